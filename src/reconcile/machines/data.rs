//! The sweep's data, shared by its stages: what it is given ([`SweepInput`]), what its machines
//! are planned on ([`MachineView`]), the vCenter changes it starts ([`MachineStep`]), what it
//! did ([`SweepOutcome`]), and how it names machines ([`key`]). The stages (`read`, `vcenter`,
//! `write_back`, and the driver in `mod.rs`) import from here, never from each other's parent.
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::api::machine::Machine;
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::capi_machine::actuated::is_actuated;
use crate::plan::machine::drain::PodInfo;
use crate::plan::machine::observe::{IpamObjects, Surroundings};
use crate::plan::machine::{Requeue, VmStep};
use crate::vcenter::model::cluster::ClusterConfig;
use crate::vcenter::model::task::TaskState;
use crate::vcenter::{Inventory, MoRef};

/// What one sweep needs from the Kubernetes side.
pub struct SweepInput<'a> {
    /// The machines whose VMs live on this server.
    pub machines: Vec<Machine>,
    /// Every machine (the control plane drain rule looks at the others).
    pub all_machines: &'a [Machine],
    /// The VSphereVMs whose stand-ins are among `machines`, by the stand-in's [`key`]: what
    /// the planner's result is written back onto.
    pub vsphere_vms: &'a BTreeMap<String, VSphereVM>,
    pub zones: &'a BTreeMap<String, VSphereDeploymentZone>,
    pub failure_domains: &'a BTreeMap<String, VSphereFailureDomain>,
    pub nodes: &'a [Node],
    /// Pods by node name.
    pub pods: &'a BTreeMap<String, Vec<PodInfo>>,
    /// The user data Secrets (`namespace/name`) the machines name.
    pub secrets: &'a BTreeMap<String, Secret>,
    /// The IP address claims and addresses of the machines' namespaces (empty when no machine
    /// asks for IP pools).
    pub ipam: &'a IpamObjects,
    pub now: Time,
    /// Plan only (`reconcile --dry-run`): the vCenter steps are reported in
    /// [`SweepOutcome::would`], none is started; the Kubernetes side is written as usual (local
    /// mode's dry run writes to a store it then discards).
    pub dry_run: bool,
}

impl SweepInput<'_> {
    pub(super) fn around(&self) -> Surroundings<'_> {
        Surroundings {
            nodes: self.nodes,
            machines: self.all_machines,
            pods: self.pods,
            secrets: self.secrets,
            ipam: self.ipam,
            now: &self.now,
        }
    }
}

/// What a sweep did.
#[derive(Debug, Default)]
pub struct SweepOutcome {
    /// vCenter changes started, described.
    pub vcenter_writes: Vec<String>,
    /// vCenter changes a dry run would start, described.
    pub would: Vec<String>,
    /// Kubernetes changes made (machines written, nodes cordoned or deleted, pods evicted).
    pub kube_writes: usize,
    /// Machine key → when it wants another look; a failure is `Backoff` with what failed.
    pub requeues: BTreeMap<String, Requeue>,
    /// Machine key → its VM's inventory path, as read this sweep.
    pub vm_paths: BTreeMap<String, String>,
    /// The inventory this sweep read (other planners of the same pass reuse it).
    pub inventory: Option<Inventory>,
    /// Machine key → the vCenter objects whose changes it waits on, as this sweep left it (its
    /// task in flight, its VM): what the long poll watches for it.
    pub watch: BTreeMap<String, Vec<MoRef>>,
}

impl SweepOutcome {
    pub fn changed(&self) -> bool {
        !self.vcenter_writes.is_empty() || self.kube_writes > 0
    }

    /// The machines that failed, each with what failed (they back off).
    pub fn failures(&self) -> impl Iterator<Item = (&str, &str)> {
        self.requeues
            .iter()
            .filter_map(|(k, r)| Some((k.as_str(), r.failure()?)))
    }

    /// The soonest a machine wants another look (None: nothing pending).
    pub fn soonest(&self) -> Option<Duration> {
        self.requeues
            .values()
            .filter_map(|r| match r {
                Requeue::After(d) => Some(*d),
                Requeue::NodeJoin => Some(crate::plan::machine::TASK_POLL),
                _ => None,
            })
            .min()
    }
}

/// `namespace/name`, how sweeps name machines; `VSphereVM namespace/name` for a VSphereVM's
/// stand-in (a namespace may hold a Machine and a VSphereVM of the same name).
pub fn key(m: &Machine) -> String {
    let k = format!(
        "{}/{}",
        m.metadata.namespace.as_deref().unwrap_or("default"),
        m.metadata.name.as_deref().unwrap_or_default()
    );
    if is_actuated(m) {
        format!("VSphereVM {k}")
    } else {
        k
    }
}

/// What the machines of a sweep are planned on: read fresh, under the server's write lock.
#[derive(Clone, Debug)]
pub struct MachineView {
    /// The recorded tasks (`None`: vCenter no longer knows the task).
    pub(super) tasks: BTreeMap<MoRef, Option<TaskState>>,
    pub inventory: Inventory,
    /// Groups and rules of the clusters whose new VMs wait for their VM group (read only then).
    pub(super) configs: BTreeMap<MoRef, ClusterConfig>,
    /// Tags on the VMs whose `tagIDs` are not yet recorded as attached (read only then, in one
    /// call for all of them).
    pub(super) tags: BTreeMap<MoRef, Vec<String>>,
}

/// A vCenter change of the machine sweep.
#[derive(Clone, Debug, PartialEq)]
pub enum MachineStep {
    /// One task for one machine's VM (clone, power on or off, destroy).
    Vm { machine: String, step: VmStep },
    /// One reconfiguration of a cluster adding the new VMs of these machines to a VM group,
    /// on the group as read.
    Join {
        cluster: MoRef,
        group: String,
        members: Vec<(String, MoRef)>,
    },
    /// One `PowerOnMultiVM_Task` on a datacenter for the VMs of these machines (DRS fully
    /// automated, as upstream); the task's result says which were not powered on.
    PowerOn {
        datacenter: MoRef,
        members: Vec<(String, MoRef)>,
    },
}

impl MachineStep {
    /// One line per machine the step changes, `namespace/name: what`, naming objects by their
    /// paths in `inv`.
    pub(super) fn describe(&self, inv: &Inventory) -> Vec<String> {
        let at = |m: &MoRef| inv.describe(m);
        match self {
            MachineStep::Vm { machine, step } => {
                vec![format!("{machine}: {}", step.describe(inv))]
            }
            MachineStep::Join {
                cluster,
                group,
                members,
            } => members
                .iter()
                .map(|(m, vm)| {
                    format!("{m}: add {} to VM group {group} of {}", at(vm), at(cluster))
                })
                .collect(),
            MachineStep::PowerOn {
                datacenter,
                members,
            } => members
                .iter()
                .map(|(m, vm)| {
                    format!(
                        "{m}: power on {} (one task on {} for {} VM(s))",
                        at(vm),
                        at(datacenter),
                        members.len()
                    )
                })
                .collect(),
        }
    }
}
