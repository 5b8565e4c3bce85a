//! The in-cluster shell (`vsphere-provider run`): kube-runtime controllers around the same
//! gather/plan/execute core local mode drives (DESIGN.md §1–§2). Everything here is thin: the
//! decisions live in `plan`, the vCenter work in `reconcile`.
//!
//! * [`zone`] — VSphereDeploymentZone (also woken by VSphereFailureDomain changes): verify and
//!   autoConfigure in vCenter, status, the failure domain's owner reference, deletion.
//! * [`cluster`] — VSphereCluster (woken by zone changes): publish ready zones as failure domains.
//! * [`leader`] — leader election on a `coordination.k8s.io/v1` Lease.
//! * [`admin`] — `/metrics`, `/healthz`, `/readyz`.
//!
//! One watch per kind: each kind is reflected once into a shared [`Cache`], and the controllers
//! are triggered from that cache's subscription. A trigger therefore never runs ahead of the
//! caches the reconcilers read (a zone woken by its failure domain sees that failure domain).
//! The controllers start only once every cache has its initial list: kube-runtime's
//! Controller waits for its own store only, and a reconcile reading a cache that has not loaded
//! would take "not listed yet" for "none" (no Machines, so delete the zone; no zones, so
//! unpublish every failure domain).
pub mod admin;
pub mod cache;
pub mod cluster;
pub mod credentials;
pub mod error;
pub mod kube_ops;
pub mod leader;
pub mod metrics;
pub mod patch;
pub mod shutdown;
pub mod zone;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::api::{Machine, VSphereCluster, VSphereDeploymentZone, VSphereFailureDomain};
use crate::plan::credentials::ManagerIdentity;
use crate::reconcile::views::ServerViews;
use crate::vcenter::session::SessionCache;

pub use admin::Health;
pub use cache::Cache;
pub use error::Error;
pub use metrics::Metrics;
pub use shutdown::{Shutdown, ShutdownTrigger};

/// The field manager of every write this provider makes (server-side apply owner).
pub const FIELD_MANAGER: &str = "vsphere-provider";

/// How many objects a shared store buffers for a slow subscriber before the watch waits.
const SUBSCRIBER_BUFFER: usize = 256;

/// Reconciles of one controller running at once (2 cores; vCenter is the bottleneck anyway).
const CONCURRENCY: u16 = 4;

/// After shutdown, how long in-flight reconciles get to finish before they are aborted: within
/// the pod's 30 s grace period, leaving time to release the lease and log out of vCenter.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// A reconcile that finds a cache it reads not loaded yet comes back this soon (and changes
/// nothing meanwhile).
pub const NOT_SYNCED_REQUEUE: Duration = Duration::from_secs(2);

/// What outlives a leadership term: clients, caches, metrics, health.
#[derive(Clone)]
pub struct Shared {
    pub client: kube::Client,
    /// vCenter sessions per (server, user, TLS); logged out on shutdown.
    pub sessions: SessionCache,
    /// Per-server vCenter views, so N zones on one server cost one gather.
    pub views: Arc<ServerViews>,
    /// The manager's own vCenter credentials (fallback when no VSphereCluster supplies some).
    pub manager: Option<ManagerIdentity>,
    pub metrics: Arc<Metrics>,
    /// Who publishes Events.
    pub reporter: Reporter,
    pub health: Arc<Health>,
}

/// The caches the reconcilers read.
#[derive(Clone)]
pub struct Stores {
    pub zones: Cache<VSphereDeploymentZone>,
    pub failure_domains: Cache<VSphereFailureDomain>,
    pub clusters: Cache<VSphereCluster>,
    pub machines: Cache<Machine>,
}

impl Stores {
    /// Whether every cache has its initial list.
    pub fn all_synced(&self) -> bool {
        self.not_synced().is_empty()
    }

    /// The kinds whose caches have not loaded yet.
    pub fn not_synced(&self) -> Vec<&'static str> {
        [
            ("VSphereDeploymentZone", self.zones.is_synced()),
            ("VSphereFailureDomain", self.failure_domains.is_synced()),
            ("VSphereCluster", self.clusters.is_synced()),
            ("Machine", self.machines.is_synced()),
        ]
        .into_iter()
        .filter_map(|(kind, synced)| (!synced).then_some(kind))
        .collect()
    }

    /// Resolves when every cache has its initial list (false if a watch is gone for good).
    pub async fn wait_synced(&self) -> bool {
        self.zones.wait_synced().await
            && self.failure_domains.wait_synced().await
            && self.clusters.wait_synced().await
            && self.machines.wait_synced().await
    }
}

