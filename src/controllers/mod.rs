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
//! One watch per kind: each kind is reflected once into a shared store, and the controllers are
//! triggered from that store's subscription. A trigger therefore never runs ahead of the stores
//! the reconcilers read (a zone woken by its failure domain sees that failure domain).
pub mod admin;
pub mod cluster;
pub mod credentials;
pub mod error;
pub mod leader;
pub mod metrics;
pub mod patch;
pub mod shutdown;
pub mod zone;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::api::{Machine, VSphereCluster, VSphereDeploymentZone, VSphereFailureDomain};
use crate::plan::credentials::ManagerIdentity;
use crate::reconcile::views::ServerViews;
use crate::vcenter::session::SessionCache;

pub use admin::Health;
pub use error::Error;
pub use metrics::Metrics;
pub use shutdown::{Shutdown, ShutdownTrigger};

/// The field manager of every write this provider makes (server-side apply owner).
pub const FIELD_MANAGER: &str = "vsphere-provider";

/// How many objects a shared store buffers for a slow subscriber before the watch waits.
const SUBSCRIBER_BUFFER: usize = 256;

/// Reconciles of one controller running at once (2 cores; vCenter is the bottleneck anyway).
const CONCURRENCY: u16 = 4;

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

/// The reflector stores the reconcilers read.
#[derive(Clone)]
pub struct Stores {
    pub zones: Store<VSphereDeploymentZone>,
    pub failure_domains: Store<VSphereFailureDomain>,
    pub clusters: Store<VSphereCluster>,
    pub machines: Store<Machine>,
}

impl Stores {
    /// Resolves when every store has its initial list.
    pub async fn wait_until_ready(&self) -> bool {
        ready(&self.zones).await
            && ready(&self.failure_domains).await
            && ready(&self.clusters).await
            && ready(&self.machines).await
    }
}

/// Wait for a store's initial list. The store's readiness signal keeps only the waker of its
/// latest waiter (the controller waits on the same stores), so poll with a timeout instead of
/// waiting once; after the first success it answers at once.
async fn ready<K>(store: &Store<K>) -> bool
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(200), store.wait_until_ready()).await {
            Ok(result) => return result.is_ok(),
            Err(_) => continue,
        }
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
/// over.
#[derive(Debug)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
    base: Duration,
    cap: Duration,
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
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(key.to_string()).or_insert(0);
        let delay = self
            .base
            .saturating_mul(2u32.saturating_pow((*n).min(16)))
            .min(self.cap);
        *n = n.saturating_add(1);
        delay
    }

    pub fn reset(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

/// Drive the watch of `api` into `writer` until the task is aborted. Watch errors (API server
/// restarts, a CRD removed) are logged and retried with the watcher's backoff.
fn spawn_reflector<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
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
                if let Err(e) = event {
                    tracing::warn!(%kind, error = %e, "watch failed; retrying");
                }
                futures::future::ready(())
            })
            .await;
    });
}

