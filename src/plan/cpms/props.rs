//! Property tests over random machine sets, domains, readiness and deletions.
use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::json;

use super::mapping::{self, MappedMachine, map_indexes};
use super::tests::{World, cpms, value_mut};
use super::{machine_value, updates};
use crate::api::control_plane_machine_set::ControlPlaneMachineSetStrategyType as Kind;

const ZONES: [&str; 5] = ["a", "b", "c", "d", "e"];

/// One machine: index, zone, ready, deleting, outdated.
type Spec = (usize, usize, bool, bool, bool);

#[derive(Clone, Debug)]
struct Case {
    replicas: i32,
    listed: Vec<&'static str>,
    machines: Vec<Spec>,
    strategy: Kind,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![Just(3), Just(5)],
        prop::collection::vec(0usize..5, 1..6),
        prop::collection::vec(
            (
                0usize..5,
                0usize..5,
                any::<bool>(),
                any::<bool>(),
                any::<bool>(),
            ),
            0..8,
        ),
        prop_oneof![Just(Kind::RollingUpdate), Just(Kind::OnDelete)],
    )
        .prop_map(|(replicas, listed, machines, strategy)| Case {
            replicas,
            listed: listed.into_iter().map(|i| ZONES[i]).collect(),
            machines: machines
                .into_iter()
                .filter(|m| (m.0 as i32) < replicas)
                .collect(),
            strategy,
        })
}

fn world(c: &Case) -> World {
    let mut cp = cpms(&c.listed, c.strategy);
    cp.spec.replicas = Some(c.replicas);
    let mut w = World::new(cp, &ZONES);
    for (k, (idx, zone, ready, deleting, outdated)) in c.machines.iter().enumerate() {
        let name = format!("ocp-master-m{k}-{idx}");
        w.add(&name, ZONES[*zone]);
        let m = w.machines.last_mut().unwrap();
        if *outdated {
            value_mut(m)["numCPUs"] = json!(2);
        }
        if *deleting {
            m.metadata.deletion_timestamp = Some(w.now.clone());
        }
        if !*ready {
            w.node(&name, false);
        }
    }
    w
}

