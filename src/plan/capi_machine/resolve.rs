//! From a Cluster API Machine to the VM to clone, pure.
//!
//! The order is CAPV's VSphereMachine flow (`controllers/vspheremachine_controller.go`,
//! `pkg/services/vimmachine.go`): pause → cluster infrastructure ready → bootstrap data (workers
//! also wait for the control plane to be initialized) → the VSphereVM spec: the VSphereMachine's
//! clone spec, then the failure domain's overrides, then server and thumbprint from the
//! VSphereCluster when still empty, the BIOS UUID kept from an existing VSphereVM, the power-off
//! fields copied.
//!
//! The overrides (CAPV `generateOverrideFunc`), from `Machine.spec.failureDomain` → the
//! VSphereDeploymentZone of that name → its VSphereFailureDomain:
//! `server` ← zone (always); `datacenter` ← FD topology (always); `folder`, `resourcePool` ←
//! zone placement constraint (when set); `datastore` ← FD topology (when set); network devices by
//! index ← `topology.networks` (network name; extra entries appended as new devices), then
//! `topology.networkConfigurations` merged (network name, dhcp4/6, nameservers, search
//! domains, DHCP overrides, address pools). The VM group is the FD's `topology.hosts.vmGroupName`.
//! Never overridden: template, storage policy, tags.
//!
//! Then the VSphereVM spec is written as the OpenShift provider spec ([`provider_spec`]), which
//! `plan::placement::resolve` turns into the clone's [`crate::plan::placement::Placement`]: one
//! clone/group/power/destroy path for both machine APIs.
//!
//! Where CAPV goes wrong, this does better (reference capi-infra-contract.md §7):
//! * #3575 — the failure domain is `Machine.spec.failureDomain`, falling back to the
//!   VSphereMachine's own `spec.failureDomain`, so a VM is never cloned (and powered on) outside
//!   the zone because CAPI had not copied the field yet;
//! * missing or not-ready zones — CAPV only logs and clones *without* the overrides; here the
//!   machine waits, naming the zone (or its failure domain), and nothing is cloned;
//! * a zone that names no resource pool places the VM in its failure domain's compute cluster
//!   (its root pool), not in vCenter's default pool (ambiguous with several clusters);
//! * #3376 — `spec.network` is optional: the failure domain's networks supply the devices;
//! * #4128 — the template is looked up inside the failure domain's datacenter, so per-datacenter
//!   copies of one template name resolve to the zone's own copy instead of being ambiguous.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::bootstrap::{self, BootstrapData};
use super::naming;
use crate::api::capi_core::{CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, CapiCluster, CapiMachine};
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::{NetworkConfiguration, VSphereFailureDomain};
use crate::api::infrastructure::v1beta2::clone_spec::{
    NetworkDeviceSpec, NetworkSpec, VirtualMachineCloneSpec,
};
use crate::api::machine::{self as mapi, VSphereMachineProviderSpec, Workspace};
use crate::api::vsphere_cluster::VSphereCluster;
use crate::api::vsphere_machine::{MachineAddress, MachineAddressType, VSphereMachine};
use crate::api::vsphere_vm::{SecretReference, VSphereVM, VSphereVMSpec};
use crate::plan::vm_size::{self, VmSize};

/// Why a machine waits (the `VirtualMachineProvisioned` condition's reason), CAPV's names where
/// CAPV has one.
pub mod reason {
    /// The Cluster or the machine is paused.
    pub const PAUSED: &str = "Paused";
    /// `Cluster` infrastructure not provisioned yet.
    pub const WAITING_FOR_CLUSTER_INFRASTRUCTURE: &str = "WaitingForClusterInfrastructureReady";
    /// A worker waits for the control plane.
    pub const WAITING_FOR_CONTROL_PLANE: &str = "WaitingForControlPlaneInitialized";
    /// No bootstrap data (Secret) yet.
    pub const WAITING_FOR_BOOTSTRAP_DATA: &str = "WaitingForBootstrapData";
    /// The failure domain's zone is missing or not ready.
    pub const WAITING_FOR_FAILURE_DOMAIN: &str = "WaitingForFailureDomain";
    /// The configuration cannot be acted on (named field).
    pub const INVALID_CONFIGURATION: &str = "InvalidConfiguration";
}

