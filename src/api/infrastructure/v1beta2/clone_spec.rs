//! The clone spec VSphereMachine, VSphereMachineTemplate and VSphereVM share, in CAPV v1.17's
//! v1beta2 shape: bounded strings, enums where v1beta1 took any string, `*bool`/`*int32`
//! where zero and unset differ, and IP pool references without an apiVersion.
//!
//! One difference from CAPV, the same as in our v1beta1: `network` is optional, because a
//! failure domain's networks may supply the devices (CAPV #3376 makes every template list
//! devices the failure domain then replaces).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DhcpOverrides, IpPoolReference};

/// How a VM is cloned from its template.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum CloneMode {
    /// A full copy of the template's disks.
    #[serde(rename = "fullClone")]
    FullClone,
    /// Delta disks on a snapshot of the template.
    #[serde(rename = "linkedClone")]
    LinkedClone,
}

/// `cloneMode` as stored. v1beta1 took any string, and an object stored then is converted to
/// v1beta2, not validated against its enum: an unknown value decodes as unset (a full clone, as
/// this provider always read one) instead of making the whole VSphereMachine or VSphereVM
/// undecodable (hub-types §4.4). The CRD still allows only the two values.
fn lenient_clone_mode<'de, D>(d: D) -> Result<Option<CloneMode>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let given = Option::<String>::deserialize(d)?;
    Ok(given.and_then(|s| serde_json::from_value(serde_json::Value::String(s)).ok()))
}

/// How a VM is powered off before it is destroyed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PowerOffMode {
    /// Power off without involving the guest.
    #[serde(rename = "hard")]
    Hard,
    /// Guest shutdown, however long it takes.
    #[serde(rename = "soft")]
    Soft,
    /// Guest shutdown, then a hard power-off after `guestSoftPowerOffTimeoutSeconds`.
    #[serde(rename = "trySoft")]
    TrySoft,
}

/// Fault tolerance encryption of the VM.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[allow(clippy::enum_variant_names)]
pub enum FtEncryptionMode {
    /// ftEncryptionDisabled.
    #[serde(rename = "ftEncryptionDisabled")]
    Disabled,
    /// ftEncryptionOpportunistic.
    #[serde(rename = "ftEncryptionOpportunistic")]
    Opportunistic,
    /// ftEncryptionRequired.
    #[serde(rename = "ftEncryptionRequired")]
    Required,
}

/// vMotion encryption of the VM.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MigrateEncryptionMode {
    /// disabled.
    #[serde(rename = "disabled")]
    Disabled,
    /// opportunistic.
    #[serde(rename = "opportunistic")]
    Opportunistic,
    /// required.
    #[serde(rename = "required")]
    Required,
}

