//! One machine sweep over one vCenter, driven by the per-server driver ([`super::server`]) like
//! the zones: read in a fixed number of bulk reads ([`read`]), plan every machine (pure,
//! `plan::machine`), start the one vCenter change each needs ([`vcenter`]), fold what came of it
//! into each plan (pure, `plan::machine::outcome`), then write the Machines back through
//! [`KubeOps`] ([`write_back`]).
//!
//! Reads per sweep, whatever the number of machines: the recorded tasks (one read, only when
//! some are recorded, and always *before* the inventory, so a clone seen finished is also seen
//! in the inventory), the inventory with the VM properties (one read), and the VM groups of the
//! clusters whose new VMs are about to be powered on (one read, only then). Writes: one task per
//! VM change, and one cluster reconfiguration per cluster and VM group for all its new VMs'
//! joins. The reads and writes happen under the server's write lock (the drive holds it from
//! the start, [`Locking::Whole`]), so a group join is decided on a read no zone reconfiguration
//! of the same cluster can overtake; the drive ends after its writes (the tasks are read by the
//! next sweep), and the Machines are written after the lock is released.
mod data;
mod read;
mod vcenter;
mod write_back;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesOrdered;

use super::execute::Outcome;
use super::kube_ops::KubeOps;
use super::server::{Limits, Locking, Sweep, drive};
use super::views::ServerViews;
use crate::api::machine::Machine;
use crate::plan::failure::Failure;
use crate::plan::machine::observe::{base_input, group_wanted, membership, name_holder, observe};
use crate::plan::machine::outcome::{StepResult, after_vcenter};
use crate::plan::machine::waiting::watched_objects;
use crate::plan::machine::{
    MachinePlan, TaskObs, VcenterTrouble, VmObs, VmStep, plan_machine, tags_to_check,
};
use crate::vcenter::model::task::TaskState;
use crate::vcenter::{Client, MoRef, Wanted};

pub use crate::plan::machine::observe::{IpamObjects, machine_server};
pub use data::{MachineStep, MachineView, SweepInput, SweepOutcome, key};
pub use read::task_ref;
use write_back::write_back;

/// Run one sweep. `client` is the server's client, or why there is none (then machines record
/// the trouble and back off; nothing else changes). `views` holds the server's write lock.
pub async fn sweep<K: KubeOps>(
    views: &ServerViews,
    client: Result<&Client, VcenterTrouble>,
    kube: &K,
    input: SweepInput<'_>,
) -> SweepOutcome {
    let mut out = SweepOutcome::default();
    let client = match client {
        Ok(c) => c,
        Err(t) => {
            let mut plans = Vec::with_capacity(input.machines.len());
            for m in &input.machines {
                plans.push((
                    m,
                    plan_machine(&base_input(m, input.around(), Some(t.clone()))),
                ));
            }
            write_all_back(kube, &input, plans, &mut out).await;
            return out;
        }
    };
    let mut sweep = MachineSweep {
        input: &input,
        plans: Vec::new(),
        vm_paths: BTreeMap::new(),
        results: BTreeMap::new(),
    };
    let limits = Limits {
        max_writes: 1,
        dry_run: input.dry_run,
        locking: Locking::Whole,
    };
    let driven = drive(views, client, &mut sweep, limits).await;
    if input.dry_run
        && let Some(view) = &driven.view
    {
        out.would = driven
            .pending
            .iter()
            .flat_map(|s| s.describe(&view.inventory))
            .collect();
    }
    out.inventory = driven.view.map(|v| v.inventory);
    out.vm_paths = std::mem::take(&mut sweep.vm_paths);
    let MachineSweep { plans, results, .. } = sweep;
    let mut planned = Vec::with_capacity(plans.len());
    for (m, mut plan) in input.machines.iter().zip(plans) {
        let k = key(m);
        let result = results.get(&k);
        if let Some(StepResult::Started { what, .. } | StepResult::Done { what }) = result {
            out.vcenter_writes.push(format!("{k}: {what}"));
        }
        after_vcenter(&mut plan, m.metadata.deletion_timestamp.is_some(), result);
        if let Some(inv) = &out.inventory {
            let (_, vm) = observe(m, input.zones, input.failure_domains, inv);
            out.watch
                .insert(k.clone(), watched_objects(&plan.machine, vm.as_ref()));
        }
        planned.push((m, plan));
    }
    write_all_back(kube, &input, planned, &mut out).await;
    out
}

/// Machines written back at once: each one's writes are its own (its Machine or VSphereVM,
/// its Node, its pods, its claims), and written one after another the API server's round
/// trips of 30 machines came between a vCenter task's end and the next machine's step.
const WRITE_BACK_CONCURRENCY: usize = 32;

