//! How long a machine waits before its next look, given what the vCenter long poll watches
//! (`vcenter::watcher`). The planners say *why* a machine waits (`Requeue::After(TASK_POLL)`:
//! a task in flight, a VM property, a node to join); this says *how*: a task the long poll
//! watches wakes its machine the moment it ends, so the machine needs no re-look of its own
//! before the periodic full read (`resync`); a task it does not watch (no long poll, a vCenter
//! without `WaitForUpdatesEx`, the watch failing) is looked at again every `task_poll`, the
//! fallback. Pure: the controller passes what the watcher said.
use std::time::Duration;

use super::{Requeue, TASK_POLL, VmObs, provider_status};
use crate::api::machine::Machine;
use crate::vcenter::model::moref::MoRef;

/// The machine controller's polling intervals (the manager's flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Polling {
    /// The fallback re-look while a machine waits on a task the long poll does not watch (or
    /// on a Node to register where nothing wakes it then).
    pub task_poll: Duration,
    /// The periodic full read of a machine with nothing pending, or whose wait the long poll
    /// covers: the safety net against a missed update.
    pub resync: Duration,
    /// Whether to long-poll vCenter at all.
    pub long_poll: bool,
    /// The safety net of zones and clusters: how often a ready zone is verified against vCenter
    /// again, and a VSphereCluster's vCenter session checked, when nothing changed. Between
    /// two, nothing but the long poll reads vCenter at rest.
    pub infrastructure_resync: Duration,
    /// How long a vCenter credentials Secret read from the API server is used before it is
    /// read again (`controllers::secrets`): a rotated or deleted Secret is seen this late at
    /// most, or at once when vCenter refuses the remembered password.
    pub credentials_reread: Duration,
}

impl Default for Polling {
    fn default() -> Self {
        Self {
            task_poll: TASK_POLL,
            resync: DEFAULT_RESYNC,
            long_poll: true,
            infrastructure_resync: DEFAULT_INFRASTRUCTURE_RESYNC,
            credentials_reread: DEFAULT_CREDENTIALS_REREAD,
        }
    }
}

/// The default of [`Polling::credentials_reread`]: a restart resync or a burst of sweeps reads
/// each Secret once (it was once per sweep: 68 reads of one Secret while six machines were
/// made), and a rotated password is picked up within a minute even while the old one works.
pub const DEFAULT_CREDENTIALS_REREAD: Duration = Duration::from_secs(60);

/// The default of [`Polling::resync`]: vCenter drifts (a VM deleted by hand must turn its
/// Machine `Failed`), and this is how late that is seen when no long poll reports it.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(600);

/// The default of [`Polling::infrastructure_resync`]: CAPV re-verifies zones on its own sync
/// period (10 min by default); a zone that drifted shows within this.
pub const DEFAULT_INFRASTRUCTURE_RESYNC: Duration = Duration::from_secs(300);

/// The objects the long poll should watch for a machine, as its plan left it: its task in
/// flight (recorded on the Machine) and its VM (power state, IP address: also changes made by
/// hand).
pub fn watched_objects(machine: &Machine, vm: Option<&VmObs>) -> Vec<MoRef> {
    let mut out = Vec::new();
    let ps = provider_status(machine);
    if !ps.task_ref.is_empty() {
        out.push(MoRef::new("Task", &ps.task_ref));
    }
    if let Some(m) = vm.and_then(|v| v.moref.clone()) {
        out.push(m);
    }
    out
}

/// The machine's task in flight, if it records one.
pub fn task_in_flight(machine: &Machine) -> Option<MoRef> {
    let ps = provider_status(machine);
    (!ps.task_ref.is_empty()).then(|| MoRef::new("Task", &ps.task_ref))
}

/// What wakes a machine, so that it needs no re-look of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Woken {
    /// The long poll watches the machine's task in flight.
    pub by_task: bool,
    /// A Node's arrival wakes the machine (the manager's Node watch) and the long poll watches
    /// its VM (a new guest address, by which a Node may be matched, wakes it too).
    pub by_node: bool,
}

/// The requeue the controller acts on: a task wait (`After(TASK_POLL)`) becomes the periodic
/// full read when the long poll watches the machine's task, else the fallback `task_poll`; a
/// wait for the Node likewise when its arrival wakes the machine; other waits are left as
/// planned.
pub fn requeue_with(requeue: Requeue, woken: Woken, polling: &Polling) -> Requeue {
    match requeue {
        Requeue::After(d) if d == TASK_POLL && woken.by_task => Requeue::After(polling.resync),
        Requeue::After(d) if d == TASK_POLL => Requeue::After(polling.task_poll),
        Requeue::NodeJoin if woken.by_node => Requeue::After(polling.resync),
        Requeue::NodeJoin => Requeue::After(polling.task_poll),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_task_waits_for_its_update_an_unwatched_one_is_polled() {
        let p = Polling {
            task_poll: Duration::from_secs(3),
            resync: Duration::from_secs(900),
            long_poll: true,
            ..Polling::default()
        };
        let task = Requeue::After(TASK_POLL);
        let (by_task, by_node) = (
            Woken {
                by_task: true,
                by_node: false,
            },
            Woken {
                by_task: false,
                by_node: true,
            },
        );
        let (resync, poll) = (
            Requeue::After(Duration::from_secs(900)),
            Requeue::After(Duration::from_secs(3)),
        );
        let cases = [
            (task.clone(), by_task, resync.clone()),
            (task.clone(), by_node, poll.clone()),
            (task, Woken::default(), poll.clone()),
            (Requeue::NodeJoin, by_node, resync),
            (Requeue::NodeJoin, by_task, poll.clone()),
            (Requeue::NodeJoin, Woken::default(), poll),
            (Requeue::Idle, by_task, Requeue::Idle),
            (
                Requeue::After(Duration::from_secs(1)),
                by_task,
                Requeue::After(Duration::from_secs(1)),
            ),
            (
                Requeue::Backoff("x".into()),
                by_task,
                Requeue::Backoff("x".into()),
            ),
        ];
        for (r, woken, want) in cases {
            assert_eq!(requeue_with(r.clone(), woken, &p), want, "{r:?} {woken:?}");
        }
    }

    #[test]
    fn a_machine_watches_its_task_and_its_vm() {
        let mut m = Machine::new("m", Default::default());
        assert!(watched_objects(&m, None).is_empty());
        let vm = VmObs {
            moref: Some(MoRef::new("VirtualMachine", "vm-9")),
            ..VmObs::default()
        };
        assert_eq!(
            watched_objects(&m, Some(&vm)),
            vec![MoRef::new("VirtualMachine", "vm-9")]
        );
        let mut ps = provider_status(&m);
        ps.task_ref = "task-3".into();
        super::super::set_provider_status(&mut m, &ps);
        assert_eq!(task_in_flight(&m), Some(MoRef::new("Task", "task-3")));
        assert_eq!(
            watched_objects(&m, Some(&vm)),
            vec![
                MoRef::new("Task", "task-3"),
                MoRef::new("VirtualMachine", "vm-9")
            ]
        );
    }
}
