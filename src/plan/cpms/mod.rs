//! The control plane machine set planner (issue 8): pure. Inputs — the CPMS, the machines, the
//! failure domains (VSphereDeploymentZones and the workspace each implies), node readiness and
//! `now` — in; a plan — machines to create and delete, the CPMS status, events, a requeue — out.
//! The algorithm is CPMSO's (reference §2) with its known bugs fixed; see each module.
//!
//! Contract with the shells:
//! * run [`plan`] on cached reads; apply `status`; delete `delete`; for each `create`, first re-read
//!   the machines **uncached** (a direct API read in a cluster, the store in local mode) and call
//!   [`confirm_create`]: create only if it says the index still needs a machine (OCPBUGS-4297,
//!   OCPBUGS-7516: a stale cache must never make a second replacement);
//! * add the CPMS as controller owner of `adopt` (Active only);
//! * record `events`; come back after `requeue` if nothing else wakes the controller (Machine,
//!   Node and zone changes should).
//!
//! Failure domains that cannot take new machines:
//! * a listed name with no VSphereDeploymentZone: Degraded `InvalidSpec`, nothing is touched;
//! * `controlPlane: false`: the domain leaves the mapping, so its machines are outdated and the
//!   rollout moves them out, one index at a time, old machine deleted only once its replacement
//!   is ready;
//! * not ready (or its workspace does not resolve): the domain stays in the mapping, so machines
//!   there stay (a passing vCenter problem moves nothing), but no machine is created there until
//!   it is ready again. `FailureDomainsUsable=False` says which domains and why.
pub mod domains;
pub mod mapping;
pub mod naming;
pub mod spec;
pub mod status;
pub mod updates;

#[cfg(test)]
mod props;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::ObjectMeta;
use serde_json::Value;

use crate::api::conditions::{STATUS_FALSE, STATUS_TRUE, cpms as c};
use crate::api::control_plane_machine_set::{
    ControlPlaneMachineSet, ControlPlaneMachineSetState, ControlPlaneMachineSetStatus,
    ControlPlaneMachineSetStrategyType as Strategy,
};
use crate::api::machine::{Machine, ProviderSpec, phase};
use crate::api::machine_status::event;
use crate::plan::placement::ZoneFill;
use crate::plan::selector;

use mapping::{MappedMachine, map_indexes, name_index};
use status::{Cond, Counters};
pub use updates::{MachineInfo, Note, UpdatePlan};

/// How long a Running machine whose node went NotReady still counts as ready (OCPBUGS-20061).
pub const NODE_NOT_READY_GRACE: Duration = Duration::from_secs(20 * 60);
/// Come back this soon while waiting for a machine to become ready (upstream's 5s).
pub const WAIT_REQUEUE: Duration = Duration::from_secs(5);
/// The template path, for messages.
pub const TEMPLATE_PATH: &str = "spec.template.machines_v1beta1_machine_openshift_io";

/// A failure domain (VSphereDeploymentZone) as the planner sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DomainState {
    /// The zone exists.
    pub exists: bool,
    /// `status.ready`.
    pub ready: bool,
    /// `spec.controlPlane` (default true).
    pub control_plane: bool,
    /// The workspace and networks it implies (`plan::placement::zone_fill`); None when they do
    /// not resolve.
    pub fill: Option<ZoneFill>,
}

/// A Node as the planner sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeState {
    /// `Ready=True`.
    pub ready: bool,
    /// When `Ready` last changed (for the NotReady grace).
    pub ready_transition: Option<Time>,
    /// Carries `node-role.kubernetes.io/master` or `/control-plane`.
    pub control_plane: bool,
}

/// Everything a pass reads.
#[derive(Clone, Debug)]
pub struct CpmsInput<'a> {
    pub cpms: &'a ControlPlaneMachineSet,
    /// Machines in the namespace (those the selector picks are used).
    pub machines: &'a [Machine],
    /// Zone name → state; listed names missing here do not exist.
    pub domains: &'a BTreeMap<String, DomainState>,
    /// Node name → state.
    pub nodes: &'a BTreeMap<String, NodeState>,
    pub now: &'a Time,
    /// Randomness for machine names.
    pub seed: u64,
    /// Index → the name of a machine of this set whose VM is still in vCenter (found by the
    /// identity it carries, [`naming::recovered_names`]) though the Machine is gone: a new
    /// machine for that index takes that name, so the machine controller adopts the VM instead
    /// of cloning a second control plane (local mode after a lost or skipped state file).
    pub recovered: &'a BTreeMap<i32, String>,
}

