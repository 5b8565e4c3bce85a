//! Leader election on a `coordination.k8s.io/v1` Lease, the client-go way: the holder renews
//! every few seconds; a candidate takes over only after it has seen the same record, unchanged,
//! for a whole lease duration on its own clock (so clock skew between nodes does not matter);
//! every write is a compare-and-swap on the resourceVersion, so two candidates cannot both win.
//! kube-runtime 5 ships no leader election, hence this small one.
//!
//! Safety rests on timing: a leader stops acting within `renew_deadline` of its last successful
//! renewal, which is shorter than the `lease_duration` a standby waits. So every Lease call is
//! bounded by that deadline (the client has no read timeout of its own: a hung call must not
//! keep a stale leader acting), and losing the lease aborts the term's work at once instead of
//! letting it drain (another replica may already lead). Only a process shutdown drains, and it
//! keeps renewing meanwhile so no standby takes over mid-drain; then it releases the lease.
//!
//! Clocks are `tokio::time` ones, so tests can run on paused time.
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::time::Instant;

use super::Health;
use super::shutdown::{self, Shutdown};

/// The Lease every replica competes for.
pub const LEASE_NAME: &str = "vsphere-provider-leader";

/// Timing and identity of one candidate.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    /// Unique per replica (pod name).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub lease_duration: Duration,
    /// How often the leader renews.
    pub renew_every: Duration,
    /// A leader that could not renew for this long stops leading (before the lease runs out).
    pub renew_deadline: Duration,
    /// How often a standby replica tries to acquire.
    pub retry_every: Duration,
}

impl LeaseSettings {
    /// The defaults: 15 s lease, renewed every 5 s, given up after 10 s without renewal;
    /// standby replicas try every 2 s.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        LeaseSettings {
            name: LEASE_NAME.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            renew_deadline: Duration::from_secs(10),
            retry_every: Duration::from_secs(2),
        }
    }
}

/// The outcome of one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the lease (acquired or renewed).
    Leading,
    /// Someone else holds a live lease.
    Standby { holder: String },
}

/// A Lease call that failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// No answer before the deadline (the renew deadline while leading).
    #[error("the Lease call got no answer in time ({0:?})")]
    Timeout(Duration),
}

/// How long releasing the lease on shutdown may take (it expires by itself anyway).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);

/// What we last saw in the Lease, and when we first saw it (our clock). The resourceVersion
/// is part of it: any write is a sign of life, even two renewals within one microsecond.
#[derive(Clone, Debug, PartialEq)]
struct Record {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    duration: Option<i32>,
    resource_version: Option<String>,
}

/// One candidate.
pub struct LeaderElector {
    api: Api<Lease>,
    settings: LeaseSettings,
    observed: Option<(Record, Instant)>,
    /// While leading: when the last successful acquisition or renewal started.
    renewed_at: Option<Instant>,
}

