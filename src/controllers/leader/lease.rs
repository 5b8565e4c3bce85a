//! The Lease itself: reading it, taking it over once it expired on our clock, renewing and
//! releasing it, each write a compare-and-swap on the resourceVersion.
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::time::Instant;

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
    pub(super) fn renew_deadline_passed(&self) -> bool {
        self.renew_deadline()
            .is_some_and(|deadline| Instant::now() >= deadline)
    }

    /// Forget the leadership (lost or given up): the next attempt is an acquisition.
    pub(super) fn step_down(&mut self) {
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
