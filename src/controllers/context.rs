//! What a reconcile gets: the parts that outlive a leadership term ([`Shared`]) plus the term's
//! caches and backoff ([`Context`]).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};

use super::backoff::Backoff;
use super::stores::Stores;
use super::{Error, Health, Metrics};
use crate::plan::credentials::{ManagerIdentity, ServerTrust};
use crate::reconcile::views::ServerViews;
use crate::vcenter::session::SessionCache;

/// What outlives a leadership term: clients, caches, metrics, health.
#[derive(Clone)]
pub struct Shared {
    pub client: kube::Client,
    /// The Kubernetes API server's URL, for the messages that name it.
    pub server: String,
    /// vCenter sessions per (server, user, TLS); logged out on shutdown.
    pub sessions: SessionCache,
    /// Per-server vCenter views, so N zones on one server cost one gather.
    pub views: Arc<ServerViews>,
    /// The manager's own vCenter credentials and the servers they are bound to.
    pub manager: Option<ManagerIdentity>,
    /// How each vCenter is trusted (the admin's TLS flags, per server).
    pub trust: ServerTrust,
    pub metrics: Arc<Metrics>,
    /// Who publishes Events.
    pub reporter: Reporter,
    pub health: Arc<Health>,
    /// The controller's own namespace (`--namespace`, else the kubeconfig's): where the Secrets
    /// of VSphereClusterIdentities live.
    pub namespace: String,
    /// Whether this process serves the webhooks, the CRDs' conversion included (config/crd
    /// points it here). Only then are objects Cluster API v1.11+ applies at v1beta2 written at
    /// v1beta2 too (see `ApiServer::write_object_at`): without the conversion webhook the API
    /// server would store a v1beta2 write unconverted.
    pub converts: bool,
    /// The machine controller's polling intervals and whether it long-polls vCenter.
    pub polling: crate::plan::machine::waiting::Polling,
    /// The zones a VSphereCluster that sets no `failureDomainSelector` gets
    /// (`--default-failure-domain-selector`; `None`: none, as CAPV).
    pub default_zone_selector: Option<LabelSelector>,
}

/// What a reconcile gets: the shared parts plus this term's stores and backoff.
pub struct Context {
    pub client: kube::Client,
    pub sessions: SessionCache,
    pub views: Arc<ServerViews>,
    pub manager: Option<ManagerIdentity>,
    pub trust: ServerTrust,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub stores: Stores,
    pub backoff: Backoff,
    /// The machine controller's per-server sweep gates.
    pub machine_sweeps: super::machine::gate::Sweeps,
    /// The limit of each Kubernetes call a reconciler makes through `KubeOps`.
    pub kube_timeout: std::time::Duration,
    /// The controller's own namespace (see [`Shared::namespace`]).
    pub namespace: String,
    /// See [`Shared::converts`].
    pub converts: bool,
    /// The machine controller's vCenter long polls (none wake anything unless the term's
    /// controllers set their wakers, see `runtime::run_controllers`).
    pub long_polls: super::machine::long_poll::LongPolls,
    /// See [`Shared::polling`].
    pub polling: crate::plan::machine::waiting::Polling,
    /// When each VSphereCluster's vCenter session was last checked (by UID): owned clusters
    /// look again every 30 s for a pause, but vCenter only at the resync.
    pub vcenter_checks: VcenterChecks,
    /// The credentials Secrets read lately (see `controllers::secrets`).
    pub secrets: super::secrets::SecretCache,
    /// See [`Shared::default_zone_selector`].
    pub default_zone_selector: Option<LabelSelector>,
}

/// See [`Context::vcenter_checks`].
pub type VcenterChecks = std::sync::Arc<
    std::sync::Mutex<std::collections::HashMap<String, crate::plan::cluster::lifecycle::LastCheck>>,
>;

impl Context {
    /// A context over `shared` reading `stores`.
    pub fn new(shared: &Shared, stores: Stores) -> Self {
        Context {
            client: shared.client.clone(),
            sessions: shared.sessions.clone(),
            views: shared.views.clone(),
            manager: shared.manager.clone(),
            trust: shared.trust.clone(),
            metrics: shared.metrics.clone(),
            recorder: Recorder::new(shared.client.clone(), shared.reporter.clone()),
            stores,
            backoff: Backoff::default(),
            machine_sweeps: Default::default(),
            kube_timeout: super::api_server::WRITE_TIMEOUT,
            namespace: shared.namespace.clone(),
            converts: shared.converts,
            long_polls: super::machine::long_poll::LongPolls::new(shared.polling.clone(), None),
            polling: shared.polling.clone(),
            vcenter_checks: Default::default(),
            secrets: Default::default(),
            default_zone_selector: shared.default_zone_selector.clone(),
        }
    }

    /// The API server as the reconcilers' `KubeOps`, each call under [`Context::kube_timeout`].
    pub fn api_server(&self) -> super::api_server::ApiServer {
        let mut a = super::api_server::ApiServer::new(self.client.clone(), self.recorder.clone());
        a.timeout = self.kube_timeout;
        a
    }

    /// Count and time one reconcile, and nothing else. Measuring once reset the object's
    /// backoff as a side effect, and a machine whose plan said "back off" was reset by its own
    /// successful reconcile and retried every 5 s forever; the backoff is now touched only by
    /// [`Context::settle`] and the error policies.
    pub(crate) fn measure(
        &self,
        controller: &str,
        started: Instant,
        result: &Result<Action, Error>,
    ) {
        let outcome = result.as_ref().map(|_| ()).map_err(Error::category);
        self.metrics
            .reconciled(controller, started.elapsed(), outcome);
    }

    /// A reconcile of `key` succeeded: its next failure backs off from the start again. (A
    /// failure is the error policy's: it returns `Err`, never `Ok` with a backoff delay.)
    pub(crate) fn settle(&self, key: &str, result: &Result<Action, Error>) {
        if result.is_ok() {
            self.backoff.reset(key);
        }
    }
}

/// The current time, as status conditions stamp it.
pub(crate) fn now() -> Time {
    Time(jiff::Timestamp::now())
}
