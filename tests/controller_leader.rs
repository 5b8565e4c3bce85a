//! Leader election on a Lease against the fake API server: acquire, renew, stand by, take over
//! an expired lease, release, and controllers running only while the lease is held.
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "controller_support/harness.rs"]
mod harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use apiserver::FakeApiServer;
use harness::*;
use k8s_openapi::api::coordination::v1::Lease;
use vsphere_provider::api::VSphereDeploymentZone;
use vsphere_provider::controllers::leader::{
    Attempt, LEASE_NAME, LeaderElector, LeaseSettings, lead,
};
use vsphere_provider::controllers::{Health, controllers_under_lease, shutdown};

const NS: &str = "vsphere-provider-system";
const LEASE_PATH: &str = "/namespaces/vsphere-provider-system/leases/vsphere-provider-leader";

fn quick(identity: &str) -> LeaseSettings {
    LeaseSettings {
        lease_duration: Duration::from_secs(1),
        renew_every: Duration::from_millis(150),
        renew_deadline: Duration::from_millis(500),
        retry_every: Duration::from_millis(100),
        ..LeaseSettings::new(NS, identity)
    }
}

fn lease(api: &FakeApiServer) -> Lease {
    api.get::<Lease>(Some(NS), LEASE_NAME)
        .expect("the lease exists")
}

fn holder(api: &FakeApiServer) -> Option<String> {
    lease(api).spec.and_then(|s| s.holder_identity)
}

#[tokio::test]
async fn acquires_a_missing_lease_and_renews_it() {
    let api = FakeApiServer::new();
    let mut a = LeaderElector::new(api.client(), LeaseSettings::new(NS, "pod-a"));
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    let first = lease(&api).spec.unwrap();
    assert_eq!(first.holder_identity.as_deref(), Some("pod-a"));
    assert_eq!(first.lease_duration_seconds, Some(15));
    assert_eq!(first.lease_transitions, Some(0));
    assert_eq!(
        api.count("POST", "/namespaces/vsphere-provider-system/leases"),
        1
    );

    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    let renewed = lease(&api).spec.unwrap();
    assert!(renewed.renew_time.unwrap().0 > first.renew_time.unwrap().0);
    assert_eq!(
        renewed.acquire_time, first.acquire_time,
        "a renewal is not a new acquisition"
    );
    assert_eq!(renewed.lease_transitions, Some(0));
    let put = api
        .requests()
        .into_iter()
        .rfind(|r| r.method == "PUT")
        .unwrap();
    assert!(put.path.ends_with(LEASE_PATH));
    assert!(
        put.body["metadata"]["resourceVersion"].is_string(),
        "renewal is compare-and-swap"
    );
}

#[tokio::test]
async fn a_live_lease_keeps_others_standing_by_and_an_expired_one_is_taken_over() {
    let api = FakeApiServer::new();
    let mut a = LeaderElector::new(api.client(), quick("pod-a"));
    let mut b = LeaderElector::new(api.client(), quick("pod-b"));
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert_eq!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::Standby {
            holder: "pod-a".into()
        }
    );
    // pod-a keeps renewing: pod-b keeps standing by even after more than a lease duration.
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
        assert!(matches!(
            b.try_acquire_or_renew().await.unwrap(),
            Attempt::Standby { .. }
        ));
    }
    // pod-a stops renewing; after a lease duration of an unchanged record, pod-b takes over.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(b.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    let spec = lease(&api).spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("pod-b"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(
        a.try_acquire_or_renew().await.unwrap(),
        Attempt::Standby {
            holder: "pod-b".into()
        }
    );
}

#[tokio::test]
async fn a_released_lease_is_taken_at_once_and_a_lost_race_is_standby() {
    let api = FakeApiServer::new();
    let mut a = LeaderElector::new(api.client(), LeaseSettings::new(NS, "pod-a"));
    let mut b = LeaderElector::new(api.client(), LeaseSettings::new(NS, "pod-b"));
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    a.release().await.unwrap();
    assert_eq!(holder(&api), None);
    assert_eq!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::Leading,
        "no wait for expiry"
    );
    // Releasing a lease someone else holds changes nothing.
    a.release().await.unwrap();
    assert_eq!(holder(&api).as_deref(), Some("pod-b"));
    // Another write between our read and our write: a conflict means standby, not an error.
    api.inject("PUT", LEASE_PATH, 409, 1);
    assert!(matches!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::Standby { .. }
    ));
}