/// Everything the resolution reads (the controller gathers it from its caches).
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub machine: &'a CapiMachine,
    pub cluster: Option<&'a CapiCluster>,
    pub vsphere_machine: &'a VSphereMachine,
    pub vsphere_cluster: Option<&'a VSphereCluster>,
    /// Deployment zones by name.
    pub zones: &'a BTreeMap<String, VSphereDeploymentZone>,
    /// Failure domains by name.
    pub failure_domains: &'a BTreeMap<String, VSphereFailureDomain>,
    /// The Secret `Machine.spec.bootstrap.dataSecretName` names, if found. Read only while
    /// there is no VSphereVM ([`super::machine::bootstrap_secret_to_read`]); ignored once there
    /// is one.
    pub bootstrap_secret: Option<&'a Secret>,
    /// The machine's VSphereVM, if it exists already.
    pub existing_vm: Option<&'a VSphereVM>,
    /// The VSphereMachine's v1beta1 `spec.failureDomain`, held in its conversion annotation
    /// since v1beta2 has no such field (`conversion::legacy_failure_domain`): the fallback
    /// when the Machine names none.
    pub legacy_failure_domain: Option<&'a str>,
}

/// A machine that cannot be provisioned yet: the reason and a message naming what it waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    pub reason: &'static str,
    pub message: String,
}

/// The VM a machine wants.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The VSphereVM object (name, namespace, labels, owner, spec), CAPV's shape.
    pub vm: VSphereVM,
    /// The same, as the provider spec `plan::placement::resolve` reads.
    pub provider_spec: VSphereMachineProviderSpec,
    /// The bootstrap data for the clone's extraConfig, checked before the VSphereVM is made
    /// (`None` once it exists: the VSphereVM names the Secret, the clone reads it).
    pub bootstrap: Option<BootstrapData>,
    /// The failure domain's region and zone tag names, when placed by one.
    pub region_zone: Option<(String, String)>,
    /// Fields set on the VSphereMachine that this provider stores but does not act on.
    pub ignored: Vec<&'static str>,
}

fn wait(reason: &'static str, message: impl Into<String>) -> Result<Desired, Wait> {
    Err(Wait {
        reason,
        message: message.into(),
    })
}

