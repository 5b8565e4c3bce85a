//! The Cluster API machine kinds of `infrastructure.cluster.x-k8s.io/v1beta1` (namespaced):
//! `VSphereMachine` (the InfraMachine a CAPI Machine points at), `VSphereMachineTemplate` (what
//! MachineDeployments, KubeadmControlPlane and ClusterClass stamp VSphereMachines from) and
//! `VSphereVM` (the clone spec once the failure domain's overrides are applied).
//!
//! Every field of cluster-api-provider-vsphere v1.15.0 `apis/v1beta1/{types,vspheremachine_types,
//! vspheremachinetemplate_types,vspherevm_types}.go` is here (written afresh from the schema, not
//! translated), so CAPV manifests validate and apply unchanged. One deliberate difference:
//! `spec.network` and `network.devices` are optional here, because a failure domain's
//! `topology.networks` supply the devices (CAPV #3376 makes every template spell out devices the
//! failure domain then overrides). Fields CAPV accepts but this provider does not act on
//! (`pciDevices`, `resources`, `hardwareVersion`, `customVMXKeys` aside) are stored and ignored;
//! the machine says so in an event when wired.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, TypedLocalObjectReference};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::vsphere_deployment_zone::V1Beta2Status;
use super::vsphere_failure_domain::DhcpOverrides;
use crate::api::conditions::CapiCondition;

/// Finalizer CAPV puts on every VSphereMachine.
pub use crate::api::infrastructure::v1beta2::vsphere_machine::MACHINE_FINALIZER;
pub use crate::api::infrastructure::v1beta2::vsphere_vm::{
    GUEST_SOFT_POWER_OFF_DEFAULT, VM_FINALIZER,
};

/// How a VM is powered off before it is destroyed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PowerOffMode {
    /// Power off without involving the guest.
    #[default]
    #[serde(rename = "hard")]
    Hard,
    /// Guest shutdown through VMware Tools, however long it takes.
    #[serde(rename = "soft")]
    Soft,
    /// Guest shutdown, then a hard power-off after `guestSoftPowerOffTimeout`.
    #[serde(rename = "trySoft")]
    TrySoft,
}

/// VirtualMachineCloneSpec is information used to clone a virtual machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineCloneSpec {
    /// Template is the name, inventory path, managed object reference or the managed
    /// object ID of the template used to clone the virtual machine.
    #[schemars(length(min = 1))]
    pub template: String,
    /// CloneMode specifies the type of clone operation. Defaults to LinkedClone when the
    /// template has a snapshot, else FullClone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clone_mode: Option<String>,
    /// Snapshot is the name of the snapshot from which to create a linked clone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// Server is the IP address or FQDN of the vSphere server on which the virtual machine is
    /// created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Thumbprint is the colon-separated SHA-1 checksum of the given vCenter server's host
    /// certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thumbprint: Option<String>,
    /// Datacenter is the name, inventory path, managed object reference or the managed object ID
    /// of the datacenter in which the virtual machine is created/located. `*` (the default)
    /// selects the only datacenter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datacenter: Option<String>,
    /// Folder in which the virtual machine is created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// Datastore in which the virtual machine is created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datastore: Option<String>,
    /// StoragePolicyName of the storage policy to use with this Virtual Machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_policy_name: Option<String>,
    /// ResourcePool in which the virtual machine is created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
    /// Network is the network configuration for this machine's VM (optional here: a failure
    /// domain's networks may supply the devices).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    /// NumCPUs is the number of virtual processors in a virtual machine. Unset or 0: the
    /// template's (CAPV's Go field is `omitempty`, so 0 and unset are one value there).
    #[serde(rename = "numCPUs", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub num_cpus: Option<i32>,
    /// NumCoresPerSocket is the number of cores among which to distribute CPUs. Unset or 0:
    /// the template's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub num_cores_per_socket: Option<i32>,
    /// resources is the definition of the VM's cpu and memory reservations, limits and shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<VirtualMachineResources>,
    /// MemoryMiB is the size of a virtual machine's memory, in MiB. Unset or 0: the template's.
    #[serde(rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub memory_mib: Option<i64>,
    /// DiskGiB is the size of a virtual machine's disk, in GiB. Unset or 0: the template's.
    #[serde(rename = "diskGiB", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub disk_gib: Option<i32>,
    /// AdditionalDisksGiB holds the sizes of additional disks of the virtual machine, in GiB.
    #[serde(rename = "additionalDisksGiB", skip_serializing_if = "Option::is_none")]
    pub additional_disks_gib: Option<Vec<i32>>,
    /// CustomVMXKeys is a dictionary of advanced VMX options that can be set on VM. Keys that
    /// change the VM's isolation, devices or identity, and the guestinfo keys the provider
    /// writes, are refused (docs/vmx-keys.md).
    #[serde(rename = "customVMXKeys", skip_serializing_if = "Option::is_none")]
    pub custom_vmx_keys: Option<BTreeMap<String, String>>,
    /// TagIDs is an optional set of tags to add to an instance (URN notation).
    #[serde(rename = "tagIDs", skip_serializing_if = "Option::is_none")]
    pub tag_ids: Option<Vec<String>>,
    /// PciDevices is the list of pci devices used by the virtual machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci_devices: Option<Vec<PciDeviceSpec>>,
    /// OS is the Operating System of the virtual machine: Linux (the default) or Windows.
    #[serde(rename = "os", skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// HardwareVersion is the hardware version of the virtual machine (`vmx-17`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware_version: Option<String>,
    /// DataDisks are additional disks to add to the VM that are not part of the VM's OVA template.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 29))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub data_disks: Option<Vec<VSphereDisk>>,
}

