//! The machine controller's vCenter long polls: one [`Watcher`] per sweep gate (a vCenter and
//! the identity its machines act as; with the manager's credentials, one per vCenter), fed
//! after each sweep with the objects its machines wait on (tasks in flight, their VMs). When
//! one changes, the decisions of the machines waiting on it are dropped from the gate and
//! their reconciles triggered at once (kube-runtime's `reconcile_on`), so a machine's next
//! step follows its task by the time of a sweep, not the 10 s re-look; a machine whose task
//! the long poll watches gets no re-look of its own before the periodic full read
//! (`plan::machine::waiting`). Where the long poll fails or is unsupported, the watcher says
//! which objects are unwatched; their machines are woken and poll again.
//!
//! Why here and not in `vcenter/`: the watcher itself is the client's (`vcenter::watcher`, one
//! per client, no controller concepts); what it watches, whom it wakes and which decisions it
//! voids are the machine controller's.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};

use futures::channel::mpsc::UnboundedSender;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use super::gate::Gate;
use crate::api::Machine;
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::machine::Requeue;
use crate::plan::machine::waiting::{Polling, Woken, requeue_with};
use crate::vcenter::watcher::{WatchEvent, WatchOptions, Watcher};
use crate::vcenter::{Client, MoRef};

/// Where a woken machine's reconcile is triggered: the Machine controller and the VSphereVM
/// controller (a Cluster API machine's stand-in key starts with `VSphereVM `).
#[derive(Clone)]
pub struct Wakers {
    pub machines: UnboundedSender<ObjectRef<DeserializeGuard<Machine>>>,
    pub vms: UnboundedSender<ObjectRef<DeserializeGuard<VSphereVM>>>,
}

impl Wakers {
    /// Trigger the reconcile of the machine keyed `key` (`namespace/name`, or
    /// `VSphereVM namespace/name`).
    pub(super) fn wake(&self, key: &str) {
        let (vm, k) = match key.strip_prefix("VSphereVM ") {
            Some(k) => (true, k),
            None => (false, key),
        };
        let Some((ns, name)) = k.split_once('/') else {
            return;
        };
        // A closed channel: the controllers are stopping.
        if vm {
            let _ = self.vms.unbounded_send(ObjectRef::new(name).within(ns));
        } else {
            let _ = self
                .machines
                .unbounded_send(ObjectRef::new(name).within(ns));
        }
    }
}

/// Object → the machines (keys) waiting on it.
type Owners = Arc<Mutex<BTreeMap<MoRef, Vec<String>>>>;

struct Poll {
    /// The client's identity (server, user, password fingerprint): a new client (a changed
    /// password) gets a new watcher.
    principal: String,
    watcher: Watcher,
    owners: Owners,
}

