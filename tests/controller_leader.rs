//! Leader election on a Lease against the fake API server: acquire, renew, stand by, take over
//! an expired lease, release, controllers running only while the lease is held, a lost lease
//! aborting the term at once, hung Lease calls bounded by the renew deadline, and a shutdown
//! drain that keeps renewing.
//!
//! Timing: tokio's paused clock is not available (no `test-util`), so these run on the wall
//! clock with wide margins: a 5 s lease renewed every 500 ms, given up 3 s after the last
//! renewal. Leadership cannot flip unless the whole test process stalls for 3 s; assertions
//! about what must not happen are either guaranteed by construction (a standby's clock starts
//! after the holder's last write) or checked over a window longer than the lease.
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "controller_support/harness.rs"]
mod harness;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::FakeApiServer;
use harness::*;
use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::Instant;
use vsphere_provider::api::VSphereDeploymentZone;
use vsphere_provider::controllers::leader::{
    Attempt, LEASE_NAME, LeaderElector, LeaseSettings, lead,
};
use vsphere_provider::controllers::{Health, Shutdown, controllers_under_lease, shutdown};

const NS: &str = "vsphere-provider-system";
const LEASE_PATH: &str = "/namespaces/vsphere-provider-system/leases/vsphere-provider-leader";

const LEASE: Duration = Duration::from_secs(5);
const RENEW_EVERY: Duration = Duration::from_millis(500);
const RENEW_DEADLINE: Duration = Duration::from_secs(3);

