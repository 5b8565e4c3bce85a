//! Retry later or failed: a zone whose vCenter work fails is `Retrying` when the failure is one a
//! later pass may not meet (HTTP 503 after the client's own retries), and `Failed` when vCenter
//! refuses (not authenticated even after logging in again). Both the view read and the
//! autoConfigure writes are faulted (vcsim fault injection). The two faults produce the same
//! condition reason, so the state can only come from the typed error, not from a string.
#[path = "support/vcsim.rs"]
mod vcsim;

use std::collections::BTreeMap;

use secrecy::SecretString;
use serde_json::json;
use vcsim::{FaultKind, FaultSpec, Vcsim};
use vsphere_provider::api::{VSphereDeploymentZone, VSphereFailureDomain};
use vsphere_provider::plan::failure::{Cause, Retry};
use vsphere_provider::plan::zone::{ZoneState, ZoneVerdict};
use vsphere_provider::reconcile::zones::reconcile_server;
use vsphere_provider::vcenter::model::tags::TagCatalog;
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials};

/// A ComputeCluster zone on DC0_C0 whose tags autoConfigure creates and attaches.
fn zone() -> (
    VSphereDeploymentZone,
    BTreeMap<String, VSphereFailureDomain>,
) {
    let fd: VSphereFailureDomain = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereFailureDomain",
        "metadata": {"name": "fd-a"},
        "spec": {
            "region": {"name": "region-1", "type": "Datacenter", "tagCategory": "k8s-region", "autoConfigure": true},
            "zone": {"name": "zone-a", "type": "ComputeCluster", "tagCategory": "k8s-zone", "autoConfigure": true},
            "topology": {"datacenter": "DC0", "computeCluster": "DC0_C0"}
        }
    }))
    .unwrap();
    let dz: VSphereDeploymentZone = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereDeploymentZone",
        "metadata": {"name": "a"},
        "spec": {"server": "127.0.0.1", "failureDomain": "fd-a", "placementConstraint": {"folder": "vm"}}
    }))
    .unwrap();
    (dz, BTreeMap::from([("fd-a".to_string(), fd)]))
}

/// One reconcile of the zone against a fresh vcsim with `fault` queued (20 times: more than the
/// client's retries and its one re-login).
async fn verdict_with(fault: FaultKind, method: &str) -> ZoneVerdict {
    let sim = Vcsim::builder().clusters(1).hosts(1).start().await;
    sim.inject(FaultSpec::new(fault).method(method).count(20))
        .await;
    let client = Client::new(
        sim.url(),
        Credentials::new("admin", SecretString::from("secret")),
        ClientOptions::default(),
    )
    .unwrap();
    let (dz, fds) = zone();
    let mut tags = TagCatalog::default();
    let mut run = reconcile_server(&client, &[&dz], &fds, &mut tags, false).await;
    run.verdicts.remove("a").unwrap()
}

fn reason(v: &ZoneVerdict) -> &'static str {
    v.first_problem().unwrap().0
}

#[tokio::test]
async fn an_unanswered_read_is_retrying_and_a_refused_one_failed() {
    let busy = verdict_with(FaultKind::Http503, "RetrievePropertiesEx").await;
    let refused = verdict_with(FaultKind::NotAuthenticated, "RetrievePropertiesEx").await;
    assert_eq!(reason(&busy), "VCenterUnreachable");
    assert_eq!(
        reason(&refused),
        "VCenterUnreachable",
        "the same reason string"
    );

    assert_eq!(busy.state(), ZoneState::Retrying, "{busy:?}");
    let f = busy.decisive_failure().unwrap();
    assert_eq!(f.retry(), Retry::Later);
    assert!(f.vcenter_error().is_some_and(|e| e.is_transient()), "{f:?}");

    assert_eq!(refused.state(), ZoneState::Failed, "{refused:?}");
    let f = refused.decisive_failure().unwrap();
    assert_eq!(f.retry(), Retry::Failed);
    assert!(
        matches!(f.cause(), Cause::Vcenter(e) if !e.is_transient()),
        "{f:?}"
    );
}

