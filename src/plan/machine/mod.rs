//! The machine actuator's decisions, pure: what one Machine needs next, given what vCenter and
//! the cluster look like now. One step per machine per pass; the shells execute it, record any
//! vCenter task on the Machine and come back (a task is never waited on).
//!
//! * [`create`] — Provisioning → Provisioned → Running: clone, join the VM group, power on,
//!   record identity and addresses, link the node.
//! * [`deletion`] — seed 000's order: hooks, drain, hooks, power off, destroy, delete the Node,
//!   release the finalizer.
//! * [`devices`] — the NIC and disk changes of a clone, from the template's devices.
//! * [`drain`] — which pods a drain evicts, and when a control plane drain must wait.
//! * [`ipam`] — static IPs: the IP address claims a clone waits for, and its network kargs.
//! * [`node_link`] — which Node is the machine's.
//! * [`outcome`] — what the executed steps' results make of the plan.
//! * [`ownership`] — whether the VM found for a machine is the machine's to touch.
pub mod create;
pub mod deletion;
pub mod devices;
pub mod drain;
pub mod ipam;
pub mod node_link;
pub mod observe;
pub mod outcome;
pub mod ownership;
pub mod user_data;
pub mod waiting;

use crate::api::conditions::STATUS_TRUE;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions::{ConditionUpdate, set_capi_condition};
use crate::api::machine::Machine;
use crate::api::machine_status::{VSphereMachineProviderStatus, condition as cond};
use crate::vcenter::model::inventory::Inventory;
use crate::vcenter::model::moref::MoRef;
use crate::vcenter::model::task::TaskState;

pub use create::plan_create;
pub use deletion::plan_delete;

use super::failure::{Failure, Retry};
use super::placement::{ConfigError, Placement};

/// A VM as the inventory snapshot shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VmObs {
    pub moref: Option<MoRef>,
    pub bios_uuid: Option<String>,
    pub power_state: Option<String>,
    pub ip_address: Option<String>,
    /// Inventory path, for messages and the MACHINES table.
    pub path: String,
    /// The host name whose cloud-init metadata the VM carries (Cluster API machines).
    pub guest_metadata: Option<String>,
    /// The instance UUID the VM was found by (always read by the sweep; `None` only where a
    /// VM is described without it, as in planner tests).
    pub instance_uuid: Option<String>,
    /// The identity marker it carries ([`machine_identity`] of the object it was cloned for).
    pub identity: Option<String>,
}

impl VmObs {
    pub fn powered_on(&self) -> bool {
        self.power_state.as_deref() == Some("poweredOn")
    }

    fn moref(&self) -> MoRef {
        self.moref
            .clone()
            .unwrap_or_else(|| MoRef::new("VirtualMachine", ""))
    }
}

/// The VM already in the machine's target folder under the machine's name (observed when the
/// machine has no VM of its own yet): whose it is decides between adopting it and refusing to
/// clone — never a second VM of the same name, never a clone over someone else's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameHolder {
    pub path: String,
    pub instance_uuid: Option<String>,
    /// The identity it carries ([`machine_identity`] of the Machine it was cloned for), if any.
    pub identity: Option<String>,
}

/// What a VM cloned for `m` carries as its owner (extraConfig `vsphere-provider.machine`):
/// namespace and name, and the cluster ID label when the Machine has one — what survives a lost
/// local state file or a Machine re-created from the same manifest, where the UID does not.
pub fn machine_identity(m: &Machine) -> String {
    let ns = m.metadata.namespace.as_deref().unwrap_or("default");
    let name = m.metadata.name.as_deref().unwrap_or_default();
    if crate::plan::capi_machine::actuated::is_actuated(m) {
        return format!("VSphereVM {ns}/{name}");
    }
    match m
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(crate::api::machine::CLUSTER_ID_LABEL))
    {
        Some(cluster) => format!("{ns}/{name} cluster={cluster}"),
        None => format!("{ns}/{name}"),
    }
}

/// The provider spec's `tagIDs`.
pub fn wanted_tags(m: &Machine) -> Vec<String> {
    m.vsphere_provider_spec()
        .and_then(Result::ok)
        .and_then(|s| s.tag_ids)
        .unwrap_or_default()
}

/// Whether the sweep must read the tags on the machine's VM: it wants `tagIDs`, its VM is
/// powered on, and its `TagsAttached` condition does not already cover them (tags are attached
/// once, after power-on, as upstream; a steady sweep reads no tags).
pub fn tags_to_check(m: &Machine, vm: Option<&VmObs>) -> bool {
    let wanted = wanted_tags(m);
    if wanted.is_empty()
        || !vm.is_some_and(VmObs::powered_on)
        || m.metadata.deletion_timestamp.is_some()
    {
        return false;
    }
    !provider_status(m).conditions.iter().any(|c| {
        c.type_ == TAGS_ATTACHED && c.status == STATUS_TRUE && c.message == tags_message(&wanted)
    })
}