fn steady(identity: &str) -> LeaseSettings {
    LeaseSettings {
        lease_duration: LEASE,
        renew_every: RENEW_EVERY,
        renew_deadline: RENEW_DEADLINE,
        retry_every: Duration::from_millis(250),
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
    let mut a = LeaderElector::new(api.client(), steady("pod-a"));
    let mut b = LeaderElector::new(api.client(), steady("pod-b"));
    assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
    assert_eq!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::Standby {
            holder: "pod-a".into()
        }
    );
    // pod-a keeps renewing: pod-b keeps standing by for longer than a lease duration.
    let started = Instant::now();
    while started.elapsed() < LEASE + Duration::from_secs(1) {
        tokio::time::sleep(RENEW_EVERY).await;
        assert_eq!(a.try_acquire_or_renew().await.unwrap(), Attempt::Leading);
        assert!(matches!(
            b.try_acquire_or_renew().await.unwrap(),
            Attempt::Standby { .. }
        ));
    }
    // pod-a stops renewing; pod-b takes over after a lease duration of an unchanged record
    // on its own clock, so never sooner than a lease duration after pod-a's last write.
    let last_renewal = Instant::now();
    while b.try_acquire_or_renew().await.unwrap() != Attempt::Leading {
        assert!(last_renewal.elapsed() < CONVERGE, "pod-b never took over");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let taken_over = last_renewal.elapsed();
    assert!(taken_over >= LEASE, "taken over after {taken_over:?}");
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

/// What the terms of a `lead` did: started, saw their end signal, finished draining, or were
/// dropped (aborted) before finishing.
#[derive(Default)]
struct Terms {
    started: AtomicUsize,
    signalled: AtomicUsize,
    drained: AtomicUsize,
    aborted: AtomicUsize,
    drained_at: Mutex<Option<Instant>>,
}

impl Terms {
    fn get(&self, counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }

    /// Terms running now.
    fn running(&self) -> usize {
        self.get(&self.started) - self.get(&self.drained) - self.get(&self.aborted)
    }
}

/// Counts an abort when dropped before `done`.
struct AbortGuard {
    terms: Arc<Terms>,
    done: bool,
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if !self.done {
            self.terms.aborted.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A term's work: runs until its signal, then takes `drain(term number)` to drain.
fn work(
    terms: Arc<Terms>,
    drain: impl Fn(usize) -> Duration + Clone + 'static,
) -> impl FnMut(Shutdown) -> std::pin::Pin<Box<dyn Future<Output = ()>>> {
    move |term| {
        let terms = terms.clone();
        let drain = drain.clone();
        Box::pin(async move {
            let n = terms.started.fetch_add(1, Ordering::SeqCst) + 1;
            let mut guard = AbortGuard {
                terms: terms.clone(),
                done: false,
            };
            term.wait().await;
            terms.signalled.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(drain(n)).await;
            *terms.drained_at.lock().unwrap() = Some(Instant::now());
            terms.drained.fetch_add(1, Ordering::SeqCst);
            guard.done = true;
        })
    }
}

fn spawn_lead(
    api: &FakeApiServer,
    identity: &str,
    health: Arc<Health>,
    signal: Shutdown,
    terms: Arc<Terms>,
    drain: impl Fn(usize) -> Duration + Clone + 'static,
) -> tokio::task::JoinHandle<()> {
    let elector = LeaderElector::new(api.client(), steady(identity));
    tokio::task::spawn_local(lead(elector, health, signal, work(terms, drain)))
}

/// Run `f` on a LocalSet (the term futures in these tests are not `Send`).
async fn local<F: Future>(f: F) -> F::Output {
    tokio::task::LocalSet::new().run_until(f).await
}

#[tokio::test]
async fn work_runs_only_while_leading_and_a_failed_renewal_aborts_it() {
    local(async {
        let api = FakeApiServer::new();
        // Someone else holds the lease at first.
        let mut other = LeaderElector::new(api.client(), steady("pod-other"));
        assert_eq!(
            other.try_acquire_or_renew().await.unwrap(),
            Attempt::Leading
        );

        let health = Health::new(true);
        let terms = Arc::new(Terms::default());
        let (stop, signal) = shutdown::channel();
        // The first term would take an hour to drain: only an abort ends it in time.
        let task = spawn_lead(&api, "pod-a", health.clone(), signal, terms.clone(), |n| {
            if n == 1 {
                Duration::from_secs(3600)
            } else {
                Duration::from_millis(100)
            }
        });
        // pod-other renews for a while: no work, standby is ready.
        for _ in 0..4 {
            tokio::time::sleep(RENEW_EVERY).await;
            other.try_acquire_or_renew().await.unwrap();
        }
        assert_eq!(terms.get(&terms.started), 0);
        assert!(!health.is_leading());
        assert!(health.readiness().is_ok(), "a standby replica is ready");

        // pod-other hands over.
        other.release().await.unwrap();
        api.wait_for("the first term", CONVERGE, |_| {
            (terms.running() == 1).then_some(())
        })
        .await;
        assert!(health.is_leading());
        assert_eq!(holder(&api).as_deref(), Some("pod-a"));
        assert!(
            health.readiness().is_err(),
            "leading without synced caches is not ready"
        );

        // Renewals fail past the deadline: the term is aborted, not drained (another replica
        // may lead by now), and the replica stands by.
        api.inject("PUT", LEASE_PATH, 500, 1000);
        api.inject("GET", LEASE_PATH, 500, 1000);
        api.wait_for("the term to be aborted", CONVERGE, |_| {
            (terms.get(&terms.aborted) == 1).then_some(())
        })
        .await;
        assert_eq!(terms.get(&terms.signalled), 0, "aborted without a drain");
        assert!(!health.is_leading());
        // The API server recovers: a second term starts.
        api.clear_injected();
        api.wait_for("the second term", CONVERGE, |_| {
            (terms.get(&terms.started) == 2 && terms.running() == 1).then_some(())
        })
        .await;

        // Process shutdown: the work drains, then the lease is released.
        stop.trigger();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(terms.get(&terms.drained), 1);
        assert_eq!(terms.running(), 0);
        assert_eq!(holder(&api), None, "released on shutdown");
    })
    .await;
}

#[tokio::test]
async fn a_lease_taken_over_aborts_the_term_at_once() {
    local(async {
        let api = FakeApiServer::new();
        let health = Health::new(true);
        let terms = Arc::new(Terms::default());
        let (_stop, signal) = shutdown::channel();
        let task = spawn_lead(&api, "pod-a", health.clone(), signal, terms.clone(), |_| {
            Duration::from_secs(3600)
        });
        api.wait_for("the first term", CONVERGE, |_| {
            (terms.running() == 1).then_some(())
        })
        .await;
        // Another replica holds the lease now (as after a partition).
        let mut taken = lease(&api);
        let spec = taken.spec.as_mut().unwrap();
        spec.holder_identity = Some("pod-b".into());
        spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            jiff::Timestamp::now(),
        ));
        api.put(&taken);
        let lost_after = Instant::now();
        api.wait_for("the term to be aborted", CONVERGE, |_| {
            (terms.get(&terms.aborted) == 1).then_some(())
        })
        .await;
        assert_eq!(terms.get(&terms.signalled), 0, "aborted, not drained");
        assert!(!health.is_leading());
        // Noticed at the next renewal, not after the renew deadline.
        assert!(
            lost_after.elapsed() < RENEW_DEADLINE + RENEW_EVERY,
            "{:?}",
            lost_after.elapsed()
        );
        assert_eq!(holder(&api).as_deref(), Some("pod-b"));
        task.abort();
    })
    .await;
}

#[tokio::test]
async fn hung_lease_calls_end_the_term_by_the_renew_deadline() {
    local(async {
        let api = FakeApiServer::new();
        let health = Health::new(true);
        let terms = Arc::new(Terms::default());
        let (stop, signal) = shutdown::channel();
        let task = spawn_lead(&api, "pod-a", health.clone(), signal, terms.clone(), |n| {
            if n == 1 {
                Duration::from_secs(3600)
            } else {
                Duration::from_millis(100)
            }
        });
        api.wait_for("the first term", CONVERGE, |_| {
            (terms.running() == 1).then_some(())
        })
        .await;
        // The API server stops answering Lease calls (the client has no read timeout).
        api.hold("GET", LEASE_PATH);
        api.hold("PUT", LEASE_PATH);
        let hung_at = Instant::now();
        api.wait_for("the term to be aborted", CONVERGE, |_| {
            (terms.get(&terms.aborted) == 1).then_some(())
        })
        .await;
        let took = hung_at.elapsed();
        assert!(!health.is_leading());
        // Within the renew deadline of the last renewal (which was before the hang), well
        // before a standby could take over (a lease duration after that renewal).
        assert!(took <= RENEW_DEADLINE + Duration::from_secs(1), "{took:?}");
        assert_eq!(terms.get(&terms.signalled), 0, "aborted, not drained");

        // The API server answers again: the lease is still ours, a new term starts.
        api.release_holds();
        api.wait_for("the second term", CONVERGE, |_| {
            (terms.get(&terms.started) == 2).then_some(())
        })
        .await;
        stop.trigger();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(terms.get(&terms.drained), 1);
    })
    .await;
}

#[tokio::test]
async fn a_shutdown_drain_keeps_renewing_then_releases() {
    local(async {
        let api = FakeApiServer::new();
        let health = Health::new(true);
        let terms = Arc::new(Terms::default());
        let (stop, signal) = shutdown::channel();
        // Draining takes longer than a lease duration.
        let drain = LEASE + Duration::from_secs(2);
        let task = spawn_lead(
            &api,
            "pod-a",
            health.clone(),
            signal,
            terms.clone(),
            move |_| drain,
        );
        api.wait_for("the first term", CONVERGE, |_| {
            (terms.running() == 1).then_some(())
        })
        .await;

        // A standby tries all along.
        let standby_led_at: Arc<Mutex<Option<Instant>>> = Arc::default();
        let done = Arc::new(AtomicBool::new(false));
        let standby = {
            let (api, led_at, done) = (api.clone(), standby_led_at.clone(), done.clone());
            tokio::task::spawn_local(async move {
                let mut b = LeaderElector::new(api.client(), steady("pod-b"));
                while !done.load(Ordering::SeqCst) {
                    if let Ok(Attempt::Leading) = b.try_acquire_or_renew().await {
                        *led_at.lock().unwrap() = Some(Instant::now());
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        };

        stop.trigger();
        tokio::time::timeout(CONVERGE, task)
            .await
            .expect("lead returns after the drain")
            .unwrap();
        assert_eq!(terms.get(&terms.drained), 1, "drained, not aborted");
        assert_eq!(terms.get(&terms.aborted), 0);
        let drained_at = terms.drained_at.lock().unwrap().expect("drained");
        if let Some(led) = *standby_led_at.lock().unwrap() {
            assert!(led >= drained_at, "the standby took over mid-drain");
        }
        // Released after the drain: the standby takes over at once.
        api.wait_for("the standby to lead", CONVERGE, |_| {
            standby_led_at.lock().unwrap().map(|_| ())
        })
        .await;
        done.store(true, Ordering::SeqCst);
        let _ = standby.await;
        assert_eq!(holder(&api).as_deref(), Some("pod-b"));
    })
    .await;
}

#[tokio::test]
async fn controllers_do_not_touch_zones_while_another_replica_leads() {
    let api = FakeApiServer::new();
    api.put(&zone("a", "vc.example.com", "missing", &[]));
    let mut other = LeaderElector::new(api.client(), steady("pod-other"));
    assert_eq!(
        other.try_acquire_or_renew().await.unwrap(),
        Attempt::Leading
    );

    let mut shared = shared(&api, None);
    shared.health = Health::new(true);
    let (stop, signal) = shutdown::channel();
    let task = tokio::spawn(controllers_under_lease(
        shared.clone(),
        Some(steady("pod-a")),
        signal,
    ));
    for _ in 0..4 {
        tokio::time::sleep(RENEW_EVERY).await;
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
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(holder(&api), None);
}
