//! One long poll per client (per vCenter and identity): a background task that keeps a
//! PropertyCollector of its own with one filter over a ListView of the watched objects (tasks
//! in flight: `info.state`; VMs: `runtime.powerState`, `guest.ipAddress`), waits in
//! `WaitForUpdatesEx`, and reports each change as a [`WatchEvent`]. Callers say *what* to
//! watch ([`Watcher::set`]); the task does the rest:
//!
//! * a changed set is one `ModifyListView` (objects added and removed, any number), made
//!   beside the pending wait, which then reports the objects that joined (`enter`, with their
//!   state) and their later changes. One filter per object cost a `CreateFilter` and a
//!   `DestroyPropertyFilter` each (150 calls to delete 30 machines); interrupting the wait
//!   with `CancelWaitForUpdates` put the cancelled wait's slow end between a task's end and
//!   the next step. vcsim re-reports every object of the view as `enter` after a change of
//!   it; what the watcher already knew is not reported again;
//! * a re-login (the client's session generation moved) means the old session's collector,
//!   view and filter are gone with it: fresh ones are made. Any other failure destroys the
//!   collector and the view (retried until done while the session lasts, so none leaks),
//!   backs off (1 s doubling to
//!   [`WatchOptions::max_backoff`]) and starts over; every watched object is reported
//!   [`WatchEvent::Unwatched`] so its owner falls back to polling meanwhile;
//! * a vCenter that has no `WaitForUpdatesEx` (MethodNotFound, NotSupported, MethodDisabled) or
//!   refuses a watched property (InvalidProperty) is [`Health::Unsupported`]: said once in the
//!   log, every object reported unwatched, and the task ends. Callers poll.
//!
//! The task ends when the [`Watcher`] is dropped (its collector is destroyed then, best effort).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc, watch};

use super::client::Client;
use super::model::error::Error;
use super::model::fault::FaultKind;
use super::model::moref::MoRef;
use super::updates::{UpdateKind, UpdateSet};

/// Every watched kind with its properties: the view filter's property specs.
const WATCHED: [(&str, &[&str]); 2] = [
    ("Task", &["info.state"]),
    ("VirtualMachine", &["runtime.powerState", "guest.ipAddress"]),
];

/// The properties watched for an object of `kind` (none: the kind is not watched).
pub fn watched_paths(kind: &str) -> &'static [&'static str] {
    WATCHED
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(&[], |(_, paths)| paths)
}

/// Bounds of a watcher.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// `maxWaitSeconds` of each wait; below the client's request timeout (30 s by default).
    pub max_wait_seconds: u32,
    /// `maxObjectUpdates` of each wait (the server pages beyond it with `truncated`).
    pub max_object_updates: u32,
    /// At most this many objects are watched (one filter each); the rest are not (polled).
    pub max_objects: usize,
    /// The longest pause between attempts after failures.
    pub max_backoff: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            max_wait_seconds: 20,
            max_object_updates: 100,
            max_objects: 1000,
            max_backoff: Duration::from_secs(60),
        }
    }
}

/// What the watcher reports.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent {
    /// A watched property of `obj` changed (or `obj` left: destroyed); `values` are the watched
    /// properties' texts as now known (`None`: unset).
    Changed {
        obj: MoRef,
        kind: UpdateKind,
        values: BTreeMap<String, Option<String>>,
    },
    /// `obj` is no longer watched (the long poll failed or is unsupported): poll it.
    Unwatched(MoRef),
}

impl WatchEvent {
    pub fn obj(&self) -> &MoRef {
        match self {
            WatchEvent::Changed { obj, .. } | WatchEvent::Unwatched(obj) => obj,
        }
    }
}

/// The state of the long poll.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// Not waiting yet (starting, or starting over after a failure).
    Starting,
    /// Waiting with every wanted object's filter in place (or about to be).
    Healthy,
    /// Failing; retried with backoff. The reason, for logs and status.
    Failing(String),
    /// This vCenter cannot do it: callers poll, for good.
    Unsupported(String),
}

struct Shared {
    wanted: Mutex<BTreeSet<MoRef>>,
    changed: Notify,
    /// The collector and the view in use (tests look at them).
    collector: Mutex<Option<(MoRef, MoRef)>>,
}