/// Ours: the provider status condition that the `tagIDs` are on the VM.
pub const TAGS_ATTACHED: &str = "TagsAttached";

fn tags_message(tags: &[String]) -> String {
    format!("attached: {}", tags.join(", "))
}

/// The instance UUID the machine's VM has: an adopted VM's, else the Machine's UID.
pub fn vm_instance_uuid(m: &Machine) -> Option<String> {
    provider_status(m)
        .instance_uuid
        .or_else(|| instance_uuid(m))
}

/// The machine's recorded task, as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskObs {
    /// No task recorded.
    None,
    /// Recorded, but vCenter no longer knows it (tasks expire): the VM's state decides.
    Gone,
    State(TaskState),
}

/// Everything one machine's decision depends on.
#[derive(Clone, Debug)]
pub struct MachineInput<'a> {
    pub machine: &'a Machine,
    /// The resolved placement (`None` when it is not needed: deletion).
    pub placement: Option<Result<Placement, ConfigError>>,
    /// Region and zone label values from the machine's deployment zone.
    pub zone_labels: Option<(String, String)>,
    /// What the placement waits for (a zone or failure domain not found): nothing is created.
    pub placement_pending: Option<String>,
    /// Why vCenter could not be read this pass (then nothing changes in vCenter).
    pub vcenter_error: Option<VcenterTrouble>,
    pub vm: Option<VmObs>,
    pub task: TaskObs,
    /// Whether the VM is in its VM group (None: no group wanted, or not read).
    pub in_vm_group: Option<bool>,
    /// A VM under the machine's name in its target folder, when it has no VM of its own.
    pub name_holder: Option<NameHolder>,
    /// The user data its clone gets (read from the Secret the provider spec names).
    pub user_data: user_data::UserData,
    /// Its static IP configuration against the IP address claims read.
    pub network: ipam::Network,
    /// Its IP address claims that exist (released once its VM is gone), or why they could not
    /// be read (then its deletion cannot finish).
    pub claims_held: Result<Vec<String>, String>,
    /// The tags attached to its VM, when the sweep read them ([`tags_to_check`] says when).
    pub attached_tags: Option<Vec<String>>,
    /// Every Node (the shells read them from their caches or store).
    pub nodes: &'a [Node],
    /// Other machines of the namespace, for the control plane drain rule.
    pub machines: &'a [Machine],
    /// Pods on this machine's node, for the drain.
    pub pods: &'a [drain::PodInfo],
    pub now: Time,
}

/// vCenter could not be asked: retried with backoff, never `Failed`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VcenterTrouble {
    pub message: String,
    /// Wrong credentials or a refused certificate: retrying will not help until someone acts,
    /// but the machine is still not failed (its VM may be fine).
    pub permanent: bool,
}

/// Why vCenter could not be asked: permanent unless the failure is worth retrying as it is.
impl From<&Failure> for VcenterTrouble {
    fn from(f: &Failure) -> Self {
        VcenterTrouble {
            message: f.to_string(),
            permanent: f.retry() != Retry::Later,
        }
    }
}

/// One vCenter change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmStep {
    Clone {
        name: String,
        instance_uuid: String,
        /// [`machine_identity`], written into the clone's extraConfig.
        identity: String,
        /// The Ignition payload and the other guestinfo keys come from it.
        user_data: user_data::UserData,
        /// `guestinfo.afterburn.initrd.network-kargs` (static IPs), if any.
        network_kargs: Option<String>,
        placement: Box<Placement>,
    },
    /// Add the VM to its VM group before it is powered on (batched per cluster by the shell).
    JoinGroup {
        cluster: MoRef,
        group: String,
        vm: MoRef,
    },
    /// Write a Cluster API machine's cloud-init metadata (it matches the clone's MACs, read by
    /// the shell) before its first power-on.
    WriteMetadata(MoRef),
    PowerOn(MoRef),
    PowerOff(MoRef),
    /// Ask the guest to shut down (VMware Tools; no task).
    ShutdownGuest(MoRef),
    Destroy(MoRef),
    /// Attach these tags (`tagIDs` not yet on the VM); REST calls, no task.
    AttachTags {
        vm: MoRef,
        tags: Vec<String>,
    },
}