async fn write_all_back<K: KubeOps>(
    kube: &K,
    input: &SweepInput<'_>,
    plans: Vec<(&Machine, MachinePlan)>,
    out: &mut SweepOutcome,
) {
    // A plain loop over `FuturesOrdered` rather than `stream::map(closure).buffered`: the
    // closure's lifetimes defeat the `Send` proof of the controller's future.
    let mut plans = plans.into_iter();
    let mut writing = FuturesOrdered::new();
    loop {
        while writing.len() < WRITE_BACK_CONCURRENCY {
            let Some((m, plan)) = plans.next() else { break };
            writing.push_back(write_back(kube, m, input.vsphere_vms, plan, &input.now));
        }
        let Some(written) = writing.next().await else {
            break;
        };
        written.add_to(out);
    }
}

/// A task's state as it concerns one machine's VM: a power-on of several VMs that succeeded
/// but did not power this one on failed, for this machine, with vCenter's reason (it is
/// retried, never reported Running).
fn for_vm(state: &TaskState, vm: Option<&VmObs>) -> TaskState {
    if let TaskState::Success { not_attempted, .. } = state
        && let Some(vm) = vm.and_then(|v| v.moref.as_ref())
        && let Some((_, fault)) = not_attempted.iter().find(|(m, _)| m == vm)
    {
        return TaskState::Error(fault.clone());
    }
    state.clone()
}

/// The machines of one server as a sweep of the per-server driver.
struct MachineSweep<'a, 'i> {
    input: &'a SweepInput<'i>,
    /// Each machine's plan against the last read, in input order.
    plans: Vec<MachinePlan>,
    vm_paths: BTreeMap<String, String>,
    /// Machine key → what its step came to.
    results: BTreeMap<String, StepResult>,
}

impl Sweep for MachineSweep<'_, '_> {
    type View = MachineView;
    type Step = MachineStep;
    const VERIFY_WRITES: bool = false;

    async fn read(
        &self,
        _views: &ServerViews,
        client: &Client,
    ) -> Result<Arc<MachineView>, Failure> {
        read::read_view(self.input, client).await.map(Arc::new)
    }

    /// Plan every machine; the group joins are batched per cluster and group. (A machine drive
    /// ends after its writes, so nothing is ever refused before a plan.)
    fn plan(
        &mut self,
        view: Result<&MachineView, &Failure>,
        _refused: &[(MachineStep, Failure)],
    ) -> Vec<MachineStep> {
        let input = self.input;
        let view = match view {
            Ok(v) => v,
            Err(failure) => {
                let trouble = VcenterTrouble::from(failure);
                self.plans = input
                    .machines
                    .iter()
                    .map(|m| plan_machine(&base_input(m, input.around(), Some(trouble.clone()))))
                    .collect();
                return Vec::new();
            }
        };
        self.plans.clear();
        for m in &input.machines {
            let (placed, vm) = observe(m, input.zones, input.failure_domains, &view.inventory);
            let mut i = base_input(m, input.around(), None);
            i.in_vm_group = group_wanted(&placed, vm.as_ref()).and_then(|(cluster, group)| {
                membership(&view.configs, cluster, group, vm.as_ref()?)
            });
            i.name_holder = name_holder(m, &placed, vm.as_ref(), &view.inventory);
            i.placement = placed.placement;
            i.zone_labels = placed.zone_labels;
            i.placement_pending = placed.pending;
            if let Some(vm) = &vm {
                self.vm_paths.insert(key(m), vm.path.clone());
            }
            if tags_to_check(m, vm.as_ref()) {
                i.attached_tags = vm
                    .as_ref()
                    .and_then(|v| v.moref.as_ref())
                    .and_then(|r| view.tags.get(r))
                    .cloned();
            }
            i.vm = vm;
            i.task = match task_ref(m) {
                None => TaskObs::None,
                Some(t) => match view.tasks.get(&t) {
                    Some(Some(s)) => TaskObs::State(for_vm(s, i.vm.as_ref())),
                    _ => TaskObs::Gone,
                },
            };
            self.plans.push(plan_machine(&i));
        }
        let mut joins: BTreeMap<(MoRef, String), Vec<(String, MoRef)>> = BTreeMap::new();
        let mut power_ons: BTreeMap<MoRef, Vec<(String, MoRef)>> = BTreeMap::new();
        let mut steps = Vec::new();
        for (m, plan) in input.machines.iter().zip(&self.plans) {
            let datacenter = |vm: &MoRef| {
                view.inventory
                    .ancestor(vm, Wanted::Datacenter)
                    .map(|d| d.moref.clone())
            };
            match &plan.vm {
                Some(VmStep::JoinGroup { cluster, group, vm }) => joins
                    .entry((cluster.clone(), group.clone()))
                    .or_default()
                    .push((key(m), vm.clone())),
                Some(VmStep::PowerOn(vm)) if datacenter(vm).is_some() => power_ons
                    .entry(datacenter(vm).unwrap_or_else(|| vm.clone()))
                    .or_default()
                    .push((key(m), vm.clone())),
                Some(step) => steps.push(MachineStep::Vm {
                    machine: key(m),
                    step: step.clone(),
                }),
                None => {}
            }
        }
        let joins = joins
            .into_iter()
            .map(|((cluster, group), members)| MachineStep::Join {
                cluster,
                group,
                members,
            });
        let power_ons = power_ons
            .into_iter()
            .map(|(datacenter, members)| MachineStep::PowerOn {
                datacenter,
                members,
            });
        joins.chain(power_ons).chain(steps).collect()
    }

