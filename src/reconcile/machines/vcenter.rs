//! The sweep's only vCenter writes: each machine's one step (clone, power on or off, destroy)
//! and, per cluster and VM group, one reconfiguration adding the new VMs of its machines. What
//! each came to is handed back as a [`StepResult`]; deciding what it means for the machine is
//! `plan::machine::outcome`'s.
use std::collections::BTreeMap;

use futures::StreamExt;
use futures::stream::FuturesOrdered;

use super::data::{MachineStep, MachineView, SweepInput, key};
use super::read::device_facts;
use crate::plan::capi_machine::actuated::guest_metadata_keys;
use crate::plan::failure::Failure;
use crate::plan::machine::VmStep;
use crate::plan::machine::devices::{DeviceChanges, DeviceError, DeviceFacts, device_changes};
use crate::plan::machine::ipam::{NETWORK_KARGS_KEY, pool_addresses};
use crate::plan::machine::outcome::StepResult;
use crate::plan::machine::user_data::{UserData, extra_config};
use crate::plan::placement::Placement;
use crate::reconcile::execute::Outcome;
use crate::vcenter::model::cluster::{ClusterGroup, GroupChange};
use crate::vcenter::model::inventory::MACHINE_IDENTITY_KEY;
use crate::vcenter::model::vm::CloneSpec;
use crate::vcenter::{Client, MoRef};

/// Start every step; `results` gets what each machine's step came to.
pub async fn start(
    input: &SweepInput<'_>,
    results: &mut BTreeMap<String, StepResult>,
    client: &Client,
    view: &MachineView,
    steps: &[MachineStep],
) -> Outcome<MachineStep> {
    let mut outcome = Outcome::default();
    let namespaces: BTreeMap<String, String> = input
        .machines
        .iter()
        .map(|m| (key(m), m.metadata.namespace.clone().unwrap_or_default()))
        .collect();
    // Group joins first: one reconfiguration per cluster and group.
    for step in steps {
        let MachineStep::Join {
            cluster,
            group,
            members,
        } = step
        else {
            continue;
        };
        let vms: Vec<MoRef> = members.iter().map(|(_, vm)| vm.clone()).collect();
        let result = join_group(client, view, cluster, group, &vms).await;
        for (k, _) in members {
            let result = result.clone().map(|task| StepResult::Started {
                task,
                what: format!(
                    "add to VM group {group} of {}",
                    view.inventory.describe(cluster)
                ),
            });
            record(&mut outcome, results, step, k, result);
        }
    }
    // Power-ons next: one task per datacenter for all its VMs.
    for step in steps {
        let MachineStep::PowerOn {
            datacenter,
            members,
        } = step
        else {
            continue;
        };
        let vms: Vec<MoRef> = members.iter().map(|(_, vm)| vm.clone()).collect();
        let what = format!(
            "power on with {} VM(s) of {}",
            vms.len(),
            view.inventory.describe(datacenter)
        );
        let result = client
            .power_on_multi(datacenter, &vms)
            .await
            .map_err(|e| Failure::vcenter(Some(&what), e));
        for (k, _) in members {
            let result = result.clone().map(|task| StepResult::Started {
                task: task.task,
                what: what.clone(),
            });
            record(&mut outcome, results, step, k, result);
        }
    }
    let clones: Vec<&Placement> = steps
        .iter()
        .filter_map(|s| match s {
            MachineStep::Vm {
                step: VmStep::Clone { placement, .. },
                ..
            } => Some(placement.as_ref()),
            _ => None,
        })
        .collect();
    let facts = device_facts(client, &clones).await;
    let macs = metadata_macs(client, steps).await;
    // Each machine's step is its own VM's: started VM_STEP_CONCURRENCY at a time (one after
    // another, 30 power-offs cost 30 round trips before the first machine's next step).
    let ctx = VmStepContext {
        input,
        namespaces: &namespaces,
        client,
        view,
        facts: &facts,
        macs: &macs,
    };
    let mut vm_steps = steps.iter().filter_map(|s| match s {
        MachineStep::Vm { machine, step } => Some((s, machine, step)),
        _ => None,
    });
    let mut starting = FuturesOrdered::new();
    loop {
        while starting.len() < VM_STEP_CONCURRENCY {
            let Some((step, k, vm_step)) = vm_steps.next() else {
                break;
            };
            starting.push_back(start_vm_step(&ctx, step, k, vm_step));
        }
        let Some((step, k, started)) = starting.next().await else {
            break;
        };
        match started {
            Started::Result(r) => record(&mut outcome, results, step, k, r),
            Started::Invalid(e) => {
                results.insert(k.clone(), StepResult::Invalid(e.clone()));
                outcome.failed.push((step.clone(), Failure::config(e)));
            }
            Started::Skipped => {}
        }
    }
    outcome
}

