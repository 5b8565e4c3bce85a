//! The VSphereCluster controller (failure-domain publication) against the fake API server:
//! called directly for the exact decisions, and running with the zone controller and vcsim for
//! the watch wiring.
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "controller_support/harness.rs"]
mod harness;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::sync::Arc;
use std::time::Duration;

use apiserver::FakeApiServer;
use harness::*;
use kube::runtime::controller::Action;
use serde_json::json;
use vcsim::Vcsim;
use vsphere_provider::api::conditions::find_capi;
use vsphere_provider::api::infrastructure::v1beta2::common::DeprecatedStatus;
use vsphere_provider::api::{VSphereCluster, VSphereDeploymentZone};
use vsphere_provider::controllers::{Cache, NOT_SYNCED_REQUEUE, Stores, cluster};

const CLUSTER_STATUS: &str = "/namespaces/ns/vsphereclusters/c1/status";

/// A v1beta1 condition of the cluster (kept under `status.deprecated.v1beta1` on the hub).
fn condition(c: &VSphereCluster, t: &str) -> Option<(String, String)> {
    let conds = DeprecatedStatus::v1beta1_conditions(&c.status.as_ref()?.deprecated);
    let c = find_capi(conds, t)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// The names of the failure domains a cluster publishes, in the published order.
fn names(c: &VSphereCluster) -> Vec<String> {
    c.status
        .as_ref()
        .and_then(|s| s.failure_domains.as_ref())
        .map(|f| f.iter().map(|f| f.name.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn publishes_ready_zones_and_waits_ten_seconds_for_unreported_ones() {
    let api = FakeApiServer::new();
    let c1 = vsphere_cluster(
        "ns",
        "c1",
        "vc.example.com",
        Some(json!({"matchLabels": {"region": "east"}})),
    );
    api.put(&c1);
    let c1 = api.get::<VSphereCluster>(Some("ns"), "c1").unwrap();
    let east = [("region", "east")];
    let zones = vec![
        zone_with_ready("ready", "https://vc.example.com/sdk", &east, Some(true)),
        zone_with_ready("unreported", "vc.example.com", &east, None),
        zone_with_ready("west", "vc.example.com", &[("region", "west")], Some(true)),
        zone_with_ready("other-server", "vc2.example.com", &east, Some(true)),
    ];
    let ctx = context_with(&api, zones.clone(), vec![], vec![], vec![]);

    let action = cluster::reconcile(Arc::new(c1), ctx.clone()).await.unwrap();
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(10)),
        "waits for the unreported zone"
    );
    let c1 = api.get::<VSphereCluster>(Some("ns"), "c1").unwrap();
    let published = names(&c1);
    assert_eq!(
        published,
        ["ready", "unreported"],
        "same server and selector only; unset ready is published"
    );
    assert_eq!(
        condition(&c1, "FailureDomainsAvailable").unwrap(),
        ("False".into(), "WaitingForFailureDomainStatus".into())
    );
    assert_eq!(api.count("PATCH", CLUSTER_STATUS), 1);

    // Unchanged input: no write, same wait.
    let action = cluster::reconcile(Arc::new(c1.clone()), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    assert_eq!(
        api.count("PATCH", CLUSTER_STATUS),
        1,
        "no status patch when nothing changed"
    );

    // The zone reports ready: published, condition true, back to the slow resync.
    let mut zones = zones;
    zones[1].status.as_mut().unwrap().ready = Some(true);
    let ctx = context_with(&api, zones, vec![], vec![], vec![]);
    let action = cluster::reconcile(Arc::new(c1), ctx).await.unwrap();
    assert_eq!(
        action,
        Action::requeue(vsphere_provider::plan::machine::waiting::DEFAULT_INFRASTRUCTURE_RESYNC)
    );
    let c1 = api.get::<VSphereCluster>(Some("ns"), "c1").unwrap();
    assert_eq!(condition(&c1, "FailureDomainsAvailable").unwrap().0, "True");
    assert_eq!(names(&c1), ["ready", "unreported"]);
    let fds = c1.status.unwrap().failure_domains.unwrap();
    assert_eq!(fds[0].control_plane, Some(true));
    assert_eq!(api.count("PATCH", CLUSTER_STATUS), 2);
}

#[tokio::test]
async fn a_cluster_without_selector_or_owner_publishes_nothing_and_says_it_waits_for_its_owner() {
    let api = FakeApiServer::new();
    api.put(&vsphere_cluster("ns", "c1", "vc.example.com", None));
    let c1 = api.get::<VSphereCluster>(Some("ns"), "c1").unwrap();
    let ctx = context_with(
        &api,
        vec![zone_with_ready("z", "vc.example.com", &[], Some(true))],
        vec![],
        vec![],
        vec![],
    );
    let action = cluster::reconcile(Arc::new(c1), ctx.clone()).await.unwrap();
    assert_eq!(
        action,
        Action::requeue(vsphere_provider::plan::machine::waiting::DEFAULT_INFRASTRUCTURE_RESYNC)
    );
    assert_eq!(api.count("PATCH", CLUSTER_STATUS), 1);
    let c1 = api.get::<VSphereCluster>(Some("ns"), "c1").unwrap();
    let status = c1.status.clone().unwrap();
    assert!(status.failure_domains.is_none());
    assert!(!status.provisioned());
    assert_eq!(
        condition(&c1, "Ready").unwrap(),
        ("False".into(), "WaitingForClusterOwner".into())
    );
    assert!(
        c1.metadata.finalizers.is_none(),
        "no finalizer without an owner"
    );
    // Again: nothing changed, nothing written.
    cluster::reconcile(Arc::new(c1), ctx).await.unwrap();
    assert_eq!(api.count("PATCH", CLUSTER_STATUS), 1);
}

#[tokio::test]
async fn zone_changes_reach_the_clusters_selecting_them() {
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let (user, password) = sim.credentials();
    let api = FakeApiServer::new();
    api.put(&failure_domain("fd-a", "DC0_C0", true));
    api.put(&zone("a", sim.url(), "fd-a", &[("fd", "yes")]));
    // Zone b names a missing failure domain: it reports ready=false and is skipped.
    api.put(&zone("b", sim.url(), "missing", &[("fd", "yes")]));
    api.put(&vsphere_cluster(
        "ns",
        "c1",
        sim.url(),
        Some(json!({"matchLabels": {"fd": "yes"}})),
    ));
    let running = Running::start(shared(&api, Some(manager(user, password))));

    let c1 = api
        .wait_for("zone a published", Duration::from_secs(60), |api| {
            api.get::<VSphereCluster>(Some("ns"), "c1").filter(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.failure_domains.as_ref())
                    .is_some_and(|f| f.iter().any(|f| f.name == "a"))
                    && condition(c, "FailureDomainsAvailable")
                        .is_some_and(|c| c.1 == "FailureDomainsSkipped")
            })
        })
        .await;
    assert_eq!(names(&c1), ["a"], "the not-ready zone is skipped");
    running.stop().await;
}

/// A cluster selecting `fd=yes` zones on vc.example.com that already publishes `published`
/// (written before by us), with fields written by others: `initialization`, `vCenterVersion`
/// and a `ClusterModulesReady` condition (CAPV's; never ours).
fn published_cluster(published: &[&str]) -> VSphereCluster {
    let mut c = vsphere_cluster(
        "ns",
        "c1",
        "vc.example.com",
        Some(json!({"matchLabels": {"fd": "yes"}})),
    );
    c.status = Some(
        serde_json::from_value(json!({
            "initialization": {"provisioned": true},
            "vCenterVersion": "8.0.3",
            "failureDomains": published
                .iter()
                .map(|z| json!({"name": z, "controlPlane": true}))
                .collect::<Vec<_>>(),
            "conditions": [{
                "type": "ClusterModulesReady", "status": "True", "reason": "Ready", "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z"
            }]
        }))
        .unwrap(),
    );
    c
}

fn published(api: &FakeApiServer) -> Vec<String> {
    api.get::<VSphereCluster>(Some("ns"), "c1")
        .and_then(|c| c.status)
        .and_then(|s| s.failure_domains)
        .map(|f| f.into_iter().map(|f| f.name).collect())
        .unwrap_or_default()
}

/// A zone reported ready whose status the zone controller cannot change (its writes fail),
/// so the cluster controller is the only one acting on it.
fn frozen_ready_zone(api: &FakeApiServer, name: &str, labels: &[(&str, &str)]) {
    api.put(&zone_with_ready(name, "vc.example.com", labels, Some(true)));
    api.inject(
        "PATCH",
        &format!("/vspheredeploymentzones/{name}"),
        500,
        100_000,
    );
}

#[tokio::test]
async fn only_the_owned_status_fields_are_applied() {
    let api = FakeApiServer::new();
    api.put(&published_cluster(&[]));
    // Our earlier publication of zone "old", applied with our field manager.
    let clusters: kube::Api<VSphereCluster> = kube::Api::namespaced(api.client(), "ns");
    clusters
        .patch_status(
            "c1",
            &kube::api::PatchParams::apply(vsphere_provider::controllers::FIELD_MANAGER).force(),
            &kube::api::Patch::Apply(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "VSphereCluster",
                "status": {"failureDomains": [{"name": "old", "controlPlane": true}]}
            })),
        )
        .await
        .unwrap();
    assert_eq!(published(&api), ["old"]);
    let c1 = api.get::<VSphereCluster>(Some("ns"), "c1").unwrap();
    let zones = vec![zone_with_ready(
        "a",
        "vc.example.com",
        &[("fd", "yes")],
        Some(true),
    )];
    let ctx = context_with(&api, zones, vec![], vec![], vec![]);
    cluster::reconcile(Arc::new(c1), ctx).await.unwrap();

    let patch = api
        .requests()
        .into_iter()
        .rfind(|r| r.method == "PATCH" && r.path.ends_with(CLUSTER_STATUS))
        .expect("a status apply");
    assert!(patch.content_type.starts_with("application/apply-patch"));
    assert!(patch.query.contains("fieldManager=vsphere-provider"));
    let mut sent: Vec<&str> = patch.body["status"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    sent.sort();
    // `initialization` is sent as it is (provisioned is never taken back), so is the version
    // already there; the v1beta1 conditions go whole under `deprecated`.
    assert_eq!(
        sent,
        [
            "conditions",
            "deprecated",
            "failureDomains",
            "initialization",
            "vCenterVersion"
        ]
    );
    assert_eq!(
        patch.body["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta2"
    );
    let mut v1beta2: Vec<&str> = patch.body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    v1beta2.sort();
    assert_eq!(
        v1beta2,
        ["FailureDomainsReady", "Paused", "Ready"],
        "only our own v1beta2 conditions"
    );

    // What others wrote is still there.
    let status = api
        .get::<VSphereCluster>(Some("ns"), "c1")
        .unwrap()
        .status
        .unwrap();
    assert!(status.provisioned());
    assert_eq!(status.vcenter_version.as_deref(), Some("8.0.3"));
    let types: Vec<String> = status
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert!(
        types.contains(&"ClusterModulesReady".to_string()),
        "{types:?}"
    );
    assert!(
        types.contains(&"FailureDomainsReady".to_string()),
        "{types:?}"
    );
    // What we stopped sending is gone.
    assert_eq!(
        status
            .failure_domains
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect::<Vec<_>>(),
        ["a"]
    );
}

#[tokio::test]
async fn a_publication_on_an_unloaded_zone_cache_changes_nothing() {
    let api = FakeApiServer::new();
    api.put(&published_cluster(&["a"]));
    let c1 = api.get::<VSphereCluster>(Some("ns"), "c1").unwrap();
    let stores = Stores {
        zones: Cache::unsynced(),
        failure_domains: Cache::from_objects([]),
        clusters: Cache::from_objects([c1.clone()]),
        machines: Cache::from_objects([]),
        nodes: Cache::from_objects([]),
        machine_sets: Cache::from_objects([]),
        health_checks: Cache::from_objects([]),
        vsphere_machines: Cache::from_objects([]),
        vsphere_vms: Cache::from_objects([]),
        capi_machines: Cache::from_objects([]),
        capi_clusters: Cache::from_objects([]),
        identities: Cache::from_objects([]),
    };
    let action = cluster::reconcile(Arc::new(c1), context_over(&api, stores))
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(NOT_SYNCED_REQUEUE));
    assert_eq!(api.count("PATCH", CLUSTER_STATUS), 0);
}