/// What a reconcile gets: the shared parts plus this term's stores and backoff.
pub struct Context {
    pub client: kube::Client,
    pub sessions: SessionCache,
    pub views: Arc<ServerViews>,
    pub manager: Option<ManagerIdentity>,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub stores: Stores,
    pub backoff: Backoff,
}

impl Context {
    /// A context over `shared` reading `stores`.
    pub fn new(shared: &Shared, stores: Stores) -> Self {
        Context {
            client: shared.client.clone(),
            sessions: shared.sessions.clone(),
            views: shared.views.clone(),
            manager: shared.manager.clone(),
            metrics: shared.metrics.clone(),
            recorder: Recorder::new(shared.client.clone(), shared.reporter.clone()),
            stores,
            backoff: Backoff::default(),
        }
    }

    /// Count and time one reconcile; a success resets the object's backoff.
    pub(crate) fn record(
        &self,
        controller: &str,
        key: &str,
        started: Instant,
        result: &Result<Action, Error>,
    ) {
        let outcome = match result {
            Ok(_) => {
                self.backoff.reset(key);
                Ok(())
            }
            Err(e) => Err(e.category()),
        };
        self.metrics
            .reconciled(controller, started.elapsed(), outcome);
    }
}

/// The current time, as status conditions stamp it.
pub(crate) fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// Per-object exponential backoff for failed reconciles: an unreachable vCenter is retried
/// at 5 s, 10 s, 20 s … up to 5 min for each zone, never in a hot loop, and a success starts
/// over. Objects that stopped failing without a success (deleted ones) are forgotten once they
/// have not failed for twice the cap.
#[derive(Debug)]
pub struct Backoff {
    failures: Mutex<HashMap<String, Failures>>,
    base: Duration,
    cap: Duration,
}

#[derive(Debug)]
struct Failures {
    count: u32,
    last: tokio::time::Instant,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Duration::from_secs(5), Duration::from_secs(300))
    }
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Backoff {
            failures: Mutex::default(),
            base,
            cap,
        }
    }

    /// Record one more failure of `key` and say how long to wait.
    pub fn next(&self, key: &str) -> Duration {
        let now = tokio::time::Instant::now();
        let stale = self.cap.saturating_mul(2);
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|k, f| k == key || now.duration_since(f.last) < stale);
        let f = map.entry(key.to_string()).or_insert(Failures {
            count: 0,
            last: now,
        });
        let delay = self
            .base
            .saturating_mul(2u32.saturating_pow(f.count.min(16)))
            .min(self.cap);
        f.count = f.count.saturating_add(1);
        f.last = now;
        delay
    }

    pub fn reset(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// How many objects have a failure on record.
    pub fn tracked(&self) -> usize {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

type Deleted<K> = futures::channel::mpsc::UnboundedSender<Arc<DeserializeGuard<K>>>;

/// Drive the watch of `api` into `writer` until the task is aborted. Watch errors (API server
/// restarts, a CRD removed) are logged and retried with the watcher's backoff; an object that
/// does not decode is cached as such and logged, never failing the list. Deleted objects go to
/// `deleted` (shared stores tell their subscribers about changes, not deletions).
fn spawn_reflector<K>(
    api: Api<DeserializeGuard<K>>,
    writer: reflector::store::Writer<DeserializeGuard<K>>,
    deleted: Option<Deleted<K>>,
    tasks: &mut tokio::task::JoinSet<()>,
) where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let kind = K::kind(&()).into_owned();
    tasks.spawn(async move {
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default()).default_backoff(),
        );
        stream
            .for_each(|event| {
                match event {
                    Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                        if let Err(e) = &obj.0 {
                            tracing::warn!(
                                %kind,
                                object = %cache::display_name(&e.metadata),
                                error = %e.error,
                                "cannot decode the object; it is skipped until fixed"
                            );
                        }
                    }
                    Ok(watcher::Event::Delete(obj)) => {
                        if let Some(tx) = &deleted {
                            let _ = tx.unbounded_send(Arc::new(obj));
                        }
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                    Err(e) => tracing::warn!(%kind, error = %e, "watch failed; retrying"),
                }
                futures::future::ready(())
            })
            .await;
    });
}

