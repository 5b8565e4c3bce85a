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
use vsphere_provider::api::VSphereCluster;
use vsphere_provider::api::conditions::find_capi;
use vsphere_provider::controllers::cluster;

const CLUSTER_STATUS: &str = "/namespaces/ns/vsphereclusters/c1/status";

fn condition(c: &VSphereCluster, t: &str) -> Option<(String, String)> {
    let conds = c.status.as_ref()?.conditions.as_ref()?;
    let c = find_capi(conds, t)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
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
    let published: Vec<_> = c1
        .status
        .as_ref()
        .unwrap()
        .failure_domains
        .as_ref()
        .unwrap()
        .keys()
        .cloned()
        .collect();
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
    assert_eq!(action, Action::requeue(cluster::RESYNC));
    let c1 = api.get::<VSphereCluster>(Some("ns"), "c1").unwrap();
    assert_eq!(condition(&c1, "FailureDomainsAvailable").unwrap().0, "True");
    let fds = c1.status.unwrap().failure_domains.unwrap();
    assert_eq!(fds["ready"].control_plane, Some(true));
    assert_eq!(api.count("PATCH", CLUSTER_STATUS), 2);
}

#[tokio::test]
async fn a_cluster_without_selector_is_left_alone() {
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
    let action = cluster::reconcile(Arc::new(c1), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(cluster::RESYNC));
    assert_eq!(api.count("PATCH", CLUSTER_STATUS), 0);
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
                    .is_some_and(|f| f.contains_key("a"))
                    && condition(c, "FailureDomainsAvailable")
                        .is_some_and(|c| c.1 == "FailureDomainsSkipped")
            })
        })
        .await;
    let fds = c1.status.unwrap().failure_domains.unwrap();
    assert_eq!(
        fds.keys().collect::<Vec<_>>(),
        ["a"],
        "the not-ready zone is skipped"
    );
    running.stop().await;
}
