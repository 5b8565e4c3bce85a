//! One machine sweep over one vCenter, driven by the per-server driver ([`super::server`]) like
//! the zones: read in a fixed number of bulk reads, plan every machine (pure, `plan::machine`),
//! start the one vCenter change each needs, then write the Machines back through [`KubeOps`].
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
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::execute::Outcome;
use super::kube::{Eviction, KubeOps, machine_ref};
use super::server::{Limits, Locking, Sweep, drive};
use super::views::ServerViews;
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::api::machine::Machine;
use crate::api::machine_status::{VSphereMachineProviderStatus, event};
use crate::plan::failure::Failure;
use crate::plan::machine::create::fail_invalid_configuration;
use crate::plan::machine::deletion::mark_drain_error;
use crate::plan::machine::devices::{DeviceChanges, DeviceError, DeviceFacts, device_changes};
use crate::plan::machine::drain::PodInfo;
use crate::plan::machine::{
    KubeStep, MachineInput, MachinePlan, Requeue, TaskObs, VcenterTrouble, VmObs, VmStep,
    plan_machine,
};
use crate::plan::placement::{self, ConfigError, Placement};
use crate::vcenter::model::cluster::{ClusterConfig, ClusterGroup, GroupChange};
use crate::vcenter::model::task::TaskState;
use crate::vcenter::model::vm::CloneSpec;
use crate::vcenter::{Client, Error, Inventory, MoRef};

/// What one sweep needs from the Kubernetes side.
pub struct SweepInput<'a> {
    /// The machines whose VMs live on this server.
    pub machines: Vec<Machine>,
    /// Every machine (the control plane drain rule looks at the others).
    pub all_machines: &'a [Machine],
    pub zones: &'a BTreeMap<String, VSphereDeploymentZone>,
    pub failure_domains: &'a BTreeMap<String, VSphereFailureDomain>,
    pub nodes: &'a [Node],
    /// Pods by node name.
    pub pods: &'a BTreeMap<String, Vec<PodInfo>>,
    pub now: Time,
}

/// What a sweep did.
#[derive(Debug, Default)]
pub struct SweepOutcome {
    /// vCenter changes started, described.
    pub vcenter_writes: Vec<String>,
    /// Kubernetes changes made (machines written, nodes cordoned or deleted, pods evicted).
    pub kube_writes: usize,
    /// Failures, each naming the machine.
    pub failed: Vec<String>,
    /// The soonest a machine wants another look (None: nothing pending).
    pub requeue: Option<Duration>,
    /// Machines whose reconcile failed and should back off.
    pub backoff: Vec<String>,
    /// Machine key → its VM's inventory path, as read this sweep.
    pub vm_paths: BTreeMap<String, String>,
    /// Machine key → when it wants another look.
    pub requeues: BTreeMap<String, Requeue>,
    /// The inventory this sweep read (other planners of the same pass reuse it).
    pub inventory: Option<Inventory>,
}

impl SweepOutcome {
    pub fn changed(&self) -> bool {
        !self.vcenter_writes.is_empty() || self.kube_writes > 0
    }

    fn want(&mut self, r: Requeue, key: &str) {
        self.requeues.insert(key.to_string(), r);
        match r {
            Requeue::Idle => {}
            Requeue::After(d) => self.requeue = Some(self.requeue.map_or(d, |x| x.min(d))),
            Requeue::Backoff => self.backoff.push(key.to_string()),
        }
    }
}

