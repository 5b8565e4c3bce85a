//! The per-server driver both shells use, for zones and machines alike: a sweep is planned
//! against what it reads of the server, its changes made under the server's write lock, and
//! (when its changes can be verified at once) the server read again, until the plan asks for
//! nothing more — the one fixed point of the core.
//!
//! * What is read is the sweep's own ([`Sweep::read`]): zones plan against the server's
//!   [`ServerViews`] entry, cached for a while in the cluster (N zones on one server cost one
//!   gather) and always fresh in local mode (TTL zero); machines against the recorded tasks
//!   and the inventory, read fresh every drive.
//! * Changes are decided on a read taken under the write lock, so two sweeps sharing a cluster,
//!   its groups or a tag cannot both change it (a machine joining a VM group and a zone
//!   configuring the same cluster's groups and rules are serialised). [`Locking::OnWrite`]
//!   reads first and locks only when there is something to change (most zone reconciles change
//!   nothing); [`Locking::Whole`] holds the lock from the start (local mode's zones: one sweep
//!   covers the whole server anyway, and its first read is then already fresh; machines: their
//!   read is fresh anyway, so reading under the lock costs no second read).
//! * A sweep whose changes start vCenter tasks ([`Sweep::VERIFY_WRITES`] false: machines)
//!   stops after its writes: a read right after them would decide nothing new, the tasks take
//!   time and the next drive reads how they ended.
//! * A step vCenter refused is not tried again in the same drive: the sweep is told which steps
//!   were refused, with their typed failures, and says so in its verdicts.
use std::future::Future;
use std::sync::Arc;

use super::execute::Outcome;
use super::views::ServerViews;
use crate::plan::failure::Failure;
use crate::vcenter::Client;

/// What one kind of object needs from the driver: how to read the server, a plan against what
/// was read, and the executor of its steps.
pub trait Sweep {
    /// What a plan is made on.
    type View: Clone + Send + Sync;
    type Step: Clone + PartialEq + Send + Sync;

    /// Whether a read right after the writes can decide something new in the same drive:
    /// zones configure, then verify; machines only start tasks (the next drive reads them).
    const VERIFY_WRITES: bool = true;

    /// Read what the plan needs of the server (under the write lock when the drive holds it).
    fn read<'a>(
        &'a self,
        views: &'a ServerViews,
        client: &'a Client,
    ) -> impl Future<Output = Result<Arc<Self::View>, Failure>> + Send + 'a;

    /// Decide every object against `view` (or the typed failure that kept it from being read)
    /// and return the steps still wanted, leaving out those in `refused` (refused earlier in
    /// this drive; the verdicts say why).
    fn plan(
        &mut self,
        view: Result<&Self::View, &Failure>,
        refused: &[(Self::Step, Failure)],
    ) -> Vec<Self::Step>;

    /// Make these changes, updating `view` with what was learnt (ids of what was created); the
    /// sweep may keep what it needs of the results.
    fn execute<'a>(
        &'a mut self,
        client: &'a Client,
        view: &'a mut Self::View,
        steps: &'a [Self::Step],
    ) -> impl Future<Output = Outcome<Self::Step>> + Send + 'a;

    /// Keep in `views` what executing learnt (zones: the ids of tags they created).
    fn learnt<'a>(
        &'a self,
        _views: &'a ServerViews,
        _client: &'a Client,
        _view: &'a Self::View,
    ) -> impl Future<Output = ()> + Send + 'a {
        async {}
    }
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
pub struct Driven<S, V> {
    /// Steps executed, in order.
    pub applied: Vec<S>,
    /// Steps that would run (dry run) or were still wanted when the drive stopped.
    pub pending: Vec<S>,
    /// Steps vCenter refused, with the typed failure.
    pub failed: Vec<(S, Failure)>,
    /// The last view read (with what the executor learnt), if any could be read.
    pub view: Option<V>,
}

impl<S, V> Default for Driven<S, V> {
    fn default() -> Self {
        Driven {
            applied: Vec::new(),
            pending: Vec::new(),
            failed: Vec::new(),
            view: None,
        }
    }
}

/// Drive `sweep` on the server of `client` to a fixed point: read, plan, and while steps are
/// wanted, change (under the server's write lock, on a read taken under it) and, when the sweep
/// verifies its writes, read again.
pub async fn drive<W>(
    views: &ServerViews,
    client: &Client,
    sweep: &mut W,
    limits: Limits,
) -> Driven<W::Step, W::View>
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
        let read = sweep.read(views, client).await;
        let steps = match &read {
            Ok(view) => sweep.plan(Ok(view), &out.failed),
            Err(failure) => sweep.plan(Err(failure), &out.failed),
        };
        let Ok(view) = read else { break };
        if steps.is_empty() || limits.dry_run || writes == limits.max_writes {
            out.pending = steps;
            out.view = Some(Arc::unwrap_or_clone(view));
            break;
        }
        if lock.is_none() {
            // Decide again on a fresh read taken under the lock.
            lock = Some(views.write_lock(client).await);
            views.invalidate(client).await;
            continue;
        }
        let mut working = Arc::unwrap_or_clone(view);
        let outcome = sweep.execute(client, &mut working, &steps).await;
        sweep.learnt(views, client, &working).await;
        views.invalidate(client).await;
        writes += 1;
        out.applied.extend(outcome.done);
        out.failed.extend(outcome.failed);
        out.view = Some(working);
        if !W::VERIFY_WRITES {
            // Nothing more is decided in this drive: its changes are tasks still running.
            break;
        }
        out.pending = steps;
    }
    drop(lock);
    out
}
