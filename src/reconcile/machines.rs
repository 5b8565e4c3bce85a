//! One machine sweep over one vCenter: gather in a fixed number of bulk reads, plan every
//! machine (pure, `plan::machine`), execute the one step each needs, write the Machines back
//! through [`KubeOps`].
//!
//! Reads per sweep, whatever the number of machines: the recorded tasks (one read, only when
//! some are recorded, and always *before* the inventory, so a clone seen finished is also seen
//! in the inventory), the inventory with the VM properties (one read), and the VM groups of the
//! clusters whose new VMs are about to be powered on (one read, only then). Writes: one task per
//! VM change, and one cluster reconfiguration per cluster for all its new VMs' group joins.
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::kube::{EventRecord, Eviction, KubeOps, machine_ref};
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::api::machine::Machine;
use crate::api::machine_status::{VSphereMachineProviderStatus, event};
use crate::plan::machine::create::fail_invalid_configuration;
use crate::plan::machine::deletion::mark_drain_error;
use crate::plan::machine::devices::{DeviceChanges, DeviceError, DeviceFacts, device_changes};
use crate::plan::machine::drain::PodInfo;
use crate::plan::machine::{
    KubeStep, MachineInput, MachinePlan, Requeue, TaskObs, VcenterTrouble, VmObs, VmStep,
    plan_machine,
};
use crate::plan::placement::{self, ConfigError, Placement};
use crate::vcenter::model::cluster::{ClusterGroup, GroupChange};
use crate::vcenter::model::vm::CloneSpec;
use crate::vcenter::{Client, Inventory, MoRef};

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
/// the trouble and back off; nothing else changes).
pub async fn sweep<K: KubeOps>(
    client: Result<&Client, VcenterTrouble>,
    kube: &K,
    input: SweepInput<'_>,
) -> SweepOutcome {
    let mut out = SweepOutcome::default();
    let gathered = match client {
        Err(t) => Err(t),
        Ok(c) => gather(c, &input.machines).await.map(|g| (c, g)),
    };
    let (client, g) = match gathered {
        Ok(x) => (Some(x.0), Some(x.1)),
        Err(t) => {
            for m in &input.machines {
                let i = base_input(m, &input, Some(t.clone()));
                let plan = plan_machine(&i);
                finish(kube, m, plan, &mut out, &input.now).await;
            }
            return out;
        }
    };
    let Some(g) = g else { return out };
    let client = client.expect("a client when gathered");
    out.inventory = Some(g.inventory.clone());

    // Plan every machine; group joins are collected per cluster.
    let mut plans: Vec<(Machine, MachinePlan)> = Vec::new();
    let mut placements = Vec::new();
    for m in &input.machines {
        let (placement, labels) = if m.metadata.deletion_timestamp.is_some() {
            (None, None)
        } else {
            machine_placement(m, input.zones, input.failure_domains, &g.inventory)
        };
        placements.push(placement.clone());
        let mut i = base_input(m, &input, None);
        i.placement = placement;
        i.zone_labels = labels;
        i.vm = vm_obs(&g.inventory, m.metadata.uid.as_deref());
        if let Some(vm) = &i.vm {
            out.vm_paths.insert(key(m), vm.path.clone());
        }
        i.task = match task_ref(m) {
            None => TaskObs::None,
            Some(t) => match g.tasks.get(&t) {
                Some(Some(s)) => TaskObs::State(s.clone()),
                _ => TaskObs::Gone,
            },
        };
        if let (Some(vm), Some(Ok(p))) = (&i.vm, &i.placement)
            && let (Some(cluster), Some(group)) = (&p.cluster, &p.vm_group)
            && !vm.powered_on()
        {
            i.in_vm_group = g.membership(client, cluster, group, vm).await;
        }
        let plan = plan_machine(&i);
        plans.push((m.clone(), plan));
    }

    // Group joins: one reconfiguration per cluster and group, on the configuration just read.
    let mut joins: BTreeMap<(MoRef, String), Vec<usize>> = BTreeMap::new();
    for (idx, (_, plan)) in plans.iter().enumerate() {
        if let Some(VmStep::JoinGroup { cluster, group, .. }) = &plan.vm {
            joins
                .entry((cluster.clone(), group.clone()))
                .or_default()
                .push(idx);
        }
    }
    for ((cluster, group), idxs) in joins {
        let new: Vec<MoRef> = idxs
            .iter()
            .filter_map(|i| match &plans[*i].1.vm {
                Some(VmStep::JoinGroup { vm, .. }) => Some(vm.clone()),
                _ => None,
            })
            .collect();
        let result = join_group(client, &g, &cluster, &group, &new).await;
        for i in idxs {
            let (m, plan) = &mut plans[i];
            plan.vm = None;
            match &result {
                Ok(task) => {
                    set_task_ref(&mut plan.machine, task);
                    out.vcenter_writes
                        .push(format!("{}: add to VM group {group} of {cluster}", key(m)));
                }
                Err(e) => {
                    out.failed.push(format!("{}: {e}", key(m)));
                    plan.event(true, event::FAILED_CREATE, e.clone());
                    plan.requeue = Requeue::Backoff;
                }
            }
        }
    }

    let clones: Vec<&Placement> = plans
        .iter()
        .filter_map(|(_, p)| match &p.vm {
            Some(VmStep::Clone { placement, .. }) => Some(placement.as_ref()),
            _ => None,
        })
        .collect();
    let facts = device_facts(client, &clones).await;
    for (m, mut plan) in plans {
        if let Some(step) = plan.vm.take() {
            let started = match &step {
                VmStep::Clone {
                    name,
                    instance_uuid,
                    placement,
                } => {
                    let ns = m.metadata.namespace.clone().unwrap_or_default();
                    match facts
                        .as_ref()
                        .map_err(|e| DeviceError::Unreadable(e.clone()))
                        .and_then(|f| device_changes(placement, &g.inventory, f))
                    {
                        Ok(devices) => {
                            client
                                .clone_vm(
                                    &placement.template,
                                    &clone_spec(name, &ns, instance_uuid, placement, devices),
                                )
                                .await
                        }
                        Err(DeviceError::Invalid(e)) => {
                            fail_invalid_configuration(&mut plan, &e);
                            finish(kube, &m, plan, &mut out, &input.now).await;
                            continue;
                        }
                        Err(DeviceError::Unreadable(e)) => Err(crate::vcenter::Error::Decode {
                            server: client.server(),
                            method: "template devices".into(),
                            reason: e,
                        }),
                    }
                }
                VmStep::PowerOn(vm) => client.power_on_vm(vm).await,
                VmStep::PowerOff(vm) => client.power_off_vm(vm).await,
                VmStep::Destroy(vm) => client.destroy(vm).await,
                VmStep::JoinGroup { .. } => unreachable!("joins are batched above"),
            };
            match started {
                Ok(task) => {
                    set_task_ref(&mut plan.machine, &task.task);
                    out.vcenter_writes
                        .push(format!("{}: {}", key(&m), step.describe()));
                }
                Err(e) => {
                    let reason = if m.metadata.deletion_timestamp.is_some() {
                        event::FAILED_DELETE
                    } else {
                        event::FAILED_CREATE
                    };
                    let msg = format!("{}: {e}", step.describe());
                    out.failed.push(format!("{}: {msg}", key(&m)));
                    plan.event(true, reason, msg);
                    plan.requeue = Requeue::Backoff;
                }
            }
        }
        finish(kube, &m, plan, &mut out, &input.now).await;
    }
    out
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
        kube.event(EventRecord::new(
            regarding.clone(),
            e.warning,
            e.reason,
            &e.message,
        ))
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

/// What a sweep reads from vCenter.
struct Gathered {
    tasks: BTreeMap<MoRef, Option<crate::vcenter::model::task::TaskState>>,
    inventory: Inventory,
    /// Cluster configurations, read at most once per sweep (lazily, for all clusters at once).
    configs: tokio::sync::OnceCell<BTreeMap<MoRef, crate::vcenter::model::cluster::ClusterConfig>>,
    clusters_wanted: Vec<MoRef>,
}

impl Gathered {
    async fn membership(
        &self,
        client: &Client,
        cluster: &MoRef,
        group: &str,
        vm: &VmObs,
    ) -> Option<bool> {
        let configs = self
            .configs
            .get_or_try_init(|| async {
                let mut wanted = self.clusters_wanted.clone();
                if !wanted.contains(cluster) {
                    wanted.push(cluster.clone());
                }
                client.cluster_configs(&wanted).await
            })
            .await
            .ok()?;
        let vm = vm.moref.as_ref()?;
        match configs.get(cluster)?.group(group) {
            Some(ClusterGroup::Vm { vms, .. }) => Some(vms.contains(vm)),
            // A missing group: joining will say so (and back off) rather than powering on
            // outside the zone.
            _ => Some(false),
        }
    }
}

async fn gather(client: &Client, machines: &[Machine]) -> Result<Gathered, VcenterTrouble> {
    let trouble = |e: crate::vcenter::Error| VcenterTrouble {
        permanent: !e.is_transient(),
        message: e.to_string(),
    };
    let refs: Vec<MoRef> = machines.iter().filter_map(task_ref).collect();
    let tasks = if refs.is_empty() {
        BTreeMap::new()
    } else {
        client.task_states(&refs).await.map_err(trouble)?
    };
    let inventory = client.inventory().await.map_err(trouble)?;
    // Every cluster a powered-off VM of the sweep sits in: read together, once, if needed.
    let mut clusters_wanted: Vec<MoRef> = machines
        .iter()
        .filter_map(|m| vm_obs(&inventory, m.metadata.uid.as_deref()))
        .filter(|v| !v.powered_on())
        .filter_map(|v| {
            inventory.ancestor(v.moref.as_ref()?, crate::vcenter::Wanted::ComputeCluster)
        })
        .map(|c| c.moref.clone())
        .collect();
    clusters_wanted.sort();
    clusters_wanted.dedup();
    Ok(Gathered {
        tasks,
        inventory,
        configs: tokio::sync::OnceCell::new(),
        clusters_wanted,
    })
}

/// Add `new` VMs to a VM group with one reconfiguration, on the configuration read this sweep.
async fn join_group(
    client: &Client,
    g: &Gathered,
    cluster: &MoRef,
    group: &str,
    new: &[MoRef],
) -> Result<MoRef, String> {
    let current = g
        .configs
        .get()
        .and_then(|c| c.get(cluster))
        .and_then(|c| c.group(group).cloned());
    let mut vms = match current {
        Some(ClusterGroup::Vm { vms, .. }) => vms,
        Some(other) => {
            return Err(format!(
                "{group} in {cluster} is not a VM group ({other:?})"
            ));
        }
        None => {
            return Err(format!(
                "VM group {group} does not exist in {cluster} (spec.providerSpec.value.workspace.vmGroup); the VM stays powered off until it does"
            ));
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
        .map_err(|e| e.to_string())
}