/// `namespace/name`, how sweeps name machines.
pub fn key(m: &Machine) -> String {
    format!(
        "{}/{}",
        m.metadata.namespace.as_deref().unwrap_or("default"),
        m.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The vCenter a machine's VM lives on: its workspace's server, else its deployment zone's.
pub fn machine_server(
    m: &Machine,
    zones: &BTreeMap<String, VSphereDeploymentZone>,
) -> Option<String> {
    let own = m
        .vsphere_provider_spec()
        .and_then(Result::ok)
        .and_then(|s| s.workspace)
        .and_then(|w| w.server)
        .filter(|s| !s.is_empty());
    own.or_else(|| {
        let z = placement::requested_zone(m, zones.values())?;
        zones.get(&z)?.spec.server.clone()
    })
}

fn task_ref(m: &Machine) -> Option<MoRef> {
    let ps = VSphereMachineProviderStatus::from_value(
        m.status.as_ref().and_then(|s| s.provider_status.as_ref()),
    );
    (!ps.task_ref.is_empty()).then(|| MoRef::new("Task", &ps.task_ref))
}

fn set_task_ref(m: &mut Machine, task: &MoRef) {
    let st = m.status.get_or_insert_with(Default::default);
    let mut ps = VSphereMachineProviderStatus::from_value(st.provider_status.as_ref());
    ps.task_ref = task.value.clone();
    st.provider_status = Some(ps.to_value());
}

/// A machine's resolved placement (`None`: not a vSphere provider spec) and the region and zone
/// labels of its deployment zone.
pub type PlacementAndLabels = (
    Option<Result<Placement, ConfigError>>,
    Option<(String, String)>,
);

/// The placement of one machine: its provider spec, with its deployment zone's workspace filled
/// in where it asks for one.
pub fn machine_placement(
    m: &Machine,
    zones: &BTreeMap<String, VSphereDeploymentZone>,
    fds: &BTreeMap<String, VSphereFailureDomain>,
    inv: &Inventory,
) -> PlacementAndLabels {
    let spec = match m.vsphere_provider_spec() {
        None => return (None, None),
        Some(Err(e)) => {
            return (
                Some(Err(ConfigError {
                    field: "spec.providerSpec.value".into(),
                    message: format!("cannot decode the VSphereMachineProviderSpec: {e}"),
                })),
                None,
            );
        }
        Some(Ok(s)) => s,
    };
    let (spec, labels) = match placement::requested_zone(m, zones.values()) {
        None => (spec, None),
        Some(zname) => {
            let Some(zone) = zones.get(&zname) else {
                return (
                    Some(Err(ConfigError {
                        field: format!("metadata.labels[{}]", placement::DEPLOYMENT_ZONE_LABEL),
                        message: format!("VSphereDeploymentZone {zname:?} not found"),
                    })),
                    None,
                );
            };
            let fd = zone.spec.failure_domain.as_ref().and_then(|f| fds.get(f));
            match placement::zone_fill(zone, fd, inv) {
                Ok(fill) => {
                    let labels = (fill.region.clone(), fill.zone.clone());
                    (placement::with_zone(&spec, &fill), Some(labels))
                }
                Err(e) => return (Some(Err(e)), None),
            }
        }
    };
    (Some(placement::resolve(&spec, inv)), labels)
}

fn vm_obs(inv: &Inventory, uuid: Option<&str>) -> Option<VmObs> {
    let e = inv.vm_by_instance_uuid(uuid?)?;
    let vm = e.vm.as_ref()?;
    Some(VmObs {
        moref: Some(e.moref.clone()),
        bios_uuid: vm.bios_uuid.clone(),
        power_state: vm.power_state.clone(),
        ip_address: vm.ip_address.clone(),
        path: e.path.clone(),
    })
}

/// What this sweep's clones need to know of their templates and port groups: one read for the
/// templates and two for the port groups, only when clones with network devices or a disk size
/// are planned.
async fn device_facts(client: &Client, clones: &[&Placement]) -> Result<DeviceFacts, String> {
    let wanted: Vec<&&Placement> = clones
        .iter()
        .filter(|p| !p.networks.is_empty() || p.disk_gib.is_some())
        .collect();
    if wanted.is_empty() {
        return Ok(DeviceFacts::default());
    }
    let mut templates: Vec<MoRef> = wanted.iter().map(|p| p.template.clone()).collect();
    templates.sort();
    templates.dedup();
    let mut pgs: Vec<MoRef> = wanted
        .iter()
        .flat_map(|p| p.networks.iter())
        .filter(|n| n.kind == "DistributedVirtualPortgroup")
        .cloned()
        .collect();
    pgs.sort();
    pgs.dedup();
    let templates = client
        .template_devices(&templates)
        .await
        .map_err(|e| e.to_string())?;
    let switch_uuids = if pgs.is_empty() {
        BTreeMap::new()
    } else {
        client
            .portgroup_switch_uuids(&pgs)
            .await
            .map_err(|e| e.to_string())?
    };
    Ok(DeviceFacts {
        templates,
        switch_uuids,
    })
}

fn clone_spec(
    name: &str,
    namespace: &str,
    uuid: &str,
    p: &Placement,
    devices: DeviceChanges,
) -> CloneSpec {
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
        extra_config: vec![("guestinfo.hostname".into(), name.to_string())],
        nics: devices.nics,
        disk_resize: devices.disk,
        power_on: false,
    }
}

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
            for m in &input.machines {
                let plan = plan_machine(&base_input(m, &input, Some(t.clone())));
                finish(kube, m, plan, &mut out, &input.now).await;
            }
            return out;
        }
    };
    let mut sweep = MachineSweep {
        input: &input,
        plans: Vec::new(),
        vm_paths: BTreeMap::new(),
        started: BTreeMap::new(),
    };
    let limits = Limits {
        max_writes: 1,
        dry_run: false,
        locking: Locking::Whole,
    };
    let driven = drive(views, client, &mut sweep, limits).await;
    out.inventory = driven.view.map(|v| v.inventory);
    out.vm_paths = std::mem::take(&mut sweep.vm_paths);
    let MachineSweep { plans, started, .. } = sweep;
    for (m, mut plan) in input.machines.iter().zip(plans) {
        let k = key(m);
        plan.vm = None;
        match started.get(&k) {
            None => {}
            Some(Started::Task(task, what)) => {
                set_task_ref(&mut plan.machine, task);
                out.vcenter_writes.push(format!("{k}: {what}"));
            }
            Some(Started::Refused(message)) => {
                let reason = if m.metadata.deletion_timestamp.is_some() {
                    event::FAILED_DELETE
                } else {
                    event::FAILED_CREATE
                };
                out.failed.push(format!("{k}: {message}"));
                plan.event(true, reason, message.clone());
                plan.requeue = Requeue::Backoff;
            }
            Some(Started::Invalid(message)) => fail_invalid_configuration(&mut plan, message),
        }
        finish(kube, m, plan, &mut out, &input.now).await;
    }
    out
}