/// The VM's cpu and memory reservations, limits and shares.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct VirtualMachineResources {
    /// requests: cpu (Hz) and memory (bytes) reservations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<VirtualMachineResourceSpec>,
    /// limits: cpu (Hz) and memory (bytes) limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<VirtualMachineResourceSpec>,
    /// shares: cpu and memory shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shares: Option<VirtualMachineResourceShares>,
}

/// A cpu and memory quantity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct VirtualMachineResourceSpec {
    /// cpu quantity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// memory quantity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
}

/// cpu and memory shares.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct VirtualMachineResourceShares {
    /// cpu shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub cpu: Option<i32>,
    /// memory shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub memory: Option<i32>,
}

/// An additional disk that is not part of the template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereDisk {
    /// Name identifies the disk definition; unique.
    pub name: String,
    /// SizeGiB is the size of the disk in GiB.
    #[serde(rename = "sizeGiB")]
    pub size_gib: i32,
    /// ProvisioningMode: Thin, Thick or EagerlyZeroed; unset leaves it to the storage policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_mode: Option<DiskProvisioningMode>,
}

/// How a data disk is provisioned.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DiskProvisioningMode {
    /// Allocated on demand.
    Thin,
    /// All space allocated.
    Thick,
    /// All space allocated and zeroed.
    EagerlyZeroed,
}

/// A PCI passthrough device or a vGPU.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PciDeviceSpec {
    /// DeviceID of the PCI device (with vendorId; exclusive with vGPUProfile).
    #[serde(rename = "deviceId", skip_serializing_if = "Option::is_none")]
    pub device_id: Option<i32>,
    /// VendorID of the PCI device.
    #[serde(rename = "vendorId", skip_serializing_if = "Option::is_none")]
    pub vendor_id: Option<i32>,
    /// VGPUProfile is the profile name of a vGPU.
    #[serde(rename = "vGPUProfile", skip_serializing_if = "Option::is_none")]
    pub vgpu_profile: Option<String>,
    /// CustomLabel is the hardware label of the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_label: Option<String>,
}

/// The VM's network configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// Devices is the list of network devices used by the virtual machine.
    pub devices: Vec<NetworkDeviceSpec>,
    /// Routes is a list of optional, static routes applied to the virtual machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<NetworkRouteSpec>>,
    /// Deprecated and rejected by the webhooks.
    #[serde(
        rename = "preferredAPIServerCidr",
        skip_serializing_if = "Option::is_none"
    )]
    pub preferred_api_server_cidr: Option<String>,
}

