//! The VSphereDeploymentZone controller against the fake API server (and vcsim where vCenter
//! matters): finalizer, status, owner references, events, deletion, backoff, no hot loop.
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "controller_support/harness.rs"]
mod harness;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::time::Duration;

use std::sync::Arc;

use apiserver::FakeApiServer;
use harness::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use serde_json::json;
use vcsim::Vcsim;
use vsphere_provider::api::deployment_zone::ZONE_FINALIZER;
use vsphere_provider::api::{Machine, VSphereCluster, VSphereDeploymentZone, VSphereFailureDomain};
use vsphere_provider::controllers::{Cache, NOT_SYNCED_REQUEUE, Stores, zone as zone_controller};

const ZONE_STATUS: &str = "/vspheredeploymentzones/a/status";

fn zone_of(api: &FakeApiServer, name: &str) -> Option<VSphereDeploymentZone> {
    api.get::<VSphereDeploymentZone>(None, name)
}

#[tokio::test]
async fn first_reconcile_adds_the_finalizer_and_a_missing_failure_domain_is_reported() {
    let api = FakeApiServer::new();
    api.put(&zone("a", "vc.example.com", "missing", &[]));
    let running = Running::start(shared(&api, None));

    let z = api
        .wait_for(
            "the zone to report FailureDomainNotFound",
            CONVERGE,
            |api| zone_of(api, "a").filter(|z| z.status.as_ref().and_then(|s| s.ready).is_some()),
        )
        .await;
    assert!(has_finalizer(&z), "finalizer added first");
    assert_eq!(z.status.as_ref().unwrap().ready, Some(false));
    let (status, reason, message) = zone_condition(&z, "VSphereFailureDomainValidated").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "FailureDomainNotFound")
    );
    assert!(message.contains("\"missing\" not found"), "{message}");
    assert_eq!(
        zone_condition(&z, "Ready").unwrap().1,
        "FailureDomainNotFound"
    );
    // The finalizer came by JSON patch before any status write.
    let reqs = api.requests();
    let finalizer_at = reqs
        .iter()
        .position(|r| r.method == "PATCH" && r.path.ends_with("/vspheredeploymentzones/a"))
        .expect("finalizer patch");
    let status_at = reqs
        .iter()
        .position(|r| r.method == "PATCH" && r.path.ends_with(ZONE_STATUS))
        .expect("status patch");
    assert!(finalizer_at < status_at);
    assert!(
        reqs[status_at]
            .content_type
            .starts_with("application/apply-patch"),
        "server-side apply"
    );
    assert!(
        reqs[status_at]
            .query
            .contains("fieldManager=vsphere-provider"),
        "{}",
        reqs[status_at].query
    );
    // No vCenter needed, so no credentials were looked up.
    assert_eq!(api.count("GET", "/secrets/"), 0);
    // A not-ready transition is an Event.
    api.wait_for("a NotReady event", CONVERGE, |api| {
        api.requests()
            .iter()
            .find(|r| {
                r.method == "POST" && r.path.contains("/events") && r.body["reason"] == "NotReady"
            })
            .map(|r| {
                assert!(
                    r.body["note"]
                        .as_str()
                        .unwrap()
                        .contains("FailureDomainNotFound")
                )
            })
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn status_is_not_patched_when_nothing_changed() {
    let api = FakeApiServer::new();
    api.put(&zone("a", "vc.example.com", "missing", &[]));
    let running = Running::start(shared(&api, None));
    api.wait_for("the first status", CONVERGE, |api| {
        zone_of(api, "a")
            .and_then(|z| z.status)
            .and_then(|s| s.ready)
    })
    .await;
    let ok = r#"vsphere_provider_reconciles_total{controller="vspheredeploymentzone",result="ok"}"#;
    let settled = running.metric(ok);
    let patches = api.count("PATCH", ZONE_STATUS);
    assert_eq!(patches, 1);

    // Wake the zone with a change that does not affect its status.
    let mut z = zone_of(&api, "a").unwrap();
    z.metadata.labels = Some([("touched".to_string(), "yes".to_string())].into());
    api.put(&z);
    api.wait_for("another reconcile", CONVERGE, |_| {
        (running.metric(ok) > settled).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        api.count("PATCH", ZONE_STATUS),
        1,
        "an unchanged status is not written again"
    );
    assert_eq!(
        api.requests()
            .iter()
            .filter(|r| r.method == "POST" && r.body["reason"] == "NotReady")
            .count(),
        1,
        "no repeated NotReady event without a transition"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_failure_domain_created_later_wakes_the_zone_and_an_unreachable_vcenter_backs_off() {
    let api = FakeApiServer::new();
    // Port 9 on loopback: nothing listens, so the connection is refused at once.
    api.put(&zone("a", "http://127.0.0.1:9/sdk", "fd-a", &[]));
    let running = Running::start(shared(&api, Some(manager("admin", "secret"))));
    api.wait_for("FailureDomainNotFound", CONVERGE, |api| {
        zone_of(api, "a")
            .and_then(|z| zone_condition(&z, "Ready"))
            .filter(|c| c.1 == "FailureDomainNotFound")
    })
    .await;

    api.put(&failure_domain("fd-a", "DC0_C0", false));
    let z = api
        .wait_for("VCenterUnreachable", CONVERGE, |api| {
            zone_of(api, "a").filter(|z| {
                zone_condition(z, "VCenterAvailable").is_some_and(|c| c.1 == "VCenterUnreachable")
            })
        })
        .await;
    assert_eq!(z.status.unwrap().ready, Some(false));
    let errors = r#"vsphere_provider_reconcile_errors_total{controller="vspheredeploymentzone",category="vcenter"}"#;
    api.wait_for("a vcenter error counted", CONVERGE, |_| {
        (running.metric(errors) >= 1.0).then_some(())
    })
    .await;
    // Backoff starts at 5 s, then 10 s: over the next 3 s there is at most one more attempt
    // (none unless the first error was already ~2 s old when seen), whereas a hot loop would
    // make dozens. Only an attempt count past 2 in 15 s would show a missing backoff, so a
    // slow machine cannot fail this.
    let first = running.metric(errors);
    let watched = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let more = running.metric(errors) - first;
    if watched.elapsed() < Duration::from_secs(15) {
        assert!(
            more <= 1.0,
            "{more} more attempts within 3 s: retries back off"
        );
    }
    running.stop().await;
}

fn owned_by(fd: &VSphereFailureDomain) -> Vec<String> {
    fd.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect()
}

/// A zone on an unreachable vCenter still gets its finalizer (deletion needs no vCenter).
async fn zone_with_finalizer(api: &FakeApiServer, name: &str) -> VSphereDeploymentZone {
    api.wait_for("the finalizer", CONVERGE, |api| {
        zone_of(api, name).filter(has_finalizer)
    })
    .await
}

#[tokio::test]
async fn deletion_blocked_by_a_machine_keeps_the_finalizer_and_names_the_machines() {
    let api = FakeApiServer::new();
    api.put(&zone("a", "vc.example.com", "missing", &[]));
    api.put(&machine_in_zone("openshift-machine-api", "cp-0", "a"));
    api.put(&machine_in_zone(
        "openshift-machine-api",
        "cp-9",
        "elsewhere",
    ));
    let running = Running::start(shared(&api, None));
    zone_with_finalizer(&api, "a").await;

    api.delete::<VSphereDeploymentZone>(None, "a");
    let z = api
        .wait_for("the Deleting conditions", CONVERGE, |api| {
            zone_of(api, "a").filter(|z| {
                z.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.reason == "Deleting"))
            })
        })
        .await;
    assert!(
        has_finalizer(&z),
        "the finalizer stays while machines use the zone"
    );
    let conditions = z.status.unwrap().conditions.unwrap();
    let deleting: Vec<_> = conditions
        .iter()
        .filter(|c| c.reason == "Deleting")
        .collect();
    assert_eq!(deleting.len(), 3, "{conditions:?}");
    assert!(
        deleting[0]
            .message
            .contains("currently in use by Machines openshift-machine-api/cp-0"),
        "{}",
        deleting[0].message
    );
    assert!(!deleting[0].message.contains("cp-9"));
    api.wait_for("a DeletionBlocked event", CONVERGE, |api| {
        api.requests()
            .iter()
            .any(|r| r.method == "POST" && r.body["reason"] == "DeletionBlocked")
            .then_some(())
    })
    .await;
    let blocked = r#"vsphere_provider_reconcile_errors_total{controller="vspheredeploymentzone",category="deletion_blocked"}"#;
    assert!(running.metric(blocked) >= 1.0);

    // The machine goes away; the next pass (woken here rather than after the 30 s requeue)
    // lets the zone go. The machine cache may see the deletion after the poke, so poke again
    // until the zone is gone rather than betting on a fixed sleep.
    api.delete::<Machine>(Some("openshift-machine-api"), "cp-0");
    let mut pokes = 0;
    api.wait_for("the zone to be gone", CONVERGE, |api| {
        let Some(mut z) = zone_of(api, "a") else {
            return Some(());
        };
        pokes += 1;
        if pokes % 10 == 1 {
            z.metadata.annotations = Some([("poke".to_string(), pokes.to_string())].into());
            api.put(&z);
        }
        None
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn deleting_zones_releases_the_failure_domain_and_the_last_one_deletes_it() {
    let api = FakeApiServer::new();
    // Nothing listens on port 9: the zones never verify, but deletion needs no vCenter.
    api.put(&zone("a", "http://127.0.0.1:9/sdk", "fd", &[]));
    api.put(&zone("b", "http://127.0.0.1:9/sdk", "fd", &[]));
    let owner = |name: &str| {
        let z = zone_of(&api, name).unwrap();
        serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereDeploymentZone",
            "name": name,
            "uid": z.metadata.uid.unwrap(),
        })
    };
    let mut fd = failure_domain("fd", "DC0_C0", false);
    fd.metadata.owner_references =
        Some(serde_json::from_value(serde_json::json!([owner("a"), owner("b")])).unwrap());
    api.put(&fd);
    let running = Running::start(shared(&api, Some(manager("admin", "secret"))));
    zone_with_finalizer(&api, "a").await;
    zone_with_finalizer(&api, "b").await;

    api.delete::<VSphereDeploymentZone>(None, "a");
    api.wait_for("zone a to be gone", CONVERGE, |api| {
        zone_of(api, "a").is_none().then_some(())
    })
    .await;
    let fd = api
        .get::<VSphereFailureDomain>(None, "fd")
        .expect("still owned by b");
    assert_eq!(owned_by(&fd), ["VSphereDeploymentZone/b"]);

    api.delete::<VSphereDeploymentZone>(None, "b");
    api.wait_for(
        "zone b and the failure domain to be gone",
        CONVERGE,
        |api| {
            (zone_of(api, "b").is_none() && api.get::<VSphereFailureDomain>(None, "fd").is_none())
                .then_some(())
        },
    )
    .await;
    let delete = api
        .requests()
        .into_iter()
        .find(|r| r.method == "DELETE" && r.path.ends_with("/vspherefailuredomains/fd"))
        .expect("the failure domain was deleted by the controller");
    assert!(
        delete.body["preconditions"]["uid"].is_string(),
        "deleted exactly the object read"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_zone_against_vcsim_becomes_ready_and_owns_its_failure_domain() {
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let (user, password) = sim.credentials();
    let api = FakeApiServer::new();
    // autoConfigure on region and zone: the controller creates and attaches the tags.
    api.put(&failure_domain("fd-a", "DC0_C0", true));
    api.put(&zone("a", sim.url(), "fd-a", &[]));
    let running = Running::start(shared(&api, Some(manager(user, password))));

    let z = api
        .wait_for("the zone to be ready", Duration::from_secs(60), |api| {
            zone_of(api, "a").filter(|z| z.status.as_ref().and_then(|s| s.ready) == Some(true))
        })
        .await;
    for t in [
        "VCenterAvailable",
        "PlacementConstraintMet",
        "VSphereFailureDomainValidated",
        "Ready",
    ] {
        assert_eq!(zone_condition(&z, t).unwrap().0, "True", "{t}");
    }
    let fd = api
        .wait_for("the owner reference", CONVERGE, |api| {
            api.get::<VSphereFailureDomain>(None, "fd-a")
                .filter(|fd| !owned_by(fd).is_empty())
        })
        .await;
    assert_eq!(owned_by(&fd), ["VSphereDeploymentZone/a"]);
    let owner = &fd.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(Some(&owner.uid), z.metadata.uid.as_ref());
    assert_eq!(
        owner.controller, None,
        "several zones may own one failure domain"
    );
    let patch = api
        .requests()
        .into_iter()
        .find(|r| r.method == "PATCH" && r.path.ends_with("/vspherefailuredomains/fd-a"))
        .unwrap();
    assert!(
        patch.body["metadata"]["resourceVersion"].is_string(),
        "owner refs are compare-and-swap"
    );

    // Each autoConfigure step is an Event, and so is readiness.
    let reasons: Vec<String> = api
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.contains("/events"))
        .map(|r| r.body["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(reasons.iter().any(|r| r == "AutoConfigured"), "{reasons:?}");
    assert!(reasons.iter().any(|r| r == "Ready"), "{reasons:?}");

    // vCenter round trips are on /metrics.
    let text = running.shared.metrics.encode();
    assert!(
        metric(
            &text,
            r#"vsphere_provider_vcenter_requests_total{method="RetrievePropertiesEx"}"#
        ) >= 1.0,
        "{text}"
    );
    // A ready zone with nothing changed writes nothing more.
    let patches = api.count("PATCH", ZONE_STATUS);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(api.count("PATCH", ZONE_STATUS), patches);
    running.stop().await;
}

/// A VSphereCluster naming the zone's server never wakes the zone: zones act as their own
/// identity or the manager, never as a tenant's cluster (so nothing a cluster does can change
/// how a zone is verified), and every failure-domain publication is a status write — waking
/// every zone of the server on each one once made 100 zones cost ~1,900 credential reads
/// instead of ~200 on the real API server (hack/bench-cluster.sh).
#[tokio::test]
async fn a_cluster_change_does_not_wake_the_zones_of_its_server() {
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let (user, password) = sim.credentials();
    let api = FakeApiServer::new();
    api.put(&failure_domain("fd-a", "DC0_C0", true));
    api.put(&zone("a", sim.url(), "fd-a", &[]));
    // No failureDomainSelector: the cluster controller leaves it alone, only the test writes it.
    let cluster = |port: u16, published: &[&str]| {
        let domains: serde_json::Map<String, serde_json::Value> = published
            .iter()
            .map(|z| (z.to_string(), json!({"controlPlane": true})))
            .collect();
        json!({
            "metadata": {"name": "demo", "namespace": "ns"},
            "spec": {"server": sim.url(), "controlPlaneEndpoint": {"host": "10.0.0.10", "port": port}},
            "status": {"failureDomains": domains}
        })
    };
    api.put_json::<VSphereCluster>(cluster(6443, &[]));
    let running = Running::start(shared(&api, Some(manager(user, password))));
    api.wait_for("the zone to be ready", Duration::from_secs(60), |api| {
        zone_of(api, "a").filter(|z| z.status.as_ref().and_then(|s| s.ready) == Some(true))
    })
    .await;
    let reconciles = || {
        running.metric(
            r#"vsphere_provider_reconciles_total{controller="vspheredeploymentzone",result="ok"}"#,
        )
    };
    // Settled: nothing wakes the ready zone by itself.
    let mut before = reconciles();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = reconciles();
        if now == before {
            break;
        }
        before = now;
    }
    assert!(before >= 1.0, "the zone was reconciled");
    for published in [&["a"][..], &["a", "b"], &["b"]] {
        api.put_json::<VSphereCluster>(cluster(6443, published));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(reconciles(), before, "status-only changes woke the zone");
    api.put_json::<VSphereCluster>(cluster(6444, &["b"]));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(reconciles(), before, "a spec change woke the zone");
    running.stop().await;
}

/// A zone already being deleted (our finalizer on, deletionTimestamp set).
fn deleting_zone(name: &str) -> VSphereDeploymentZone {
    let mut z = zone(name, "vc.example.com", "missing", &[]);
    z.metadata.finalizers = Some(vec![ZONE_FINALIZER.into()]);
    z.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
    z
}

#[tokio::test]
async fn no_zone_is_reconciled_before_the_machines_are_listed() {
    let api = FakeApiServer::new();
    api.put(&deleting_zone("a"));
    api.put(&machine_in_zone("openshift-machine-api", "cp-0", "a"));
    // The Machine list does not answer yet (a slow API server, a large cluster).
    api.hold("GET", "/machines");
    let running = Running::start(shared(&api, None));
    api.wait_for("the zones to be listed", CONVERGE, |api| {
        (api.count("GET", "/vspheredeploymentzones") >= 1).then_some(())
    })
    .await;
    // The zone cache is loaded, the Machine cache is not: with an empty Machine cache the
    // deletion would go through at once. Nothing may happen, however long we wait.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let z = zone_of(&api, "a").expect("the zone in use is not deleted");
    assert!(has_finalizer(&z));
    assert_eq!(api.count("PATCH", "/vspheredeploymentzones/"), 0);
    assert!(
        running.shared.health.readiness().is_err(),
        "not ready before the caches"
    );

    // The Machines arrive: the deletion is blocked by cp-0.
    api.release_holds();
    let z = api
        .wait_for("the deletion to be blocked", CONVERGE, |api| {
            zone_of(api, "a").filter(|z| {
                z.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| {
                        c.iter().any(|c| {
                            c.reason == "Deleting"
                                && c.message.contains("openshift-machine-api/cp-0")
                        })
                    })
            })
        })
        .await;
    assert!(has_finalizer(&z));
    running.stop().await;
}

#[tokio::test]
async fn a_reconcile_on_unloaded_caches_changes_nothing_and_comes_back_soon() {
    let api = FakeApiServer::new();
    let z = deleting_zone("a");
    api.put(&z);
    let z = zone_of(&api, "a").unwrap();
    let stores = Stores {
        zones: Cache::from_objects([z.clone()]),
        failure_domains: Cache::from_objects([]),
        clusters: Cache::from_objects([]),
        machines: Cache::unsynced(),
        nodes: Cache::from_objects([]),
        machine_sets: Cache::from_objects([]),
        health_checks: Cache::from_objects([]),
        vsphere_machines: Cache::from_objects([]),
        vsphere_vms: Cache::from_objects([]),
        capi_machines: Cache::from_objects([]),
        capi_clusters: Cache::from_objects([]),
        identities: Cache::from_objects([]),
    };
    let action = zone_controller::reconcile(Arc::new(z), context_over(&api, stores))
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(NOT_SYNCED_REQUEUE));
    assert!(
        has_finalizer(&zone_of(&api, "a").unwrap()),
        "finalizer kept"
    );
    assert!(
        api.requests().iter().all(|r| r.method == "GET"),
        "nothing written"
    );
}

#[tokio::test]
async fn an_undecodable_machine_blocks_a_zone_deletion() {
    let api = FakeApiServer::new();
    api.put(&deleting_zone("a"));
    let z = zone_of(&api, "a").unwrap();
    // spec.providerID must be a string: this Machine does not decode, so its placement is
    // unknown; only a zone label naming another zone rules it out.
    let machine = |name: &str, labels: serde_json::Value| -> DeserializeGuard<Machine> {
        serde_json::from_value(json!({
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "Machine",
            "metadata": {"name": name, "namespace": "openshift-machine-api", "labels": labels},
            "spec": {"providerID": 7}
        }))
        .unwrap()
    };
    let broken = machine("broken", json!({}));
    assert!(broken.0.is_err(), "the fixture does not decode");
    let elsewhere = machine(
        "elsewhere",
        json!({"vsphere-provider.io/deployment-zone": "b"}),
    );
    let stores = Stores {
        zones: Cache::from_objects([z.clone()]),
        failure_domains: Cache::from_objects([]),
        clusters: Cache::from_objects([]),
        machines: Cache::from_entries([broken, elsewhere]),
        nodes: Cache::from_objects([]),
        machine_sets: Cache::from_objects([]),
        health_checks: Cache::from_objects([]),
        vsphere_machines: Cache::from_objects([]),
        vsphere_vms: Cache::from_objects([]),
        capi_machines: Cache::from_objects([]),
        capi_clusters: Cache::from_objects([]),
        identities: Cache::from_objects([]),
    };
    let err = zone_controller::reconcile(Arc::new(z), context_over(&api, stores))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("openshift-machine-api/broken (cannot be decoded)"),
        "{message}"
    );
    assert!(!message.contains("elsewhere"), "{message}");
    assert!(
        has_finalizer(&zone_of(&api, "a").unwrap()),
        "finalizer kept"
    );
}

#[tokio::test]
async fn a_malformed_zone_does_not_stop_the_others() {
    let api = FakeApiServer::new();
    // spec.server must be a string: this one cannot be decoded.
    api.put_json::<VSphereDeploymentZone>(json!({
        "metadata": {"name": "bad"},
        "spec": {"server": 42, "placementConstraint": {}}
    }));
    api.put(&zone("a", "vc.example.com", "missing", &[]));
    let running = Running::start(shared(&api, None));
    let z = api
        .wait_for("the good zone to be reconciled", CONVERGE, |api| {
            zone_of(api, "a").filter(|z| z.status.as_ref().and_then(|s| s.ready).is_some())
        })
        .await;
    assert!(has_finalizer(&z));
    // The bad one is left alone (and counted).
    api.wait_for("the invalid zone counted", CONVERGE, |_| {
        (running.metric(
            r#"vsphere_provider_reconcile_errors_total{controller="vspheredeploymentzone",category="invalid"}"#,
        ) >= 1.0)
            .then_some(())
    })
    .await;
    assert_eq!(api.count("PATCH", "/vspheredeploymentzones/bad"), 0);
    assert!(
        api.get_json::<VSphereDeploymentZone>(None, "bad").unwrap()["metadata"]
            .get("finalizers")
            .is_none()
    );
    // A zone edited into a bad shape later does not stop the watch either.
    api.put_json::<VSphereDeploymentZone>(json!({
        "metadata": {"name": "a"},
        "spec": {"server": ["not", "a", "string"], "placementConstraint": {}}
    }));
    api.put(&zone("c", "vc.example.com", "missing", &[]));
    api.wait_for(
        "a zone added afterwards to be reconciled",
        CONVERGE,
        |api| zone_of(api, "c").filter(has_finalizer),
    )
    .await;
    running.stop().await;
}
