//! RollingUpdate and OnDelete over per-index machine information (CPMSO `updates.go`,
//! reference §2). Pure: which indexes get a new machine, which machines are deleted, whether to
//! come back soon, and notes that say why (upstream's log messages).
//!
//! Fixed here:
//! * an index never loses its last live machine: a deletion is planned only when another machine
//!   of the index, not being deleted, stays; deleting an outdated machine needs a ready,
//!   up-to-date, live replacement (OCPBUGS-29249 and the "deleting replacement" case upstream
//!   leaves to list order);
//! * at most one deletion in flight per index: when a machine of the index is already being
//!   deleted, the rules wait for it instead of deleting another;
//! * choices never depend on list order: machines are taken oldest first, then by name.
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::control_plane_machine_set::ControlPlaneMachineSetStrategyType as Strategy;

/// Upstream's maximum surge, hard-coded.
pub const MAX_SURGE: i64 = 1;

/// What the update strategies know of a machine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MachineInfo {
    pub name: String,
    pub index: i32,
    pub ready: bool,
    /// Its provider spec differs from the index's desired one.
    pub needs_update: bool,
    pub deleting: bool,
    pub created: Option<Time>,
    /// `status.errorMessage`.
    pub error_message: Option<String>,
    /// The differences (for notes and events).
    pub diff: Vec<String>,
}

impl MachineInfo {
    /// Needs update or is being deleted.
    pub fn needs_replacement(&self) -> bool {
        self.needs_update || self.deleting
    }
    /// Not ready, up to date, not deleting: a replacement on its way.
    pub fn pending(&self) -> bool {
        !self.ready && !self.needs_update && !self.deleting
    }
    /// Ready and up to date.
    pub fn updated(&self) -> bool {
        self.ready && !self.needs_update
    }
}

/// Upstream's log messages, kept as notes.
pub mod note {
    pub const CREATED_REPLACEMENT: &str = "Created replacement machine";
    pub const MACHINE_REQUIRES_UPDATE: &str = "Machine requires an update";
    pub const REQUIRES_DELETE_BEFORE_UPDATE: &str =
        "Machine requires an update, delete the machine to trigger a replacement";
    pub const NO_UPDATES_REQUIRED: &str = "No updates required";
    pub const NO_CAPACITY_FOR_EXPANSION: &str = "Insufficient capacity for expansion, maximum surge has been reached. Cannot create a replacement Machine at this time.";
    pub const REMOVING_OLD_MACHINE: &str = "Removing old machine";
    pub const WAITING_FOR_READY: &str = "Waiting for machine to become ready";
    pub const WAITING_FOR_REMOVED: &str = "Waiting for machine to be removed";
    pub const WAITING_FOR_REPLACEMENT: &str = "Waiting for replacement machine to become ready";
    /// Ours: the index's failure domain cannot take new machines now.
    pub const DOMAIN_HELD: &str = "Failure domain cannot take new machines now, replacement held";
    /// Ours: a deletion was not planned because it would leave the index without a live machine.
    pub const KEPT_LAST_MACHINE: &str = "Kept the last live machine of the index";
}

/// One note: index, machine (empty when the index has none) and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub index: i32,
    pub machine: String,
    pub message: &'static str,
}

/// What the strategy decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdatePlan {
    /// Indexes that get a new machine, ascending.
    pub create: Vec<i32>,
    /// Machines to delete (index, name), ascending by index.
    pub delete: Vec<(i32, String)>,
    /// Waiting on a machine to become ready (upstream: `RequeueAfter: 5s`).
    pub requeue: bool,
    pub notes: Vec<Note>,
}

impl UpdatePlan {
    fn note(&mut self, index: i32, machine: &str, message: &'static str) {
        self.notes.push(Note {
            index,
            machine: machine.to_string(),
            message,
        });
    }
}

fn sorted(ms: &[MachineInfo]) -> Vec<&MachineInfo> {
    let mut v: Vec<&MachineInfo> = ms.iter().collect();
    v.sort_by(|a, b| {
        (a.created.as_ref().map(|t| t.0), &a.name).cmp(&(b.created.as_ref().map(|t| t.0), &b.name))
    });
    v
}