#[tokio::test]
async fn an_undecodable_published_zone_is_not_unpublished() {
    let api = FakeApiServer::new();
    api.put(&published_cluster(&["a"]));
    let c1 = api.get::<VSphereCluster>(Some("ns"), "c1").unwrap();
    let bad: kube::core::DeserializeGuard<VSphereDeploymentZone> = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereDeploymentZone",
        "metadata": {"name": "a"},
        "spec": {"server": 1, "placementConstraint": {}}
    }))
    .unwrap();
    let stores = Stores {
        zones: Cache::from_entries([bad]),
        failure_domains: Cache::from_objects([]),
        clusters: Cache::from_objects([c1.clone()]),
        machines: Cache::from_objects([]),
        nodes: Cache::from_objects([]),
        machine_sets: Cache::from_objects([]),
        health_checks: Cache::from_objects([]),
        vsphere_machines: Cache::from_objects([]),
        vsphere_vms: Cache::from_objects([]),
        capi_machines: Cache::from_objects([]),
        capi_clusters: Cache::from_objects([]),
        identities: Cache::from_objects([]),
    };
    let err = cluster::reconcile(Arc::new(c1), context_over(&api, stores))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot be decoded: a"), "{err}");
    assert_eq!(api.count("PATCH", CLUSTER_STATUS), 0);
}

