//! What a sweep observes of one machine, pure: its placement resolved against the inventory
//! (with its deployment zone's workspace filled in), its VM, whether that VM is in its VM group,
//! and the planner's input assembled from them. The shells read vCenter; this decides what the
//! reads mean.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::drain::PodInfo;
use super::ipam::{claims_to_release, network, unreadable, wanted_claims};
use super::user_data::user_data;
use super::{MachineInput, NameHolder, TaskObs, VcenterTrouble, VmObs, vm_instance_uuid};
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::api::ipam::{IpAddress, IpAddressClaim};
use crate::api::machine::Machine;
use crate::plan::capi_machine::actuated::{clone_fallback, is_actuated};
use crate::plan::placement::{self, ConfigError, Placement};
use crate::vcenter::model::cluster::{ClusterConfig, ClusterGroup};
use crate::vcenter::model::inventory::Inventory;
use crate::vcenter::model::moref::MoRef;

/// A machine's resolved placement and the region and zone labels of its deployment zone.
#[derive(Clone, Debug, Default)]
pub struct Placed {
    /// `None`: not a vSphere provider spec, or not needed (a deleting machine).
    pub placement: Option<Result<Placement, ConfigError>>,
    pub zone_labels: Option<(String, String)>,
    /// The zone or failure domain the placement needs and that does not exist (yet): the machine
    /// waits for it rather than failing, as one created with its zone (`kubectl apply -k`) may be
    /// seen before the zone is.
    pub pending: Option<String>,
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

/// The placement of one machine: its provider spec, with its deployment zone's workspace filled
/// in where it asks for one. A zone that does not resolve says why (field and cause).
pub fn machine_placement(
    m: &Machine,
    zones: &BTreeMap<String, VSphereDeploymentZone>,
    fds: &BTreeMap<String, VSphereFailureDomain>,
    inv: &Inventory,
) -> Placed {
    let failed = |e: ConfigError| Placed {
        placement: Some(Err(e)),
        zone_labels: None,
        pending: None,
    };
    let pending = |what: String| Placed {
        placement: None,
        zone_labels: None,
        pending: Some(what),
    };
    let spec = match m.vsphere_provider_spec() {
        None => return Placed::default(),
        Some(Err(e)) => {
            return failed(ConfigError {
                field: "spec.providerSpec.value".into(),
                message: format!("cannot decode the VSphereMachineProviderSpec: {e}"),
            });
        }
        Some(Ok(s)) => s,
    };
    let (spec, zone_labels) = match placement::requested_zone(m, zones.values()) {
        None => (spec, None),
        Some(zname) => {
            let Some(zone) = zones.get(&zname) else {
                return pending(format!(
                    "VSphereDeploymentZone {zname:?} (metadata.labels[{}]) not found",
                    placement::DEPLOYMENT_ZONE_LABEL
                ));
            };
            if let Some(f) = zone.spec.failure_domain_name()
                && !fds.contains_key(f)
            {
                return pending(format!(
                    "VSphereFailureDomain {f:?} of VSphereDeploymentZone {zname:?} not found"
                ));
            }
            let fd = zone.spec.failure_domain_name().and_then(|f| fds.get(f));
            match placement::zone_fill(zone, fd, inv) {
                Ok(fill) => {
                    let labels = (fill.region.clone(), fill.zone.clone());
                    (placement::with_zone(&spec, &fill), Some(labels))
                }
                Err(e) => return failed(e),
            }
        }
    };
    Placed {
        placement: Some(placement::resolve(&spec, inv).map(|p| clone_fallback(m, p))),
        zone_labels,
        pending: None,
    }
}

/// A machine's placement (none for a deleting machine: it only needs its VM) and its VM.
pub fn observe(
    m: &Machine,
    zones: &BTreeMap<String, VSphereDeploymentZone>,
    fds: &BTreeMap<String, VSphereFailureDomain>,
    inv: &Inventory,
) -> (Placed, Option<VmObs>) {
    let placed = if m.metadata.deletion_timestamp.is_some() {
        Placed::default()
    } else {
        machine_placement(m, zones, fds, inv)
    };
    (placed, vm_obs(inv, vm_instance_uuid(m).as_deref()))
}

/// The VM named like the machine in the folder its clone would go to, when the machine has no
/// VM of its own (the planner decides whether it is the machine's to adopt).
pub fn name_holder(
    m: &Machine,
    placed: &Placed,
    vm: Option<&VmObs>,
    inv: &Inventory,
) -> Option<NameHolder> {
    if vm.is_some() {
        return None;
    }
    let Some(Ok(p)) = &placed.placement else {
        return None;
    };
    let name = m.metadata.name.as_deref()?;
    let e = inv
        .children(&p.folder)
        .find(|e| e.moref.kind == "VirtualMachine" && e.name == name)?;
    let info = e.vm.as_ref();
    Some(NameHolder {
        path: e.path.clone(),
        instance_uuid: info.and_then(|v| v.instance_uuid.clone()),
        identity: info.and_then(|v| v.machine.clone()),
    })
}

/// The VM with this instance UUID, as the inventory shows it.
pub fn vm_obs(inv: &Inventory, uuid: Option<&str>) -> Option<VmObs> {
    let e = inv.vm_by_instance_uuid(uuid?)?;
    let vm = e.vm.as_ref()?;
    Some(VmObs {
        moref: Some(e.moref.clone()),
        bios_uuid: vm.bios_uuid.clone(),
        power_state: vm.power_state.clone(),
        ip_address: vm.ip_address.clone(),
        path: e.path.clone(),
        guest_metadata: vm.guest_metadata.clone(),
        instance_uuid: vm.instance_uuid.clone(),
        identity: vm.machine.clone(),
    })
}

/// The cluster and VM group a machine's powered-off VM must be in before it is powered on.
pub fn group_wanted<'p>(placed: &'p Placed, vm: Option<&VmObs>) -> Option<(&'p MoRef, &'p str)> {
    let (Some(vm), Some(Ok(p))) = (vm, &placed.placement) else {
        return None;
    };
    let (Some(cluster), Some(group)) = (&p.cluster, &p.vm_group) else {
        return None;
    };
    (!vm.powered_on()).then_some((cluster, group.as_str()))
}

