//! Local mode as one run: the zones and clusters to a fixed point ([`super::driver`]), then the
//! machines, machine sets and health checks ([`super::machines`]), over one object store; and
//! the verdict — whether everything is done, and if not why, one line per object — decided
//! here, in the report, so the printers only render and the CLI only maps it to an exit code.
use crate::api::conditions::{STATUS_FALSE, STATUS_TRUE};
use std::path::PathBuf;

use super::cluster::LocalCluster;
use super::driver::{self, Options, Report};
use super::machines::{MachineReport, run_machines};
use super::store::Store;
use crate::api::capi_core::CapiObject;
use crate::plan::capi_machine::capi_play;
use crate::plan::capi_machine::status::VM_PROVISIONED;
use crate::plan::machine::deletion::held_by;
use crate::vcenter::session::SessionCache;

/// What a local run did.
#[derive(Debug, Default)]
pub struct LocalReport {
    pub zones: Report,
    pub machines: MachineReport,
    /// Why the run could not go on (the state file could not be written): nothing more was
    /// done after it.
    pub stopped: Option<String>,
}

/// Run everything over `store`. The state file (`state`, unless a dry run) holds each change as
/// it is made, the machines' identities before anything is cloned for them.
pub async fn run(
    mut store: Store,
    state: Option<PathBuf>,
    opts: &Options,
    sessions: &SessionCache,
    progress: &mut dyn FnMut(&str),
) -> (Store, LocalReport) {
    // CAPI's Cluster controller adopts the VSphereClusters first, so they are owned this run.
    super::capi::own_infra_clusters(&mut store);
    let mut report = LocalReport {
        zones: driver::run(&mut store, opts, sessions, progress).await,
        ..LocalReport::default()
    };
    let cluster = LocalCluster::new(store, state.filter(|_| !opts.dry_run), opts.now.clone());
    match cluster.persist() {
        Err(e) => report.stopped = Some(format!("{e}; nothing was done for machines")),
        Ok(()) => {
            report.machines = run_machines(&cluster, opts, sessions, progress).await;
            // A write of the state file that failed mid-run stopped the rounds (each
            // `persist` records its failure); it is the run's verdict, not a lost error.
            let earlier = cluster
                .persist_error
                .lock()
                .map(|e| e.clone())
                .unwrap_or_else(|p| p.into_inner().clone());
            report.stopped = match (earlier, cluster.persist()) {
                (Some(e), _) => Some(e),
                (None, Err(e)) => Some(e.to_string()),
                (None, Ok(())) => None,
            };
        }
    }
    (cluster.into_store(), report)
}

impl LocalReport {
    /// Why the run is not done: one line per zone not ready, machine not running (with what
    /// failed this run), machine set not updated, and any run failure. Empty: exit 0.
    pub fn problems(&self, store: &Store, simulate_nodes: bool) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(s) = &self.stopped {
            out.push(format!("stopped: {s}"));
        }
        for (name, v) in &self.zones.verdicts {
            if let Some((reason, message)) = v.first_problem() {
                out.push(format!("zone {name} is not ready: {reason}: {message}"));
            }
        }
        for (step, e) in &self.zones.failed {
            out.push(format!("refused: {step}: {e}"));
        }
        for f in &self.machines.failed {
            out.push(format!("failed: {f}"));
        }
        out.extend(machines_not_ready(store, &self.machines, simulate_nodes));
        out.extend(capi_not_ready(store, &self.machines));
        out
    }
}

/// Why the Cluster API objects are not all done: one line per Cluster, MachineDeployment or
/// Machine that waits, and per Machine not yet `Provisioned` (as far as local mode takes one:
/// there is no node to find), with why.
fn capi_not_ready(store: &Store, report: &MachineReport) -> Vec<String> {
    let mut lines: Vec<String> = report
        .capi_waits
        .iter()
        .filter(|(k, _)| !k.starts_with("machine "))
        .map(|(k, why)| format!("{k} waits: {why}"))
        .collect();
    for (k, m) in &store.capi_machines {
        let phase = m.status["phase"].as_str().unwrap_or("-");
        if phase == capi_play::phase::PROVISIONED {
            continue;
        }
        let why = capi_machine_why(store, report, k, m)
            .unwrap_or_else(|| "the VM is being provisioned".into());
        lines.push(format!("cluster api machine {k} is {phase}: {why}"));
    }
    lines
}

/// Why a Cluster API machine is not there yet: what local mode's pass waits for, else what
/// failed this run, else its VSphereMachine's `VirtualMachineProvisioned` reason.
pub fn capi_machine_why(
    store: &Store,
    report: &MachineReport,
    k: &str,
    m: &CapiObject,
) -> Option<String> {
    report
        .capi_waits
        .get(&format!("machine {k}"))
        .or_else(|| report.machine_failures.get(&format!("VSphereVM {k}")))
        .cloned()
        .or_else(|| vsphere_machine_reason(store, m))
}

/// The VSphereMachine's `VirtualMachineProvisioned` reason and message, when it is False.
fn vsphere_machine_reason(store: &Store, m: &CapiObject) -> Option<String> {
    let vk = capi_play::infra_machine_ref(m).ok()?;
    let c = store
        .vsphere_machines
        .get(&vk)?
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == VM_PROVISIONED && c.status == STATUS_FALSE)?;
    Some(format!("{}: {}", c.reason, c.message))
}