fn record(lease: &Lease) -> Record {
    let spec = lease.spec.clone().unwrap_or_default();
    Record {
        holder: spec.holder_identity.filter(|h| !h.is_empty()),
        renew_time: spec.renew_time,
        duration: spec.lease_duration_seconds,
        resource_version: lease.metadata.resource_version.clone(),
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

impl LeaderElector {
    pub fn new(client: kube::Client, settings: LeaseSettings) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            observed: None,
            renewed_at: None,
        }
    }

    pub fn settings(&self) -> &LeaseSettings {
        &self.settings
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.settings.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// Remember what we saw; the clock restarts only when the record changes.
    fn observe(&mut self, r: Record) {
        if self.observed.as_ref().map(|(seen, _)| seen) != Some(&r) {
            self.observed = Some((r, Instant::now()));
        }
    }

    /// Whether the observed holder let its lease run out (by our clock).
    fn expired(&self) -> bool {
        let Some((r, at)) = &self.observed else {
            return false;
        };
        let duration = r
            .duration
            .and_then(|d| u64::try_from(d).ok())
            .map(Duration::from_secs)
            .unwrap_or(self.settings.lease_duration);
        at.elapsed() >= duration
    }

    /// While leading: the instant by which this replica must have stopped acting unless it
    /// renews (its last renewal plus the renew deadline).
    pub fn renew_deadline(&self) -> Option<Instant> {
        self.renewed_at.map(|at| at + self.settings.renew_deadline)
    }

    /// Whether a leader is past its renew deadline.
    fn renew_deadline_passed(&self) -> bool {
        self.renew_deadline()
            .is_some_and(|deadline| Instant::now() >= deadline)
    }

    /// Forget the leadership (lost or given up): the next attempt is an acquisition.
    fn step_down(&mut self) {
        self.renewed_at = None;
    }

    /// Run one Lease call, giving up at `deadline`.
    async fn call<T>(
        &self,
        deadline: Instant,
        call: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, LeaseError> {
        match tokio::time::timeout_at(deadline, call).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(LeaseError::Timeout(self.settings.renew_deadline)),
        }
    }

    /// Acquire the lease if free or expired, renew it if ours. Every call is bounded: by the
    /// renew deadline while leading (a leader must stop by then whatever the API server does),
    /// else by one renew deadline from now. A leader past its renew deadline has stopped
    /// leading (see [`lead`]): for it this is a new acquisition.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, LeaseError> {
        let started = Instant::now();
        if self.renew_deadline_passed() {
            self.step_down();
        }
        let deadline = self
            .renew_deadline()
            .unwrap_or(started + self.settings.renew_deadline);
        let result = self.attempt(deadline).await;
        match &result {
            Ok(Attempt::Leading) => self.renewed_at = Some(started),
            Ok(Attempt::Standby { .. }) => self.step_down(),
            Err(_) => {}
        }
        result
    }

    async fn attempt(&mut self, deadline: Instant) -> Result<Attempt, LeaseError> {
        let me = self.settings.identity.clone();
        let now = MicroTime(jiff::Timestamp::now());
        let current = self
            .call(deadline, self.api.get_opt(&self.settings.name))
            .await?;
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.settings.name.clone()),
                    namespace: Some(self.settings.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(self.duration_secs()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            let created = self
                .call(deadline, self.api.create(&PostParams::default(), &lease))
                .await;
            return match created {
                Ok(created) => {
                    self.observe(record(&created));
                    Ok(Attempt::Leading)
                }
                Err(LeaseError::Kube(e)) if is_conflict(&e) => Ok(Attempt::Standby {
                    holder: "another replica (created concurrently)".into(),
                }),
                Err(e) => Err(e),
            };
        };
        let seen = record(&lease);
        let holder = seen.holder.clone();
        self.observe(seen);
        if let Some(h) = holder.as_ref().filter(|h| **h != me)
            && !self.expired()
        {
            return Ok(Attempt::Standby { holder: h.clone() });
        }
        let mut next = lease.spec.clone().unwrap_or_default();
        if holder.as_deref() != Some(me.as_str()) {
            next.acquire_time = Some(now.clone());
            next.lease_transitions = Some(next.lease_transitions.unwrap_or(0) + 1);
        }
        next.holder_identity = Some(me);
        next.renew_time = Some(now);
        next.lease_duration_seconds = Some(self.duration_secs());
        lease.spec = Some(next);
        let written = self
            .call(
                deadline,
                self.api
                    .replace(&self.settings.name, &PostParams::default(), &lease),
            )
            .await;
        match written {
            Ok(written) => {
                self.observe(record(&written));
                Ok(Attempt::Leading)
            }
            // Someone wrote first (a renewal, or another candidate taking over).
            Err(LeaseError::Kube(e)) if is_conflict(&e) => Ok(Attempt::Standby {
                holder: holder.unwrap_or_else(|| "another replica".into()),
            }),
            Err(e) => Err(e),
        }
    }

    /// Give the lease up (on shutdown) so a standby replica takes over at once instead of
    /// waiting for it to expire. Bounded: it expires by itself anyway.
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        self.step_down();
        let deadline = Instant::now() + RELEASE_TIMEOUT.min(self.settings.renew_deadline);
        let current = self
            .call(deadline, self.api.get_opt(&self.settings.name))
            .await?;
        let Some(mut lease) = current else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        lease.spec = Some(spec);
        self.call(
            deadline,
            self.api
                .replace(&self.settings.name, &PostParams::default(), &lease),
        )
        .await?;
        Ok(())
    }
}

/// How a leadership term ended.
enum TermEnd {
    /// Taken over, or not renewed within the renew deadline.
    Lost,
    /// The process is stopping.
    Stopping,
    /// The work returned by itself.
    WorkEnded,
}