/// Whether a VM is in a group, as read (a missing group counts as "not in it": the planner then
/// joins, and the join says the group is missing, rather than powering on outside the zone);
/// `None` when the cluster was not read.
pub fn membership(
    configs: &BTreeMap<MoRef, ClusterConfig>,
    cluster: &MoRef,
    group: &str,
    vm: &VmObs,
) -> Option<bool> {
    let vm = vm.moref.as_ref()?;
    match configs.get(cluster)?.group(group) {
        Some(ClusterGroup::Vm { vms, .. }) => Some(vms.contains(vm)),
        _ => Some(false),
    }
}

/// The Kubernetes facts every machine's decision shares.
#[derive(Clone, Copy, Debug)]
pub struct Surroundings<'a> {
    pub nodes: &'a [Node],
    /// Every machine (the control plane drain rule looks at the others).
    pub machines: &'a [Machine],
    /// Pods by node name.
    pub pods: &'a BTreeMap<String, Vec<PodInfo>>,
    /// The user data Secrets (`namespace/name`) of the machines that may clone.
    pub secrets: &'a BTreeMap<String, Secret>,
    /// The IP address claims and addresses (`namespace/name`) of the machines' namespaces.
    pub ipam: &'a IpamObjects,
    pub now: &'a Time,
}

/// The IP address claims and addresses a sweep read, by `namespace/name`.
#[derive(Clone, Debug, Default)]
pub struct IpamObjects {
    pub claims: BTreeMap<String, IpAddressClaim>,
    pub addresses: BTreeMap<String, IpAddress>,
    /// Namespace → why its claims or addresses could not be read (its machines with IP pools
    /// wait; the others go on).
    pub unreadable: BTreeMap<String, String>,
}

/// The planner's input for `m` before vCenter is consulted (`trouble`: why it could not be).
pub fn base_input<'a>(
    m: &'a Machine,
    around: Surroundings<'a>,
    trouble: Option<VcenterTrouble>,
) -> MachineInput<'a> {
    let node = m
        .status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .and_then(|r| r.name.clone())
        .unwrap_or_default();
    let ns = m.metadata.namespace.as_deref().unwrap_or("default");
    let (network, claims_held) = match around.ipam.unreadable.get(ns) {
        Some(why) if !wanted_claims(m).is_empty() => {
            let why = format!(
                "the IP address claims and addresses of namespace {ns} cannot be read: {why}"
            );
            (unreadable(m, &why), Err(why))
        }
        _ => (
            network(m, &around.ipam.claims, &around.ipam.addresses),
            Ok(claims_to_release(m, &around.ipam.claims)),
        ),
    };
    MachineInput {
        machine: m,
        placement: None,
        zone_labels: None,
        placement_pending: None,
        vcenter_error: trouble,
        vm: None,
        task: TaskObs::None,
        in_vm_group: None,
        name_holder: None,
        user_data: user_data(m, around.secrets),
        network,
        claims_held,
        attached_tags: None,
        // Nodes of Cluster API machines are CAPI's to link, drain and delete.
        nodes: if is_actuated(m) { &[] } else { around.nodes },
        machines: around.machines,
        pods: around.pods.get(&node).map(Vec::as_slice).unwrap_or(&[]),
        now: around.now.clone(),
    }
}