/// Wait for every cache's initial list, saying now and then which are still loading; false
/// when a watch is gone for good.
async fn wait_for_caches(stores: &Stores) -> bool {
    let wait = stores.wait_synced();
    tokio::pin!(wait);
    loop {
        tokio::select! {
            synced = &mut wait => return synced,
            () = tokio::time::sleep(Duration::from_secs(10)) => {
                tracing::info!(loading = ?stores.not_synced(), "waiting for the caches before starting the controllers");
            }
        }
    }
}

/// Run `work` to its end, but give it at most `limit` once `shutdown` fires: a reconcile stuck
/// on an unresponsive vCenter must not outlive the pod's grace period. Dropping `work` aborts
/// what is still running. Returns whether it finished in time.
pub async fn drain_within(
    work: impl Future<Output = ()>,
    shutdown: Shutdown,
    limit: Duration,
) -> bool {
    tokio::select! {
        () = work => true,
        () = async {
            shutdown.wait().await;
            tokio::time::sleep(limit).await;
        } => false,
    }
}

/// Marks the caches unsynced when a term's controllers end, however they end (also when the
/// term is aborted because the lease was lost).
struct Unsynced(Arc<Health>);

impl Drop for Unsynced {
    fn drop(&mut self) {
        self.0.set_synced(false);
    }
}

/// Run the zone and cluster controllers until `shutdown`, then let in-flight reconciles finish
/// (at most [`DRAIN_TIMEOUT`]). The controllers start once every cache has its initial list;
/// `shared.health` is marked synced then. Dropping the future aborts everything at once.
pub async fn run_controllers(shared: &Shared, shutdown: Shutdown) {
    let client = shared.client.clone();
    let mut tasks = tokio::task::JoinSet::new();
    let _unsynced = Unsynced(shared.health.clone());

    let (zone_store, zone_writer) =
        reflector::store_shared::<DeserializeGuard<VSphereDeploymentZone>>(SUBSCRIBER_BUFFER);
    let (fd_store, fd_writer) =
        reflector::store_shared::<DeserializeGuard<VSphereFailureDomain>>(SUBSCRIBER_BUFFER);
    let (cluster_store, cluster_writer) =
        reflector::store_shared::<DeserializeGuard<VSphereCluster>>(SUBSCRIBER_BUFFER);
    let (machine_store, machine_writer) = reflector::store::<DeserializeGuard<Machine>>();

    // Subscribe before the watches start so no object is missed.
    let (Some(zone_trigger), Some(zone_to_clusters), Some(fd_trigger), Some(cluster_trigger)) = (
        zone_writer.subscribe(),
        zone_writer.subscribe(),
        fd_writer.subscribe(),
        cluster_writer.subscribe(),
    ) else {
        unreachable!("shared stores can be subscribed to");
    };
    let (zone_deleted, deleted_zones) = futures::channel::mpsc::unbounded();
    spawn_reflector(
        Api::all(client.clone()),
        zone_writer,
        Some(zone_deleted),
        &mut tasks,
    );
    spawn_reflector(Api::all(client.clone()), fd_writer, None, &mut tasks);
    spawn_reflector(Api::all(client.clone()), cluster_writer, None, &mut tasks);
    spawn_reflector(Api::all(client.clone()), machine_writer, None, &mut tasks);

    let stores = Stores {
        zones: Cache::over(zone_store.clone()),
        failure_domains: Cache::over(fd_store),
        clusters: Cache::over(cluster_store.clone()),
        machines: Cache::over(machine_store),
    };
    // Nothing is reconciled before every cache has loaded. (Until the controllers start,
    // the subscriptions buffer; a full buffer only holds a watch back, never a cache's
    // readiness, which is set before the initial list is passed on.)
    let synced = tokio::select! {
        synced = wait_for_caches(&stores) => synced,
        () = shutdown.clone().wait() => false,
    };
    if !synced {
        tasks.shutdown().await;
        return;
    }
    tracing::info!("caches synced");
    shared.health.set_synced(true);
    let ctx = Arc::new(Context::new(shared, stores.clone()));

    let zones_for_fd = stores.zones.store();
    let zone_controller = Controller::for_shared_stream(
        skip_status_only_changes(zone_trigger, zone_store.clone()),
        zone_store,
    )
    .watches_shared_stream(
        fd_trigger,
        move |fd: Arc<DeserializeGuard<VSphereFailureDomain>>| {
            zone::zones_using(
                &zones_for_fd.state(),
                &fd.meta().name.clone().unwrap_or_default(),
            )
        },
    )
    .with_config(Config::default().concurrency(CONCURRENCY))
    .graceful_shutdown_on(shutdown.clone().wait())
    .run(
        zone::reconcile_guarded,
        zone::error_policy_guarded,
        ctx.clone(),
    )
    .for_each(|result| {
        log_controller_result(zone::CONTROLLER, result);
        futures::future::ready(())
    });

    // Zone changes and deletions both wake the clusters concerned.
    let zone_events = futures::stream::select(zone_to_clusters, deleted_zones);
    let clusters_for_zone = stores.clusters.store();
    let cluster_controller = Controller::for_shared_stream(
        skip_status_only_changes(cluster_trigger, cluster_store.clone()),
        cluster_store,
    )
    .watches_shared_stream(
        zone_events,
        move |z: Arc<DeserializeGuard<VSphereDeploymentZone>>| {
            cluster::clusters_concerned(&clusters_for_zone.state(), &z)
        },
    )
    .with_config(Config::default().concurrency(CONCURRENCY))
    .graceful_shutdown_on(shutdown.clone().wait())
    .run(
        cluster::reconcile_guarded,
        cluster::error_policy_guarded,
        ctx,
    )
    .for_each(|result| {
        log_controller_result(cluster::CONTROLLER, result);
        futures::future::ready(())
    });

    tracing::info!("controllers started");
    let controllers = async {
        futures::join!(zone_controller, cluster_controller);
    };
    if !drain_within(controllers, shutdown, DRAIN_TIMEOUT).await {
        tracing::warn!(
            limit = ?DRAIN_TIMEOUT,
            "reconciles still running after shutdown; aborted"
        );
    }
    tasks.shutdown().await;
    tracing::info!("controllers stopped");
}