/// Run the zone and cluster controllers until `shutdown`, then let in-flight reconciles finish.
/// Marks `shared.health` synced once every store has its initial list.
pub async fn run_controllers(shared: &Shared, shutdown: Shutdown) {
    let client = shared.client.clone();
    let mut tasks = tokio::task::JoinSet::new();

    let (zones, zone_writer) = reflector::store_shared::<VSphereDeploymentZone>(SUBSCRIBER_BUFFER);
    let (failure_domains, fd_writer) =
        reflector::store_shared::<VSphereFailureDomain>(SUBSCRIBER_BUFFER);
    let (clusters, cluster_writer) = reflector::store_shared::<VSphereCluster>(SUBSCRIBER_BUFFER);
    let (machines, machine_writer) = reflector::store::<Machine>();

    // Subscribe before the watches start so no object is missed.
    let (Some(zone_trigger), Some(zone_to_clusters), Some(fd_trigger), Some(cluster_trigger)) = (
        zone_writer.subscribe(),
        zone_writer.subscribe(),
        fd_writer.subscribe(),
        cluster_writer.subscribe(),
    ) else {
        unreachable!("shared stores can be subscribed to");
    };
    spawn_reflector(
        Api::<VSphereDeploymentZone>::all(client.clone()),
        zone_writer,
        &mut tasks,
    );
    spawn_reflector(
        Api::<VSphereFailureDomain>::all(client.clone()),
        fd_writer,
        &mut tasks,
    );
    spawn_reflector(
        Api::<VSphereCluster>::all(client.clone()),
        cluster_writer,
        &mut tasks,
    );
    spawn_reflector(
        Api::<Machine>::all(client.clone()),
        machine_writer,
        &mut tasks,
    );

    let stores = Stores {
        zones: zones.clone(),
        failure_domains,
        clusters: clusters.clone(),
        machines,
    };
    {
        let stores = stores.clone();
        let health = shared.health.clone();
        tasks.spawn(async move {
            if stores.wait_until_ready().await {
                tracing::info!("caches synced");
                health.set_synced(true);
            }
        });
    }
    let ctx = Arc::new(Context::new(shared, stores));

    let zones_for_fd = zones.clone();
    let zone_controller =
        Controller::for_shared_stream(skip_status_only_changes(zone_trigger), zones.clone())
            .watches_shared_stream(fd_trigger, move |fd: Arc<VSphereFailureDomain>| {
                zone::zones_using(&zones_for_fd.state(), &fd)
            })
            .with_config(Config::default().concurrency(CONCURRENCY))
            .graceful_shutdown_on(shutdown.clone().wait())
            .run(zone::reconcile, zone::error_policy, ctx.clone())
            .for_each(|result| {
                log_controller_result(zone::CONTROLLER, result);
                futures::future::ready(())
            });

    let clusters_for_zone = clusters.clone();
    let cluster_controller =
        Controller::for_shared_stream(skip_status_only_changes(cluster_trigger), clusters)
            .watches_shared_stream(zone_to_clusters, move |z: Arc<VSphereDeploymentZone>| {
                cluster::clusters_selecting(&clusters_for_zone.state(), &z)
            })
            .with_config(Config::default().concurrency(CONCURRENCY))
            .graceful_shutdown_on(shutdown.clone().wait())
            .run(cluster::reconcile, cluster::error_policy, ctx)
            .for_each(|result| {
                log_controller_result(cluster::CONTROLLER, result);
                futures::future::ready(())
            });

    tracing::info!("controllers started");
    futures::join!(zone_controller, cluster_controller);
    tasks.shutdown().await;
    shared.health.set_synced(false);
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

/// Drop updates that changed nothing but the status (or other server-managed fields): our own
/// status writes would otherwise wake the reconciler once more each time, doubling vCenter
/// traffic and defeating the backoff. Spec (generation), labels, annotations, finalizers and
/// deletion still wake it; periodic requeues catch everything else.
fn skip_status_only_changes<K>(
    trigger: impl futures::Stream<Item = Arc<K>> + Send + 'static,
) -> impl futures::Stream<Item = Arc<K>> + Send + 'static
where
    K: Resource + Send + Sync + 'static,
{
    use std::hash::{Hash, Hasher};
    let mut seen: HashMap<(Option<String>, String), u64> = HashMap::new();
    trigger.filter(move |obj| {
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
        futures::future::ready(seen.insert(key, fingerprint) != Some(fingerprint))
    })
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

    #[test]
    fn backoff_doubles_per_object_up_to_the_cap_and_resets() {
        let b = Backoff::new(Duration::from_secs(5), Duration::from_secs(60));
        let seq: Vec<u64> = (0..6).map(|_| b.next("zone/a").as_secs()).collect();
        assert_eq!(seq, [5, 10, 20, 40, 60, 60]);
        assert_eq!(b.next("zone/b").as_secs(), 5, "per object");
        b.reset("zone/a");
        assert_eq!(b.next("zone/a").as_secs(), 5);
    }
}