/// What the machines of a sweep are planned on: read fresh, under the server's write lock.
#[derive(Clone, Debug)]
pub struct MachineView {
    /// The recorded tasks (`None`: vCenter no longer knows the task).
    tasks: BTreeMap<MoRef, Option<TaskState>>,
    pub inventory: Inventory,
    /// Groups and rules of the clusters whose new VMs wait for their VM group (read only then).
    configs: BTreeMap<MoRef, ClusterConfig>,
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
}

/// What became of a machine's step.
#[derive(Clone, Debug)]
enum Started {
    /// The task started, and what it does.
    Task(MoRef, String),
    /// vCenter refused (or could not be asked): the message for the machine's event.
    Refused(String),
    /// The clone asks for something impossible: the machine fails.
    Invalid(String),
}

/// The machines of one server as a sweep of the per-server driver.
struct MachineSweep<'a, 'i> {
    input: &'a SweepInput<'i>,
    /// Each machine's plan against the last read, in input order.
    plans: Vec<MachinePlan>,
    vm_paths: BTreeMap<String, String>,
    /// Machine key → what its step came to.
    started: BTreeMap<String, Started>,
}

impl MachineSweep<'_, '_> {
    /// A machine's resolved placement and zone labels (none for a deleting machine) and its VM.
    fn observe(&self, m: &Machine, inv: &Inventory) -> (PlacementAndLabels, Option<VmObs>) {
        let placed = if m.metadata.deletion_timestamp.is_some() {
            (None, None)
        } else {
            machine_placement(m, self.input.zones, self.input.failure_domains, inv)
        };
        (placed, vm_obs(inv, m.metadata.uid.as_deref()))
    }

