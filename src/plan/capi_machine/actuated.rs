//! A VSphereVM as the machine actuator sees it: **one actuator** for both machine APIs.
//!
//! CAPV splits a Cluster API machine in two: the VSphereMachine controller resolves what the
//! machine wants into a VSphereVM, and the VSphereVM controller makes the VM. Here the first
//! half is [`super::resolve`] and the second is the same per-server sweep, planners and
//! clone/group/power/destroy path that OpenShift Machines use: each VSphereVM enters the sweep
//! as an in-memory OpenShift Machine ([`machine_for`]) and what the planner made of it is
//! written back onto the VSphereVM ([`vm_after`]). The in-memory Machine is never stored; the
//! actuator's state between passes (the task in flight, an adopted VM's instance UUID, the
//! phase and conditions) lives in `VSphereVM.status.actuatorState`, and CAPV's own status
//! fields are derived from it for CAPV's readers.
//!
//! What differs from an OpenShift Machine is decided here and nowhere else:
//! * the VM's instance UUID is the VSphereVM's UID (as CAPV clones it), so a VM CAPV made is
//!   found as ours;
//! * the user data is the bootstrap data Secret in CAPV's format ([`super::bootstrap`]), and
//!   `guestinfo.metadata` is written once the clone's MACs are known, before power-on;
//! * Nodes are CAPI's: the actuator neither links, drains nor deletes them for a VSphereVM.
use crate::api::conditions::STATUS_FALSE;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeAddress, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::status::{VM_PROVISIONED, WAITING_FOR_CLONE, meta_reason};
use crate::api::conditions::{
    CapiCondition, ConditionUpdate, set_capi_condition, set_meta_condition, severity,
};
use crate::api::infrastructure::v1beta2::clone_spec::PowerOffMode;
use crate::api::infrastructure::v1beta2::common::DeprecatedFailureStatus;
use crate::api::machine::{
    MACHINE_FINALIZER, Machine, MachineSpec, MachineStatus, ProviderSpec, phase as ph,
};
use crate::api::machine_status::{VSphereMachineProviderStatus, condition as cond};
use crate::api::vsphere_vm::{
    GUEST_SOFT_POWER_OFF_DEFAULT, VM_FINALIZER, VSphereVM, VSphereVMStatus,
};
use crate::plan::machine::VmObs;
use crate::plan::machine::ipam::PoolAddresses;
use crate::plan::placement::Placement;
use crate::vcenter::model::inventory::GUEST_METADATA_KEY;

/// On the in-memory Machine only: the VSphereVM it stands for (JSON). Never stored.
pub const VSPHERE_VM_ANNOTATION: &str = "vsphere-provider.io/vspherevm";
/// On a VSphereVM: the VM group its failure domain puts the VM in (CAPV's VSphereVM spec has
/// no field for it; set when the VSphereVM is made from its VSphereMachine).
pub const VM_GROUP_ANNOTATION: &str = "vsphere-provider.io/vm-group";

/// Whether `m` is the in-memory stand-in of a VSphereVM.
pub fn is_actuated(m: &Machine) -> bool {
    m.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(VSPHERE_VM_ANNOTATION))
}

/// The name, namespace and spec of a VSphereVM: what its stand-in carries (its status and
/// resource version would change the stand-in's fingerprint on every status write).
fn spec_only(vm: &VSphereVM) -> VSphereVM {
    VSphereVM {
        metadata: ObjectMeta {
            name: vm.metadata.name.clone(),
            namespace: vm.metadata.namespace.clone(),
            ..ObjectMeta::default()
        },
        spec: vm.spec.clone(),
        status: None,
    }
}

/// The name, namespace and spec of the VSphereVM `m` stands for, if it stands for one.
pub fn vsphere_vm(m: &Machine) -> Option<VSphereVM> {
    let json = m
        .metadata
        .annotations
        .as_ref()?
        .get(VSPHERE_VM_ANNOTATION)?;
    serde_json::from_str(json).ok()
}