/// Run `work` only while holding the lease, until `shutdown`. Each leadership term gets its
/// own shutdown signal, which fires only when the process stops:
///
/// * lease lost (another holder, or no renewal within the renew deadline): the term's work is
///   dropped at once — aborted, not drained, since another replica may already lead — and the
///   replica goes back to standby;
/// * process shutdown: the term's signal fires and the work drains while the lease is still
///   renewed (a standby must not take over mid-drain); then the lease is released. A lease
///   lost during the drain aborts the rest of it.
pub async fn lead<F, Fut>(
    mut elector: LeaderElector,
    health: Arc<Health>,
    shutdown: Shutdown,
    mut work: F,
) where
    F: FnMut(Shutdown) -> Fut,
    Fut: Future<Output = ()>,
{
    let settings = elector.settings().clone();
    loop {
        if !acquire(&mut elector, &shutdown).await {
            return;
        }
        tracing::info!(identity = %settings.identity, lease = %format!("{}/{}", settings.namespace, settings.name), "became leader");
        health.set_leading(true);
        let (end_term, term) = shutdown::channel();
        let mut term_work = Box::pin(work(term));
        let end = tokio::select! {
            () = renew_until_lost(&mut elector) => TermEnd::Lost,
            () = shutdown.clone().wait() => TermEnd::Stopping,
            () = &mut term_work => TermEnd::WorkEnded,
        };
        match end {
            TermEnd::Lost => {
                drop(term_work);
                drop(end_term);
                health.set_leading(false);
                tracing::warn!("leadership lost: controllers aborted, standing by");
            }
            TermEnd::Stopping => {
                tracing::info!("shutdown: draining the controllers, still renewing the lease");
                end_term.trigger();
                let lost = tokio::select! {
                    () = &mut term_work => false,
                    () = renew_until_lost(&mut elector) => true,
                };
                drop(term_work);
                health.set_leading(false);
                if lost {
                    tracing::warn!("leadership lost while draining: the rest of the drain aborted");
                }
                release(&mut elector).await;
                return;
            }
            TermEnd::WorkEnded => {
                health.set_leading(false);
                if shutdown.is_triggered() {
                    release(&mut elector).await;
                    return;
                }
                // Not expected (the controllers run until told to stop): start a new term
                // after a pause rather than spinning.
                tracing::warn!("controllers stopped by themselves; restarting them");
                tokio::select! {
                    () = tokio::time::sleep(settings.retry_every) => {}
                    () = shutdown.clone().wait() => {
                        release(&mut elector).await;
                        return;
                    }
                }
            }
        }
    }
}

async fn release(elector: &mut LeaderElector) {
    match elector.release().await {
        Ok(()) => tracing::info!("leader lease released"),
        Err(e) => {
            tracing::warn!(error = %e, "cannot release the leader lease; it expires by itself");
        }
    }
}

/// Try until leading (true) or the process stops (false).
async fn acquire(elector: &mut LeaderElector, shutdown: &Shutdown) -> bool {
    let mut last_holder: Option<String> = None;
    loop {
        if shutdown.is_triggered() {
            return false;
        }
        match elector.try_acquire_or_renew().await {
            Ok(Attempt::Leading) => return true,
            Ok(Attempt::Standby { holder }) => {
                if last_holder.as_ref() != Some(&holder) {
                    tracing::info!(%holder, "standing by: the leader lease is held");
                    last_holder = Some(holder);
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read or write the leader lease"),
        }
        tokio::select! {
            () = tokio::time::sleep(elector.settings().retry_every) => {}
            () = shutdown.clone().wait() => return false,
        }
    }
}

/// Renew every `renew_every` until the lease is lost: taken over, or not renewed by the renew
/// deadline (each call is bounded by it, and the wait between calls never overshoots it).
async fn renew_until_lost(elector: &mut LeaderElector) {
    loop {
        let mut wake = Instant::now() + elector.settings().renew_every;
        if let Some(deadline) = elector.renew_deadline() {
            wake = wake.min(deadline);
        }
        tokio::time::sleep_until(wake).await;
        if elector.renew_deadline_passed() || elector.renew_deadline().is_none() {
            tracing::warn!("the leader lease was not renewed within the renew deadline");
            elector.step_down();
            return;
        }
        match elector.try_acquire_or_renew().await {
            Ok(Attempt::Leading) => {}
            Ok(Attempt::Standby { holder }) => {
                tracing::warn!(%holder, "the leader lease was taken over");
                elector.step_down();
                return;
            }
            Err(e) => tracing::warn!(error = %e, "cannot renew the leader lease"),
        }
    }
}