    fn execute<'a>(
        &'a mut self,
        client: &'a Client,
        view: &'a mut MachineView,
        steps: &'a [MachineStep],
    ) -> impl Future<Output = Outcome<MachineStep>> + Send + 'a {
        vcenter::start(self.input, &mut self.results, client, view, steps)
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use super::*;
    use crate::local::cluster::LocalCluster;
    use crate::local::store::Store;
    use crate::plan::machine::tests::machine;
    use crate::vcenter::{ClientOptions, Credentials, RetryPolicy};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::time::Duration;

    /// A machine's group join and a zone's autoConfigure of the same cluster are serialised: the
    /// machine drive takes the server's write lock before its first read and keeps it until its
    /// last write, so while a zone holds it (to change the cluster's groups and rules) the
    /// machine sweep neither reads nor writes anything.
    #[tokio::test]
    async fn a_machine_sweep_reads_and_writes_only_under_the_server_write_lock() {
        let views = ServerViews::new(Duration::ZERO);
        // Nothing listens there: once the sweep may go, its first read fails at once.
        let options = ClientOptions {
            retry: RetryPolicy::none(),
            ..ClientOptions::default()
        };
        let client = Client::new(
            "http://127.0.0.1:9",
            Credentials::new("u", "p".to_string().into()),
            options,
        )
        .unwrap();
        let now = Time(jiff::Timestamp::UNIX_EPOCH);
        let kube = LocalCluster::new(Store::default(), None, now.clone());
        let machines = vec![machine("m-0")];
        let (zones, fds, pods) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        let input = SweepInput {
            machines: machines.clone(),
            all_machines: &machines,
            vsphere_vms: &BTreeMap::new(),
            zones: &zones,
            failure_domains: &fds,
            nodes: &[],
            pods: &pods,
            secrets: &BTreeMap::new(),
            ipam: &IpamObjects::default(),
            now,
            dry_run: false,
        };

        let zone_writing = views.write_lock(&client).await;
        let mut run = pin!(sweep(&views, Ok(&client), &kube, input));
        let waited = tokio::time::timeout(Duration::from_millis(300), &mut run).await;
        assert!(waited.is_err(), "the machine sweep waits for the lock");
        assert_eq!(
            client.requests_sent(),
            0,
            "nothing read or written meanwhile"
        );

        drop(zone_writing);
        let out = run.await;
        assert!(client.requests_sent() > 0, "it reads once the lock is free");
        assert!(out.inventory.is_none(), "the read failed: {out:?}");
        assert!(out.requeues.contains_key("openshift-machine-api/m-0"));
        let released = tokio::time::timeout(Duration::from_secs(5), views.write_lock(&client));
        assert!(released.await.is_ok(), "the sweep released the lock");
    }

    /// A shared power-on task that did not power this machine's VM on is, for this machine, a
    /// failed task (retried, never Running); for the VMs it did power on it is a success.
    #[test]
    fn a_multi_power_on_fails_only_the_machines_it_did_not_power_on() {
        use crate::plan::machine::VmObs;
        use crate::vcenter::model::fault::Fault;
        let done = TaskState::Success {
            result: None,
            not_attempted: vec![(
                MoRef::new("VirtualMachine", "vm-2"),
                Fault::untyped("no host has capacity"),
            )],
        };
        let vm = |v: &str| VmObs {
            moref: Some(MoRef::new("VirtualMachine", v)),
            ..VmObs::default()
        };
        assert!(matches!(
            for_vm(&done, Some(&vm("vm-1"))),
            TaskState::Success { .. }
        ));
        match for_vm(&done, Some(&vm("vm-2"))) {
            TaskState::Error(f) => assert!(f.to_string().contains("no host has capacity")),
            other => panic!("{other:?}"),
        }
    }
}