/// Whether the stand-in's VM still needs its cloud-init metadata: it is written once, naming
/// the VM, while the VM is powered off (before its first boot; a running guest would not read
/// it again).
pub fn needs_guest_metadata(m: &Machine, vm: &VmObs) -> bool {
    is_actuated(m) && !vm.powered_on() && vm.guest_metadata.as_deref() != m.metadata.name.as_deref()
}

/// The extraConfig the stand-in's VM gets for its metadata, given its NICs' MACs in device
/// order and the addresses its IP address claims are bound to: `guestinfo.metadata` (+
/// encoding) and the marker saying whose it is. A pool's gateway serves a device that names
/// none of its own (CAPV's way).
pub fn guest_metadata_keys(
    m: &Machine,
    macs: &[String],
    pools: &PoolAddresses,
) -> Option<Vec<(String, String)>> {
    let vm = vsphere_vm(m)?;
    let name = vm.metadata.name.clone().unwrap_or_default();
    let network = vm.spec.clone.network.unwrap_or_default();
    let mut devices = network.devices.clone();
    let mut extra = vec![Vec::new(); devices.len()];
    for (i, (addrs, gateway)) in pools {
        let (Some(d), Some(e)) = (devices.get_mut(*i), extra.get_mut(*i)) else {
            continue;
        };
        e.clone_from(addrs);
        let v6 = addrs.first().is_some_and(|a| a.contains(':'));
        let slot = if v6 { &mut d.gateway6 } else { &mut d.gateway4 };
        if slot.as_deref().is_none_or(str::is_empty) {
            slot.clone_from(gateway);
        }
    }
    let yaml = super::bootstrap::metadata(
        &name,
        &devices,
        network.routes.as_deref().unwrap_or_default(),
        macs,
        &extra,
    );
    let mut keys = super::bootstrap::metadata_extra_config(&yaml);
    keys.push((GUEST_METADATA_KEY.to_string(), name));
    Some(keys)
}

/// A Cluster API machine's placement: `cloneMode: linkedClone` from a template without
/// snapshots is a full clone, as CAPV does it (CAPV's templates ask for linked clones; an
/// OpenShift Machine is refused instead, naming the field).
pub fn clone_fallback(m: &Machine, mut p: Placement) -> Placement {
    if is_actuated(m)
        && let Some(l) = p.linked_clone.as_mut()
    {
        l.or_full_clone = true;
    }
    p
}

/// The provider-status condition saying when the guest was asked to shut down (True), or that
/// it could not be asked (False: no VMware Tools).
pub const GUEST_SHUTDOWN: &str = "GuestShutdownRequested";

/// How the stand-in's VM is powered off before it is destroyed, and how long trySoft waits for
/// the guest (CAPV's default when unset or unreadable). Hard for an OpenShift Machine.
pub fn power_off_mode(m: &Machine) -> (PowerOffMode, std::time::Duration) {
    let Some(vm) = vsphere_vm(m) else {
        return (PowerOffMode::Hard, GUEST_SOFT_POWER_OFF_DEFAULT);
    };
    let timeout = vm
        .spec
        .guest_soft_power_off_timeout_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map(std::time::Duration::from_secs)
        .unwrap_or(GUEST_SOFT_POWER_OFF_DEFAULT);
    (
        vm.spec.power_off_mode.unwrap_or(PowerOffMode::Hard),
        timeout,
    )
}