/// A machine to create.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineCreate {
    pub index: i32,
    /// Its failure domain (None: the template's own placement, no domains listed).
    pub domain: Option<String>,
    /// The machine it replaces, if the index has one.
    pub replaces: Option<String>,
    pub machine: Machine,
}

/// A machine to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineDelete {
    pub index: i32,
    pub domain: Option<String>,
    pub name: String,
}

/// An event on the CPMS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpmsEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// The plan of one pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpmsPlan {
    pub status: ControlPlaneMachineSetStatus,
    pub create: Vec<MachineCreate>,
    pub delete: Vec<MachineDelete>,
    /// Machines to take ownership of (no controller owner yet).
    pub adopt: Vec<String>,
    pub events: Vec<CpmsEvent>,
    pub requeue: Option<Duration>,
    /// The index → domain mapping used.
    pub mapping: BTreeMap<i32, String>,
    /// Why indexes wait (upstream's log lines).
    pub notes: Vec<Note>,
    /// The Degraded reason when the pass refused to act.
    pub refused: Option<&'static str>,
}

/// What a pass observed.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    pub mapping: BTreeMap<i32, String>,
    pub indexed: BTreeMap<i32, Vec<MachineInfo>>,
    /// Machines whose index could not be found.
    pub unindexed: Vec<String>,
    /// The soonest end of a NotReady grace.
    pub grace_ends: Option<Duration>,
}

fn template_value(cpms: &ControlPlaneMachineSet) -> Option<&Value> {
    cpms.spec
        .template
        .machines_v1beta1_machine_openshift_io
        .as_ref()?
        .spec
        .provider_spec
        .as_ref()?
        .value
        .as_ref()
}

fn machine_value(m: &Machine) -> Value {
    m.spec
        .provider_spec
        .as_ref()
        .and_then(|p| p.value.clone())
        .unwrap_or(Value::Null)
}

fn name_of(m: &Machine) -> String {
    m.metadata.name.clone().unwrap_or_default()
}

/// The machines the CPMS selects.
pub fn selected<'m>(cpms: &ControlPlaneMachineSet, machines: &'m [Machine]) -> Vec<&'m Machine> {
    machines
        .iter()
        .filter(|m| m.metadata.namespace == cpms.metadata.namespace)
        .filter(|m| {
            selector::matches(
                &cpms.spec.selector,
                m.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()),
            )
        })
        .collect()
}

/// Listed domains that can hold control plane machines (in the mapping).
fn mapped_domains<'d>(input: &'d CpmsInput<'_>) -> Vec<&'d str> {
    input
        .cpms
        .spec
        .vsphere_failure_domains()
        .into_iter()
        .filter(|d| {
            input
                .domains
                .get(*d)
                .is_some_and(|s| s.exists && s.control_plane)
        })
        .collect()
}

fn fills(input: &CpmsInput<'_>) -> BTreeMap<String, ZoneFill> {
    input
        .domains
        .iter()
        .filter_map(|(n, d)| d.fill.clone().map(|f| (n.clone(), f)))
        .collect()
}

/// The provider spec an index's machine should have; None when its domain does not resolve.
fn desired(input: &CpmsInput<'_>, mapping: &BTreeMap<i32, String>, index: i32) -> Option<Value> {
    let template = template_value(input.cpms)?;
    if input.cpms.spec.vsphere_failure_domains().is_empty() {
        return Some(template.clone());
    }
    let domain = mapping.get(&index)?;
    let fill = input.domains.get(domain)?.fill.as_ref()?;
    Some(spec::inject(template, fill))
}