/// The long polls of one controller term (dropped with it: each watcher's task ends).
pub struct LongPolls {
    polling: Polling,
    wakers: Option<Wakers>,
    polls: Mutex<HashMap<String, Poll>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LongPolls {
    /// Without `wakers` (or with `polling.long_poll` off) nothing is watched: machines poll.
    pub fn new(polling: Polling, wakers: Option<Wakers>) -> Self {
        Self {
            polling,
            wakers,
            polls: Mutex::new(HashMap::new()),
        }
    }

    pub fn polling(&self) -> &Polling {
        &self.polling
    }

    /// How many long polls run (one per gate: vCenter and identity).
    pub fn len(&self) -> usize {
        lock(&self.polls).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stop the long polls of gates whose key is not in `live` (no machine is left on that
    /// server acting as that identity): each watcher's task ends, and with it its hold on the
    /// client, so the session cache can log it out once idle. Returns the keys dropped.
    pub fn retain(&self, live: &BTreeSet<String>) -> Vec<String> {
        let mut polls = lock(&self.polls);
        let gone: Vec<String> = polls
            .keys()
            .filter(|k| !live.contains(*k))
            .cloned()
            .collect();
        for k in &gone {
            if polls.remove(k).is_some() {
                let server = k.split('\n').next().unwrap_or_default();
                tracing::debug!(%server, "no machine left: vCenter long poll stopped");
            }
        }
        gone
    }

    /// After a sweep of `gate_key`'s machines through `client` (`None`: none, or the sweep
    /// read nothing): watch what they wait on (`watch`, machine key → objects), and turn their
    /// planned requeues into the ones to act on.
    pub fn after_sweep(
        &self,
        gate_key: &str,
        gate: &Gate,
        client: Option<&Client>,
        watch: &BTreeMap<String, Vec<MoRef>>,
        requeues: &mut BTreeMap<String, Requeue>,
    ) {
        // A watcher starts with the first object to watch; once started, it follows every
        // sweep, an empty one too (its filters go). A sweep that read nothing leaves it be.
        let active = match (client, &self.wakers) {
            (Some(c), Some(w)) if self.polling.long_poll => {
                if !watch.is_empty() {
                    self.ensure_watcher(gate_key, gate, c, w);
                }
                true
            }
            _ => false,
        };
        let polls = lock(&self.polls);
        let poll = polls.get(gate_key).filter(|_| active);
        let mut tasks: BTreeMap<&str, &MoRef> = BTreeMap::new();
        let mut vms: BTreeMap<&str, &MoRef> = BTreeMap::new();
        if let Some(p) = poll {
            let mut by_obj: BTreeMap<MoRef, Vec<String>> = BTreeMap::new();
            for (k, objs) in watch {
                for o in objs {
                    by_obj.entry(o.clone()).or_default().push(k.clone());
                    match o.kind.as_str() {
                        "Task" => tasks.insert(k, o),
                        _ => vms.insert(k, o),
                    };
                }
            }
            p.watcher.set(by_obj.keys().cloned());
            *lock(&p.owners) = by_obj;
        }
        let watching = |objs: &BTreeMap<&str, &MoRef>, k: &str| {
            poll.is_some_and(|p| objs.get(k).is_some_and(|o| p.watcher.watching(o)))
        };
        for (k, r) in requeues.iter_mut() {
            let woken = Woken {
                by_task: watching(&tasks, k),
                // The Node watch runs with the wakers (`node_join`).
                by_node: watching(&vms, k),
            };
            *r = requeue_with(r.clone(), woken, &self.polling);
        }
    }

    /// Start the gate's watcher on first use, or again for a new client.
    fn ensure_watcher(&self, gate_key: &str, gate: &Gate, client: &Client, wakers: &Wakers) {
        let principal = client.principal_key();
        let mut polls = lock(&self.polls);
        if polls
            .get(gate_key)
            .is_some_and(|p| p.principal == principal)
        {
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let owners: Owners = Arc::default();
        let watcher = Watcher::start(client.clone(), tx, WatchOptions::default());
        tokio::spawn(wake(
            rx,
            owners.clone(),
            Arc::downgrade(gate),
            wakers.clone(),
        ));
        tracing::debug!(server = %client.server(), "vCenter long poll started");
        polls.insert(
            gate_key.to_string(),
            Poll {
                principal,
                watcher,
                owners,
            },
        );
    }
}

/// Wake the machines waiting on what changed: drop their decisions (so their reconcile sweeps)
/// and trigger their reconciles. Events arriving together are handled together: machines woken
/// at once cost one sweep. The gate is not held (it is dropped with its last machine, see
/// `Sweeps::retain`); once it is gone there is nobody to wake.
async fn wake(
    mut events: mpsc::UnboundedReceiver<WatchEvent>,
    owners: Owners,
    gate: Weak<tokio::sync::Mutex<super::gate::Decisions>>,
    wakers: Wakers,
) {
    while let Some(first) = events.recv().await {
        let mut objs = vec![first.obj().clone()];
        while let Ok(e) = events.try_recv() {
            objs.push(e.obj().clone());
        }
        let mut keys: Vec<String> = {
            let owners = lock(&owners);
            objs.iter()
                .filter_map(|o| owners.get(o))
                .flatten()
                .cloned()
                .collect()
        };
        keys.sort();
        keys.dedup();
        if keys.is_empty() {
            continue;
        }
        tracing::debug!(objects = ?objs, machines = ?keys, "vCenter changed: waking the machines waiting on it");
        let Some(gate) = gate.upgrade() else {
            return;
        };
        {
            let mut decisions = gate.lock().await;
            for k in &keys {
                decisions.remove(k);
            }
        }
        for k in &keys {
            wakers.wake(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::idle_cache::{CacheLimits, TestClock};
    use crate::vcenter::session::SessionCache;
    use crate::vcenter::{ClientOptions, Credentials, Stats, TlsPolicy};

    fn wakers() -> Wakers {
        Wakers {
            machines: futures::channel::mpsc::unbounded().0,
            vms: futures::channel::mpsc::unbounded().0,
        }
    }

    /// A gate whose machines all went: its long poll stops, and the client the watcher held is
    /// then the session cache's alone, which logs it out once idle. Before, the watcher kept
    /// the client shared for good, so the cache never let it go.
    #[tokio::test]
    async fn the_long_poll_of_a_gate_with_no_machine_left_stops_and_frees_its_client() {
        let clock = TestClock::new();
        let limits = CacheLimits {
            idle: std::time::Duration::from_secs(60),
            max_entries: 8,
        };
        let sessions = SessionCache::with_limits(
            Stats::default(),
            ClientOptions::default(),
            limits,
            clock.clock(),
        );
        let creds = Credentials::new("u", secrecy::SecretString::from("p".to_string()));
        // Nothing listens there: the watcher retries its login, with backoff, meanwhile.
        let server = "https://127.0.0.1:9";
        let client = sessions.client(server, &creds, TlsPolicy::System).unwrap();
        let polls = LongPolls::new(Polling::default(), Some(wakers()));
        let gate_key = format!("{server}\nmanager");
        let gate = Gate::default();
        let watch = BTreeMap::from([(
            "ns/m".to_string(),
            vec![MoRef::new("VirtualMachine", "vm-1")],
        )]);
        polls.after_sweep(
            &gate_key,
            &gate,
            Some(&client),
            &watch,
            &mut BTreeMap::new(),
        );
        assert_eq!(polls.len(), 1);
        drop(client);
        // Another server's call lets the cache evict what is idle: not the watcher's client.
        clock.advance(std::time::Duration::from_secs(120));
        let other = sessions.client("https://127.0.0.1:10", &creds, TlsPolicy::System);
        drop(other);
        assert_eq!(sessions.len(), 2, "the watcher holds its client");

        // The gate's last machine went.
        let live = BTreeSet::from(["https://127.0.0.1:10\nmanager".to_string()]);
        assert_eq!(polls.retain(&live), [gate_key]);
        assert!(polls.is_empty());
        // The watcher's task ends at its next turn (abort), releasing the client.
        let released = async {
            loop {
                clock.advance(std::time::Duration::from_secs(120));
                drop(sessions.client("https://127.0.0.1:10", &creds, TlsPolicy::System));
                if sessions.len() == 1 {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), released)
            .await
            .expect("the session cache never let the watcher's client go");
    }
}