/// Machine steps started at once.
const VM_STEP_CONCURRENCY: usize = 8;

/// What every machine step of a sweep reads.
struct VmStepContext<'a, 'i> {
    input: &'a SweepInput<'i>,
    namespaces: &'a BTreeMap<String, String>,
    client: &'a Client,
    view: &'a MachineView,
    facts: &'a Result<DeviceFacts, Failure>,
    macs: &'a Result<BTreeMap<MoRef, Vec<String>>, Failure>,
}

/// What starting one machine's step came to.
enum Started {
    Result(Result<StepResult, Failure>),
    /// The machine asks for something impossible: it goes `Failed`.
    Invalid(String),
    /// Not a step started one machine at a time (a group join).
    Skipped,
}

/// Start one machine's VM step.
async fn start_vm_step<'s>(
    ctx: &VmStepContext<'_, '_>,
    step: &'s MachineStep,
    k: &'s String,
    vm_step: &'s VmStep,
) -> (&'s MachineStep, &'s String, Started) {
    let VmStepContext {
        input,
        namespaces,
        client,
        view,
        facts,
        macs,
    } = ctx;
    let what = vm_step.describe(&view.inventory);
    if let VmStep::ShutdownGuest(vm) = vm_step {
        // No task: the guest is asked; the VM's power state says when it is down.
        let result = client
            .shutdown_guest(vm)
            .await
            .map(|()| StepResult::Done { what: what.clone() })
            .map_err(|e| Failure::vcenter(Some(&what), e));
        return (step, k, Started::Result(result));
    }
    if let VmStep::AttachTags { vm, tags } = vm_step {
        // REST, no task: each missing tag in turn (attach is idempotent in vCenter).
        let mut result = Ok(StepResult::Done { what: what.clone() });
        for t in tags {
            if let Err(e) = client.attach_tag(t, vm).await {
                result = Err(Failure::vcenter(Some(&what), e));
                break;
            }
        }
        return (step, k, Started::Result(result));
    }
    let started = match vm_step {
        VmStep::Clone {
            name,
            instance_uuid,
            identity,
            user_data,
            network_kargs,
            placement,
        } => {
            let ns = namespaces.get(k).map(String::as_str).unwrap_or_default();
            let devices = match facts {
                Ok(f) => device_changes(placement, &view.inventory, f),
                Err(failure) => return (step, k, Started::Result(Err(failure.clone()))),
            };
            match devices {
                Ok(devices) => {
                    let who = Owner {
                        name,
                        namespace: ns,
                        uuid: instance_uuid,
                        identity,
                    };
                    let guest = (user_data, network_kargs.as_deref());
                    let spec = clone_spec(&who, guest, placement, devices);
                    client.clone_vm(&placement.template, &spec).await
                }
                Err(DeviceError::Invalid(e)) => return (step, k, Started::Invalid(e)),
                Err(DeviceError::Unreadable(e)) => {
                    let f = Failure::stale(format!("{what}: {e}"));
                    return (step, k, Started::Result(Err(f)));
                }
            }
        }
        VmStep::WriteMetadata(vm) => {
            let keys = match macs {
                Ok(macs) => input.machines.iter().find(|m| key(m) == *k).and_then(|m| {
                    let pools = pool_addresses(m, &input.ipam.claims, &input.ipam.addresses);
                    guest_metadata_keys(m, macs.get(vm)?, &pools)
                }),
                Err(failure) => return (step, k, Started::Result(Err(failure.clone()))),
            };
            let Some(keys) = keys else {
                let f = Failure::stale(format!("{what}: the VM's network cards were not read"));
                return (step, k, Started::Result(Err(f)));
            };
            client.set_extra_config(vm, &keys).await
        }
        VmStep::PowerOn(vm) => client.power_on_vm(vm).await,
        VmStep::PowerOff(vm) => client.power_off_vm(vm).await,
        VmStep::Destroy(vm) => client.destroy(vm).await,
        VmStep::JoinGroup { .. } | VmStep::ShutdownGuest(_) | VmStep::AttachTags { .. } => {
            // Joins are batched per group into a `MachineStep::Join` (started before); the
            // others returned above.
            return (step, k, Started::Skipped);
        }
    };
    let started = started
        .map(|task| StepResult::Started {
            task: task.task,
            what: what.clone(),
        })
        .map_err(|e| Failure::vcenter(Some(&what), e));
    (step, k, Started::Result(started))
}

