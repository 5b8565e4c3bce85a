//! Running the controller manager's parts against the fake API server, and object fixtures.
//! Included by the `controller_*` tests next to `apiserver.rs`:
//!
//! ```ignore
//! #[path = "controller_support/apiserver.rs"]
//! mod apiserver;
//! #[path = "controller_support/harness.rs"]
//! mod harness;
//! ```
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use secrecy::SecretString;
use serde_json::json;
use vsphere_provider::api::{Machine, VSphereCluster, VSphereDeploymentZone, VSphereFailureDomain};
use vsphere_provider::controllers::{
    self, Cache, Health, Metrics, Shared, ShutdownTrigger, shutdown,
};
use vsphere_provider::plan::credentials::{ManagerIdentity, ServerScope, ServerTrust};
use vsphere_provider::reconcile::views::ServerViews;
use vsphere_provider::vcenter::session::SessionCache;
use vsphere_provider::vcenter::{ClientOptions, Stats};

use super::apiserver::FakeApiServer;

/// How long tests wait for the controllers to converge.
pub const CONVERGE: Duration = Duration::from_secs(20);

/// The shared parts over the fake API server.
pub fn shared(api: &FakeApiServer, manager: Option<ManagerIdentity>) -> Shared {
    let stats = Stats::default();
    Shared {
        client: api.client(),
        server: "https://fake-apiserver".into(),
        sessions: SessionCache::new(stats.clone(), ClientOptions::default()),
        views: Arc::new(ServerViews::new(Duration::from_secs(30))),
        manager,
        trust: ServerTrust::default(),
        metrics: Metrics::new(stats),
        reporter: "vsphere-provider".into(),
        converts: false,
        polling: Default::default(),
        health: Health::new(false),
        namespace: "vsphere-provider-system".into(),
        default_zone_selector: None,
    }
}

/// vcsim's credentials as the manager's own, for any server: these tests run the controllers
/// in-process over a fake API server and a vcsim on a random port (the binding of the manager's
/// credentials to servers is `run`'s, tested in tests/realapi_tenants.rs and plan::credentials).
pub fn manager(user: &str, password: &str) -> ManagerIdentity {
    ManagerIdentity {
        username: user.into(),
        password: SecretString::from(password.to_string()),
        servers: ServerScope::Any,
    }
}

/// The controllers running in the background.
pub struct Running {
    pub shared: Shared,
    trigger: ShutdownTrigger,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    pub fn start(shared: Shared) -> Self {
        let (trigger, signal) = shutdown::channel();
        let s = shared.clone();
        let task = tokio::spawn(async move { controllers::run_controllers(&s, signal).await });
        Running {
            shared,
            trigger,
            task,
        }
    }

    /// Graceful stop; panics if the controllers do not stop within 10 s.
    pub async fn stop(self) {
        self.trigger.trigger();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("controllers stop on shutdown")
            .expect("controllers task");
        self.shared.sessions.logout_all().await;
    }

    /// The value of one metric line (`name{labels}`), 0 if absent.
    pub fn metric(&self, series: &str) -> f64 {
        metric(&self.shared.metrics.encode(), series)
    }

    /// The whole metrics text, as scraped.
    #[allow(dead_code)]
    pub fn metrics_text(&self) -> String {
        self.shared.metrics.encode()
    }
}

/// The value of `series` (e.g. `vsphere_provider_reconciles_total{controller="x",result="ok"}`)
/// in a metrics text, 0 if absent.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

pub fn failure_domain(
    name: &str,
    compute_cluster: &str,
    auto_configure: bool,
) -> VSphereFailureDomain {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereFailureDomain",
        "metadata": {"name": name},
        "spec": {
            "region": {"name": "region-a", "type": "Datacenter", "tagCategory": "k8s-region", "autoConfigure": auto_configure},
            "zone": {"name": format!("zone-{name}"), "type": "ComputeCluster", "tagCategory": "k8s-zone", "autoConfigure": auto_configure},
            "topology": {
                "datacenter": "DC0",
                "computeCluster": compute_cluster,
                "datastore": "LocalDS_0",
                "networks": ["VM Network"]
            }
        }
    }))
    .expect("failure domain fixture")
}

