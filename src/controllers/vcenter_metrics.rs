//! vCenter round trips on `/metrics`: not double-bookkept, but read from the client's own
//! accounting ([`Stats`]) at scrape time, so `/metrics` and the local-mode summary can never
//! disagree.
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::vcenter::Stats;

/// vCenter round trips per method, read from the client's own accounting at scrape time.
#[derive(Debug)]
pub struct VcenterCollector {
    stats: Stats,
}

impl VcenterCollector {
    pub fn new(stats: Stats) -> Self {
        VcenterCollector { stats }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

impl Collector for VcenterCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snapshot = self.stats.snapshot();
        let requests = Family::<MethodLabels, Counter>::default();
        let errors = Family::<MethodLabels, Counter>::default();
        let seconds = Family::<MethodLabels, Counter<f64>>::default();
        for (method, m) in &snapshot.methods {
            let labels = MethodLabels {
                method: method.clone(),
            };
            requests.get_or_create(&labels).inc_by(m.calls);
            // A connection that failed is no round trip, but it is a failed request.
            errors.get_or_create(&labels).inc_by(m.errors + m.unsent);
            seconds.get_or_create(&labels).inc_by(m.total.as_secs_f64());
        }
        let by_kind = Family::<KindLabels, Counter>::default();
        for (kind, n) in &snapshot.by_kind {
            let kind = serde_json::to_value(kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            by_kind.get_or_create(&KindLabels { kind }).inc_by(*n);
        }
        for (name, help, family) in [
            (
                "vcenter_requests",
                "vCenter round trips, by SOAP method or REST operation",
                &requests,
            ),
            (
                "vcenter_request_errors",
                "vCenter round trips that failed, by SOAP method or REST operation",
                &errors,
            ),
        ] {
            let e = encoder.encode_descriptor(name, help, None, family.metric_type())?;
            family.encode(e)?;
        }
        let e = encoder.encode_descriptor(
            "vcenter_request_seconds",
            "Time spent waiting for vCenter, by SOAP method or REST operation",
            None,
            seconds.metric_type(),
        )?;
        seconds.encode(e)?;
        let e = encoder.encode_descriptor(
            "vcenter_requests_by_kind",
            "vCenter round trips by kind (session, read, write)",
            None,
            by_kind.metric_type(),
        )?;
        by_kind.encode(e)?;
        Ok(())
    }
}