#[tokio::test]
async fn no_cluster_is_published_before_the_zones_are_listed() {
    let api = FakeApiServer::new();
    api.put(&published_cluster(&["a"]));
    frozen_ready_zone(&api, "a", &[("fd", "yes")]);
    // The zone list does not answer yet.
    api.hold("GET", "/vspheredeploymentzones");
    let running = Running::start(shared(&api, None));
    api.wait_for("the clusters to be listed", CONVERGE, |api| {
        (api.count("GET", "/vsphereclusters") >= 1).then_some(())
    })
    .await;
    // With an empty zone cache the cluster would publish "no zones" at once.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(api.count("PATCH", CLUSTER_STATUS), 0);
    assert_eq!(published(&api), ["a"]);

    api.release_holds();
    api.wait_for("the cluster to be reconciled", CONVERGE, |_| {
        (running.metric(
            r#"vsphere_provider_reconciles_total{controller="vspherecluster",result="ok"}"#,
        ) >= 1.0)
            .then_some(())
    })
    .await;
    assert_eq!(published(&api), ["a"], "never unpublished");
    running.stop().await;
}

#[tokio::test]
async fn a_zone_that_stops_matching_or_vanishes_is_unpublished_at_once() {
    let api = FakeApiServer::new();
    api.put(&vsphere_cluster(
        "ns",
        "c1",
        "vc.example.com",
        Some(json!({"matchLabels": {"fd": "yes"}})),
    ));
    frozen_ready_zone(&api, "a", &[("fd", "yes")]);
    frozen_ready_zone(&api, "b", &[("fd", "yes")]);
    let running = Running::start(shared(&api, None));
    api.wait_for("a and b published", CONVERGE, |api| {
        (published(api) == ["a", "b"]).then_some(())
    })
    .await;

    // Zone a is relabelled: no cluster selects it any more, but c1 still publishes it.
    // (Settled clusters are otherwise only re-published every 5 minutes.)
    let mut a = api.get::<VSphereDeploymentZone>(None, "a").unwrap();
    a.metadata.labels = Some([("fd".to_string(), "no".to_string())].into());
    api.put(&a);
    api.wait_for("a unpublished", CONVERGE, |api| {
        (published(api) == ["b"]).then_some(())
    })
    .await;

    // Zone b is deleted without our finalizer (it never got one): one DELETED event.
    assert!(!has_finalizer(
        &api.get::<VSphereDeploymentZone>(None, "b").unwrap()
    ));
    api.delete::<VSphereDeploymentZone>(None, "b");
    api.wait_for("b unpublished", CONVERGE, |api| {
        published(api).is_empty().then_some(())
    })
    .await;
    running.stop().await;
}
