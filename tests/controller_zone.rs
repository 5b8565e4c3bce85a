//! The VSphereDeploymentZone controller against the fake API server (and vcsim where vCenter
//! matters): finalizer, status, owner references, events, deletion, backoff, no hot loop.
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "controller_support/harness.rs"]
mod harness;

use std::time::Duration;

use apiserver::FakeApiServer;
use harness::*;
use vsphere_provider::api::VSphereDeploymentZone;

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
    // Backoff starts at 5 s: within 3 s there is no second attempt (no hot loop).
    let first = running.metric(errors);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(running.metric(errors), first, "retries back off");
    running.stop().await;
}