/// One network device of the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkDeviceSpec {
    /// NetworkName is the name, managed object reference or the managed object ID of the vSphere
    /// network to which the device will be connected.
    pub network_name: String,
    /// DeviceName is the name of the device in the guest OS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// DHCP4: use DHCP for IPv4 on this device.
    #[serde(rename = "dhcp4", skip_serializing_if = "Option::is_none")]
    pub dhcp4: Option<bool>,
    /// DHCP6: use DHCP for IPv6 on this device.
    #[serde(rename = "dhcp6", skip_serializing_if = "Option::is_none")]
    pub dhcp6: Option<bool>,
    /// Gateway4 is the IPv4 gateway used by this device.
    #[serde(rename = "gateway4", skip_serializing_if = "Option::is_none")]
    pub gateway4: Option<String>,
    /// Gateway6 is the IPv6 gateway used by this device.
    #[serde(rename = "gateway6", skip_serializing_if = "Option::is_none")]
    pub gateway6: Option<String>,
    /// IPAddrs: IPv4 and/or IPv6 addresses in CIDR notation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_addrs: Option<Vec<String>>,
    /// MTU is the device's Maximum Transmission Unit size in bytes.
    #[serde(rename = "mtu", skip_serializing_if = "Option::is_none")]
    pub mtu: Option<i64>,
    /// MACAddr is the MAC address used by this device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac_addr: Option<String>,
    /// Nameservers: DNS servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nameservers: Option<Vec<String>>,
    /// Routes applied to the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<NetworkRouteSpec>>,
    /// SearchDomains used when resolving with DNS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_domains: Option<Vec<String>>,
    /// AddressesFromPools: IPAddressPools to claim addresses from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addresses_from_pools: Option<Vec<TypedLocalObjectReference>>,
    /// DHCP4Overrides (applied when dhcp4 is set).
    #[serde(rename = "dhcp4Overrides", skip_serializing_if = "Option::is_none")]
    pub dhcp4_overrides: Option<DhcpOverrides>,
    /// DHCP6Overrides (applied when dhcp6 is set).
    #[serde(rename = "dhcp6Overrides", skip_serializing_if = "Option::is_none")]
    pub dhcp6_overrides: Option<DhcpOverrides>,
    /// SkipIPAllocation: the device gets neither DHCP nor static addresses.
    #[serde(rename = "skipIPAllocation", skip_serializing_if = "Option::is_none")]
    pub skip_ip_allocation: Option<bool>,
}

/// A static route.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRouteSpec {
    /// To is an IPv4 or IPv6 address.
    pub to: String,
    /// Via is an IPv4 or IPv6 address.
    pub via: String,
    /// Metric is the weight/priority of the route.
    pub metric: i32,
}

/// One of a VM's networks as observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    /// Connected: the network is connected to the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connected: Option<bool>,
    /// IPAddrs reported by VMware Tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_addrs: Option<Vec<String>>,
    /// MACAddr of the device.
    pub mac_addr: String,
    /// NetworkName of the network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_name: Option<String>,
}

/// How the VSphereVM of a machine is named.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereVmNamingStrategy {
    /// Template: a Go template over `.machine.name` with `trimSuffix` and `trunc`; unset means
    /// `{{ .machine.name }}`. Results are cut to 63 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

pub use crate::api::infrastructure::v1beta2::vsphere_machine::MachineAddressType;

/// MachineAddress contains information for the node's address.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct MachineAddress {
    /// type is the machine address type.
    #[serde(rename = "type")]
    pub type_: MachineAddressType,
    /// address is the machine address.
    #[schemars(length(min = 1, max = 256))]
    pub address: String,
}

/// VSphereMachineSpec defines the desired state of VSphereMachine.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "VSphereMachine",
    plural = "vspheremachines",
    namespaced,
    category = "cluster-api",
    status = "VSphereMachineStatus",
    doc = "VSphereMachine is the Schema for the vspheremachines API.",
    derive = "PartialEq",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels.cluster\\.x-k8s\\.io/cluster-name",
        description = "Cluster to which this VSphereMachine belongs"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.ready",
        description = "Machine ready status"
    ),
    printcolumn(
        name = "ProviderID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "VSphereMachine instance ID"
    ),
    printcolumn(
        name = "Machine",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"Machine\")].name",
        description = "Machine object which owns this VSphereMachine",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of Machine"
    )
)]
#[schemars(extend("x-kubernetes-validations" = [
    {"fieldPath": ".providerID", "message": crate::api::provider_id_cel::MESSAGE,
     "rule": crate::api::provider_id_cel::RULE}
]))]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineSpec {
    /// The clone spec.
    #[serde(flatten)]
    pub clone: VirtualMachineCloneSpec,
    /// ProviderID is the virtual machine's BIOS UUID formatted as `vsphere://<uuid>`.
    #[serde(rename = "providerID", skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// FailureDomain is the name of the VSphereDeploymentZone this machine should be placed in
    /// (`Machine.spec.failureDomain` wins when both are set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// PowerOffMode: hard (default), soft or trySoft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(default = "default_power_off_mode")]
    pub power_off_mode: Option<PowerOffMode>,
    /// GuestSoftPowerOffTimeout: how long trySoft waits before a hard power-off (default 5m).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_soft_power_off_timeout: Option<String>,
    /// NamingStrategy of the VSphereVM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub naming_strategy: Option<VSphereVmNamingStrategy>,
}