/// The MACs of the VMs whose metadata is written this sweep: one read for all of them, none
/// when there are none.
async fn metadata_macs(
    client: &Client,
    steps: &[MachineStep],
) -> Result<BTreeMap<MoRef, Vec<String>>, Failure> {
    let vms: Vec<MoRef> = steps
        .iter()
        .filter_map(|s| match s {
            MachineStep::Vm {
                step: VmStep::WriteMetadata(vm),
                ..
            } => Some(vm.clone()),
            _ => None,
        })
        .collect();
    if vms.is_empty() {
        return Ok(BTreeMap::new());
    }
    client.vm_macs(&vms).await.map_err(|e| {
        Failure::vcenter(
            Some(&format!("reading the network cards of {} VM(s)", vms.len())),
            e,
        )
    })
}

/// Keep what a machine's step came to, and count it done or failed.
fn record(
    outcome: &mut Outcome<MachineStep>,
    results: &mut BTreeMap<String, StepResult>,
    step: &MachineStep,
    machine: &str,
    result: Result<StepResult, Failure>,
) {
    match result {
        Ok(s) => {
            outcome.done.push(step.clone());
            results.insert(machine.to_string(), s);
        }
        Err(f) => {
            results.insert(machine.to_string(), StepResult::Refused(f.clone()));
            outcome.failed.push((step.clone(), f));
        }
    }
}

/// Whose clone it is.
struct Owner<'a> {
    name: &'a str,
    namespace: &'a str,
    uuid: &'a str,
    identity: &'a str,
}

/// The clone spec; `guest` is what the guest reads: the user data and the network kargs.
fn clone_spec(
    who: &Owner<'_>,
    (user_data, network_kargs): (&UserData, Option<&str>),
    p: &Placement,
    devices: DeviceChanges,
) -> CloneSpec {
    let Owner {
        name,
        namespace,
        uuid,
        identity,
    } = who;
    let mut extra_config = extra_config(user_data, name);
    if let Some(kargs) = network_kargs {
        extra_config.push((NETWORK_KARGS_KEY.into(), kargs.to_string()));
    }
    // Whose VM this is, for the next run that has lost the Machine's UID.
    extra_config.push((MACHINE_IDENTITY_KEY.into(), identity.to_string()));
    CloneSpec {
        name: name.to_string(),
        folder: p.folder.clone(),
        datastore: p.datastore.clone(),
        pool: Some(p.pool.clone()),
        host: None,
        instance_uuid: Some(uuid.to_string()),
        annotation: Some(format!("Machine {namespace}/{name} (vsphere-provider)")),
        num_cpus: p.num_cpus,
        num_cores_per_socket: p.num_cores_per_socket,
        memory_mb: p.memory_mib,
        extra_config,
        nics: devices.nics,
        disk_resize: devices.disk,
        data_disks: devices.data_disks,
        linked_clone: devices.snapshot,
        power_on: false,
    }
}

/// Add `new` VMs to a VM group with one reconfiguration, on the group as read this sweep. A
/// group that is missing or is no VM group is a configuration failure: the VM stays powered
/// off rather than run outside its zone.
async fn join_group(
    client: &Client,
    view: &MachineView,
    cluster: &MoRef,
    group: &str,
    new: &[MoRef],
) -> Result<MoRef, Failure> {
    let mut vms = match view.configs.get(cluster).and_then(|c| c.group(group)) {
        Some(ClusterGroup::Vm { vms, .. }) => vms.clone(),
        Some(other) => {
            return Err(Failure::config(format!(
                "{group} in {cluster} is not a VM group ({other:?})"
            )));
        }
        None => {
            return Err(Failure::config(format!(
                "VM group {group} does not exist in {cluster} (spec.providerSpec.value.workspace.vmGroup); the VM stays powered off until it does"
            )));
        }
    };
    for v in new {
        if !vms.contains(v) {
            vms.push(v.clone());
        }
    }
    client
        .reconfigure_cluster(
            cluster,
            &[],
            &[GroupChange::Edit(ClusterGroup::Vm {
                name: group.to_string(),
                vms,
            })],
        )
        .await
        .map(|t| t.task)
        .map_err(Failure::from)
}
