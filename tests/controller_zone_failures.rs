//! The zone controller tells "retry later" from "failed" by the typed vCenter failure, not by a
//! condition reason (both say VCenterUnreachable): an unreachable vCenter backs off per zone
//! (5 s, 10 s, …), a vCenter refusing the login waits like a zone that is not ready.
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
use vcsim::Vcsim;
use vsphere_provider::api::VSphereDeploymentZone;
use vsphere_provider::api::deployment_zone::ZONE_FINALIZER;
use vsphere_provider::controllers::zone::{self as zone_controller, NOT_READY_REQUEUE};
use vsphere_provider::controllers::{Cache, Context, Error, Stores};
use vsphere_provider::plan::failure::Retry;

/// One reconcile of zone `a` on `server` (finalizer already in place) with the manager's
/// credentials `user`/`password`: the error, and the error policy's answer twice.
async fn reconcile_failing(server: &str, password: &str) -> (Error, Action, Action) {
    let api = FakeApiServer::new();
    let mut z = zone("a", server, "fd-a", &[]);
    z.metadata.finalizers = Some(vec![ZONE_FINALIZER.to_string()]);
    api.put(&z);
    let fd = failure_domain("fd-a", "DC0_C0", false);
    api.put(&fd);
    let z: VSphereDeploymentZone = api.get(None, "a").unwrap();
    let stores = Stores {
        zones: Cache::from_objects([z.clone()]),
        failure_domains: Cache::from_objects([fd]),
        clusters: Cache::from_objects([]),
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
    let ctx = Arc::new(Context::new(
        &shared(&api, Some(manager("admin", password))),
        stores,
    ));
    let z = Arc::new(z);
    let err = zone_controller::reconcile(z.clone(), ctx.clone())
        .await
        .unwrap_err();
    let first = zone_controller::error_policy(z.clone(), &err, ctx.clone());
    let second = zone_controller::error_policy(z, &err, ctx);
    (err, first, second)
}

#[tokio::test]
async fn unreachable_backs_off_and_a_refused_login_waits_for_a_change() {
    // Nothing listens on port 9: the connection is refused (transient).
    let (err, first, second) = reconcile_failing("http://127.0.0.1:9/sdk", "secret").await;
    assert_eq!(err.category(), "vcenter");
    assert_eq!(err.retry(), Retry::Later, "{err}");
    assert_eq!(first, Action::requeue(Duration::from_secs(5)));
    assert_eq!(
        second,
        Action::requeue(Duration::from_secs(10)),
        "backs off"
    );

    // vcsim accepts only admin/secret: a wrong password is refused (permanent).
    let sim = Vcsim::builder()
        .clusters(1)
        .hosts(1)
        .credentials("admin", "secret")
        .start()
        .await;
    let (err, first, second) = reconcile_failing(sim.url(), "wrong").await;
    assert_eq!(err.category(), "vcenter");
    assert_eq!(err.retry(), Retry::Failed, "{err}");
    assert!(err.to_string().contains("rejected the login"), "{err}");
    assert_eq!(first, Action::requeue(NOT_READY_REQUEUE));
    assert_eq!(
        second,
        Action::requeue(NOT_READY_REQUEUE),
        "no backoff storm of logins"
    );
}