/// Ready (reference §2) and, within the NotReady grace, how long it still counts.
fn readiness(
    m: &Machine,
    nodes: &BTreeMap<String, NodeState>,
    now: &Time,
) -> (bool, Option<Duration>) {
    let Some(node) = m
        .status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .and_then(|r| r.name.as_ref())
        .and_then(|n| nodes.get(n))
    else {
        return (false, None);
    };
    match m.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some(phase::RUNNING) if node.ready => (true, None),
        Some(phase::RUNNING) => {
            let Some(since) = &node.ready_transition else {
                return (false, None);
            };
            let elapsed = now.0.as_second() - since.0.as_second();
            let grace = NODE_NOT_READY_GRACE.as_secs() as i64;
            if (0..grace).contains(&elapsed) {
                (
                    true,
                    Some(Duration::from_secs((grace - elapsed) as u64 + 1)),
                )
            } else {
                (false, None)
            }
        }
        Some(phase::DELETING) => (node.ready, None),
        _ => (false, None),
    }
}

/// Indexes, mapping and per-machine information for a set of machines.
pub fn observe(input: &CpmsInput<'_>, machines: &[Machine]) -> Observed {
    let cpms = input.cpms;
    let replicas = cpms.spec.replicas_or_default();
    let ms = selected(cpms, machines);
    let fills = fills(input);
    let domain_of: Vec<String> = ms
        .iter()
        .map(|m| spec::domain_of(&machine_value(m), &fills))
        .collect();
    let mapped: Vec<MappedMachine> = ms
        .iter()
        .zip(&domain_of)
        .map(|(m, d)| MappedMachine {
            name: name_of(m),
            domain: d.clone(),
            deleting: m.metadata.deletion_timestamp.is_some(),
            created: m.metadata.creation_timestamp.clone(),
        })
        .collect();
    let listed = input.cpms.spec.vsphere_failure_domains();
    let mapping = if listed.is_empty() {
        BTreeMap::new()
    } else {
        map_indexes(replicas, &mapped_domains(input), &mapped)
    };
    let named: BTreeSet<i32> = ms.iter().filter_map(|m| name_index(&name_of(m))).collect();
    let mut out = Observed {
        mapping: mapping.clone(),
        ..Observed::default()
    };
    for i in mapping.keys() {
        out.indexed.entry(*i).or_default();
    }
    for (m, dom) in ms.iter().zip(&domain_of) {
        let name = name_of(m);
        let index = name_index(&name).or_else(|| {
            let with: Vec<i32> = mapping
                .iter()
                .filter(|(_, d)| *d == dom)
                .map(|(i, _)| *i)
                .collect();
            with.iter()
                .find(|i| !named.contains(i))
                .or(with.first())
                .copied()
        });
        let Some(index) = index else {
            out.unindexed.push(name);
            continue;
        };
        let (ready, grace) = readiness(m, input.nodes, input.now);
        if let Some(g) = grace {
            out.grace_ends = Some(out.grace_ends.map_or(g, |o| o.min(g)));
        }
        let diff = desired(input, &mapping, index)
            .map(|d| spec::diff(&d, &machine_value(m)))
            .unwrap_or_default();
        out.indexed.entry(index).or_default().push(MachineInfo {
            name,
            index,
            ready,
            needs_update: !diff.is_empty(),
            deleting: m.metadata.deletion_timestamp.is_some(),
            created: m.metadata.creation_timestamp.clone(),
            error_message: m.status.as_ref().and_then(|s| s.error_message.clone()),
            diff,
        });
    }
    let mut i = 0;
    while (out.indexed.len() as i32) < replicas {
        out.indexed.entry(i).or_default();
        i += 1;
    }
    out
}

/// From a fresh (uncached) read of one index: true when no up-to-date machine that is not being
/// deleted sits there, so creating one is still right.
pub fn index_needs_machine(fresh: &[MachineInfo]) -> bool {
    !fresh.iter().any(|m| !m.needs_update && !m.deleting)
}

/// The shell's check before creating: re-read the machines uncached and ask whether the index
/// still needs a machine.
pub fn confirm_create(input: &CpmsInput<'_>, fresh: &[Machine], create: &MachineCreate) -> bool {
    let obs = observe(input, fresh);
    index_needs_machine(obs.indexed.get(&create.index).map_or(&[], Vec::as_slice))
}