/// `namespace/name` of a VSphereVM.
pub fn vm_key(vm: &VSphereVM) -> String {
    format!(
        "{}/{}",
        vm.metadata.namespace.as_deref().unwrap_or("default"),
        vm.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The VSphereVM as an OpenShift Machine the shared planners act on: its name, namespace, UID
/// (the VM's instance UUID), deletion and finalizer; the clone spec as a provider spec (with
/// the bootstrap Secret as the user data Secret, so it is read like one); the actuator's state
/// as the Machine's status; `providerID` from the BIOS UUID once known.
pub fn machine_for(vm: &VSphereVM) -> Machine {
    let group = vm
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VM_GROUP_ANNOTATION))
        .filter(|g| !g.is_empty())
        .cloned();
    let mut spec = super::resolve::provider_spec(&vm.spec, group);
    spec.user_data_secret = vm
        .spec
        .bootstrap_ref
        .as_ref()
        .map(|r| r.name.clone())
        .filter(|name| !name.is_empty())
        .map(|name| k8s_openapi::api::core::v1::LocalObjectReference { name });
    let finalizers = vm
        .metadata
        .finalizers
        .iter()
        .flatten()
        .map(|f| {
            if f == VM_FINALIZER {
                MACHINE_FINALIZER.to_string()
            } else {
                f.clone()
            }
        })
        .collect::<Vec<_>>();
    let status: Option<MachineStatus> = vm
        .status
        .as_ref()
        .and_then(|s| s.actuator_state.clone())
        .and_then(|v| serde_json::from_value(v).ok());
    Machine {
        metadata: ObjectMeta {
            name: vm.metadata.name.clone(),
            namespace: vm.metadata.namespace.clone(),
            uid: vm.metadata.uid.clone(),
            resource_version: vm.metadata.resource_version.clone(),
            generation: vm.metadata.generation,
            creation_timestamp: vm.metadata.creation_timestamp.clone(),
            deletion_timestamp: vm.metadata.deletion_timestamp.clone(),
            finalizers: (!finalizers.is_empty()).then_some(finalizers),
            annotations: Some(BTreeMap::from([(
                VSPHERE_VM_ANNOTATION.to_string(),
                serde_json::to_string(&spec_only(vm)).unwrap_or_default(),
            )])),
            ..ObjectMeta::default()
        },
        spec: MachineSpec {
            provider_spec: Some(ProviderSpec {
                value: serde_json::to_value(&spec).ok(),
            }),
            provider_id: vm
                .spec
                .bios_uuid
                .as_deref()
                .filter(|b| !b.is_empty())
                .map(crate::plan::machine::create::provider_id),
            ..MachineSpec::default()
        },
        status,
    }
}

/// The VSphereVM after the planner's pass over its stand-in `after`: the finalizer, the BIOS
/// UUID once the VM exists, the actuator's state, and CAPV's status fields derived from it.
pub fn vm_after(before: &VSphereVM, after: &Machine, now: &Time) -> VSphereVM {
    let mut vm = before.clone();
    let wants_finalizer = after
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == MACHINE_FINALIZER);
    let mut finalizers: Vec<String> = before
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != VM_FINALIZER)
        .cloned()
        .collect();
    if wants_finalizer {
        finalizers.push(VM_FINALIZER.to_string());
    }
    vm.metadata.finalizers =
        (!finalizers.is_empty() || before.metadata.finalizers.is_some()).then_some(finalizers);
    if let Some(bios) = after
        .spec
        .provider_id
        .as_deref()
        .and_then(|p| p.strip_prefix("vsphere://"))
        .filter(|b| !b.is_empty())
    {
        vm.spec.bios_uuid = Some(bios.to_string());
    }
    let st = after.status.clone().unwrap_or_default();
    let ps = VSphereMachineProviderStatus::from_value(st.provider_status.as_ref());
    let out = vm.status.get_or_insert_with(VSphereVMStatus::default);
    out.actuator_state = serde_json::to_value(&st).ok();
    out.task_ref = Some(ps.task_ref.clone()).filter(|t| !t.is_empty());
    let ips = internal_ips(st.addresses.as_deref());
    out.addresses = (!ips.is_empty()).then(|| ips.clone());
    let running = ps.instance_state.as_deref() == Some("poweredOn");
    out.ready = Some(ps.instance_id.is_some() && running && !ips.is_empty());
    let failed = st.phase.as_deref() == Some(ph::FAILED);
    let v1beta1 = DeprecatedFailureStatus::v1beta1_mut(&mut out.deprecated);
    v1beta1.failure_reason = st.error_reason.clone().filter(|_| failed);
    v1beta1.failure_message = st
        .error_message
        .as_deref()
        .filter(|_| failed)
        .map(capv_paths);
    // The planner names OpenShift's provider spec fields; the user wrote CAPV's.
    let mut ps = ps;
    for c in &mut ps.conditions {
        c.message = capv_paths(&c.message);
    }
    // The same condition in both sets: v1beta1's for v1beta1 readers (and the VSphereMachine,
    // [`not_provisioned`]), metav1's (with a reason always) for v1beta2's.
    let provisioned = provisioned_condition(&ps);
    let conditions = v1beta1.conditions.get_or_insert_with(Vec::new);
    set_capi_condition(conditions, &provisioned, now);
    let meta = ConditionUpdate {
        reason: meta_reason(provisioned.status, provisioned.reason),
        severity: "",
        ..provisioned
    };
    let generation = vm.metadata.generation;
    let out = vm.status.get_or_insert_with(VSphereVMStatus::default);
    set_meta_condition(
        out.conditions.get_or_insert_with(Vec::new),
        &meta,
        generation,
        now,
    );
    vm
}