fn live_indexes(w: &World) -> BTreeSet<i32> {
    w.machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .filter_map(|m| mapping::name_index(m.metadata.name.as_deref()?))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// RollingUpdate never has more than replicas+1 machines and never leaves an index that had
    /// a live machine without one; a created machine sits in its index's mapped domain.
    #[test]
    fn rolling_update_keeps_surge_and_indexes(c in case()) {
        let c = Case { strategy: Kind::RollingUpdate, ..c };
        let mut w = world(&c);
        prop_assume!(w.machines.len() as i32 <= c.replicas + 1);
        for _ in 0..6 {
            let before = live_indexes(&w);
            let p = w.plan();
            for cr in &p.create {
                let d = p.mapping.get(&cr.index).cloned();
                prop_assert_eq!(&cr.domain, &d);
                let ws = &machine_value(&cr.machine)["workspace"];
                let want = serde_json::to_value(&w.domains[d.as_deref().unwrap()].fill.as_ref().unwrap().workspace).unwrap();
                prop_assert_eq!(ws, &want);
            }
            w.apply(&p);
            prop_assert!(w.machines.len() as i32 <= c.replicas + 1, "{} machines", w.machines.len());
            let after = live_indexes(&w);
            prop_assert!(before.is_subset(&after), "lost an index: {:?} -> {:?}", before, after);
            w.settle();
        }
    }

    /// OnDelete never deletes.
    #[test]
    fn on_delete_never_deletes(c in case()) {
        let c = Case { strategy: Kind::OnDelete, ..c };
        let mut w = world(&c);
        for _ in 0..4 {
            let p = w.plan();
            prop_assert!(p.delete.is_empty());
            w.apply(&p);
            w.settle();
        }
    }

    /// The mapping does not depend on the order of machines or listed domains.
    #[test]
    fn mapping_ignores_input_order(c in case(), seed in any::<u64>()) {
        let ms: Vec<MappedMachine> = c.machines.iter().enumerate().map(|(k, (i, z, _, d, _))| MappedMachine {
            name: format!("m{k}-{i}"),
            domain: ZONES[*z].into(),
            deleting: *d,
            created: None,
        }).collect();
        let want = map_indexes(c.replicas, &c.listed, &ms);
        let mut ms2 = ms.clone();
        let mut listed2 = c.listed.clone();
        // A deterministic shuffle from the seed.
        let n = ms2.len().max(1);
        ms2.rotate_left((seed as usize) % n);
        if seed % 2 == 0 { ms2.reverse(); }
        let k = (seed as usize / 3) % listed2.len().max(1);
        listed2.rotate_left(k);
        if seed % 3 == 0 { listed2.reverse(); }
        prop_assert_eq!(map_indexes(c.replicas, &listed2, &ms2), want.clone());
        // Through the whole planner too.
        let w = world(&c);
        let mut w2 = w.clone();
        w2.machines.reverse();
        prop_assert_eq!(w.plan().mapping, w2.plan().mapping);
    }

    /// From any set of ready machines (one per index), applying the plans until nothing changes
    /// leaves every machine in its mapped domain and per-domain counts at most one apart.
    #[test]
    fn convergence_balances_domains(c in case()) {
        let mut seen = BTreeSet::new();
        let machines: Vec<Spec> = c.machines.iter().filter(|m| seen.insert(m.0)).map(|&(i, z, _, _, o)| (i, z, true, false, o)).collect();
        let c = Case { machines, ..c };
        let mut w = world(&c);
        // Under OnDelete the user deletes what the plan says needs deleting, one at a time.
        for _ in 0..12 {
            w.converge(60);
            let p = w.plan();
            let Some(n) = p.notes.iter().find(|n| n.message == updates::note::REQUIRES_DELETE_BEFORE_UPDATE) else {
                break;
            };
            let now = w.now.clone();
            if let Some(m) = w.machines.iter_mut().find(|m| m.metadata.name.as_deref() == Some(n.machine.as_str())) {
                m.metadata.deletion_timestamp = Some(now);
            }
        }
        let p = w.plan();
        prop_assert!(p.create.is_empty() && p.delete.is_empty(), "not converged: {:?}", p.notes);
        prop_assert_eq!(w.machines.len() as i32, c.replicas);
        let listed: BTreeSet<&str> = c.listed.iter().copied().collect();
        let mut counts: BTreeMap<String, usize> = listed.iter().map(|d| (d.to_string(), 0)).collect();
        for m in &w.machines {
            let z = w.zone_of(m);
            let idx = mapping::name_index(m.metadata.name.as_deref().unwrap()).unwrap();
            prop_assert_eq!(Some(&z), p.mapping.get(&idx));
            *counts.get_mut(&z).unwrap() += 1;
        }
        let max = counts.values().max().copied().unwrap_or(0);
        let min = counts.values().min().copied().unwrap_or(0);
        prop_assert!(max - min <= 1, "{:?}", counts);
    }
}

/// The case the real applier's property run found: five replicas over four domains, one index
/// empty and one outdated. The first pass makes two machines; the mapping then rebalances and
/// moves the outdated index to another domain, so its fresh replacement is outdated too.
/// Upstream's rules then neither delete (no updated machine at the index) nor create (surge
/// spent): stuck at six machines. The surplus rule of `updates::deletion_candidate` unsticks it.
#[test]
fn a_replacement_outdated_by_a_rebalance_does_not_stall_the_rollout() {
    let c = Case {
        replicas: 5,
        listed: vec!["a", "c", "b", "e"],
        machines: vec![
            (3, 2, true, false, false),
            (1, 1, true, false, true),
            (0, 1, true, false, false),
            (4, 1, true, false, false),
        ],
        strategy: Kind::RollingUpdate,
    };
    let mut w = world(&c);
    w.converge(60);
    let p = w.plan();
    assert!(
        p.create.is_empty() && p.delete.is_empty(),
        "converged: {:?}",
        p.notes
    );
    assert_eq!(w.machines.len(), 5, "back to the replica count");
}