fn given(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

/// The deployment zone a machine is placed in: `Machine.spec.failureDomain`, else the
/// VSphereMachine's v1beta1 `spec.failureDomain` (#3575), which v1beta2 dropped: a machine
/// written at v1beta1 keeps it held for v1beta1 readers, and the edge that reads the machine
/// passes it in ([`Input::legacy_failure_domain`]).
pub fn zone_name<'a>(machine: &'a CapiMachine, legacy: Option<&'a str>) -> Option<&'a str> {
    given(&machine.spec.failure_domain).or(legacy.filter(|s| !s.is_empty()))
}

/// Resolve what `input.machine` wants, or why it waits.
pub fn resolve(input: &Input<'_>) -> Result<Desired, Wait> {
    let m = input.machine;
    let vsm = input.vsphere_machine;
    let ns = vsm.metadata.namespace.clone().unwrap_or_default();
    let paused_machine = vsm
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(crate::api::capi_core::PAUSED_ANNOTATION));
    if paused_machine || input.cluster.is_some_and(CapiCluster::paused) {
        return wait(
            reason::PAUSED,
            "the Cluster or this VSphereMachine is paused",
        );
    }
    let cluster_name = &m.spec.cluster_name;
    let Some(cluster) = input.cluster else {
        return wait(
            reason::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            format!("Cluster {ns}/{cluster_name} not found"),
        );
    };
    if !cluster.infrastructure_ready() {
        return wait(
            reason::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            format!("Cluster {ns}/{cluster_name}: infrastructure is not ready yet"),
        );
    }
    let Some(secret_name) = given(&m.spec.bootstrap.data_secret_name) else {
        if !m.is_control_plane() && !cluster.control_plane_initialized() {
            return wait(
                reason::WAITING_FOR_CONTROL_PLANE,
                format!("Cluster {ns}/{cluster_name}: the control plane is not initialized yet"),
            );
        }
        return wait(
            reason::WAITING_FOR_BOOTSTRAP_DATA,
            "Machine spec.bootstrap.dataSecretName is not set yet",
        );
    };
    // Once the VSphereVM exists the data is not needed here: not having read the Secret is
    // no reason to wait (nor to say so in the status of a provisioned machine).
    let bootstrap = match input.existing_vm {
        Some(_) => None,
        None => Some(
            bootstrap::read(input.bootstrap_secret, &ns, secret_name).map_err(|message| Wait {
                reason: reason::WAITING_FOR_BOOTSTRAP_DATA,
                message,
            })?,
        ),
    };

    // The failure domain: never clone without its placement.
    let mut spec = vsm.spec.clone.clone();
    let mut vm_group = None;
    let mut region_zone = None;
    if let Some(zname) = zone_name(m, input.legacy_failure_domain) {
        let Some(zone) = input.zones.get(zname) else {
            return wait(
                reason::WAITING_FOR_FAILURE_DOMAIN,
                format!("VSphereDeploymentZone {zname} (the machine's failure domain) not found"),
            );
        };
        if zone.status.as_ref().and_then(|s| s.ready) != Some(true) {
            return wait(
                reason::WAITING_FOR_FAILURE_DOMAIN,
                format!(
                    "VSphereDeploymentZone {zname} is not ready (see its conditions); nothing is cloned until it is"
                ),
            );
        }
        let fd_name = zone.spec.failure_domain.clone();
        let Some(fd) = input.failure_domains.get(&fd_name) else {
            return wait(
                reason::WAITING_FOR_FAILURE_DOMAIN,
                format!(
                    "VSphereFailureDomain {fd_name:?} (VSphereDeploymentZone {zname} spec.failureDomain) not found"
                ),
            );
        };
        apply_failure_domain(&mut spec, zone, fd);
        vm_group = fd
            .spec
            .topology
            .hosts
            .as_ref()
            .map(|h| h.vm_group_name.clone())
            .filter(|g| !g.is_empty());
        region_zone = Some((fd.spec.region.name.clone(), fd.spec.zone.name.clone()));
    }
    if let Some(vc) = input.vsphere_cluster {
        if given(&spec.server).is_none() {
            spec.server = vc.spec.server().map(str::to_string);
        }
        if given(&spec.thumbprint).is_none() {
            spec.thumbprint.clone_from(&vc.spec.thumbprint);
        }
    }
    if let Some((field, n)) = VmSize::from(&spec).negative().first() {
        return wait(
            reason::INVALID_CONFIGURATION,
            format!("spec.{field}: {n}: {}", vm_size::NEGATIVE),
        );
    }
    if given(&spec.server).is_none() {
        return wait(
            reason::INVALID_CONFIGURATION,
            "spec.server: no vCenter named by the failure domain's zone, the VSphereMachine or the VSphereCluster",
        );
    }

    let machine_name = m.metadata.name.clone().unwrap_or_default();
    let template = vsm.spec.naming.as_ref().and_then(|n| n.template.as_deref());
    let mut name = naming::render_name(&machine_name, template).map_err(|e| Wait {
        reason: reason::INVALID_CONFIGURATION,
        message: format!("spec.naming.template (v1beta1: spec.namingStrategy.template): {e}"),
    })?;
    if spec.is_windows() {
        name = naming::windows_name(&name);
    }

    let mut labels = BTreeMap::new();
    if let Some(c) = m.labels().get(CLUSTER_NAME_LABEL) {
        labels.insert(CLUSTER_NAME_LABEL.to_string(), c.clone());
    }
    if let Some(c) = m.labels().get(CONTROL_PLANE_LABEL) {
        labels.insert(CONTROL_PLANE_LABEL.to_string(), c.clone());
    }
    let vm_spec = VSphereVMSpec {
        clone: spec,
        bootstrap_ref: Some(SecretReference {
            name: secret_name.to_string(),
        }),
        bios_uuid: input.existing_vm.and_then(|v| v.spec.bios_uuid.clone()),
        power_off_mode: vsm.spec.power_off_mode,
        guest_soft_power_off_timeout_seconds: vsm.spec.guest_soft_power_off_timeout_seconds,
    };
    let provider_spec = provider_spec(&vm_spec, vm_group);
    let vm = VSphereVM {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(ns),
            labels: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: crate::api::infrastructure::HUB.into(),
                kind: "VSphereMachine".into(),
                name: vsm.metadata.name.clone().unwrap_or_default(),
                uid: vsm.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: vm_spec,
        status: None,
    };
    Ok(Desired {
        ignored: ignored_fields(&vm.spec),
        vm,
        provider_spec,
        bootstrap,
        region_zone,
    })
}