/// The handle on a client's long poll; dropping it stops the task.
pub struct Watcher {
    shared: Arc<Shared>,
    health: watch::Receiver<Health>,
    task: tokio::task::JoinHandle<()>,
    max_objects: usize,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // The task notices the closed health channel at its next turn; abort to be prompt.
        // The collector is left to the session (destroyed with it at logout).
        self.task.abort();
    }
}

impl Watcher {
    /// Start the long poll of `client`, reporting into `events`.
    pub fn start(
        client: Client,
        events: mpsc::UnboundedSender<WatchEvent>,
        options: WatchOptions,
    ) -> Self {
        let shared = Arc::new(Shared {
            wanted: Mutex::new(BTreeSet::new()),
            changed: Notify::new(),
            collector: Mutex::new(None),
        });
        let (health_tx, health) = watch::channel(Health::Starting);
        let max_objects = options.max_objects;
        let task = tokio::spawn(run(client, shared.clone(), events, health_tx, options));
        Self {
            shared,
            health,
            task,
            max_objects,
        }
    }

    /// Watch exactly these objects (kinds without [`watched_paths`] are ignored; past
    /// [`WatchOptions::max_objects`], the rest are not watched).
    pub fn set(&self, objs: impl IntoIterator<Item = MoRef>) {
        let next: BTreeSet<MoRef> = objs
            .into_iter()
            .filter(|o| !watched_paths(&o.kind).is_empty())
            .take(self.max_objects)
            .collect();
        let mut wanted = lock(&self.shared.wanted);
        if *wanted != next {
            *wanted = next;
            drop(wanted);
            self.shared.changed.notify_one();
        }
    }

    /// Whether a change of `obj` will be reported: the long poll is healthy and `obj` is wanted
    /// (its filter is in place or being made; if making it fails, `obj` is reported unwatched).
    pub fn watching(&self, obj: &MoRef) -> bool {
        *self.health.borrow() == Health::Healthy && lock(&self.shared.wanted).contains(obj)
    }

    pub fn health(&self) -> Health {
        self.health.borrow().clone()
    }

    /// Wait until the health is not `Starting` (tests, startup).
    pub async fn settled(&mut self) -> Health {
        let h = self
            .health
            .wait_for(|h| *h != Health::Starting)
            .await
            .map(|h| h.clone());
        h.unwrap_or_else(|_| Health::Failing("the watcher ended".into()))
    }

    /// The collector in use (tests read its `filter` property to see that none leaked).
    pub fn collector(&self) -> Option<MoRef> {
        lock(&self.shared.collector).clone().map(|(c, _)| c)
    }