pub fn zone(name: &str, server: &str, fd: &str, labels: &[(&str, &str)]) -> VSphereDeploymentZone {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereDeploymentZone",
        "metadata": {
            "name": name,
            "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        },
        "spec": {
            "server": server,
            "failureDomain": fd,
            "controlPlane": true,
            "placementConstraint": {"folder": "vm"}
        }
    }))
    .expect("zone fixture")
}

pub fn vsphere_cluster(
    ns: &str,
    name: &str,
    server: &str,
    selector: Option<serde_json::Value>,
) -> VSphereCluster {
    let mut spec = json!({"server": server});
    if let Some(sel) = selector {
        spec["failureDomainSelector"] = sel;
    }
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
        "kind": "VSphereCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }))
    .expect("cluster fixture")
}

/// A Machine labelled as placed in `zone`.
pub fn machine_in_zone(ns: &str, name: &str, zone: &str) -> Machine {
    serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"vsphere-provider.io/deployment-zone": zone}
        },
        "spec": {}
    }))
    .expect("machine fixture")
}

pub fn secret(ns: &str, name: &str, user: &str, password: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..ObjectMeta::default()
        },
        data: Some(
            [
                ("username".to_string(), ByteString(user.as_bytes().to_vec())),
                (
                    "password".to_string(),
                    ByteString(password.as_bytes().to_vec()),
                ),
            ]
            .into(),
        ),
        ..Secret::default()
    }
}

/// The zone's v1beta1 condition `type_` as (status, reason, message).
pub fn zone_condition(z: &VSphereDeploymentZone, type_: &str) -> Option<(String, String, String)> {
    let conds = vsphere_provider::api::infrastructure::v1beta2::common::DeprecatedStatus::v1beta1_conditions(
        &z.status.as_ref()?.deprecated,
    );
    let c = vsphere_provider::api::conditions::find_capi(conds, type_)?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

pub fn has_finalizer(z: &VSphereDeploymentZone) -> bool {
    z.metadata.finalizers.as_ref().is_some_and(|f| {
        f.iter()
            .any(|f| f == vsphere_provider::api::deployment_zone::ZONE_FINALIZER)
    })
}

/// A reconcile context over `api` whose caches hold these objects.
pub fn context_with(
    api: &FakeApiServer,
    zones: Vec<VSphereDeploymentZone>,
    failure_domains: Vec<VSphereFailureDomain>,
    clusters: Vec<VSphereCluster>,
    machines: Vec<Machine>,
) -> Arc<controllers::Context> {
    context_over(
        api,
        controllers::Stores {
            zones: Cache::from_objects(zones),
            failure_domains: Cache::from_objects(failure_domains),
            clusters: Cache::from_objects(clusters),
            machines: Cache::from_objects(machines),
            nodes: Cache::from_objects([]),
            machine_sets: Cache::from_objects([]),
            health_checks: Cache::from_objects([]),
            vsphere_machines: Cache::from_objects([]),
            vsphere_vms: Cache::from_objects([]),
            capi_machines: Cache::from_objects([]),
            capi_clusters: Cache::from_objects([]),
            identities: Cache::from_objects([]),
        },
    )
}

/// A reconcile context over `api` reading `stores`.
pub fn context_over(api: &FakeApiServer, stores: controllers::Stores) -> Arc<controllers::Context> {
    Arc::new(controllers::Context::new(&shared(api, None), stores))
}

/// A zone as the zone controller left it: `ready` set (or not).
pub fn zone_with_ready(
    name: &str,
    server: &str,
    labels: &[(&str, &str)],
    ready: Option<bool>,
) -> VSphereDeploymentZone {
    let mut z = zone(name, server, &format!("fd-{name}"), labels);
    z.status = Some(vsphere_provider::api::VSphereDeploymentZoneStatus {
        ready,
        ..Default::default()
    });
    z
}