/// Why the machines are not all done: one line per machine not Running, and per control plane
/// machine set not fully updated and ready.
fn machines_not_ready(store: &Store, report: &MachineReport, simulate_nodes: bool) -> Vec<String> {
    let mut lines = Vec::new();
    for (k, c) in &store.machine_sets {
        let st = c.status.clone().unwrap_or_default();
        let want = c.spec.replicas_or_default();
        let degraded = st
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Degraded" && c.status == STATUS_TRUE);
        if let Some(d) = degraded {
            // Upstream's NoReadyMachines has no message: the reason is all there is to say.
            let mut line = format!("control plane machine set {k} is degraded: {}", d.reason);
            if !d.message.is_empty() {
                line.push_str(&format!(": {}", d.message));
            }
            lines.push(line);
        } else if st.replicas.unwrap_or(0) > want {
            // More machines than replicas: a replacement made, its old machine not gone yet.
            lines.push(format!(
                "control plane machine set {k}: {} machines for {want} replicas: an old machine is still being deleted (see its line)",
                st.replicas.unwrap_or(0)
            ));
        } else if st.updated_replicas.unwrap_or(0) != want || st.ready_replicas.unwrap_or(0) != want
        {
            lines.push(format!(
                "control plane machine set {k}: {} of {want} replicas ready and updated",
                st.updated_replicas
                    .unwrap_or(0)
                    .min(st.ready_replicas.unwrap_or(0))
            ));
        }
    }
    for (k, m) in &store.machines {
        let st = m.status.as_ref();
        let phase = st.and_then(|s| s.phase.as_deref()).unwrap_or("-");
        let why = if m.metadata.deletion_timestamp.is_some() {
            format!(
                "machine {k} is being deleted: {}{}",
                held_by(m),
                local_advice(store, m)
            )
        } else {
            match phase {
                "Running" if !report.machine_failures.contains_key(k) => continue,
                "Running" => format!("machine {k} is Running"),
                "Failed" => format!(
                    "machine {k} is Failed: {}: {}",
                    st.and_then(|s| s.error_reason.clone()).unwrap_or_default(),
                    st.and_then(|s| s.error_message.clone()).unwrap_or_default()
                ),
                "Provisioned" if !simulate_nodes => {
                    format!(
                        "machine {k} is Provisioned: its node has not joined (pass --simulate-nodes to register one)"
                    )
                }
                other => format!("machine {k} is {other}"),
            }
        };
        // What failed this run, so no machine is left at "is -" without a reason.
        match report.machine_failures.get(k) {
            Some(failed) => lines.push(format!("{why}: {failed}")),
            None => lines.push(why),
        }
    }
    lines
}

/// What to do about a held deletion in local mode, where no hook owner runs (no etcd operator),
/// and, for a control plane machine set's Machine, where its replacement stands. The set
/// replaces a deleted control plane machine in the same index, one index at a time (seed 004),
/// and the etcd operator removes the quorum guard of the machine whose replacement has joined —
/// so the advice names which hook to remove now, and says to wait where removing it would lose
/// an etcd member before a new one joins.
fn local_advice(store: &Store, m: &crate::api::machine::Machine) -> String {
    let (pre_drain, pre_terminate) = m.hooks();
    let hook = pre_drain.first().or(pre_terminate.first());
    let name = m.metadata.name.as_deref().unwrap_or_default();
    let remove =
        |h: &crate::api::machine::LifecycleHook| format!("--remove-hook machine/{name}:{}", h.name);
    if !crate::plan::health::remediation::cpms_owned(m) {
        return hook.map_or_else(String::new, |h| {
            format!(
                "; local mode plays no hook owner: remove the hook from the Machine's manifest (or {})",
                remove(h)
            )
        });
    }
    let Some(mine) = cpms_index(m) else {
        return String::new();
    };
    let ns = m.metadata.namespace.as_deref();
    let set_machines = || {
        store.machines.values().filter(move |o| {
            o.metadata.namespace.as_deref() == ns && crate::plan::health::remediation::cpms_owned(o)
        })
    };
    let live = |i: u32| {
        set_machines().find(|o| o.metadata.deletion_timestamp.is_none() && cpms_index(o) == Some(i))
    };
    if let Some(r) = live(mine) {
        let phase = r
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("-");
        let rname = r.metadata.name.as_deref().unwrap_or_default();
        return match hook {
            Some(h) if phase == "Running" => format!(
                "; its replacement {rname} (index {mine}) is Running: local mode plays no hook owner, so remove the hook as its owner would now: {}",
                remove(h)
            ),
            Some(_) => format!(
                "; its replacement {rname} (index {mine}) is {phase}: remove the hook once it is Running"
            ),
            None => format!("; its replacement {rname} (index {mine}) is {phase}"),
        };
    }
    // Another index in flight: a replacement there and its old machine not gone yet.
    let busy = set_machines()
        .filter(|o| o.metadata.deletion_timestamp.is_some())
        .filter_map(cpms_index)
        .filter(|i| *i != mine)
        .find(|i| live(*i).is_some());
    let mut out = match busy {
        Some(i) => format!(
            "; no replacement for index {mine} yet: the control plane machine set replaces one index at a time, and index {i}'s old machine goes first"
        ),
        None => format!("; no replacement for index {mine} yet"),
    };
    if hook.is_some() {
        out.push_str(
            " (keep this hook until the replacement is Running: removing it now loses an etcd member before a new one joins)",
        );
    }
    out
}

/// A control plane machine set's index of a machine: the number after the last `-` of its name.
fn cpms_index(m: &crate::api::machine::Machine) -> Option<u32> {
    m.metadata
        .name
        .as_deref()
        .and_then(|n| n.rsplit_once('-'))
        .and_then(|(_, i)| i.parse().ok())
}
