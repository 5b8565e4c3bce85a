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
mod lease;

use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;

use super::Health;
use super::shutdown::{self, Shutdown};

pub use lease::{Attempt, LEASE_NAME, LeaderElector, LeaseError, LeaseSettings};

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