/// VirtualMachineCloneSpec: what a VM is cloned from and how it is sized and wired.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineCloneSpec {
    /// template: name, inventory path, managed object reference or ID of the source VM template.
    #[schemars(length(min = 1, max = 2048))]
    pub template: String,
    /// cloneMode: unset means linked when the template has a snapshot, else full.
    #[serde(
        default,
        deserialize_with = "lenient_clone_mode",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<CloneMode>")]
    pub clone_mode: Option<CloneMode>,
    /// snapshot of the template a linked clone starts from.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub snapshot: Option<String>,
    /// server: the vCenter the VM lives on.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub server: Option<String>,
    /// thumbprint: SHA-1 of the vCenter's certificate, colon-separated.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub thumbprint: Option<String>,
    /// datacenter of the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub datacenter: Option<String>,
    /// folder of the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub folder: Option<String>,
    /// datastore of the VM's disks.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub datastore: Option<String>,
    /// storagePolicyName chooses the datastore by policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub storage_policy_name: Option<String>,
    /// resourcePool of the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub resource_pool: Option<String>,
    /// network devices and routes of the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    /// numCPUs: unset means the template's.
    #[serde(rename = "numCPUs", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2))]
    pub num_cpus: Option<i32>,
    /// numCoresPerSocket: unset means the template's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub num_cores_per_socket: Option<i32>,
    /// resources: CPU and memory reservations, limits and shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<VirtualMachineResources>,
    /// memoryMiB: unset means the template's.
    #[serde(rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub memory_mib: Option<i64>,
    /// diskGiB of the boot disk: unset means the template's.
    #[serde(rename = "diskGiB", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub disk_gib: Option<i32>,
    /// additionalDisksGiB resizes the template's other disks, in order.
    #[serde(rename = "additionalDisksGiB", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), extend("x-kubernetes-list-type" = "atomic"))]
    pub additional_disks_gib: Option<Vec<i32>>,
    /// customVMXKeys: advanced VMX options. Keys that change the VM's isolation, devices or
    /// identity, and the guestinfo keys the provider writes, are refused (docs/vmx-keys.md).
    #[serde(rename = "customVMXKeys", skip_serializing_if = "Option::is_none")]
    pub custom_vmx_keys: Option<BTreeMap<String, String>>,
    /// tagIDs: vSphere tags (URNs) to attach.
    #[serde(rename = "tagIDs", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 1024)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub tag_ids: Option<Vec<String>>,
    /// pciDevices: PCI passthrough and vGPU devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), extend("x-kubernetes-list-type" = "atomic"))]
    pub pci_devices: Option<Vec<PciDeviceSpec>>,
    /// os of the guest (Linux or Windows), which decides how bootstrap data is passed.
    #[serde(rename = "os", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub os: Option<String>,
    /// hardwareVersion to upgrade the clone to (`vmx-17`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub hardware_version: Option<String>,
    /// dataDisks to add to the clone.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 29))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub data_disks: Option<Vec<VSphereDisk>>,
    /// cryptoKeyID of the key that encrypts the VM.
    #[serde(rename = "cryptoKeyID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub crypto_key_id: Option<String>,
    /// cryptoProfile: the storage policy that encrypts the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub crypto_profile: Option<String>,
    /// ftEncryptionMode: fault tolerance encryption.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ft_encryption_mode: Option<FtEncryptionMode>,
    /// migrateEncryption: vMotion encryption.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrate_encryption: Option<MigrateEncryptionMode>,
    /// nestedHV exposes hardware virtualization to the guest.
    #[serde(rename = "nestedHV", skip_serializing_if = "Option::is_none")]
    pub nested_hv: Option<bool>,
}

impl VirtualMachineCloneSpec {
    /// True for a Windows guest (VM names are cut to 15 characters).
    pub fn is_windows(&self) -> bool {
        self.os.as_deref() == Some("Windows")
    }
}

/// CPU and memory reservations, limits and shares.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct VirtualMachineResources {
    /// requests: reservations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<VirtualMachineResourceSpec>,
    /// limits: caps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<VirtualMachineResourceSpec>,
    /// shares: relative priority.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shares: Option<VirtualMachineResourceShares>,
}

/// A CPU and memory amount.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct VirtualMachineResourceSpec {
    /// cpu, as a quantity of MHz.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// memory, as a quantity of bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
}

/// CPU and memory shares.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
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

/// A data disk added to the clone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereDisk {
    /// name of the disk, unique in the VM.
    #[schemars(length(min = 1, max = 1024))]
    pub name: String,
    /// sizeGiB of the disk.
    #[serde(rename = "sizeGiB")]
    #[schemars(range(min = 1))]
    pub size_gib: i32,
    /// provisioningMode of the disk; unset means the datastore's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_mode: Option<DiskProvisioningMode>,
}

/// How a data disk's blocks are allocated.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DiskProvisioningMode {
    /// Allocated on write.
    Thin,
    /// Allocated up front, zeroed on first write.
    Thick,
    /// Allocated and zeroed up front.
    EagerlyZeroed,
}

/// A PCI passthrough or vGPU device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PciDeviceSpec {
    /// deviceId of a passthrough device.
    #[serde(rename = "deviceId", skip_serializing_if = "Option::is_none")]
    pub device_id: Option<i32>,
    /// vendorId of a passthrough device.
    #[serde(rename = "vendorId", skip_serializing_if = "Option::is_none")]
    pub vendor_id: Option<i32>,
    /// vGPUProfile of a vGPU device.
    #[serde(rename = "vGPUProfile", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub vgpu_profile: Option<String>,
    /// customLabel of the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub custom_label: Option<String>,
}

/// The network devices and routes of a VM. (v1beta2 dropped `preferredAPIServerCidr`.)
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NetworkSpec {
    /// devices of the VM, in order.
    #[schemars(length(max = 128), extend("x-kubernetes-list-type" = "atomic"))]
    pub devices: Vec<NetworkDeviceSpec>,
    /// routes of the VM, over all devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512), extend("x-kubernetes-list-type" = "atomic"))]
    pub routes: Option<Vec<NetworkRouteSpec>>,
}