fn default_power_off_mode() -> Option<PowerOffMode> {
    Some(PowerOffMode::Hard)
}

/// VSphereMachineStatus defines the observed state of VSphereMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineStatus {
    /// Ready is true when the provider resource is ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Addresses contains the VSphere instance associated addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<MachineAddress>>,
    /// Network returns the network status for each of the machine's configured network interfaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<NetworkStatus>>,
    /// FailureReason: a terminal problem, for machines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// FailureMessage: a terminal problem, for humans.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// Conditions defines current service state of the VSphereMachine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
    /// v1beta2 groups the fields of the v1beta2 status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
}

/// VSphereMachineTemplateSpec defines the desired state of VSphereMachineTemplate.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "VSphereMachineTemplate",
    plural = "vspheremachinetemplates",
    namespaced,
    category = "cluster-api",
    doc = "VSphereMachineTemplate is the Schema for the vspheremachinetemplates API.",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineTemplateSpec {
    /// Template: what VSphereMachines made from this template are.
    pub template: VSphereMachineTemplateResource,
}

/// The metadata and spec of VSphereMachines made from a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineTemplateResource {
    /// Labels and annotations for the VSphereMachines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateObjectMeta>,
    /// Spec of the VSphereMachines.
    pub spec: VSphereMachineSpec,
}

/// Cluster API's ObjectMeta: labels and annotations only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateObjectMeta {
    /// labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// VSphereVMSpec defines the desired state of VSphereVM.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "VSphereVM",
    plural = "vspherevms",
    namespaced,
    category = "cluster-api",
    status = "VSphereVMStatus",
    doc = "VSphereVM is the Schema for the vspherevms API.",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereVMSpec {
    /// The clone spec.
    #[serde(flatten)]
    pub clone: VirtualMachineCloneSpec,
    /// BootstrapRef is a reference to the bootstrap data Secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap_ref: Option<ObjectReference>,
    /// BiosUUID is the VM's BIOS UUID, once known.
    #[serde(rename = "biosUUID", skip_serializing_if = "Option::is_none")]
    pub bios_uuid: Option<String>,
    /// PowerOffMode: hard (default), soft or trySoft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(default = "default_power_off_mode")]
    pub power_off_mode: Option<PowerOffMode>,
    /// GuestSoftPowerOffTimeout: how long trySoft waits before a hard power-off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest_soft_power_off_timeout: Option<String>,
}

/// VSphereVMStatus defines the observed state of VSphereVM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereVMStatus {
    /// Host is the ESXi host the VM runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Ready: the VM is powered on and reports an IP address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Addresses are the IP addresses of the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<String>>,
    /// CloneMode is the clone mode used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clone_mode: Option<String>,
    /// Snapshot is the snapshot a linked clone was made from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// RetryAfter: when a failed task is retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// TaskRef is the vCenter task in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,
    /// Network status of the VM's devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<NetworkStatus>>,
    /// FailureReason: a terminal problem, for machines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// FailureMessage: a terminal problem, for humans.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// Conditions of the VSphereVM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
    /// ModuleUUID is the cluster module the VM belongs to.
    #[serde(rename = "moduleUUID", skip_serializing_if = "Option::is_none")]
    pub module_uuid: Option<String>,
    /// VMRef is the VM's managed object reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_ref: Option<String>,
    /// v1beta2 groups the fields of the v1beta2 status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
    /// vsphere-provider's own (not in CAPV's schema): what the machine actuator it shares with
    /// OpenShift Machines keeps between passes (the task in flight, the adopted VM's instance
    /// UUID, the phase and conditions), in the shape of an OpenShift Machine's status. The
    /// fields above are derived from it for CAPV's readers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::preserve_unknown_object")]
    pub actuator_state: Option<serde_json::Value>,
}