/// CAPV's failure-domain overrides, applied to a clone spec.
pub fn apply_failure_domain(
    spec: &mut VirtualMachineCloneSpec,
    zone: &VSphereDeploymentZone,
    fd: &VSphereFailureDomain,
) {
    if zone.spec.server.is_some() {
        spec.server.clone_from(&zone.spec.server);
    }
    let topo = &fd.spec.topology;
    spec.datacenter = Some(topo.datacenter.clone());
    if let Some(f) = zone.spec.folder().filter(|f| !f.trim().is_empty()) {
        spec.folder = Some(f.to_string());
    }
    if let Some(p) = zone.spec.resource_pool().filter(|p| !p.trim().is_empty()) {
        spec.resource_pool = Some(p.to_string());
    } else if let Some(c) = given(&topo.compute_cluster)
        && given(&spec.resource_pool).is_none()
    {
        // No pool named: the failure domain's compute cluster's root pool, as an OpenShift
        // Machine in the same zone gets (CAPV leaves it to vCenter's default pool, which is
        // ambiguous in any datacenter with several clusters).
        spec.resource_pool = Some(format!("{c}/Resources"));
    }
    if let Some(d) = given(&topo.datastore) {
        spec.datastore = Some(d.to_string());
    }
    let networks = topo.networks.clone().unwrap_or_default();
    let configs = topo.network_configurations.clone().unwrap_or_default();
    if networks.is_empty() && configs.is_empty() {
        return;
    }
    let net = spec.network.get_or_insert_with(|| NetworkSpec {
        devices: Vec::new(),
        ..NetworkSpec::default()
    });
    by_index(&mut net.devices, &networks, |d, n| {
        d.network_name = n.clone()
    });
    by_index(&mut net.devices, &configs, merge_configuration);
}

/// Merges `items[i]` into device `i`, appending new devices for the items beyond the list.
fn by_index<T>(
    devices: &mut Vec<NetworkDeviceSpec>,
    items: &[T],
    merge: impl Fn(&mut NetworkDeviceSpec, &T),
) {
    for (i, item) in items.iter().enumerate() {
        if i == devices.len() {
            devices.push(NetworkDeviceSpec::default());
        }
        merge(&mut devices[i], item);
    }
}

fn merge_configuration(d: &mut NetworkDeviceSpec, nc: &NetworkConfiguration) {
    if !nc.network_name.is_empty() {
        d.network_name = nc.network_name.clone();
    }
    if nc.dhcp4.is_some() {
        d.dhcp4 = nc.dhcp4;
    }
    if nc.dhcp6.is_some() {
        d.dhcp6 = nc.dhcp6;
    }
    let set = |own: &mut Option<Vec<String>>, theirs: &Option<Vec<String>>| {
        if theirs.as_ref().is_some_and(|t| !t.is_empty()) {
            own.clone_from(theirs);
        }
    };
    set(&mut d.nameservers, &nc.nameservers);
    set(&mut d.search_domains, &nc.search_domains);
    if nc.dhcp4_overrides.is_some() {
        d.dhcp4_overrides.clone_from(&nc.dhcp4_overrides);
    }
    if nc.dhcp6_overrides.is_some() {
        d.dhcp6_overrides.clone_from(&nc.dhcp6_overrides);
    }
    if nc
        .addresses_from_pools
        .as_ref()
        .is_some_and(|a| !a.is_empty())
    {
        d.addresses_from_pools.clone_from(&nc.addresses_from_pools);
    }
}