/// Run the controllers until `shutdown`: under the Lease when `lease` is set (only while
/// holding it, back to standby when it is lost, released on shutdown), else at once.
pub async fn controllers_under_lease(
    shared: Shared,
    lease: Option<leader::LeaseSettings>,
    shutdown: Shutdown,
) {
    match lease {
        None => run_controllers(&shared, shutdown).await,
        Some(settings) => {
            let elector = leader::LeaderElector::new(shared.client.clone(), settings);
            let health = shared.health.clone();
            leader::lead(elector, health, shutdown, |term| {
                let shared = shared.clone();
                async move { run_controllers(&shared, term).await }
            })
            .await;
        }
    }
}

/// How many remembered fingerprints of objects no longer cached are tolerated before the
/// status-only filter forgets them.
const FORGET_SLACK: usize = 64;

/// Remembers what last woke each object, to tell status-only updates apart.
struct StatusOnlyFilter<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    seen: HashMap<(Option<String>, String), u64>,
    cache: Store<K>,
}

impl<K> StatusOnlyFilter<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn new(cache: Store<K>) -> Self {
        StatusOnlyFilter {
            seen: HashMap::new(),
            cache,
        }
    }

    /// Whether `obj` changed more than its status since it last came by.
    fn admit(&mut self, obj: &K) -> bool {
        use std::hash::{Hash, Hasher};
        let m = obj.meta();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        m.uid.hash(&mut h);
        m.generation.hash(&mut h);
        m.labels.hash(&mut h);
        m.annotations.hash(&mut h);
        m.finalizers.hash(&mut h);
        m.deletion_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .hash(&mut h);
        let fingerprint = h.finish();
        let key = (m.namespace.clone(), m.name.clone().unwrap_or_default());
        let fresh = self.seen.insert(key, fingerprint) != Some(fingerprint);
        // Deleted objects are not announced: forget those no longer cached once they pile up.
        if self.seen.len() > self.cache.len() + FORGET_SLACK {
            let cache = &self.cache;
            self.seen.retain(|(ns, name), _| {
                let mut r = ObjectRef::<K>::new(name);
                if let Some(ns) = ns {
                    r = r.within(ns);
                }
                cache.get(&r).is_some()
            });
        }
        fresh
    }

    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.seen.len()
    }
}

/// Drop updates that changed nothing but the status (or other server-managed fields): our own
/// status writes would otherwise wake the reconciler once more each time, doubling vCenter
/// traffic and defeating the backoff. Spec (generation), labels, annotations, finalizers and
/// deletion still wake it; periodic requeues catch everything else.
fn skip_status_only_changes<K>(
    trigger: impl futures::Stream<Item = Arc<K>> + Send + 'static,
    cache: Store<K>,
) -> impl futures::Stream<Item = Arc<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let mut filter = StatusOnlyFilter::new(cache);
    trigger.filter(move |obj| futures::future::ready(filter.admit(obj)))
}