    /// The cluster and VM group a machine's powered-off VM must be in before it is powered on.
    fn group_wanted<'p>(
        placement: &'p Option<Result<Placement, ConfigError>>,
        vm: Option<&VmObs>,
    ) -> Option<(&'p MoRef, &'p str)> {
        let (Some(vm), Some(Ok(p))) = (vm, placement) else {
            return None;
        };
        let (Some(cluster), Some(group)) = (&p.cluster, &p.vm_group) else {
            return None;
        };
        (!vm.powered_on()).then_some((cluster, group.as_str()))
    }

    async fn read_view(&self, client: &Client) -> Result<MachineView, Error> {
        let refs: Vec<MoRef> = self.input.machines.iter().filter_map(task_ref).collect();
        let tasks = if refs.is_empty() {
            BTreeMap::new()
        } else {
            client.task_states(&refs).await?
        };
        let inventory = client.inventory().await?;
        // The clusters whose groups decide whether a new VM may be powered on, read together.
        let mut clusters: Vec<MoRef> = Vec::new();
        for m in &self.input.machines {
            let ((placement, _), vm) = self.observe(m, &inventory);
            if let Some((cluster, _)) = Self::group_wanted(&placement, vm.as_ref()) {
                clusters.push(cluster.clone());
            }
        }
        clusters.sort();
        clusters.dedup();
        let configs = if clusters.is_empty() {
            BTreeMap::new()
        } else {
            client.cluster_configs(&clusters).await?
        };
        Ok(MachineView {
            tasks,
            inventory,
            configs,
        })
    }

    async fn start(
        &mut self,
        client: &Client,
        view: &MachineView,
        steps: &[MachineStep],
    ) -> Outcome<MachineStep> {
        let mut outcome = Outcome::default();
        let namespaces: BTreeMap<String, String> = self
            .input
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
                let started = result.clone().map(|task| {
                    Started::Task(task, format!("add to VM group {group} of {cluster}"))
                });
                record(&mut outcome, &mut self.started, step, k, started);
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
        for step in steps {
            let MachineStep::Vm {
                machine: k,
                step: vm_step,
            } = step
            else {
                continue;
            };
            let started = match vm_step {
                VmStep::Clone {
                    name,
                    instance_uuid,
                    placement,
                } => {
                    let ns = namespaces.get(k).map(String::as_str).unwrap_or_default();
                    match facts
                        .as_ref()
                        .map_err(|e| DeviceError::Unreadable(e.clone()))
                        .and_then(|f| device_changes(placement, &view.inventory, f))
                    {
                        Ok(devices) => {
                            client
                                .clone_vm(
                                    &placement.template,
                                    &clone_spec(name, ns, instance_uuid, placement, devices),
                                )
                                .await
                        }
                        Err(DeviceError::Invalid(e)) => {
                            self.started.insert(k.clone(), Started::Invalid(e.clone()));
                            outcome.failed.push((step.clone(), Failure::config(e)));
                            continue;
                        }
                        Err(DeviceError::Unreadable(e)) => Err(Error::Decode {
                            server: client.server(),
                            method: "template devices".into(),
                            reason: e,
                        }),
                    }
                }
                VmStep::PowerOn(vm) => client.power_on_vm(vm).await,
                VmStep::PowerOff(vm) => client.power_off_vm(vm).await,
                VmStep::Destroy(vm) => client.destroy(vm).await,
                VmStep::JoinGroup { .. } => unreachable!("joins are batched per group"),
            };
            let what = vm_step.describe();
            let started = started
                .map(|task| Started::Task(task.task, what.clone()))
                .map_err(|e| Failure::vcenter(Some(&what), e));
            record(&mut outcome, &mut self.started, step, k, started);
        }
        outcome
    }
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
        self.read_view(client)
            .await
            .map(Arc::new)
            .map_err(Failure::from)
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
                    .map(|m| plan_machine(&base_input(m, input, Some(trouble.clone()))))
                    .collect();
                return Vec::new();
            }
        };
        self.plans.clear();
        for m in &input.machines {
            let ((placement, labels), vm) = self.observe(m, &view.inventory);
            let mut i = base_input(m, input, None);
            i.in_vm_group = Self::group_wanted(&placement, vm.as_ref())
                .and_then(|(cluster, group)| membership(view, cluster, group, vm.as_ref()?));
            i.placement = placement;
            i.zone_labels = labels;
            if let Some(vm) = &vm {
                self.vm_paths.insert(key(m), vm.path.clone());
            }
            i.vm = vm;
            i.task = match task_ref(m) {
                None => TaskObs::None,
                Some(t) => match view.tasks.get(&t) {
                    Some(Some(s)) => TaskObs::State(s.clone()),
                    _ => TaskObs::Gone,
                },
            };
            self.plans.push(plan_machine(&i));
        }
        let mut joins: BTreeMap<(MoRef, String), Vec<(String, MoRef)>> = BTreeMap::new();
        let mut steps = Vec::new();
        for (m, plan) in input.machines.iter().zip(&self.plans) {
            match &plan.vm {
                Some(VmStep::JoinGroup { cluster, group, vm }) => joins
                    .entry((cluster.clone(), group.clone()))
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
        joins.chain(steps).collect()
    }

    fn execute<'a>(
        &'a mut self,
        client: &'a Client,
        view: &'a mut MachineView,
        steps: &'a [MachineStep],
    ) -> impl Future<Output = Outcome<MachineStep>> + Send + 'a {
        self.start(client, view, steps)
    }
}

/// Keep what a machine's step came to, and count it done or failed.
fn record(
    outcome: &mut Outcome<MachineStep>,
    started: &mut BTreeMap<String, Started>,
    step: &MachineStep,
    machine: &str,
    result: Result<Started, Failure>,
) {
    match result {
        Ok(s) => {
            outcome.done.push(step.clone());
            started.insert(machine.to_string(), s);
        }
        Err(f) => {
            started.insert(machine.to_string(), Started::Refused(f.to_string()));
            outcome.failed.push((step.clone(), f));
        }
    }
}