/// The VSphereVM spec as the OpenShift provider spec, for `plan::placement::resolve`:
/// workspace = server, datacenter (`*` = the only one), folder, datastore, resource pool and
/// the failure domain's VM group; devices by network name with their static addresses; size,
/// tags, snapshot, clone mode and data disks as they are.
pub fn provider_spec(vm: &VSphereVMSpec, vm_group: Option<String>) -> VSphereMachineProviderSpec {
    let c = &vm.clone;
    let size = VmSize::from(c).asked();
    let own = |s: &Option<String>| given(s).map(str::to_string);
    let devices = c
        .network
        .iter()
        .flat_map(|n| &n.devices)
        .map(|d| mapi::NetworkDeviceSpec {
            network_name: Some(d.network_name.clone()).filter(|n| !n.is_empty()),
            gateway: own(&d.gateway4).or_else(|| own(&d.gateway6)),
            ip_addrs: d.ip_addrs.clone().filter(|a| !a.is_empty()),
            nameservers: d.nameservers.clone().filter(|a| !a.is_empty()),
            // The claims are made and waited for by the same planner as OpenShift's.
            addresses_from_pools: d
                .addresses_from_pools
                .as_ref()
                .map(|pools| {
                    pools
                        .iter()
                        .map(|p| mapi::AddressesFromPool {
                            group: p.api_group.clone(),
                            resource: p.kind.clone(),
                            name: p.name.clone(),
                        })
                        .collect::<Vec<_>>()
                })
                .filter(|p| !p.is_empty()),
        })
        .collect();
    VSphereMachineProviderSpec {
        template: c.template.clone(),
        workspace: Some(Workspace {
            server: own(&c.server),
            datacenter: own(&c.datacenter).filter(|d| d != "*"),
            folder: own(&c.folder),
            datastore: own(&c.datastore),
            resource_pool: own(&c.resource_pool),
            vm_group,
        }),
        network: mapi::NetworkSpec { devices },
        // 0 is the template's value; a negative one is kept for the placement to refuse,
        // naming the field, rather than dropped (the VM would silently get the template's).
        num_cpus: size.num_cpus,
        num_cores_per_socket: size.num_cores_per_socket,
        memory_mib: size.memory_mib,
        disk_gib: size.disk_gib,
        tag_ids: c.tag_ids.clone().filter(|t| !t.is_empty()),
        snapshot: own(&c.snapshot),
        clone_mode: c.clone_mode.map(wire_name),
        data_disks: c.data_disks.as_ref().map(|disks| {
            disks
                .iter()
                .map(|d| mapi::VSphereDisk {
                    name: d.name.clone(),
                    size_gib: d.size_gib,
                    provisioning_mode: d.provisioning_mode.map(wire_name),
                })
                .collect()
        }),
        ..VSphereMachineProviderSpec::default()
    }
}

/// An enum value as its JSON string (`linkedClone`, `Thin`).
fn wire_name(v: impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Fields CAPV acts on that this provider stores but does not (yet) act on; the controller
/// says so in an event rather than pretending.
fn ignored_fields(vm: &VSphereVMSpec) -> Vec<&'static str> {
    let c = &vm.clone;
    let mut out = Vec::new();
    let mut note = |set: bool, f: &'static str| {
        if set {
            out.push(f);
        }
    };
    note(
        given(&c.storage_policy_name).is_some(),
        "spec.storagePolicyName",
    );
    note(
        c.additional_disks_gib
            .as_ref()
            .is_some_and(|a| !a.is_empty()),
        "spec.additionalDisksGiB",
    );
    note(
        c.pci_devices.as_ref().is_some_and(|a| !a.is_empty()),
        "spec.pciDevices",
    );
    note(c.resources.is_some(), "spec.resources");
    note(given(&c.hardware_version).is_some(), "spec.hardwareVersion");
    out
}

/// A field named by `plan::placement::resolve` (`spec.providerSpec.value.workspace.folder`) as
/// the VSphereVM field it came from (`spec.folder`), so errors name what the user wrote.
pub fn capv_field(field: &str) -> String {
    let f = field
        .strip_prefix("spec.providerSpec.value.")
        .unwrap_or(field);
    let f = f.strip_prefix("workspace.").unwrap_or(f);
    format!("spec.{f}")
}

/// `providerID` (`vsphere://<BIOS UUID>`) and the addresses of a provisioned VM: every guest IP
/// as ExternalIP, then the VM name as InternalDNS (CAPV's `reconcileNetwork`).
pub fn provisioned(
    vm_name: &str,
    bios_uuid: &str,
    ips: &[String],
) -> (String, Vec<MachineAddress>) {
    let mut addresses: Vec<MachineAddress> = ips
        .iter()
        .filter(|ip| !ip.is_empty())
        .map(|ip| MachineAddress {
            type_: MachineAddressType::ExternalIp,
            address: ip.clone(),
        })
        .collect();
    addresses.push(MachineAddress {
        type_: MachineAddressType::InternalDns,
        address: vm_name.to_string(),
    });
    (
        crate::plan::machine::create::provider_id(bios_uuid),
        addresses,
    )
}

#[cfg(test)]
mod tests;
