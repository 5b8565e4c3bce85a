//! Leader election on a `coordination.k8s.io/v1` Lease, the client-go way: the holder renews
//! every few seconds; a candidate takes over only after it has seen the same record, unchanged,
//! for a whole lease duration on its own clock (so clock skew between nodes does not matter);
//! every write is a compare-and-swap on the resourceVersion, so two candidates cannot both win.
//! kube-runtime 5 ships no leader election, hence this small one.
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

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

/// What we last saw in the Lease, and when we first saw it (our clock).
#[derive(Clone, Debug, PartialEq)]
struct Record {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    duration: Option<i32>,
}

/// One candidate.
pub struct LeaderElector {
    api: Api<Lease>,
    settings: LeaseSettings,
    observed: Option<(Record, Instant)>,
}

fn record(spec: &LeaseSpec) -> Record {
    Record {
        holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
        renew_time: spec.renew_time.clone(),
        duration: spec.lease_duration_seconds,
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

    /// Acquire the lease if free or expired, renew it if ours.
    pub async fn try_acquire_or_renew(&mut self) -> kube::Result<Attempt> {
        let me = self.settings.identity.clone();
        let now = MicroTime(jiff::Timestamp::now());
        let Some(mut lease) = self.api.get_opt(&self.settings.name).await? else {
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
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(record(&created.spec.unwrap_or_default()));
                    Ok(Attempt::Leading)
                }
                Err(e) if is_conflict(&e) => Ok(Attempt::Standby {
                    holder: "another replica (created concurrently)".into(),
                }),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let seen = record(&spec);
        let holder = seen.holder.clone();
        self.observe(seen);
        if let Some(h) = holder.as_ref().filter(|h| **h != me)
            && !self.expired()
        {
            return Ok(Attempt::Standby { holder: h.clone() });
        }
        let mut next = spec;
        if holder.as_deref() != Some(me.as_str()) {
            next.acquire_time = Some(now.clone());
            next.lease_transitions = Some(next.lease_transitions.unwrap_or(0) + 1);
        }
        next.holder_identity = Some(me);
        next.renew_time = Some(now);
        next.lease_duration_seconds = Some(self.duration_secs());
        lease.spec = Some(next);
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(record(&written.spec.unwrap_or_default()));
                Ok(Attempt::Leading)
            }
            // Someone wrote first (a renewal, or another candidate taking over).
            Err(e) if is_conflict(&e) => Ok(Attempt::Standby {
                holder: holder.unwrap_or_else(|| "another replica".into()),
            }),
            Err(e) => Err(e),
        }
    }

    /// Give the lease up (on shutdown) so a standby replica takes over at once instead of
    /// waiting for it to expire.
    pub async fn release(&mut self) -> kube::Result<()> {
        let Some(mut lease) = self.api.get_opt(&self.settings.name).await? else {
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
        self.api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await?;
        Ok(())
    }
}

/// Run `work` only while holding the lease, until `shutdown`. Each leadership term gets its
/// own shutdown signal, fired when the lease is lost (another holder, or no renewal within the
/// deadline) or the process stops; a lost term goes back to standby. On process shutdown the
/// work finishes first, then the lease is released.
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
        let term_work = work(term);
        tokio::pin!(term_work);
        let process_stopping = tokio::select! {
            stopping = keep_renewing(&mut elector, &shutdown) => {
                end_term.trigger();
                term_work.await;
                stopping
            }
            () = &mut term_work => shutdown.is_triggered(),
        };
        health.set_leading(false);
        if process_stopping || shutdown.is_triggered() {
            if let Err(e) = elector.release().await {
                tracing::warn!(error = %e, "cannot release the leader lease; it expires by itself");
            } else {
                tracing::info!("leader lease released");
            }
            return;
        }
        tracing::warn!("leadership lost; controllers stopped, standing by");
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

/// Renew until the lease is lost (false) or the process stops (true).
async fn keep_renewing(elector: &mut LeaderElector, shutdown: &Shutdown) -> bool {
    let mut last_renewal = Instant::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep(elector.settings().renew_every) => {}
            () = shutdown.clone().wait() => return true,
        }
        match elector.try_acquire_or_renew().await {
            Ok(Attempt::Leading) => last_renewal = Instant::now(),
            Ok(Attempt::Standby { holder }) => {
                tracing::warn!(%holder, "the leader lease was taken over");
                return false;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot renew the leader lease");
                if last_renewal.elapsed() >= elector.settings().renew_deadline {
                    return false;
                }
            }
        }
    }
}