/// Whether a VM is in a group, as read (a missing group: joining will say so, and back off,
/// rather than powering on outside the zone); `None` when the cluster was not read.
fn membership(view: &MachineView, cluster: &MoRef, group: &str, vm: &VmObs) -> Option<bool> {
    let vm = vm.moref.as_ref()?;
    match view.configs.get(cluster)?.group(group) {
        Some(ClusterGroup::Vm { vms, .. }) => Some(vms.contains(vm)),
        _ => Some(false),
    }
}

fn base_input<'a>(
    m: &'a Machine,
    input: &'a SweepInput<'_>,
    trouble: Option<VcenterTrouble>,
) -> MachineInput<'a> {
    let node = m
        .status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .and_then(|r| r.name.clone())
        .unwrap_or_default();
    MachineInput {
        machine: m,
        placement: None,
        zone_labels: None,
        vcenter_error: trouble,
        vm: None,
        task: TaskObs::None,
        in_vm_group: None,
        nodes: input.nodes,
        machines: input.all_machines,
        pods: input.pods.get(&node).map(Vec::as_slice).unwrap_or(&[]),
        now: input.now.clone(),
    }
}

/// Execute the Kubernetes steps, write the machine, record events.
async fn finish<K: KubeOps>(
    kube: &K,
    before: &Machine,
    mut plan: MachinePlan,
    out: &mut SweepOutcome,
    now: &Time,
) {
    let k = key(before);
    let mut drain_errors = Vec::new();
    for step in std::mem::take(&mut plan.kube) {
        let result = match &step {
            KubeStep::Cordon(node) => kube.cordon(node).await.map(|()| None),
            KubeStep::Evict(pod) => match kube.evict(pod).await {
                Ok(Eviction::Evicted) => Ok(None),
                Ok(Eviction::Refused(why)) => Ok(Some(format!(
                    "eviction of pod {}/{} refused: {why}",
                    pod.namespace, pod.name
                ))),
                Err(e) => Err(e),
            },
            KubeStep::DeleteNode(node) => kube.delete_node(node).await.map(|()| None),
        };
        match result {
            Ok(None) => out.kube_writes += 1,
            Ok(Some(refused)) => drain_errors.push(refused),
            Err(e) => {
                if matches!(step, KubeStep::DeleteNode(_)) {
                    // The finalizer stays until the Node is gone.
                    if let Some(f) = plan.machine.metadata.finalizers.as_mut()
                        && !f
                            .iter()
                            .any(|x| x == crate::api::machine::MACHINE_FINALIZER)
                    {
                        f.push(crate::api::machine::MACHINE_FINALIZER.into());
                    }
                    plan.event(true, event::FAILED_DELETE, e.to_string());
                    plan.requeue = Requeue::Backoff;
                    out.failed.push(format!("{k}: {e}"));
                } else {
                    drain_errors.push(e.to_string());
                }
            }
        }
    }
    if !drain_errors.is_empty() {
        let msg = drain_errors.join("; ");
        mark_drain_error(&mut plan.machine, &msg, now);
        plan.event(true, event::DRAIN_REQUEUED, msg.clone());
        plan.requeue = Requeue::Backoff;
        out.failed.push(format!("{k}: drain: {msg}"));
    }
    out.want(plan.requeue, &k);
    let regarding = machine_ref(before);
    for e in &plan.events {
        kube.record(regarding.clone(), e.warning, e.reason, &e.message)
            .await;
    }
    if plan.machine != *before {
        match kube.update_machine(before, &plan.machine).await {
            Ok(()) => out.kube_writes += 1,
            Err(e) => {
                out.failed.push(format!("{k}: {e}"));
                out.requeues.insert(k.clone(), Requeue::Backoff);
                out.backoff.push(k);
            }
        }
    }
}

/// Add `new` VMs to a VM group with one reconfiguration, on the group as read this sweep.
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

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use super::*;
    use crate::local::kube::LocalCluster;
    use crate::local::store::Store;
    use crate::plan::machine::tests::machine;
    use crate::vcenter::{ClientOptions, Credentials, RetryPolicy};

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
            zones: &zones,
            failure_domains: &fds,
            nodes: &[],
            pods: &pods,
            now,
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
}