/// What is wrong with the spec, as (field, message).
fn spec_problems(input: &CpmsInput<'_>) -> Vec<(String, String)> {
    let spec = &input.cpms.spec;
    let mut out = Vec::new();
    let replicas = spec.replicas_or_default();
    if replicas != 3 && replicas != 5 {
        out.push((
            "spec.replicas".into(),
            format!("must be 3 or 5, not {replicas}"),
        ));
    }
    let Some(t) = spec.template.machines_v1beta1_machine_openshift_io.as_ref() else {
        out.push((TEMPLATE_PATH.into(), "required".into()));
        return out;
    };
    if !selector::matches(&spec.selector, &t.metadata.labels) {
        out.push((
            format!("{TEMPLATE_PATH}.metadata.labels"),
            "must match spec.selector".into(),
        ));
    }
    if template_value(input.cpms).is_none() {
        out.push((
            format!("{TEMPLATE_PATH}.spec.providerSpec.value"),
            "required".into(),
        ));
    }
    if let Some(fd) = &t.failure_domains {
        let field = format!("{TEMPLATE_PATH}.failureDomains");
        if !fd.platform.is_empty() && fd.platform != "VSphere" {
            out.push((
                format!("{field}.platform"),
                format!("{:?} is not supported, only VSphere", fd.platform),
            ));
        } else if fd.vsphere.as_ref().is_none_or(Vec::is_empty) && fd.platform == "VSphere" {
            out.push((
                format!("{field}.vsphere"),
                "must list at least one failure domain".into(),
            ));
        }
    }
    let listed = spec.vsphere_failure_domains();
    for (i, name) in listed.iter().enumerate() {
        if !input.domains.get(*name).is_some_and(|d| d.exists) {
            out.push((
                format!("{TEMPLATE_PATH}.failureDomains.vsphere[{i}].name"),
                format!("VSphereDeploymentZone {name:?} not found"),
            ));
        }
    }
    if !listed.is_empty() && out.is_empty() && mapped_domains(input).is_empty() {
        out.push((
            format!("{TEMPLATE_PATH}.failureDomains.vsphere"),
            "no listed failure domain accepts control plane machines (controlPlane: false)".into(),
        ));
    }
    out
}

/// Listed domains that cannot take new machines, with why.
fn unusable_domains(input: &CpmsInput<'_>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    input
        .cpms
        .spec
        .vsphere_failure_domains()
        .into_iter()
        .filter(|d| seen.insert(*d))
        .filter_map(|d| {
            let s = input.domains.get(d)?;
            if !s.exists {
                None
            } else if !s.control_plane {
                Some(format!(
                    "{d}: controlPlane is false, its machines are moved out by the rollout"
                ))
            } else if !s.ready || s.fill.is_none() {
                Some(format!(
                    "{d}: not ready, its machines stay but no new machine is created there"
                ))
            } else {
                None
            }
        })
        .collect()
}

/// The first refusal gate that holds (reference §2), as (reason, message).
fn gate(input: &CpmsInput<'_>, obs: &Observed, n: Counters) -> Option<(&'static str, String)> {
    let problems = spec_problems(input);
    if !problems.is_empty() {
        let msg = problems
            .iter()
            .map(|(f, m)| format!("{f}: {m}"))
            .collect::<Vec<_>>()
            .join("; ");
        return Some((status::INVALID_SPEC, msg));
    }
    if !obs.unindexed.is_empty() {
        return Some((
            status::UNINDEXED_MACHINES,
            format!(
                "Could not determine the index of machine(s) {} from their name or failure domain",
                obs.unindexed.join(", ")
            ),
        ));
    }
    let any_machine = obs.indexed.values().any(|v| !v.is_empty());
    if any_machine && n.ready == 0 {
        return Some((
            c::NO_READY_MACHINES,
            "No ready control plane machines found".into(),
        ));
    }
    let node_names: BTreeSet<String> = selected(input.cpms, input.machines)
        .iter()
        .filter_map(|m| m.status.as_ref()?.node_ref.as_ref()?.name.clone())
        .collect();
    let unmanaged: Vec<&String> = input
        .nodes
        .iter()
        .filter(|(name, s)| s.control_plane && !node_names.contains(*name))
        .map(|(name, _)| name)
        .collect();
    if !unmanaged.is_empty() {
        return Some((
            c::UNMANAGED_NODES,
            format!("Found {} unmanaged node(s)", unmanaged.len()),
        ));
    }
    let replicas = input.cpms.spec.replicas_or_default();
    let indexes = obs.indexed.len() as i32;
    if indexes > replicas {
        return Some((
            c::EXCESS_INDEXES,
            format!("Observed {} index(es) in excess", indexes - replicas),
        ));
    }
    if input.cpms.spec.strategy_or_default() == Strategy::OnDelete {
        for (i, ms) in &obs.indexed {
            let updated = ms.iter().filter(|m| m.updated()).count();
            if updated > 1 {
                return Some((
                    c::EXCESS_UPDATED_REPLICAS,
                    format!(
                        "Observed {} updated machine(s) in excess for index {i}",
                        updated - 1
                    ),
                ));
            }
        }
    }
    let failed: usize = obs
        .indexed
        .values()
        .filter(|ms| ms.iter().any(|m| m.needs_replacement()))
        .map(|ms| {
            ms.iter()
                .filter(|m| {
                    m.pending() && m.error_message.as_deref().is_some_and(|e| !e.is_empty())
                })
                .count()
        })
        .sum();
    if failed > 0 {
        return Some((
            c::FAILED_REPLACEMENT,
            format!("Observed {failed} replacement machine(s) in error state"),
        ));
    }
    None
}

