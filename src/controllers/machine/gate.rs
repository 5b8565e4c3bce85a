//! The per-server sweep gates of the machine controller: a leaf module (it imports nothing of
//! the controllers), so the shared [`super::super::Context`] can hold the gates without the
//! context and the machine controller importing each other.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::plan::machine::Requeue;

/// A machine with nothing pending is looked at again this often by default (vCenter drifts: a
/// VM deleted by hand must turn its Machine `Failed`; the long poll reports that at once where
/// it runs): `--machine-resync-interval`.
pub const IDLE_REQUEUE: Duration = crate::plan::machine::waiting::DEFAULT_RESYNC;

/// What the last sweep decided for one machine.
#[derive(Clone, Debug)]
pub struct Decision {
    /// The machine's fingerprint when decided: our own status writes do not change it.
    pub fingerprint: u64,
    pub requeue: Requeue,
    pub decided: Instant,
    /// Whether a reconcile of the machine has been given this decision.
    pub answered: bool,
}

impl Decision {
    /// Still valid for a machine with this fingerprint: nothing but its status changed and it
    /// is not due. A failure answers one reconcile: the machine's retry (on its backoff) sweeps
    /// again, unless a sweep made for another machine meanwhile already tried it again — so N
    /// machines failing on one server cost one sweep per backoff round, not N (each sweep
    /// re-reads and re-decides all N: with 300 machines that was 90,000 decisions, and as many
    /// warnings, per round).
    pub fn covers(&self, fp: u64, idle: Duration) -> bool {
        if self.fingerprint != fp {
            return false;
        }
        match self.requeue {
            Requeue::Idle => self.decided.elapsed() < idle,
            Requeue::After(d) => self.decided.elapsed() < d,
            // Mapped by `requeue_with` before it gets here; as planned, it is a task poll.
            Requeue::NodeJoin => self.decided.elapsed() < crate::plan::machine::TASK_POLL,
            Requeue::Backoff(_) => !self.answered,
        }
    }

    /// The decision, as given to a reconcile of its machine.
    pub fn answer(&mut self) -> Requeue {
        self.answered = true;
        self.requeue.clone()
    }
}

/// The decisions of a server's last sweeps, by machine key.
pub type Decisions = BTreeMap<String, Decision>;

/// A server's gate: held while its sweep runs; the decisions of its last sweeps by machine.
pub type Gate = Arc<tokio::sync::Mutex<Decisions>>;

/// One gate per vCenter: sweeps of a server never overlap, and their decisions are shared.
#[derive(Default)]
pub struct Sweeps {
    servers: Mutex<HashMap<String, Gate>>,
}

impl Sweeps {
    pub fn gate(&self, server: &str) -> Gate {
        self.servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(server.to_string())
            .or_default()
            .clone()
    }

    /// Drop the gates whose key is not in `live` (no machine is left on that server acting as
    /// that identity) and that nobody holds (a reconcile waiting on a gate or sweeping under it
    /// keeps it). Server names come from objects tenants write: kept forever, one gate per name
    /// ever seen would grow without bound. Returns the keys dropped.
    pub fn retain(&self, live: &BTreeSet<String>) -> Vec<String> {
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        let gone: Vec<String> = servers
            .iter()
            .filter(|(k, g)| !live.contains(*k) && Arc::strong_count(g) == 1)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &gone {
            servers.remove(k);
        }
        gone
    }

    /// How many gates there are.
    pub fn len(&self) -> usize {
        self.servers.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every server's gate (copied out: none is locked while the map is).
    fn gates(&self) -> Vec<Gate> {
        self.servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// How many machine decisions are kept, over every server (they are dropped with their
    /// machine, so this never outgrows the machines that exist).
    pub async fn decisions(&self) -> usize {
        let mut n = 0;
        for g in self.gates() {
            n += g.lock().await.len();
        }
        n
    }

    /// Drop the decisions of these machines from every gate: their next reconcile sweeps.
    pub async fn forget(&self, keys: &[String]) {
        for g in self.gates() {
            let mut decisions = g.lock().await;
            for k in keys {
                decisions.remove(k);
            }
        }
    }
}

/// Record a sweep's decisions, and forget those of machines the sweep no longer saw (deleted,
/// or moved to another server).
pub fn record(
    decisions: &mut Decisions,
    requeues: &BTreeMap<String, Requeue>,
    fingerprints: &BTreeMap<String, u64>,
) {
    decisions.retain(|k, _| fingerprints.contains_key(k));
    for (k, r) in requeues {
        decisions.insert(
            k.clone(),
            Decision {
                fingerprint: fingerprints.get(k).copied().unwrap_or_default(),
                requeue: r.clone(),
                decided: Instant::now(),
                answered: false,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_covers_an_unchanged_machine_until_it_is_due() {
        let d = Decision {
            fingerprint: 7,
            requeue: Requeue::After(Duration::from_secs(10)),
            decided: Instant::now(),
            answered: false,
        };
        assert!(d.covers(7, IDLE_REQUEUE));
        assert!(
            !d.covers(8, IDLE_REQUEUE),
            "a changed machine is swept again"
        );
        let due = Decision {
            decided: Instant::now() - Duration::from_secs(11),
            ..d.clone()
        };
        assert!(!due.covers(7, IDLE_REQUEUE), "due");
        let mut failed = Decision {
            requeue: Requeue::Backoff("x".into()),
            ..d
        };
        assert!(
            failed.covers(7, IDLE_REQUEUE),
            "a failure another machine's sweep found answers this machine's reconcile"
        );
        assert_eq!(failed.answer(), Requeue::Backoff("x".into()));
        assert!(
            !failed.covers(7, IDLE_REQUEUE),
            "once answered, the machine's retry sweeps again"
        );
    }

    #[test]
    fn gates_with_no_machine_left_are_dropped_unless_held() {
        let sweeps = Sweeps::default();
        let kept = sweeps.gate("vc-a\nmanager");
        drop(kept);
        let held = sweeps.gate("vc-held\ntenant");
        drop(sweeps.gate("vc-gone\ntenant"));
        assert_eq!(sweeps.len(), 3);
        let live = BTreeSet::from(["vc-a\nmanager".to_string()]);
        assert_eq!(sweeps.retain(&live), ["vc-gone\ntenant"]);
        assert_eq!(sweeps.len(), 2, "a gate a reconcile holds stays");
        drop(held);
        assert_eq!(sweeps.retain(&live), ["vc-held\ntenant"]);
        assert_eq!(sweeps.len(), 1);
    }

    #[test]
    fn decisions_of_machines_a_sweep_no_longer_sees_are_dropped() {
        let mut d = Decisions::new();
        let fps = BTreeMap::from([("ns/a".to_string(), 1), ("ns/b".to_string(), 2)]);
        let rq = BTreeMap::from([
            ("ns/a".to_string(), Requeue::Idle),
            ("ns/b".to_string(), Requeue::Idle),
        ]);
        record(&mut d, &rq, &fps);
        assert_eq!(d.len(), 2);
        // ns/b was deleted: the next sweep neither sees nor decides it.
        let fps = BTreeMap::from([("ns/a".to_string(), 1)]);
        let rq = BTreeMap::from([("ns/a".to_string(), Requeue::Idle)]);
        record(&mut d, &rq, &fps);
        assert_eq!(d.keys().collect::<Vec<_>>(), ["ns/a"]);
    }
}