impl VmStep {
    /// One line for the `would:`/`done:` lists and events, naming objects by their paths in
    /// `inv` (the snapshot the step was planned on), as the zone steps do.
    pub fn describe(&self, inv: &Inventory) -> String {
        let at = |m: &MoRef| inv.describe(m);
        match self {
            VmStep::Clone {
                name, placement, ..
            } => format!(
                "clone {} into pool {} as {name}",
                at(&placement.template),
                at(&placement.pool)
            ),
            VmStep::JoinGroup { group, vm, .. } => format!("add {} to VM group {group}", at(vm)),
            VmStep::WriteMetadata(vm) => format!("write guestinfo.metadata to {}", at(vm)),
            VmStep::PowerOn(vm) => format!("power on {}", at(vm)),
            VmStep::PowerOff(vm) => format!("power off {}", at(vm)),
            VmStep::ShutdownGuest(vm) => format!("shut down the guest of {}", at(vm)),
            VmStep::Destroy(vm) => format!("destroy {}", at(vm)),
            VmStep::AttachTags { vm, tags } => {
                format!("attach tags {} to {}", tags.join(", "), at(vm))
            }
        }
    }
}

/// One change on the Kubernetes side (the shells carry it out through their `KubeOps`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KubeStep {
    Cordon(String),
    Evict(drain::PodRef),
    DeleteNode(String),
    /// Create an IP address claim ([`ipam::claim_object`]); one that exists already is fine.
    CreateClaim(ipam::NewClaim),
    /// Remove the claim protection finalizer and delete the claim (namespace, name); gone
    /// already is fine.
    ReleaseClaim {
        namespace: String,
        name: String,
    },
}

/// An event to record on the Machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// When to look again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// Nothing pending: the periodic resync will do.
    Idle,
    /// Something will change soon (a task, a VM property).
    After(Duration),
    /// Provisioned, waiting for its Node to register: the manager wakes the machine when a
    /// Node that is its arrives (`controllers::machine::node_join`), so it needs no re-look of
    /// its own where that runs and the long poll watches its VM (whose address a Node may be
    /// matched by); elsewhere it is looked at again after [`TASK_POLL`].
    NodeJoin,
    /// A failure, and what failed: the shell's per-object exponential backoff. The reason is
    /// part of the verdict so that no shell can back off without saying why (local mode prints
    /// it, the controller returns it as the reconcile's error).
    Backoff(String),
}

impl Requeue {
    /// Why the machine backs off, if it does.
    pub fn failure(&self) -> Option<&str> {
        match self {
            Requeue::Backoff(why) => Some(why),
            _ => None,
        }
    }
}

/// What to do for one machine now.
#[derive(Clone, Debug)]
pub struct MachinePlan {
    /// The Machine as it should be after this pass (metadata, spec.providerID, status).
    pub machine: Machine,
    pub vm: Option<VmStep>,
    pub kube: Vec<KubeStep>,
    pub events: Vec<MachineEvent>,
    pub requeue: Requeue,
}

impl MachinePlan {
    fn new(machine: &Machine) -> Self {
        MachinePlan {
            machine: machine.clone(),
            vm: None,
            kube: Vec::new(),
            events: Vec::new(),
            requeue: Requeue::Idle,
        }
    }

    pub fn event(&mut self, warning: bool, reason: &'static str, message: impl Into<String>) {
        self.events.push(MachineEvent {
            warning,
            reason,
            message: message.into(),
        });
    }

    /// Nothing to do and nothing changed.
    pub fn is_noop(&self, before: &Machine) -> bool {
        self.vm.is_none() && self.kube.is_empty() && self.machine == *before
    }
}

/// Poll interval while a vCenter task runs or a node is expected to join.
pub const TASK_POLL: Duration = Duration::from_secs(10);
/// How often a deleting machine whose VM still exists is looked at (MAO: 30 s).
pub const DELETE_POLL: Duration = Duration::from_secs(30);
/// How long a control plane drain waits for another cordoned control plane node (MAO: 20 s).
pub const CONTROL_PLANE_DRAIN_WAIT: Duration = Duration::from_secs(20);

/// Decide for one machine. A VM found for it that is not its own
/// ([`ownership::foreign`]) is never acted on: the machine plans as if it had none, and says so.
pub fn plan_machine(input: &MachineInput<'_>) -> MachinePlan {
    if let Some(foreign) = input
        .vm
        .as_ref()
        .and_then(|vm| ownership::foreign(input.machine, vm))
    {
        return ownership::plan_without(input, &foreign);
    }
    if input.machine.metadata.deletion_timestamp.is_some() {
        plan_delete(input)
    } else {
        plan_create(input)
    }
}

/// The machine's provider status (unreadable counts as empty: it is ours to rewrite).
pub fn provider_status(m: &Machine) -> VSphereMachineProviderStatus {
    VSphereMachineProviderStatus::from_value(
        m.status.as_ref().and_then(|s| s.provider_status.as_ref()),
    )
}