#[tokio::test]
async fn an_unanswered_auto_configure_write_is_retrying_and_a_refused_one_failed() {
    // Only the tag attachments are faulted: categories and tags are created, the attachments are
    // not, and the zone says autoConfigure failed either way.
    let busy = verdict_with(FaultKind::Http503, "~action=attach").await;
    let refused = verdict_with(FaultKind::NotAuthenticated, "~action=attach").await;
    // Upstream's reason for a refused tag change is the region (or zone) being misconfigured;
    // the region's attachment runs first. That it was autoConfigure is in the message.
    assert_eq!(reason(&busy), "FailureDomainRegionMisconfigured");
    assert_eq!(
        reason(&refused),
        "FailureDomainRegionMisconfigured",
        "the same reason string"
    );
    for v in [&busy, &refused] {
        let message = v.first_problem().unwrap().1;
        assert!(message.starts_with("autoConfigure failed: "), "{message}");
    }

    assert_eq!(busy.state(), ZoneState::Retrying, "{busy:?}");
    assert!(
        busy.failures
            .iter()
            .all(|f| f.vcenter_error().is_some_and(|e| e.is_transient())),
        "{:?}",
        busy.failures
    );

    assert_eq!(refused.state(), ZoneState::Failed, "{refused:?}");
    assert_eq!(
        refused.decisive_failure().map(|f| f.retry()),
        Some(Retry::Failed)
    );
}

/// A cold verify (fresh client and tag cache) of the already configured zone, with a fault
/// queued `count` times against the tag gets, which go out `in_flight` at a time.
async fn cold_verify_with(
    sim: &Vcsim,
    in_flight: usize,
    fault: Option<(FaultKind, u32)>,
) -> ZoneVerdict {
    sim.clear_faults().await;
    if let Some((kind, count)) = fault {
        let spec = FaultSpec::new(kind).method("cis/tagging/tag/id:");
        sim.inject(spec.count(count)).await;
    }
    let client = Client::new(
        sim.url(),
        Credentials::new("admin", SecretString::from("secret")),
        ClientOptions {
            reads_in_flight: in_flight,
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let (dz, fds) = zone();
    let mut tags = TagCatalog::default();
    let mut run = reconcile_server(&client, &[&dz], &fds, &mut tags, false).await;
    let _ = client.logout().await;
    run.verdicts.remove("a").unwrap()
}

#[tokio::test]
async fn a_fault_in_the_concurrent_tag_gets_is_retried_or_reported_as_when_sequential() {
    let sim = Vcsim::builder().clusters(1).hosts(1).start().await;
    // Configure once (tags created and attached), without faults.
    let configured = cold_verify_with(&sim, 16, None).await;
    assert!(configured.ready(), "{configured:?}");
    // One 503 is retried: ready either way. A dead session is re-established once: ready.
    for fault in [FaultKind::Http503, FaultKind::NotAuthenticated] {
        for in_flight in [1, 16] {
            let v = cold_verify_with(&sim, in_flight, Some((fault.clone(), 1))).await;
            assert!(v.ready(), "{fault:?} × 1, {in_flight} in flight: {v:?}");
        }
    }
    // More than the retries (and the one re-login) allow: the same condition, message and
    // state as with the reads one at a time.
    for (fault, state) in [
        (FaultKind::Http503, ZoneState::Retrying),
        (FaultKind::NotAuthenticated, ZoneState::Failed),
    ] {
        let sequential = cold_verify_with(&sim, 1, Some((fault.clone(), 20))).await;
        let concurrent = cold_verify_with(&sim, 16, Some((fault.clone(), 20))).await;
        assert_eq!(reason(&sequential), "VCenterUnreachable", "{fault:?}");
        assert_eq!(
            concurrent.first_problem(),
            sequential.first_problem(),
            "{fault:?}"
        );
        assert_eq!((sequential.state(), concurrent.state()), (state, state));
    }
}