/// One network device of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = require_network_name)]
pub struct NetworkDeviceSpec {
    // Decoded absent as empty: v1beta1 took `""` (a failure domain's networks name it), which
    // the conversion leaves out of the hub.
    /// networkName: the port group the device is on.
    #[serde(default)]
    #[schemars(length(min = 1, max = 2048))]
    pub network_name: String,
    /// deviceName inside the guest.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub device_name: Option<String>,
    /// dhcp4: whether IPv4 comes from DHCP.
    #[serde(rename = "dhcp4", skip_serializing_if = "Option::is_none")]
    pub dhcp4: Option<bool>,
    /// dhcp6: whether IPv6 comes from DHCP.
    #[serde(rename = "dhcp6", skip_serializing_if = "Option::is_none")]
    pub dhcp6: Option<bool>,
    /// gateway4: the IPv4 default gateway.
    #[serde(rename = "gateway4", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub gateway4: Option<String>,
    /// gateway6: the IPv6 default gateway.
    #[serde(rename = "gateway6", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub gateway6: Option<String>,
    /// ipAddrs: static addresses in CIDR notation.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 39)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub ip_addrs: Option<Vec<String>>,
    /// mtu of the device.
    #[serde(rename = "mtu", skip_serializing_if = "Option::is_none")]
    pub mtu: Option<i64>,
    /// macAddr of the device; unset means vCenter's choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 23))]
    pub mac_addr: Option<String>,
    /// nameservers for the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 64)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub nameservers: Option<Vec<String>>,
    /// routes of the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512), extend("x-kubernetes-list-type" = "atomic"))]
    pub routes: Option<Vec<NetworkRouteSpec>>,
    /// searchDomains for the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 1024)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub search_domains: Option<Vec<String>>,
    /// addressesFromPools: IPAM pools to claim an address from.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses_from_pools: Option<Vec<IpPoolReference>>,
    /// dhcp4Overrides for the device.
    #[serde(rename = "dhcp4Overrides", skip_serializing_if = "Option::is_none")]
    pub dhcp4_overrides: Option<DhcpOverrides>,
    /// dhcp6Overrides for the device.
    #[serde(rename = "dhcp6Overrides", skip_serializing_if = "Option::is_none")]
    pub dhcp6_overrides: Option<DhcpOverrides>,
    /// skipIPAllocation: no address at all (neither DHCP nor static nor pools).
    #[serde(rename = "skipIPAllocation", skip_serializing_if = "Option::is_none")]
    pub skip_ip_allocation: Option<bool>,
}

/// The schema requires `networkName`, whatever the Rust decoding tolerates.
fn require_network_name(schema: &mut schemars::Schema) {
    super::common::require(schema, "networkName");
}

/// A static route.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct NetworkRouteSpec {
    /// to: destination CIDR.
    #[schemars(length(min = 1, max = 39))]
    pub to: String,
    /// via: gateway.
    #[schemars(length(min = 1, max = 39))]
    pub via: String,
    /// metric of the route.
    #[schemars(range(min = 0))]
    pub metric: i32,
}

/// What vCenter reports about one of a VM's network devices.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    /// connected: whether the device is connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connected: Option<bool>,
    /// ipAddrs the guest reports on the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 39)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub ip_addrs: Option<Vec<String>>,
    /// macAddr of the device.
    #[schemars(length(min = 1, max = 17))]
    pub mac_addr: String,
    /// networkName the device is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub network_name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VSphereVM stored at v1beta1 with a clone mode v1beta2's enum lacks still decodes (as
    /// unset); the two known ones decode as themselves, and the schema keeps the enum.
    #[test]
    fn an_unknown_clone_mode_decodes_as_unset() {
        let spec = |mode: &str| -> VirtualMachineCloneSpec {
            serde_json::from_value(serde_json::json!({"template": "t", "cloneMode": mode})).unwrap()
        };
        assert_eq!(spec("linkedClone").clone_mode, Some(CloneMode::LinkedClone));
        assert_eq!(spec("fullClone").clone_mode, Some(CloneMode::FullClone));
        assert_eq!(spec("LinkedClone").clone_mode, None);
        let absent: VirtualMachineCloneSpec =
            serde_json::from_value(serde_json::json!({"template": "t"})).unwrap();
        assert_eq!(absent.clone_mode, None);
        let schema = serde_json::to_value(schemars::schema_for!(VirtualMachineCloneSpec)).unwrap();
        let text = schema.to_string();
        assert!(
            text.contains("linkedClone") && text.contains("fullClone"),
            "{text}"
        );
    }
}