fn internal_ips(addresses: Option<&[NodeAddress]>) -> Vec<String> {
    addresses
        .unwrap_or_default()
        .iter()
        .filter(|a| a.type_ == "InternalIP" && !a.address.is_empty())
        .map(|a| a.address.clone())
        .collect()
}

/// `VirtualMachineProvisioned`: true once the VM exists; else why not, as the planner said it
/// in `MachineCreation` (a zone, claim or user data waited for, a failed clone), else cloning.
/// A message naming OpenShift provider spec fields (`spec.providerSpec.value.workspace.folder`)
/// as the VSphereVM fields they came from (`spec.folder`).
fn capv_paths(message: &str) -> String {
    message
        .replace("spec.providerSpec.value.workspace.", "spec.")
        .replace("spec.providerSpec.value.", "spec.")
}

fn provisioned_condition(ps: &VSphereMachineProviderStatus) -> ConditionUpdate<'_> {
    if ps.instance_id.is_some() {
        return ConditionUpdate::true_(VM_PROVISIONED);
    }
    match ps
        .conditions
        .iter()
        .find(|c| c.type_ == cond::MACHINE_CREATION && c.status == STATUS_FALSE)
    {
        Some(c) => {
            ConditionUpdate::false_(VM_PROVISIONED, &c.reason, severity::WARNING, &c.message)
        }
        None => ConditionUpdate::false_(
            VM_PROVISIONED,
            WAITING_FOR_CLONE,
            severity::INFO,
            "the VM is being cloned",
        ),
    }
}

/// The VM as its VSphereVM last recorded it, for the VSphereMachine's status (`None` until the
/// VM exists).
pub fn observed(vm: &VSphereVM) -> Option<VmObs> {
    let bios = vm.spec.bios_uuid.clone().filter(|b| !b.is_empty())?;
    let state: MachineStatus = vm
        .status
        .as_ref()
        .and_then(|s| s.actuator_state.clone())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let ps = VSphereMachineProviderStatus::from_value(state.provider_status.as_ref());
    Some(VmObs {
        moref: None,
        bios_uuid: Some(bios),
        power_state: ps.instance_state,
        ip_address: internal_ips(state.addresses.as_deref()).into_iter().next(),
        path: vm.metadata.name.clone().unwrap_or_default(),
        ..VmObs::default()
    })
}

/// The VSphereVM's `VirtualMachineProvisioned` condition when it says the VM is not there
/// (the reason the VSphereMachine reports while it waits).
pub fn not_provisioned(vm: &VSphereVM) -> Option<&CapiCondition> {
    DeprecatedFailureStatus::v1beta1_conditions(&vm.status.as_ref()?.deprecated)
        .iter()
        .find(|c| c.type_ == VM_PROVISIONED && c.status == STATUS_FALSE)
}

/// A reference to a VSphereVM, for events.
pub fn vm_ref(vm: &VSphereVM) -> ObjectReference {
    ObjectReference {
        api_version: Some(crate::api::Kind::VSphereVM.api_version().into()),
        kind: Some("VSphereVM".into()),
        name: vm.metadata.name.clone(),
        namespace: vm.metadata.namespace.clone(),
        uid: vm.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests;
