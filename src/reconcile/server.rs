//! The per-server driver both shells use: a sweep (zones now; machines next) is planned against
//! the server's view, its changes made under the server's write lock, and the view read again,
//! until the plan asks for nothing more — the one fixed point of the core.
//!
//! * The view comes from the server's [`ServerViews`] entry: cached for a while in the cluster
//!   (N zones on one server cost one gather), always fresh in local mode (TTL zero).
//! * Changes are decided on a view read under the write lock, so two sweeps sharing a cluster or
//!   a tag cannot both create it. [`Locking::OnWrite`] reads the shared view first and locks only
//!   when there is something to change (most reconciles change nothing); [`Locking::Whole`]
//!   holds the lock from the start (local mode: one sweep covers the whole server anyway, and its
//!   first read is then already fresh).
//! * A step vCenter refused is not tried again in the same drive: the sweep is told which steps
//!   were refused, with their typed failures, and says so in its verdicts.
use std::future::Future;
use std::sync::Arc;

use super::execute::Outcome;
use super::views::ServerViews;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::plan::failure::Failure;
use crate::plan::view::VcenterView;
use crate::vcenter::Client;

/// What one kind of object needs from the driver: a plan against a view, and the executor of
/// its steps.
pub trait Sweep {
    type Step: Clone + PartialEq + Send + Sync;

    /// Decide every object against `view` (or the typed failure that kept it from being read)
    /// and return the steps still wanted, leaving out those in `refused` (refused earlier in
    /// this drive; the verdicts say why).
    fn plan(
        &mut self,
        view: Result<&VcenterView, &Failure>,
        refused: &[(Self::Step, Failure)],
    ) -> Vec<Self::Step>;

    /// Make these changes, updating `view` with what was learnt (ids of what was created).
    fn execute<'a>(
        &'a self,
        client: &'a Client,
        view: &'a mut VcenterView,
        steps: &'a [Self::Step],
    ) -> impl Future<Output = Outcome<Self::Step>> + Send + 'a;
}

/// When the server's write lock is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locking {
    /// Read the shared view first; lock (and read again) only to change something.
    OnWrite,
    /// Hold the lock for the whole drive.
    Whole,
}

/// How far a drive goes.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Rounds of changes before giving up on convergence (each followed by a fresh read).
    pub max_writes: usize,
    /// Plan only: report the steps as pending, change nothing.
    pub dry_run: bool,
    pub locking: Locking,
}

/// What a drive did.
#[derive(Debug)]
pub struct Driven<S> {
    /// Steps executed, in order.
    pub applied: Vec<S>,
    /// Steps that would run (dry run) or were still wanted when the drive stopped.
    pub pending: Vec<S>,
    /// Steps vCenter refused, with the typed failure.
    pub failed: Vec<(S, Failure)>,
    /// The last view read (with what the executor learnt), if any could be read.
    pub view: Option<VcenterView>,
}

impl<S> Default for Driven<S> {
    fn default() -> Self {
        Driven {
            applied: Vec::new(),
            pending: Vec::new(),
            failed: Vec::new(),
            view: None,
        }
    }
}

/// Drive `sweep` on the server of `client` to a fixed point: read (a view covering `covers`),
/// plan, and while steps are wanted, change and read again. With nothing to cover, no vCenter
/// call is made (an empty view is planned against).
pub async fn drive<W>(
    views: &ServerViews,
    client: &Client,
    covers: &[&VSphereFailureDomain],
    sweep: &mut W,
    limits: Limits,
) -> Driven<W::Step>
where
    W: Sweep + Send,
{
    let mut out = Driven::default();
    let mut lock = match limits.locking {
        Locking::Whole => Some(views.write_lock(client).await),
        Locking::OnWrite => None,
    };
    let mut writes = 0;
    loop {
        let read = if covers.is_empty() {
            Ok(Arc::new(VcenterView::default()))
        } else {
            views.view(client, covers).await.map_err(Failure::from)
        };
        let steps = match &read {
            Ok(view) => sweep.plan(Ok(view), &out.failed),
            Err(failure) => sweep.plan(Err(failure), &out.failed),
        };
        let Ok(view) = read else { break };
        if steps.is_empty() || limits.dry_run || writes == limits.max_writes {
            out.pending = steps;
            out.view = Some((*view).clone());
            break;
        }
        if lock.is_none() {
            // Decide again on a fresh read taken under the lock.
            lock = Some(views.write_lock(client).await);
            views.invalidate(client).await;
            continue;
        }
        let mut working = (*view).clone();
        let outcome = sweep.execute(client, &mut working, &steps).await;
        views.remember_tags(client, &working.tags).await;
        views.invalidate(client).await;
        writes += 1;
        out.applied.extend(outcome.done);
        out.failed.extend(outcome.failed);
        out.pending = steps;
        out.view = Some(working);
    }
    drop(lock);
    out
}