#[tokio::test]
async fn work_runs_only_while_leading_and_stops_when_the_lease_is_lost() {
    let api = FakeApiServer::new();
    // Someone else holds the lease at first.
    let mut other = LeaderElector::new(api.client(), quick("pod-other"));
    assert_eq!(
        other.try_acquire_or_renew().await.unwrap(),
        Attempt::Leading
    );

    let health = Health::new(true);
    let terms = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let (stop, signal) = shutdown::channel();
    let task = {
        let (health, terms, running) = (health.clone(), terms.clone(), running.clone());
        let elector = LeaderElector::new(api.client(), quick("pod-a"));
        tokio::spawn(lead(elector, health, signal, move |term| {
            let (terms, running) = (terms.clone(), running.clone());
            async move {
                terms.fetch_add(1, Ordering::SeqCst);
                running.fetch_add(1, Ordering::SeqCst);
                term.wait().await;
                running.fetch_sub(1, Ordering::SeqCst);
            }
        }))
    };
    // pod-other renews for a while: no work, standby is ready.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        other.try_acquire_or_renew().await.unwrap();
    }
    assert_eq!(terms.load(Ordering::SeqCst), 0);
    assert!(!health.is_leading());
    assert!(health.readiness().is_ok(), "a standby replica is ready");

    // pod-other hands over.
    other.release().await.unwrap();
    api.wait_for("the first term", CONVERGE, |_| {
        (running.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    assert!(health.is_leading());
    assert_eq!(holder(&api).as_deref(), Some("pod-a"));
    assert!(
        health.readiness().is_err(),
        "leading without synced caches is not ready"
    );

    // Renewals fail past the deadline: the term ends, work stops, back to standby.
    api.inject("PUT", LEASE_PATH, 500, 1000);
    api.inject("GET", LEASE_PATH, 500, 1000);
    api.wait_for("the term to end", CONVERGE, |_| {
        (running.load(Ordering::SeqCst) == 0).then_some(())
    })
    .await;
    assert!(!health.is_leading());
    // The API server recovers: a second term starts.
    api.clear_injected();
    api.wait_for("the second term", CONVERGE, |_| {
        (terms.load(Ordering::SeqCst) == 2 && running.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;

    // Process shutdown: work stops first, then the lease is released.
    stop.trigger();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(running.load(Ordering::SeqCst), 0);
    assert_eq!(holder(&api), None, "released on shutdown");
}

#[tokio::test]
async fn controllers_do_not_touch_zones_while_another_replica_leads() {
    let api = FakeApiServer::new();
    api.put(&zone("a", "vc.example.com", "missing", &[]));
    let mut other = LeaderElector::new(api.client(), quick("pod-other"));
    assert_eq!(
        other.try_acquire_or_renew().await.unwrap(),
        Attempt::Leading
    );

    let mut shared = shared(&api, None);
    shared.health = Health::new(true);
    let (stop, signal) = shutdown::channel();
    let task = tokio::spawn(controllers_under_lease(
        shared.clone(),
        Some(quick("pod-a")),
        signal,
    ));
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        other.try_acquire_or_renew().await.unwrap();
    }
    let z = api.get::<VSphereDeploymentZone>(None, "a").unwrap();
    assert!(!has_finalizer(&z), "a standby replica writes nothing");
    assert_eq!(api.count("PATCH", "/vspheredeploymentzones/"), 0);

    other.release().await.unwrap();
    api.wait_for("the new leader to reconcile", CONVERGE, |api| {
        api.get::<VSphereDeploymentZone>(None, "a")
            .filter(has_finalizer)
    })
    .await;
    api.wait_for("caches synced", CONVERGE, |_| {
        shared.health.readiness().is_ok().then_some(())
    })
    .await;
    stop.trigger();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(holder(&api), None);
}