/// Plans the strategy over every index (ascending). `held` are indexes whose domain cannot take a
/// new machine now: no machine is created there.
pub fn plan_updates(
    strategy: Strategy,
    replicas: i32,
    indexed: &BTreeMap<i32, Vec<MachineInfo>>,
    held: &BTreeSet<i32>,
) -> UpdatePlan {
    let mut plan = UpdatePlan::default();
    let total: usize = indexed.values().map(Vec::len).sum();
    let mut surge = total as i64 - i64::from(replicas);
    for (&idx, machines) in indexed {
        let ms = sorted(machines);
        match strategy {
            Strategy::RollingUpdate => rolling_index(&mut plan, idx, &ms, &mut surge, held),
            Strategy::OnDelete => on_delete_index(&mut plan, idx, &ms, held),
        }
    }
    if plan.create.is_empty() && plan.delete.is_empty() && plan.notes.is_empty() {
        plan.note(-1, "", note::NO_UPDATES_REQUIRED);
    }
    plan
}

/// Waits common to both strategies; true when the index waits for a machine to become ready.
fn waits(plan: &mut UpdatePlan, idx: i32, ms: &[&MachineInfo]) -> bool {
    let pending: Vec<&&MachineInfo> = ms.iter().filter(|m| m.pending()).collect();
    let outdated: Vec<&&MachineInfo> = ms.iter().filter(|m| m.needs_replacement()).collect();
    let mut wait = false;
    if let Some(p) = pending.first() {
        if !ms.iter().any(|m| m.ready) && !ms.iter().any(|m| m.deleting) {
            plan.note(idx, &p.name, note::WAITING_FOR_READY);
            wait = true;
        }
        if let Some(o) = outdated.first() {
            plan.note(idx, &o.name, note::WAITING_FOR_REPLACEMENT);
            wait = true;
        }
    }
    let deleting = ms.iter().find(|m| m.deleting);
    if let Some(d) = deleting
        && ms.iter().any(|m| m.updated() && !m.deleting)
    {
        plan.note(idx, &d.name, note::WAITING_FOR_REMOVED);
    }
    wait
}

/// The machine the rolling update deletes in this index, if any (upstream `deleteReplacedMachines`,
/// later rules override earlier ones).
fn deletion_candidate<'m>(ms: &[&'m MachineInfo]) -> Option<&'m MachineInfo> {
    if ms.len() < 2 {
        return None;
    }
    // Prefer a machine already being deleted: then the rule waits instead of deleting a second.
    let pick = |set: Vec<&'m MachineInfo>| -> Option<&'m MachineInfo> {
        set.iter().find(|m| m.deleting).or(set.first()).copied()
    };
    let outdated: Vec<&MachineInfo> = ms
        .iter()
        .copied()
        .filter(|m| m.needs_replacement())
        .collect();
    let updated: Vec<&MachineInfo> = ms.iter().copied().filter(|m| m.updated()).collect();
    let mut candidate = None;
    if !outdated.is_empty() && !updated.is_empty() {
        candidate = pick(outdated.clone());
    }
    let outdated_not_ready: Vec<&MachineInfo> =
        outdated.iter().copied().filter(|m| !m.ready).collect();
    if !outdated_not_ready.is_empty() {
        candidate = pick(outdated_not_ready);
    }
    if updated.len() > 1 {
        // The oldest updated machine (a deleting one first: it is on its way already).
        candidate = pick(updated);
    }
    // Ours (upstream deadlocks here): every machine of the index needs replacement and all
    // are ready — a replacement made for this index went out of date because the index moved to
    // another domain when the mapping rebalanced (two machines created in one pass). The older
    // ones are surplus: the oldest goes, the newest stays, and the freed surge lets the index
    // get its replacement in its new domain. Without this the set sits at replicas+1 forever,
    // saying "maximum surge has been reached".
    if candidate.is_none()
        && outdated.len() == ms.len()
        && ms.iter().all(|m| m.ready && !m.deleting)
    {
        candidate = ms.first().copied();
    }
    candidate
}