/// The controller owner reference a set puts on its machines.
pub fn owner_ref(cpms: &ControlPlaneMachineSet) -> OwnerReference {
    OwnerReference {
        api_version: "machine.openshift.io/v1".into(),
        kind: "ControlPlaneMachineSet".into(),
        name: cpms.metadata.name.clone().unwrap_or_default(),
        uid: cpms.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn controller_uid(m: &Machine) -> Option<&str> {
    m.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// The Machine to create for an index.
fn new_machine(input: &CpmsInput<'_>, name: String, provider: Value) -> Machine {
    let cpms = input.cpms;
    let t = cpms
        .spec
        .template
        .machines_v1beta1_machine_openshift_io
        .clone()
        .unwrap_or_default();
    let mut spec = t.spec;
    spec.provider_spec = Some(ProviderSpec {
        value: Some(provider),
    });
    let mut m = Machine::new(&name, spec);
    m.metadata = ObjectMeta {
        name: Some(name),
        namespace: cpms.metadata.namespace.clone(),
        labels: Some(t.metadata.labels),
        annotations: t.metadata.annotations,
        owner_references: Some(vec![owner_ref(cpms)]),
        ..ObjectMeta::default()
    };
    m
}

fn where_(domain: &Option<String>) -> String {
    domain.as_ref().map_or_else(
        || "the template's placement".into(),
        |d| format!("failure domain {d}"),
    )
}

/// Plans one pass.
pub fn plan(input: &CpmsInput<'_>) -> CpmsPlan {
    let cpms = input.cpms;
    let generation = cpms.metadata.generation;
    let obs = observe(input, input.machines);
    let n = status::count(&obs.indexed);
    let replicas = cpms.spec.replicas_or_default();
    let mut conds: Vec<Cond> = status::conditions(n, replicas);
    if !cpms.spec.vsphere_failure_domains().is_empty() {
        let bad = unusable_domains(input);
        conds.push(if bad.is_empty() {
            Cond::new(
                status::FAILURE_DOMAINS_USABLE,
                STATUS_TRUE,
                c::AS_EXPECTED,
                "",
            )
        } else {
            Cond::new(
                status::FAILURE_DOMAINS_USABLE,
                STATUS_FALSE,
                status::UNUSABLE_FAILURE_DOMAINS,
                bad.join("; "),
            )
        });
    }
    let mut out = CpmsPlan {
        mapping: obs.mapping.clone(),
        requeue: obs.grace_ends,
        ..CpmsPlan::default()
    };
    let active = cpms.spec.state_or_default() == ControlPlaneMachineSetState::Active;
    if active {
        if let Some((reason, message)) = gate(input, &obs, n) {
            out.events.push(CpmsEvent {
                warning: true,
                reason,
                message: message.clone(),
            });
            conds.extend(status::refusal(reason, message));
            out.refused = Some(reason);
        } else {
            act(input, &obs, &mut out, &mut conds);
        }
    }
    let mut conditions = cpms
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    status::apply(&mut conditions, &conds, generation, input.now);
    out.status = ControlPlaneMachineSetStatus {
        conditions: Some(conditions),
        observed_generation: generation,
        replicas: Some(n.replicas),
        ready_replicas: Some(n.ready),
        updated_replicas: Some(n.updated),
        unavailable_replicas: Some(n.unavailable),
    };
    out
}

/// The Active pass past the gates: adoption, then the strategy.
fn act(input: &CpmsInput<'_>, obs: &Observed, out: &mut CpmsPlan, conds: &mut Vec<Cond>) {
    let cpms = input.cpms;
    let uid = cpms.metadata.uid.as_deref().unwrap_or_default();
    let ms = selected(cpms, input.machines);
    let owned_elsewhere = ms
        .iter()
        .any(|m| controller_uid(m).is_some_and(|u| u != uid));
    out.adopt = ms
        .iter()
        .filter(|m| controller_uid(m).is_none())
        .map(|m| name_of(m))
        .collect();
    if owned_elsewhere {
        conds.push(Cond::new(
            c::DEGRADED,
            STATUS_TRUE,
            c::MACHINES_ALREADY_OWNED,
            "Observed already owned machine(s) in target machines",
        ));
    }
    let listed = !cpms.spec.vsphere_failure_domains().is_empty();
    let domain_at = |i: i32| -> Option<String> { obs.mapping.get(&i).cloned() };
    let held: BTreeSet<i32> = if listed {
        obs.indexed
            .keys()
            .copied()
            .filter(|i| {
                domain_at(*i)
                    .and_then(|d| input.domains.get(&d))
                    .is_none_or(|d| !d.ready || d.fill.is_none())
            })
            .collect()
    } else {
        BTreeSet::new()
    };
    let up = updates::plan_updates(
        cpms.spec.strategy_or_default(),
        cpms.spec.replicas_or_default(),
        &obs.indexed,
        &held,
    );
    if up.requeue {
        out.requeue = Some(out.requeue.map_or(WAIT_REQUEUE, |r| r.min(WAIT_REQUEUE)));
    }
    for (index, name) in &up.delete {
        let domain = domain_at(*index);
        let by = obs
            .indexed
            .get(index)
            .into_iter()
            .flatten()
            .find(|m| m.updated() && !m.deleting && m.name != *name)
            .map(|m| format!(", replaced by {}", m.name))
            .unwrap_or_default();
        out.events.push(CpmsEvent {
            warning: false,
            reason: event::DELETE,
            message: format!(
                "Deleting machine {name} of index {index} in {}{by}",
                where_(&domain)
            ),
        });
        out.delete.push(MachineDelete {
            index: *index,
            domain,
            name: name.clone(),
        });
    }
    let prefix = naming::prefix(&cpms.spec);
    let mut taken: BTreeSet<String> = input.machines.iter().map(name_of).collect();
    for (k, index) in up.create.iter().enumerate() {
        let domain = if listed { domain_at(*index) } else { None };
        let Some(provider) = desired(input, &obs.mapping, *index) else {
            continue;
        };
        let seed = input
            .seed
            .wrapping_add((k as u64).wrapping_mul(0x1000_0001));
        let recovered = input
            .recovered
            .get(index)
            .filter(|n| !taken.contains(*n))
            .cloned();
        let adopts = recovered.is_some();
        let name = recovered
            .unwrap_or_else(|| naming::fresh_name(&prefix, seed, *index, &|n| taken.contains(n)));
        taken.insert(name.clone());
        let replaces = obs
            .indexed
            .get(index)
            .into_iter()
            .flatten()
            .find(|m| m.needs_replacement())
            .map(|m| m.name.clone());
        let mut why = replaces
            .as_ref()
            .map(|r| format!(", replacing {r}"))
            .unwrap_or_default();
        if adopts {
            why.push_str(
                ", named after the VM of that name already in vCenter (adopted, not cloned again)",
            );
        }
        out.events.push(CpmsEvent {
            warning: false,
            reason: event::CREATE,
            message: format!(
                "Creating machine {name} for index {index} in {}{why}",
                where_(&domain)
            ),
        });
        out.create.push(MachineCreate {
            index: *index,
            domain,
            replaces,
            machine: new_machine(input, name, provider),
        });
    }
    out.notes = up.notes;
}

#[cfg(test)]
pub(crate) mod tests;
