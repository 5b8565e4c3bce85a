//! Prometheus metrics of the controller manager, served on `/metrics`.
//!
//! Reconciles are counted and timed per controller; errors per category (the same labels the
//! error policy decides on); health checks and control plane machine sets report their
//! verdicts. vCenter round trips come from the client's own accounting
//! ([`super::vcenter_metrics`]).
use crate::api::conditions::STATUS_TRUE;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::vcenter_metrics::VcenterCollector;
use crate::api::control_plane_machine_set::ControlPlaneMachineSetStatus;
use crate::vcenter::Stats;

/// Every metric name starts with this.
pub const PREFIX: &str = "vsphere_provider";

/// Reconcile-duration buckets: vCenter reconciles take from milliseconds (cached view) to
/// tens of seconds (autoConfigure against a slow vCenter).
const DURATION_BUCKETS: [f64; 11] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CategoryLabels {
    controller: String,
    category: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

/// The manager's metrics. Cheap to share (`Arc`); recording never blocks on a scrape.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<CategoryLabels, Counter>,
    durations: Family<ControllerLabels, Histogram>,
    mhc_unhealthy: Family<CheckLabels, Gauge>,
    mhc_short_circuited: Family<CheckLabels, Gauge>,
    cpms_replicas: Family<SetCountLabels, Gauge>,
    cpms_degraded: Family<SetLabels, Gauge>,
    cpms_machines: Family<SetActionLabels, Counter>,
    machine_sweeps: Counter,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SetLabels {
    /// `namespace/name` of the ControlPlaneMachineSet.
    cpms: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SetCountLabels {
    cpms: String,
    /// desired, current, ready, updated or unavailable (the status counters).
    replicas: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SetActionLabels {
    cpms: String,
    /// created or deleted.
    action: String,
}

/// The status counters a set's `cpms_replicas` gauge carries.
const REPLICA_COUNTS: [&str; 5] = ["desired", "current", "ready", "updated", "unavailable"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabels {
    /// `namespace/name` of the MachineHealthCheck.
    mhc: String,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Metrics that also expose the vCenter round trips recorded in `stats`.
    pub fn new(stats: Stats) -> Arc<Self> {
        let mut registry = Registry::with_prefix(PREFIX);
        let reconciles = Family::<ResultLabels, Counter>::default();
        let errors = Family::<CategoryLabels, Counter>::default();
        let durations = Family::<ControllerLabels, Histogram>::new_with_constructor(
            duration_histogram as fn() -> Histogram,
        );
        registry.register(
            "reconciles",
            "Reconciles run, by controller and result (ok or error)",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciles, by controller and error category",
            errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconcile, by controller",
            durations.clone(),
        );
        let mhc_unhealthy = Family::<CheckLabels, Gauge>::default();
        let mhc_short_circuited = Family::<CheckLabels, Gauge>::default();
        registry.register(
            "mhc_unhealthy_machines",
            "Machines a MachineHealthCheck finds unhealthy (or not started in time)",
            mhc_unhealthy.clone(),
        );
        registry.register(
            "mhc_short_circuited",
            "1 while a MachineHealthCheck is short-circuited (too many unhealthy machines)",
            mhc_short_circuited.clone(),
        );
        let cpms_replicas = Family::<SetCountLabels, Gauge>::default();
        let cpms_degraded = Family::<SetLabels, Gauge>::default();
        let cpms_machines = Family::<SetActionLabels, Counter>::default();
        registry.register(
            "cpms_replicas",
            "A ControlPlaneMachineSet's machines: desired (spec), current, ready, updated, unavailable (status)",
            cpms_replicas.clone(),
        );
        registry.register(
            "cpms_degraded",
            "1 while a ControlPlaneMachineSet is Degraded (it refuses to act; the condition says why)",
            cpms_degraded.clone(),
        );
        registry.register(
            "cpms_machines",
            "Machines a ControlPlaneMachineSet created or deleted",
            cpms_machines.clone(),
        );
        let machine_sweeps = Counter::default();
        registry.register(
            "machine_sweeps",
            "Sweeps of a vCenter's machines (one reads the inventory once and decides for every machine of the server)",
            machine_sweeps.clone(),
        );
        registry.register_collector(Box::new(VcenterCollector::new(stats)));
        Arc::new(Self {
            registry,
            reconciles,
            errors,
            durations,
            mhc_unhealthy,
            mhc_short_circuited,
            cpms_replicas,
            cpms_degraded,
            cpms_machines,
            machine_sweeps,
        })
    }

    /// Record one machine sweep of a server.
    pub fn machine_swept(&self) {
        self.machine_sweeps.inc();
    }

    /// Record one reconcile: `Err(category)` for a failure.
    pub fn reconciled(&self, controller: &str, elapsed: Duration, result: Result<(), &str>) {
        let outcome = if result.is_ok() { "ok" } else { "error" };
        self.reconciles
            .get_or_create(&ResultLabels {
                controller: controller.into(),
                result: outcome.into(),
            })
            .inc();
        if let Err(category) = result {
            self.errors
                .get_or_create(&CategoryLabels {
                    controller: controller.into(),
                    category: category.into(),
                })
                .inc();
        }
        self.durations
            .get_or_create(&ControllerLabels {
                controller: controller.into(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Record a health check's verdict.
    pub fn health_checked(&self, mhc: &str, unhealthy: i64, short_circuited: bool) {
        let l = CheckLabels { mhc: mhc.into() };
        self.mhc_unhealthy.get_or_create(&l).set(unhealthy);
        self.mhc_short_circuited
            .get_or_create(&l)
            .set(i64::from(short_circuited));
    }

    /// A deleted health check's gauges go away.
    pub fn health_check_gone(&self, mhc: &str) {
        let l = CheckLabels { mhc: mhc.into() };
        self.mhc_unhealthy.remove(&l);
        self.mhc_short_circuited.remove(&l);
    }

    /// Record a machine set's pass: its status counters, whether it is degraded, and what it
    /// created and deleted.
    pub fn machine_set_applied(
        &self,
        set: &str,
        desired: i64,
        status: &ControlPlaneMachineSetStatus,
        created: usize,
        deleted: usize,
    ) {
        let counts = [
            Some(desired),
            status.replicas.map(i64::from),
            status.ready_replicas.map(i64::from),
            status.updated_replicas.map(i64::from),
            status.unavailable_replicas.map(i64::from),
        ];
        for (name, n) in REPLICA_COUNTS.iter().zip(counts) {
            self.cpms_replicas
                .get_or_create(&SetCountLabels {
                    cpms: set.into(),
                    replicas: (*name).into(),
                })
                .set(n.unwrap_or(0));
        }
        let degraded = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Degraded" && c.status == STATUS_TRUE);
        self.cpms_degraded
            .get_or_create(&SetLabels { cpms: set.into() })
            .set(i64::from(degraded));
        for (action, n) in [("created", created), ("deleted", deleted)] {
            self.cpms_machines
                .get_or_create(&SetActionLabels {
                    cpms: set.into(),
                    action: action.into(),
                })
                .inc_by(n as u64);
        }
    }

    /// A deleted set's gauges go away (its counters stay: they are totals).
    pub fn machine_set_gone(&self, set: &str) {
        for name in REPLICA_COUNTS {
            self.cpms_replicas.remove(&SetCountLabels {
                cpms: set.into(),
                replicas: name.into(),
            });
        }
        self.cpms_degraded.remove(&SetLabels { cpms: set.into() });
    }

    /// The OpenMetrics text exposition (what Prometheus scrapes).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding metrics failed");
        }
        out
    }
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::CallKind;

    #[test]
    fn reconciles_errors_durations_and_round_trips_are_exposed() {
        let stats = Stats::default();
        stats.record(
            "RetrievePropertiesEx",
            CallKind::Read,
            Duration::from_millis(20),
            true,
        );
        stats.record("Login", CallKind::Session, Duration::from_millis(5), false);
        let m = Metrics::new(stats);
        m.reconciled("zone", Duration::from_millis(30), Ok(()));
        m.reconciled("zone", Duration::from_millis(30), Err("vcenter"));
        let text = m.encode();
        for line in [
            "vsphere_provider_reconciles_total{controller=\"zone\",result=\"ok\"} 1",
            "vsphere_provider_reconciles_total{controller=\"zone\",result=\"error\"} 1",
            "vsphere_provider_reconcile_errors_total{controller=\"zone\",category=\"vcenter\"} 1",
            "vsphere_provider_reconcile_duration_seconds_count{controller=\"zone\"} 2",
            "vsphere_provider_vcenter_requests_total{method=\"RetrievePropertiesEx\"} 1",
            "vsphere_provider_vcenter_request_errors_total{method=\"Login\"} 1",
            "vsphere_provider_vcenter_requests_by_kind_total{kind=\"session\"} 1",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        assert!(
            text.contains("vsphere_provider_vcenter_request_seconds_total{method=\"Login\"} 0.005")
        );
    }
}