/// Whether deleting `m` keeps the index safe: another live machine stays and, for a ready machine,
/// another live machine is ready and up to date.
fn safe_to_delete(m: &MachineInfo, ms: &[&MachineInfo]) -> bool {
    let others = || ms.iter().filter(|o| o.name != m.name && !o.deleting);
    if m.ready {
        // A ready one stays: an updated machine, or (surplus outdated machines, see
        // `deletion_candidate`) another ready one.
        others().any(|o| o.updated() || (o.ready && m.needs_replacement() && o.needs_replacement()))
    } else {
        others().next().is_some()
    }
}

fn rolling_index(
    plan: &mut UpdatePlan,
    idx: i32,
    ms: &[&MachineInfo],
    surge: &mut i64,
    held: &BTreeSet<i32>,
) {
    if let Some(m) = deletion_candidate(ms) {
        if m.deleting {
            // Already on its way; nothing more to do for it.
        } else if safe_to_delete(m, ms) {
            plan.note(idx, &m.name, note::REMOVING_OLD_MACHINE);
            plan.delete.push((idx, m.name.clone()));
        } else {
            plan.note(idx, &m.name, note::KEPT_LAST_MACHINE);
        }
    }
    if waits(plan, idx, ms) {
        plan.requeue = true;
    }
    let outdated = ms.iter().find(|m| m.needs_replacement());
    let replacement_exists = ms
        .iter()
        .any(|m| (m.updated() && !m.deleting) || m.pending());
    let name = if ms.is_empty() {
        ""
    } else if let Some(o) = outdated {
        if !o.diff.is_empty() && !replacement_exists {
            plan.note(idx, &o.name, note::MACHINE_REQUIRES_UPDATE);
        }
        &o.name
    } else {
        return;
    };
    if !ms.is_empty() && replacement_exists {
        return;
    }
    if *surge >= MAX_SURGE {
        plan.note(idx, name, note::NO_CAPACITY_FOR_EXPANSION);
        return;
    }
    if held.contains(&idx) {
        plan.note(idx, name, note::DOMAIN_HELD);
        return;
    }
    plan.note(idx, name, note::CREATED_REPLACEMENT);
    plan.create.push(idx);
    *surge += 1;
}