/// Reconcile failures are logged by the error policies; this logs the rest (queue trouble).
fn log_controller_result<K: Resource, E: std::error::Error>(
    controller: &str,
    result: Result<
        (reflector::ObjectRef<K>, Action),
        kube::runtime::controller::Error<E, watcher::Error>,
    >,
) {
    use kube::runtime::controller::Error as CtrlError;
    match result {
        Ok((obj, action)) => tracing::debug!(controller, object = %obj, ?action, "reconciled"),
        Err(CtrlError::ReconcilerFailed(_, obj)) => {
            tracing::debug!(controller, object = %obj, "reconcile failed (see error policy)");
        }
        Err(CtrlError::ObjectNotFound(obj)) => {
            tracing::debug!(controller, object = %obj, "object gone before its reconcile");
        }
        Err(e) => tracing::warn!(controller, error = %e, "controller error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::VSphereDeploymentZoneSpec;

    #[test]
    fn backoff_doubles_per_object_up_to_the_cap_and_resets() {
        let b = Backoff::new(Duration::from_secs(5), Duration::from_secs(60));
        let seq: Vec<u64> = (0..6).map(|_| b.next("zone/a").as_secs()).collect();
        assert_eq!(seq, [5, 10, 20, 40, 60, 60]);
        assert_eq!(b.next("zone/b").as_secs(), 5, "per object");
        b.reset("zone/a");
        assert_eq!(b.next("zone/a").as_secs(), 5);
    }

    #[tokio::test]
    async fn backoff_forgets_objects_that_stopped_failing() {
        // Stale after twice the cap (200 ms) without a failure.
        let b = Backoff::new(Duration::from_millis(10), Duration::from_millis(100));
        for i in 0..100 {
            b.next(&format!("zone/deleted-{i}"));
        }
        b.next("zone/still-failing");
        assert_eq!(b.tracked(), 101);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            b.next("zone/still-failing").as_millis(),
            20,
            "kept its count"
        );
        assert_eq!(b.tracked(), 1, "the deleted objects are forgotten");
    }

    fn zone(name: &str, uid: &str) -> VSphereDeploymentZone {
        let mut z = VSphereDeploymentZone::new(name, VSphereDeploymentZoneSpec::default());
        z.metadata.uid = Some(uid.into());
        z
    }

    #[test]
    fn the_status_only_filter_forgets_deleted_objects() {
        let (store, mut writer) = reflector::store::<VSphereDeploymentZone>();
        let mut filter = StatusOnlyFilter::new(store);
        for i in 0..500 {
            let z = zone(&format!("z{i}"), &format!("uid-{i}"));
            writer.apply_watcher_event(&watcher::Event::Apply(z.clone()));
            assert!(filter.admit(&z));
            assert!(!filter.admit(&z), "a repeat without changes is dropped");
            writer.apply_watcher_event(&watcher::Event::Delete(z));
        }
        assert!(
            filter.remembered() <= FORGET_SLACK + 1,
            "{} fingerprints remembered for deleted objects",
            filter.remembered()
        );
        // A live object is still remembered.
        let live = zone("live", "uid-live");
        writer.apply_watcher_event(&watcher::Event::Apply(live.clone()));
        assert!(filter.admit(&live));
        for i in 0..200 {
            filter.admit(&zone(&format!("gone{i}"), "x"));
        }
        assert!(!filter.admit(&live), "live objects are not forgotten");
    }

    #[tokio::test]
    async fn the_drain_is_bounded_after_shutdown_only() {
        let (trigger, signal) = shutdown::channel();
        // Without shutdown, work runs to its end, however long past the limit.
        let finished = drain_within(
            tokio::time::sleep(Duration::from_millis(300)),
            signal.clone(),
            Duration::from_millis(50),
        )
        .await;
        assert!(finished);
        // After shutdown, it gets the limit and is dropped.
        let started = tokio::time::Instant::now();
        let stop = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            trigger.trigger();
        };
        let (finished, ()) = tokio::join!(
            drain_within(
                tokio::time::sleep(Duration::from_secs(3600)),
                signal,
                Duration::from_millis(200)
            ),
            stop
        );
        assert!(!finished);
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(60), "{took:?}");
    }
}