    /// The ListView of the watched objects (tests read what it holds).
    pub fn view(&self) -> Option<MoRef> {
        lock(&self.shared.collector).clone().map(|(_, v)| v)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A collector of this session, its filters by object, and where the waits are.
struct Session {
    generation: u64,
    collector: MoRef,
    /// The ListView holding every watched object; the collector's one filter reads through it.
    view: MoRef,
    /// What the view holds (as asked: an object the server could not find is kept here too,
    /// so that it is not asked for again while wanted).
    in_view: BTreeSet<MoRef>,
    version: String,
}

/// Whether a fault says this vCenter cannot long-poll these properties.
fn unsupported(e: &Error) -> Option<String> {
    let f = e.fault()?;
    match &f.kind {
        FaultKind::MethodNotFound | FaultKind::InvalidProperty { .. } => Some(f.to_string()),
        FaultKind::Other(t) if matches!(t.as_str(), "NotSupported" | "MethodDisabled") => {
            Some(f.to_string())
        }
        _ => None,
    }
}

/// Whether a task's known values say it has finished (`success` or `error`).
fn finished(values: &BTreeMap<String, Option<String>>) -> bool {
    matches!(
        values.get("info.state").cloned().flatten().as_deref(),
        Some("success" | "error")
    )
}

fn gone(e: &Error) -> bool {
    matches!(
        e.fault().map(|f| &f.kind),
        Some(FaultKind::ManagedObjectNotFound { .. })
    )
}

struct Loop {
    client: Client,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<WatchEvent>,
    health: watch::Sender<Health>,
    options: WatchOptions,
    /// The watched properties' last known values, by object: wanted objects only.
    known: BTreeMap<MoRef, BTreeMap<String, Option<String>>>,
    /// Collectors and views to destroy (generation, object): a failure left them behind.
    stale: Vec<(u64, MoRef)>,
}

async fn run(
    client: Client,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<WatchEvent>,
    health: watch::Sender<Health>,
    options: WatchOptions,
) {
    let mut l = Loop {
        client,
        shared,
        events,
        health,
        options,
        known: BTreeMap::new(),
        stale: Vec::new(),
    };
    let mut session: Option<Session> = None;
    let mut pause = Duration::from_secs(1);
    // Waits that came back at once with nothing, in a row: a server that does not wait must
    // not make this a hot loop.
    let mut empty_quick = 0u32;
    loop {
        if l.health.is_closed() {
            return;
        }
        let started = tokio::time::Instant::now();
        match l.turn(&mut session).await {
            Ok(empty) => {
                pause = Duration::from_secs(1);
                if empty && started.elapsed() < Duration::from_secs(1) {
                    empty_quick += 1;
                    if empty_quick >= 3 {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                } else {
                    empty_quick = 0;
                }
            }
            Err(e) => {
                if let Some(why) = unsupported(&e) {
                    tracing::warn!(server = %l.client.server(), reason = %why, "vCenter cannot wait for updates (WaitForUpdatesEx); machines poll their tasks instead");
                    l.give_up(Health::Unsupported(why));
                    if let Some(s) = session.take() {
                        let _ = l.client.destroy_property_collector(&s.collector).await;
                        let _ = l.client.destroy_view(&s.view).await;
                    }
                    *lock(&l.shared.collector) = None;
                    return;
                }
                tracing::debug!(server = %l.client.server(), error = %e, ?pause, "long poll failed; starting over");
                l.give_up(Health::Failing(e.to_string()));
                if let Some(s) = session.take() {
                    l.stale.push((s.generation, s.collector));
                    l.stale.push((s.generation, s.view));
                }
                *lock(&l.shared.collector) = None;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(l.options.max_backoff);
            }
        }
    }
}

impl Loop {
    /// Report every watched object unwatched (once per healthy spell) and set `health`.
    fn give_up(&mut self, health: Health) {
        if *self.health.borrow() == Health::Healthy {
            for obj in lock(&self.shared.wanted).iter() {
                let _ = self.events.send(WatchEvent::Unwatched(obj.clone()));
            }
        }
        let _ = self.health.send(health);
    }

    /// One turn: a collector for the current session, filters in line with the wanted set,
    /// one wait (cut short when the wanted set changes). True when the wait returned nothing
    /// and was not cut short.
    async fn turn(&mut self, session: &mut Option<Session>) -> Result<bool, Error> {
        self.client.login().await?;
        let generation = self.client.session_generation().await;
        // Collectors and views left behind by a failure of this session: destroy them first.
        let mut left = Vec::new();
        for (g, c) in std::mem::take(&mut self.stale) {
            if g != generation {
                continue; // gone with its session
            }
            let destroyed = match c.kind.as_str() {
                "ListView" => self.client.destroy_view(&c).await,
                _ => self.client.destroy_property_collector(&c).await,
            };
            match destroyed {
                Ok(()) => {}
                Err(e) if gone(&e) => {}
                Err(e) => {
                    left.push((g, c));
                    self.stale = left;
                    return Err(e);
                }
            }
        }
        if session.as_ref().is_some_and(|s| s.generation != generation) {
            // Re-logged in: the old session's collector and filters are gone with it. What
            // was known of the objects stays: a change made meanwhile shows as a difference
            // in the new filters' first state.
            *session = None;
        }
        let s = match session {
            Some(s) => s,
            None => {
                let collector = self.client.create_property_collector().await?;
                tracing::debug!(server = %self.client.server(), %collector, generation, "long poll collector created");
                // From here on a failure leaves the collector to be destroyed.
                self.stale.push((generation, collector.clone()));
                let view = self.client.create_list_view().await?;
                self.stale.push((generation, view.clone()));
                self.client
                    .create_view_filter(&collector, &view, &WATCHED)
                    .await?;
                self.stale.truncate(self.stale.len() - 2);
                *lock(&self.shared.collector) = Some((collector.clone(), view.clone()));
                session.insert(Session {
                    generation,
                    collector,
                    view,
                    in_view: BTreeSet::new(),
                    version: String::new(),
                })
            }
        };
        self.sync_view(s).await?;
        let _ = self.health.send(Health::Healthy);

        let client = self.client.clone();
        let collector = s.collector.clone();
        let version = s.version.clone();
        let wait = client.wait_for_updates(
            &collector,
            &version,
            self.options.max_wait_seconds,
            self.options.max_object_updates,
        );
        tokio::pin!(wait);
        // A change of the wanted set does not interrupt the wait: the view is changed beside
        // it, and the pending wait reports the objects that joined (`enter`, with their
        // state). Cancelling the wait instead (`CancelWaitForUpdates`, then a wait from `""`)
        // put the end of the cancelled wait between a task's end and its machine's next step,
        // and under load vcsim ended it 0.3–1.7 s after the cancel (docs/cost.md, "each step's
        // wait").
        let result = loop {
            tokio::select! {
                r = &mut wait => break r,
                () = self.shared.changed.notified() => self.sync_view(s).await?,
            }
        };
        tracing::trace!(server = %self.client.server(), ?result, "long poll wait returned");
        match result {
            // A truncated set is continued by the next turn's wait with its version, which
            // returns at once with the rest.
            Ok(Some(set)) => {
                s.version = set.version.clone();
                let empty = set.objects.is_empty() && set.missing_objects.is_empty();
                self.report(set);
                Ok(empty)
            }
            Ok(None) => Ok(true),
            Err(e)
                if e.fault()
                    .is_some_and(|f| f.kind == FaultKind::RequestCanceled) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Bring the view in line with the wanted set: one `ModifyListView` adding the new objects
    /// and removing those no longer wanted, whatever their number (none when nothing
    /// changed). An object the server could not find (a destroyed VM, an expired task) is
    /// reported as left, so its owner looks now.
    async fn sync_view(&mut self, s: &mut Session) -> Result<(), Error> {
        let wanted = lock(&self.shared.wanted).clone();
        let add: Vec<MoRef> = wanted.difference(&s.in_view).cloned().collect();
        let remove: Vec<MoRef> = s.in_view.difference(&wanted).cloned().collect();
        if add.is_empty() && remove.is_empty() {
            return Ok(());
        }
        let unresolved = self.client.modify_list_view(&s.view, &add, &remove).await?;
        for obj in &remove {
            self.known.remove(obj);
        }
        for obj in unresolved {
            self.known.remove(&obj);
            self.report_left(obj);
        }
        s.in_view = wanted;
        Ok(())
    }

    fn report_left(&self, obj: MoRef) {
        let _ = self.events.send(WatchEvent::Changed {
            obj,
            kind: UpdateKind::Leave,
            values: BTreeMap::new(),
        });
    }

    /// Report what changed: a leave, an update that changes a known value (also the first
    /// state after a restart, if it changed meanwhile), an enter of an object not seen yet —
    /// except a task still queued or running and a VM's first state (whoever asked to watch it
    /// has just read it).
    ///
    /// Only objects wanted now are looked at: an object the server reports that nobody asked
    /// for (a hostile or confused server; one taken out of the view since) is neither stored
    /// nor reported, so `known` never outgrows the wanted set, whatever the server sends.
    fn report(&mut self, set: UpdateSet) {
        let shared = self.shared.clone();
        let wanted = lock(&shared.wanted);
        for u in set.objects {
            if !wanted.contains(&u.obj) {
                continue;
            }
            let known = self.known.get(&u.obj).cloned();
            // A task's state only moves forward. Once it is known finished, an older state is
            // stale: vcsim reports a task's past changes to a pending wait after the read of a
            // new filter's state already said `success`.
            if u.kind != UpdateKind::Leave
                && u.obj.kind == "Task"
                && known.as_ref().is_some_and(finished)
            {
                continue;
            }
            let mut values = known.clone().unwrap_or_default();
            for c in &u.changes {
                values.insert(
                    c.name.clone(),
                    c.val.as_ref().map(|v| v.text.trim().to_string()),
                );
            }
            let news = match (u.kind, &known) {
                (UpdateKind::Leave, _) => true,
                (_, Some(k)) => *k != values,
                (_, None) => match u.obj.kind.as_str() {
                    "Task" => !matches!(
                        values.get("info.state").cloned().flatten().as_deref(),
                        Some("queued" | "running")
                    ),
                    _ => false,
                },
            };
            if u.kind == UpdateKind::Leave {
                self.known.remove(&u.obj);
            } else {
                self.known.insert(u.obj.clone(), values.clone());
            }
            if news {
                // An object already known that "enters" (a filter's first report, after the
                // watcher's own read of it) has changed, as far as its owner can tell.
                let kind = match (u.kind, &known) {
                    (UpdateKind::Enter, Some(_)) => UpdateKind::Modify,
                    (kind, _) => kind,
                };
                let _ = self.events.send(WatchEvent::Changed {
                    obj: u.obj,
                    kind,
                    values,
                });
            }
        }
        for (obj, _) in set.missing_objects {
            if wanted.contains(&obj) {
                self.known.remove(&obj);
                self.report_left(obj);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::soap::Node;
    use crate::vcenter::updates::{Change, ObjectUpdate};
    use crate::vcenter::{ClientOptions, Credentials};

    /// A task's update saying it succeeded.
    fn succeeded(obj: &MoRef, kind: UpdateKind) -> ObjectUpdate {
        ObjectUpdate {
            filter: MoRef::new("PropertyFilter", "f"),
            kind,
            obj: obj.clone(),
            changes: vec![Change {
                name: "info.state".into(),
                op: "assign".into(),
                val: Some(Node {
                    name: "val".into(),
                    text: "success".into(),
                    ..Node::default()
                }),
            }],
            missing: Vec::new(),
        }
    }

    #[tokio::test]
    async fn objects_nobody_asked_for_are_neither_kept_nor_reported() {
        // No call is made: `report` works on what it is given.
        let client = Client::new(
            "https://vc.test",
            Credentials::new("u", secrecy::SecretString::from("p".to_string())),
            ClientOptions::default(),
        )
        .unwrap();
        let asked = MoRef::new("Task", "task-1");
        let shared = Arc::new(Shared {
            wanted: Mutex::new(BTreeSet::from([asked.clone()])),
            changed: Notify::new(),
            collector: Mutex::new(None),
        });
        let (events, mut rx) = mpsc::unbounded_channel();
        let (health, _health_rx) = watch::channel(Health::Healthy);
        let mut l = Loop {
            client,
            shared,
            events,
            health,
            options: WatchOptions::default(),
            known: BTreeMap::new(),
            stale: Vec::new(),
        };
        // A server reporting 100,000 objects beside the one asked for, entering and changing,
        // and as many vanished ones.
        let unasked: Vec<MoRef> = (0..100_000)
            .map(|i| MoRef::new("Task", format!("task-x{i}")))
            .collect();
        let mut objects: Vec<ObjectUpdate> = unasked
            .iter()
            .map(|o| succeeded(o, UpdateKind::Enter))
            .collect();
        objects.push(succeeded(&asked, UpdateKind::Enter));
        objects.extend(unasked.iter().map(|o| succeeded(o, UpdateKind::Modify)));
        let missing_objects = unasked
            .iter()
            .take(1000)
            .map(|o| {
                (
                    o.clone(),
                    crate::vcenter::model::fault::Fault::untyped("gone"),
                )
            })
            .collect();
        l.report(UpdateSet {
            version: "1".into(),
            truncated: false,
            objects,
            missing_objects,
        });
        assert_eq!(l.known.len(), 1, "objects kept");
        assert!(l.known.contains_key(&asked));
        let mut reported = Vec::new();
        while let Ok(e) = rx.try_recv() {
            reported.push(e.obj().clone());
        }
        assert_eq!(reported.len(), 1, "objects reported");
        assert_eq!(reported, [asked]);
    }
}