fn on_delete_index(plan: &mut UpdatePlan, idx: i32, ms: &[&MachineInfo], held: &BTreeSet<i32>) {
    let outdated: Vec<&&MachineInfo> = ms.iter().filter(|m| m.needs_replacement()).collect();
    if outdated.is_empty() && !ms.is_empty() && !ms.iter().any(|m| m.pending()) {
        return;
    }
    if waits(plan, idx, ms) {
        plan.requeue = true;
    }
    let create = match ms {
        [] => Some(""),
        [only] if only.needs_replacement() => {
            if only.deleting {
                Some(only.name.as_str())
            } else {
                plan.note(idx, &only.name, note::REQUIRES_DELETE_BEFORE_UPDATE);
                None
            }
        }
        _ => None,
    };
    if let Some(name) = create {
        if held.contains(&idx) {
            plan.note(idx, name, note::DOMAIN_HELD);
        } else {
            plan.note(idx, name, note::CREATED_REPLACEMENT);
            plan.create.push(idx);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Upstream's builders: `updatedMachineBuilder` (ready, up to date).
    pub(crate) fn updated(idx: i32, name: &str) -> MachineInfo {
        MachineInfo {
            name: name.into(),
            index: idx,
            ready: true,
            ..MachineInfo::default()
        }
    }
    /// `pendingMachineBuilder` (not ready, up to date).
    pub(crate) fn pending(idx: i32, name: &str) -> MachineInfo {
        MachineInfo {
            ready: false,
            ..updated(idx, name)
        }
    }
    /// `outdatedNonReadyMachineBuilder`.
    pub(crate) fn outdated_non_ready(idx: i32, name: &str) -> MachineInfo {
        MachineInfo {
            needs_update: true,
            ..pending(idx, name)
        }
    }
    fn outdated(m: MachineInfo) -> MachineInfo {
        MachineInfo {
            needs_update: true,
            diff: vec!["numCPUs: 4 != 8".into()],
            ..m
        }
    }

    /// One machine of a table: `<kind>:<name>`, kind `u` updated, `p` pending, `o` outdated and
    /// ready, `n` outdated and not ready; `x` after it: being deleted; `<`/`>` before it: older /
    /// newer. The index is the name's.
    fn parse_machine(token: &str) -> MachineInfo {
        let (kind, name) = token.split_once(':').expect("kind:name");
        let idx = super::super::mapping::name_index(name).expect("indexed name");
        let mut m = match kind.trim_matches(['<', '>', 'x']) {
            "u" => updated(idx, name),
            "p" => pending(idx, name),
            "o" => outdated(updated(idx, name)),
            "n" => outdated(outdated_non_ready(idx, name)),
            k => panic!("unknown kind {k}"),
        };
        m.deleting = kind.ends_with('x');
        let second = match kind.chars().next() {
            Some('<') => Some(0),
            Some('>') => Some(60),
            _ => None,
        };
        m.created = second.map(|s| Time(jiff::Timestamp::from_second(s).unwrap()));
        m
    }

    /// Runs a table: one case a line, `name => index: machines | … => creates => deletes =>
    /// flags` (`-` for none; flags `requeue`, `stale`: a fresh read shows a replacement, so the
    /// shell's check vetoes the create).
    fn run(strategy: Strategy, table: &str) {
        let list = |s: &str| -> Vec<String> {
            s.split_whitespace()
                .filter(|t| *t != "-")
                .map(str::to_string)
                .collect()
        };
        for line in table.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let f: Vec<&str> = line.split(" => ").collect();
            let [name, machines, create, delete, flags] = f[..] else {
                panic!("bad line {line}");
            };
            let indexed: BTreeMap<i32, Vec<MachineInfo>> = machines
                .split('|')
                .map(|ix| {
                    let (i, ms) = ix.split_once(':').expect("index: machines");
                    (
                        i.trim().parse().unwrap(),
                        ms.split_whitespace().map(parse_machine).collect(),
                    )
                })
                .collect();
            let before = indexed.clone();
            let plan = plan_updates(strategy, 3, &indexed, &BTreeSet::new());
            let creates: Vec<String> = plan.create.iter().map(i32::to_string).collect();
            assert_eq!(creates, list(create), "{name}: creates");
            let deleted: Vec<String> = plan.delete.iter().map(|(_, n)| n.clone()).collect();
            assert_eq!(deleted, list(delete), "{name}: deletes");
            assert_eq!(plan.requeue, flags.contains("requeue"), "{name}: requeue");
            assert_eq!(indexed, before, "{name}: input untouched");
            if flags.contains("stale") {
                for idx in &plan.create {
                    let mut fresh = indexed.get(idx).cloned().unwrap_or_default();
                    fresh.push(updated(*idx, "machine-replacement"));
                    assert!(!super::super::index_needs_machine(&fresh), "{name}: veto");
                }
            }
        }
    }

    /// CPMSO `updates_test.go` "When the update strategy is RollingUpdate": "should implement the
    /// update strategy based on the MachineInfo". Entries that only differ upstream by the error
    /// the mock returns plan the same (errors are the executor's).
    const ROLLING_UPDATE: &str = "
        with no updates required => 0: u:machine-0 | 1: u:machine-1 | 2: u:machine-2 => - => - => -
        with updates required in a single index => 0: u:machine-0 | 1: o:machine-1 | 2: u:machine-2 => 1 => - => -
        with updates required in a single index, but actually the machine cache was stale, and so no creation needed => 0: u:machine-0 | 1: o:machine-1 | 2: u:machine-2 => 1 => - => stale
        with updates required in a single index, and an error occurs => 0: u:machine-0 | 1: o:machine-1 | 2: u:machine-2 => 1 => - => -
        with updates required in a single index, but the replacement machine is pending => 0: u:machine-0 | 1: o:machine-1 p:machine-replacement-1 | 2: u:machine-2 => - => - => requeue
        with updates required in a single index, and the replacement machine is ready => 0: u:machine-0 | 1: o:machine-1 u:machine-replacement-1 | 2: u:machine-2 => - => machine-1 => -
        with updates required in a single index, and the replacement machine is ready, and an error occurs => 0: u:machine-0 | 1: o:machine-1 u:machine-replacement-1 | 2: u:machine-2 => - => machine-1 => -
        with updates required in a single index, and the replacement machine is ready, and the old machine is already deleted => 0: u:machine-0 | 1: ox:machine-1 u:machine-replacement-1 | 2: u:machine-2 => - => - => -
        with updates required in a single index, and the outdated index is not ready => 0: u:machine-0 | 1: n:machine-1 | 2: u:machine-2 => 1 => - => -
        with updates are required in multiple indexes => 0: o:machine-0 | 1: o:machine-1 | 2: u:machine-2 => 0 => - => -
        with updates are required in multiple indexes, but the replacement machine is pending => 0: o:machine-0 p:machine-replacement-0 | 1: o:machine-1 | 2: u:machine-2 => - => - => requeue
        with updates are required in multiple indexes, but the replacement machine is pending, and a later index is not ready => 0: o:machine-0 p:machine-replacement-0 | 1: n:machine-1 | 2: u:machine-2 => - => - => requeue
        with updates are required in multiple indexes, and the replacement machine is ready => 0: o:machine-0 u:machine-replacement-0 | 1: o:machine-1 | 2: u:machine-2 => - => machine-0 => -
        with updates required in multiple indexes, and the replacement machine is ready, and the old machine is already deleted => 0: ox:machine-0 u:machine-replacement-0 | 1: o:machine-1 | 2: u:machine-2 => - => - => -
        with an empty index => 0: u:machine-0 | 1: u:machine-1 | 2: => 2 => - => -
        with a pending machine in an index => 0: u:machine-0 | 1: u:machine-1 | 2: p:machine-replacement-2 => - => - => requeue
        with a missing index, and other indexes needing updates => 0: u:machine-0 | 1: o:machine-1 | 2: => 1 2 => - => -
        with a pending machine in an index, and other indexes needing updates => 0: u:machine-0 | 1: o:machine-1 | 2: p:machine-replacement-2 => 1 => - => requeue
        with a missing index, and other indexes needing updates, and their replacement machines are ready => 0: o:machine-0 u:machine-replacement-0 | 1: o:machine-1 u:machine-replacement-1 | 2: => - => machine-0 machine-1 => -
        with a missing index, and other indexes needing updates, and their replacement machines are ready, and one machine is already deleted => 0: ox:machine-0 u:machine-replacement-0 | 1: o:machine-1 u:machine-replacement-1 | 2: => - => machine-1 => -
        with an extra index, hitting maxSurge => 0: o:machine-0 | 1: o:machine-1 | 2: o:machine-2 | 3: o:machine-3 => - => - => -
        with an extra updated machine in a single index => 0: <u:machine-older-extra-0 >u:machine-0 | 1: u:machine-1 | 2: u:machine-2 => - => machine-older-extra-0 => -
        with extra updated machines in multiple indexes => 0: <u:machine-older-extra-0 >u:machine-0 | 1: <u:machine-older-extra-1 >u:machine-1 | 2: u:machine-2 => - => machine-older-extra-0 machine-older-extra-1 => -
        with an index not starting at zero, and no updates required => 1: u:machine-1 | 2: u:machine-2 | 3: u:machine-3 => - => - => -
        with a working configuration, then a faulty configuration applied, and now rolled back => 0: o:machine-0 n:machine-replacement-0 | 1: o:machine-1 | 2: o:machine-2 => - => machine-replacement-0 => -
        with no updates required, but a machine has been deleted => 0: u:machine-0 | 1: ux:machine-1 | 2: u:machine-2 => 1 => - => -
        with no updates required, but a machine has been deleted, and its replacement is pending => 0: u:machine-0 | 1: ux:machine-1 p:machine-replacement-1 | 2: u:machine-2 => - => - => requeue
        with no updates required, but a machine has been deleted, and its replacement is ready => 0: u:machine-0 | 1: ux:machine-1 u:machine-replacement-1 | 2: u:machine-2 => - => - => -
    ";

    /// CPMSO `updates_test.go` "When the update strategy is OnDelete": "should implement the
    /// update strategy based on the MachineInfo".
    const ON_DELETE: &str = "
        with no updates required => 0: u:machine-0 | 1: u:machine-1 | 2: u:machine-2 => - => - => -
        with updates required in a single index, and the machine is not yet deleted => 0: u:machine-0 | 1: o:machine-1 | 2: u:machine-2 => - => - => -
        with updates required in a single index, and the machine has been deleted, but actually the machine cache was stale, and so no creation needed => 0: u:machine-0 | 1: ox:machine-1 | 2: u:machine-2 => 1 => - => stale
        with updates required in a single index, and the machine has been deleted => 0: u:machine-0 | 1: ox:machine-1 | 2: u:machine-2 => 1 => - => -
        with updates required in a single index, and the machine has been deleted (with no standard machine indexes) => 3: u:machine-3 | 4: ox:machine-4 | 5: u:machine-5 => 4 => - => -
        with updates required in a single index, and the machine has been deleted, and an error occurrs => 0: u:machine-0 | 1: ox:machine-1 | 2: u:machine-2 => 1 => - => -
        with updates required in a single index, and replacement machine is pending => 0: u:machine-0 | 1: ox:machine-1 p:machine-replacement-1 | 2: u:machine-2 => - => - => requeue
        with updates required in a single index, and replacement machine is ready => 0: u:machine-0 | 1: ox:machine-1 u:machine-replacement-1 | 2: u:machine-2 => - => - => -
        with updates required in multiple indexes, and the machines are not yet deleted => 0: o:machine-0 | 1: o:machine-1 | 2: u:machine-2 => - => - => -
        with updates required in a multiple indexes, and machine has been deleted, and an error occurrs => 0: o:machine-0 | 1: ox:machine-1 | 2: u:machine-2 => 1 => - => -
        with updates required in multiple indexes, and a machine has been deleted => 0: o:machine-0 | 1: ox:machine-1 | 2: u:machine-2 => 1 => - => -
        with updates required in multiple indexes, and multiple machines have been deleted => 0: ox:machine-0 | 1: ox:machine-1 | 2: u:machine-2 => 0 1 => - => -
        with updates required in multiple indexes, and a single machine has been deleted, and the replacement machine is pending => 0: o:machine-0 | 1: ox:machine-1 p:machine-replacement-1 | 2: u:machine-2 => - => - => requeue
        with updates required in multiple indexes, and multiple machines have been deleted, and the replacement machines are pending => 0: ox:machine-0 p:machine-replacement-0 | 1: ox:machine-1 p:machine-replacement-1 | 2: u:machine-2 => - => - => requeue
        with updates required in multiple indexes, and a single machine has been deleted, and the replacement machine is ready => 0: o:machine-0 | 1: ox:machine-1 u:machine-replacement-1 | 2: u:machine-2 => - => - => -
        with updates required in multiple indexes, and multiple machines have been deleted, and a replacement machine is ready, and a replacement machine is pending => 0: ox:machine-0 p:machine-replacement-0 | 1: ox:machine-1 u:machine-replacement-1 | 2: u:machine-2 => - => - => requeue
        with updates required in multiple indexes, and multiple machines have been deleted, and all replacement machines are ready => 0: ox:machine-0 u:machine-replacement-0 | 1: ox:machine-1 u:machine-replacement-1 | 2: u:machine-2 => - => - => -
        with an empty index => 0: u:machine-0 | 1: u:machine-1 | 2: => 2 => - => -
        with a pending machine in an index => 0: u:machine-0 | 1: u:machine-1 | 2: p:machine-replacement-2 => - => - => requeue
        with a missing index, and other indexes need updating => 0: u:machine-0 | 1: o:machine-1 | 2: => 2 => - => -
        with a pending machine in an index, and other indexes need updating => 0: u:machine-0 | 1: o:machine-1 | 2: p:machine-replacement-2 => - => - => requeue
        with no updates required, but a Machine has been deleted => 0: u:machine-0 | 1: u:machine-1 | 2: ux:machine-2 => 2 => - => -
    ";

    #[test]
    fn upstream_rolling_update_table() {
        assert_eq!(
            ROLLING_UPDATE
                .lines()
                .filter(|l| !l.trim().is_empty())
                .count(),
            28
        );
        run(Strategy::RollingUpdate, ROLLING_UPDATE);
    }

    #[test]
    fn upstream_on_delete_table() {
        assert_eq!(
            ON_DELETE.lines().filter(|l| !l.trim().is_empty()).count(),
            22
        );
        run(Strategy::OnDelete, ON_DELETE);
    }

    /// Upstream notes for the multi-index rolling case: one create, the next index at capacity.
    #[test]
    fn notes_say_why_an_index_waits() {
        let indexed: BTreeMap<i32, Vec<MachineInfo>> = [
            (0, vec![outdated(updated(0, "machine-0"))]),
            (1, vec![outdated(updated(1, "machine-1"))]),
            (2, vec![updated(2, "machine-2")]),
        ]
        .into_iter()
        .collect();
        let plan = plan_updates(Strategy::RollingUpdate, 3, &indexed, &BTreeSet::new());
        let msgs: Vec<(i32, &str)> = plan.notes.iter().map(|n| (n.index, n.message)).collect();
        assert_eq!(
            msgs,
            [
                (0, note::MACHINE_REQUIRES_UPDATE),
                (0, note::CREATED_REPLACEMENT),
                (1, note::MACHINE_REQUIRES_UPDATE),
                (1, note::NO_CAPACITY_FOR_EXPANSION)
            ]
        );
    }

    /// OCPBUGS-29249 and its cousin: an index never loses its last live machine, whatever the
    /// list order (upstream deletes the outdated machine when the "updated" one is deleting).
    #[test]
    fn bug_index_never_loses_its_only_machine() {
        for order in [false, true] {
            let mut ms = vec![
                outdated(updated(1, "machine-1")),
                MachineInfo {
                    deleting: true,
                    ..updated(1, "machine-replacement-1")
                },
            ];
            if order {
                ms.reverse();
            }
            let indexed: BTreeMap<i32, Vec<MachineInfo>> = [
                (0, vec![updated(0, "machine-0")]),
                (1, ms),
                (2, vec![updated(2, "machine-2")]),
            ]
            .into_iter()
            .collect();
            let plan = plan_updates(Strategy::RollingUpdate, 3, &indexed, &BTreeSet::new());
            assert!(plan.delete.is_empty(), "{plan:?}");
        }
        // A single machine is never deleted, even if outdated and not ready.
        let indexed: BTreeMap<i32, Vec<MachineInfo>> =
            [(0, vec![outdated_non_ready(0, "machine-0")])]
                .into_iter()
                .collect();
        let plan = plan_updates(Strategy::RollingUpdate, 1, &indexed, &BTreeSet::new());
        assert!(plan.delete.is_empty());
        assert_eq!(plan.create, [0]);
    }

    #[test]
    fn held_indexes_get_no_machine() {
        let indexed: BTreeMap<i32, Vec<MachineInfo>> =
            [(0, vec![updated(0, "machine-0")]), (1, vec![]), (2, vec![])]
                .into_iter()
                .collect();
        let held: BTreeSet<i32> = [1].into_iter().collect();
        let plan = plan_updates(Strategy::OnDelete, 3, &indexed, &held);
        assert_eq!(plan.create, [2]);
        let plan = plan_updates(Strategy::RollingUpdate, 3, &indexed, &held);
        assert_eq!(plan.create, [2]);
    }
}