fn set_provider_status(m: &mut Machine, ps: &VSphereMachineProviderStatus) {
    m.status
        .get_or_insert_with(Default::default)
        .provider_status = Some(ps.to_value());
}

/// Set one Machine condition; true when it changed.
fn set_condition(m: &mut Machine, update: ConditionUpdate<'_>, now: &Time) -> bool {
    let status = m.status.get_or_insert_with(Default::default);
    set_capi_condition(status.conditions.get_or_insert_with(Vec::new), &update, now)
}

/// vCenter could not be asked: `InstanceExists=Unknown` and back off; nothing else changes.
fn vcenter_trouble(plan: &mut MachinePlan, trouble: &VcenterTrouble, now: &Time) {
    set_condition(
        &mut plan.machine,
        ConditionUpdate::unknown(
            cond::INSTANCE_EXISTS,
            cond::ERROR_CHECKING_PROVIDER,
            &trouble.message,
        ),
        now,
    );
    plan.requeue = Requeue::Backoff(trouble.message.clone());
}

/// What the machine's recorded task means for this pass.
enum Settled {
    /// Still running: look again later, change nothing.
    Wait,
    /// It failed (the message names the task and the fault); the reference is cleared.
    Failed(String),
    /// None recorded, or finished (the reference is cleared): go on.
    Go,
}

/// Settle the recorded task against `ps` (the same rule for creation and deletion).
fn settle_task(task: &TaskObs, ps: &mut VSphereMachineProviderStatus) -> Settled {
    match task {
        TaskObs::State(TaskState::Queued | TaskState::Running { .. }) => Settled::Wait,
        TaskObs::State(TaskState::Error(fault)) => {
            let msg = format!("vCenter task {} failed: {fault}", ps.task_ref);
            ps.task_ref.clear();
            Settled::Failed(msg)
        }
        TaskObs::State(TaskState::Success { .. }) | TaskObs::Gone => {
            ps.task_ref.clear();
            Settled::Go
        }
        TaskObs::None => Settled::Go,
    }
}

/// The Node the machine is linked to (`status.nodeRef`), if that Node still exists.
pub fn linked_node<'n>(m: &Machine, nodes: &'n [Node]) -> Option<&'n Node> {
    let name = m.status.as_ref()?.node_ref.as_ref()?.name.as_deref()?;
    nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name))
}

/// The machine's `status.phase`.
pub fn phase(m: &Machine) -> Option<&str> {
    m.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// The machine's instance UUID: its UID (fixed before any vCenter write, as upstream).
pub fn instance_uuid(m: &Machine) -> Option<String> {
    m.metadata.uid.clone().filter(|u| !u.is_empty())
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, NodeStatus};

    use super::*;

    pub(crate) fn machine(name: &str) -> Machine {
        let mut m = Machine::new(name, Default::default());
        m.metadata.namespace = Some("openshift-machine-api".into());
        m.metadata.uid = Some(format!("uid-{name}"));
        m
    }

    pub(crate) fn input(m: &Machine) -> MachineInput<'_> {
        MachineInput {
            machine: m,
            placement: None,
            zone_labels: None,
            placement_pending: None,
            vcenter_error: None,
            vm: None,
            task: TaskObs::None,
            in_vm_group: None,
            name_holder: None,
            user_data: user_data::UserData::NotNamed,
            network: ipam::Network::Dhcp,
            claims_held: Ok(Vec::new()),
            attached_tags: None,
            nodes: &[],
            machines: &[],
            pods: &[],
            now: Time(jiff::Timestamp::UNIX_EPOCH),
        }
    }

    pub(crate) fn placement(vm_group: Option<&str>) -> Placement {
        Placement {
            datacenter: MoRef::new("Datacenter", "dc-1"),
            template: MoRef::new("VirtualMachine", "vm-t"),
            folder: MoRef::new("Folder", "f-vm"),
            pool: MoRef::new("ResourcePool", "rp-0"),
            cluster: Some(MoRef::new("ClusterComputeResource", "c-0")),
            datastore: None,
            networks: Vec::new(),
            vm_group: vm_group.map(str::to_string),
            num_cpus: None,
            num_cores_per_socket: None,
            memory_mib: None,
            disk_gib: None,
            data_disks: Vec::new(),
            linked_clone: None,
        }
    }

    pub(crate) fn node(name: &str, provider_id: Option<&str>, ip: Option<&str>) -> Node {
        Node {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: provider_id.map(str::to_string),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: ip.map(|a| {
                    vec![NodeAddress {
                        type_: "InternalIP".into(),
                        address: a.into(),
                    }]
                }),
                ..Default::default()
            }),
        }
    }
}
