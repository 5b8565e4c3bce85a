//! `Machine` (`machine.openshift.io/v1beta1`, namespaced) with the vSphere provider spec.
//!
//! Fields, JSON names and schema rules follow openshift/api `machine/v1beta1/types_machine.go`,
//! `types_provider.go` and `types_vsphereprovider.go`. Fields behind upstream feature gates
//! (`authoritativeAPI`, the migration status fields) are served without their gated default, so
//! objects from clusters with the gate on are admitted and round-trip unchanged. As upstream, `spec.providerSpec.value` is
//! `x-kubernetes-preserve-unknown-fields` in the CRD; [`VSphereMachineProviderSpec`] is checked by
//! the admission webhook and `validate` when its `kind` is `VSphereMachineProviderSpec`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LocalObjectReference, NodeAddress, ObjectReference, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::conditions::CapiCondition;

/// Finalizer the machine controller puts on every Machine.
pub const MACHINE_FINALIZER: &str = "machine.machine.openshift.io";
/// Label naming the cluster a machine belongs to.
pub const CLUSTER_ID_LABEL: &str = "machine.openshift.io/cluster-api-cluster";
/// Label with the machine role (`master` for control plane machines).
pub const MACHINE_ROLE_LABEL: &str = "machine.openshift.io/cluster-api-machine-role";
/// Label with the machine type (`master` for control plane machines).
pub const MACHINE_TYPE_LABEL: &str = "machine.openshift.io/cluster-api-machine-type";
/// Label with the machine's region (printer column REGION).
pub const REGION_LABEL: &str = "machine.openshift.io/region";
/// Label with the machine's zone (printer column ZONE).
pub const ZONE_LABEL: &str = "machine.openshift.io/zone";
/// Label with the instance type (printer column TYPE).
pub const INSTANCE_TYPE_LABEL: &str = "machine.openshift.io/instance-type";
/// Annotation with the instance state (printer column STATE).
pub const INSTANCE_STATE_ANNOTATION: &str = "machine.openshift.io/instance-state";
/// Annotation that skips draining the node on deletion.
pub const EXCLUDE_NODE_DRAINING_ANNOTATION: &str = "machine.openshift.io/exclude-node-draining";

/// Machine phases (`status.phase`).
pub mod phase {
    /// The instance is being created.
    pub const PROVISIONING: &str = "Provisioning";
    /// The instance exists (providerID or addresses) but has no node yet.
    pub const PROVISIONED: &str = "Provisioned";
    /// The node joined (nodeRef set).
    pub const RUNNING: &str = "Running";
    /// Terminal: the instance vanished or the configuration is invalid.
    pub const FAILED: &str = "Failed";
    /// deletionTimestamp is set.
    pub const DELETING: &str = "Deleting";
}

/// The pattern of a lifecycle hook name (a qualified name with an optional DNS prefix).
pub const LIFECYCLE_HOOK_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";

/// MachineSpec defines the desired state of Machine
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machine.openshift.io",
    version = "v1beta1",
    kind = "Machine",
    plural = "machines",
    namespaced,
    category = "machine-api",
    status = "MachineStatus",
    doc = "Machine is the Schema for the machines API",
    derive = "PartialEq",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Phase of machine"
    ),
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".metadata.labels['machine\\.openshift\\.io/instance-type']",
        description = "Type of instance"
    ),
    printcolumn(
        name = "Region",
        type_ = "string",
        json_path = ".metadata.labels['machine\\.openshift\\.io/region']",
        description = "Region associated with machine"
    ),
    printcolumn(
        name = "Zone",
        type_ = "string",
        json_path = ".metadata.labels['machine\\.openshift\\.io/zone']",
        description = "Zone associated with machine"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Machine age"
    ),
    printcolumn(
        name = "Node",
        type_ = "string",
        json_path = ".status.nodeRef.name",
        description = "Node associated with machine",
        priority = 1
    ),
    printcolumn(
        name = "ProviderID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID of machine created in cloud provider",
        priority = 1
    ),
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".metadata.annotations['machine\\.openshift\\.io/instance-state']",
        description = "State of instance",
        priority = 1
    )
)]
#[schemars(extend("x-kubernetes-validations" = [
    {"fieldPath": ".providerID", "message": crate::api::provider_id_cel::MESSAGE,
     "rule": crate::api::provider_id_cel::RULE}
]))]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// ObjectMeta will autopopulate the Node created. Use this to indicate what labels,
    /// annotations, name prefix, etc., should be used when creating the Node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MachineObjectMeta>,
    /// lifecycleHooks allow users to pause operations on the machine at certain predefined points
    /// within the machine lifecycle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle_hooks: Option<LifecycleHooks>,
    /// The list of the taints to be applied to the corresponding Node in additive manner.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub taints: Option<Vec<Taint>>,
    /// providerSpec details Provider-specific configuration to use during node creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_spec: Option<ProviderSpec>,
    /// providerID is the identification ID of the machine provided by the provider.
    #[serde(rename = "providerID", skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// authoritativeAPI is the API that is authoritative for this resource: `MachineAPI` or
    /// `ClusterAPI` (upstream's `MachineAPIMigration` feature gate). This provider does not act on
    /// it, but accepts and keeps it: in clusters with that gate the API server sets it on every
    /// Machine before webhooks run, so rejecting it would deny every new Machine there. Upstream's
    /// gated CRD defaults it to `MachineAPI`; the ungated CRD served here leaves it unset.
    #[serde(
        rename = "authoritativeAPI",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "authoritative_api_schema")]
    pub authoritative_api: Option<String>,
}

/// ObjectMeta is the subset of metav1.ObjectMeta a Machine template may carry for its Node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineObjectMeta {
    /// Name must be unique within a namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// GenerateName is an optional prefix, used by the server, to generate a unique name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<String>,
    /// Namespace defines the space within each name must be unique.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Map of string keys and values that can be used to organize and categorize objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations is an unstructured key value map.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// List of objects depended by this object.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["uid"]))]
    pub owner_references: Option<Vec<OwnerReference>>,
}

/// LifecycleHooks allow users to pause operations on the machine at certain predefined points
/// within the machine lifecycle.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleHooks {
    /// preDrain hooks prevent the machine from being drained.
    /// This also blocks further lifecycle events, such as termination.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub pre_drain: Option<Vec<LifecycleHook>>,
    /// preTerminate hooks prevent the machine from being terminated.
    /// PreTerminate hooks be actioned after the Machine has been drained.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub pre_terminate: Option<Vec<LifecycleHook>>,
}

/// LifecycleHook represents a single instance of a lifecycle hook
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct LifecycleHook {
    /// name defines a unique name for the lifcycle hook.
    #[schemars(length(min = 3, max = 256))]
    #[schemars(regex(
        pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
    ))]
    pub name: String,
    /// owner defines the owner of the lifecycle hook.
    #[schemars(length(min = 3, max = 512))]
    pub owner: String,
}

/// ProviderSpec defines the configuration to use during node creation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ProviderSpec {
    /// value is an inlined, serialized representation of the resource configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::preserve_unknown_object")]
    pub value: Option<serde_json::Value>,
}

/// MachineStatus defines the observed state of Machine
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"fieldPath": ".synchronizedGeneration", "message": status_cel::SYNCHRONIZED_GENERATION_MESSAGE,
     "reason": "FieldValueInvalid", "rule": status_cel::SYNCHRONIZED_GENERATION_RULE},
    {"message": status_cel::AUTHORITY_KEPT_MESSAGE, "rule": status_cel::AUTHORITY_KEPT_RULE}
]))]
pub struct MachineStatus {
    /// nodeRef will point to the corresponding Node if it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<ObjectReference>,
    /// lastUpdated identifies when this status was last observed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
    /// errorReason will be set in the event that there is a terminal problem reconciling the Machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_reason: Option<String>,
    /// errorMessage will be set in the event that there is a terminal problem reconciling the Machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// providerStatus details a Provider-specific status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::preserve_unknown_object")]
    pub provider_status: Option<serde_json::Value>,
    /// addresses is a list of addresses assigned to the machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses: Option<Vec<NodeAddress>>,
    /// lastOperation describes the last-operation performed by the machine-controller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_operation: Option<LastOperation>,
    /// phase represents the current phase of machine actuation.
    /// One of: Failed, Provisioning, Provisioned, Running, Deleting
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// conditions defines the current state of the Machine
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<CapiCondition>>,
    /// authoritativeAPI is the API that is authoritative for this resource (`MachineAPI`,
    /// `ClusterAPI`, or `Migrating` while the migration controller hands over). Written by
    /// upstream's migration controller, kept here so status updates round-trip.
    #[serde(
        rename = "authoritativeAPI",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "authoritative_api_status_schema")]
    pub authoritative_api: Option<String>,
    /// synchronizedGeneration is the generation of the authoritative resource that the
    /// non-authoritative resource is synchronised with (upstream's migration controller).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub synchronized_generation: Option<i64>,
    /// synchronizedAPI holds the last stable value of authoritativeAPI (`MachineAPI` or
    /// `ClusterAPI`; upstream's migration controller).
    #[serde(
        rename = "synchronizedAPI",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "authoritative_api_schema")]
    pub synchronized_api: Option<String>,
}

/// LastOperation represents the detail of the last performed operation on the MachineObject.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastOperation {
    /// description is the human-readable description of the last operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// lastUpdated is the timestamp at which LastOperation API was last-updated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
    /// state is the current status of the last performed operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// type is the type of operation which was last performed.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

/// `apiVersion` of [`VSphereMachineProviderSpec`].
pub const PROVIDER_SPEC_API_VERSION: &str = "machine.openshift.io/v1beta1";
/// `kind` of [`VSphereMachineProviderSpec`].
pub const PROVIDER_SPEC_KIND: &str = "VSphereMachineProviderSpec";

/// VSphereMachineProviderSpec is the type that will be embedded in a Machine.Spec.ProviderSpec field
/// for an VSphere virtual machine. It is used by the vSphere machine actuator to create a single Machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineProviderSpec {
    /// `machine.openshift.io/v1beta1`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `VSphereMachineProviderSpec`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Object metadata (unused; upstream manifests carry `creationTimestamp: null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::preserve_unknown_object")]
    pub metadata: Option<serde_json::Value>,
    /// userDataSecret contains a local reference to a secret that contains the UserData to apply
    /// to the instance
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_data_secret: Option<LocalObjectReference>,
    /// credentialsSecret is a reference to the secret with vSphere credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<LocalObjectReference>,
    /// template is the name, inventory path, or instance UUID of the template used to clone new
    /// machines. Missing decodes as empty (Go's zero value) so admission can say it is required.
    #[serde(default)]
    pub template: String,
    /// workspace describes the workspace to use for the machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    /// network is the network configuration for this machine's VM (missing decodes as empty).
    #[serde(default)]
    pub network: NetworkSpec,
    /// numCPUs is the number of virtual processors in a virtual machine.
    #[serde(rename = "numCPUs", skip_serializing_if = "Option::is_none")]
    pub num_cpus: Option<i32>,
    /// numCoresPerSocket is the number of cores among which to distribute CPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_cores_per_socket: Option<i32>,
    /// memoryMiB is the size of a virtual machine's memory, in MiB.
    #[serde(rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<i64>,
    /// diskGiB is the size of a virtual machine's disk, in GiB.
    #[serde(rename = "diskGiB", skip_serializing_if = "Option::is_none")]
    pub disk_gib: Option<i32>,
    /// tagIDs is an optional set of tags to add to an instance (URN notation, at most 10).
    #[serde(rename = "tagIDs", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 10))]
    #[schemars(inner(regex(
        pattern = r"^(urn):(vmomi):(InventoryServiceTag):([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}):([^:]+)$"
    )))]
    pub tag_ids: Option<Vec<String>>,
    /// snapshot is the name of the snapshot from which the VM was cloned
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// cloneMode specifies the type of clone operation (`fullClone`, the default, or `linkedClone`).
    /// Kept as a string: upstream never enforces the values (see [`Self::clone_mode`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "clone_mode_schema")]
    pub clone_mode: Option<String>,
    /// dataDisks is a list of non OS disks to be created and attached to the VM (at most 29).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 29))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub data_disks: Option<Vec<VSphereDisk>>,
}

/// CloneMode is the type of clone operation used to clone a VM from a template.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum CloneMode {
    /// A full copy.
    #[serde(rename = "fullClone")]
    FullClone,
    /// A linked clone of the template's snapshot.
    #[serde(rename = "linkedClone")]
    LinkedClone,
}

/// NetworkSpec defines the virtual machine's network configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct NetworkSpec {
    /// devices defines the virtual machine's network interfaces (missing decodes as empty).
    #[serde(default)]
    pub devices: Vec<NetworkDeviceSpec>,
}

/// NetworkDeviceSpec defines the network configuration for a virtual machine's network device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkDeviceSpec {
    /// networkName is the name of the vSphere network or port group to which the network device
    /// will be connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 80))]
    pub network_name: Option<String>,
    /// gateway is an IPv4 or IPv6 address which represents the subnet gateway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// ipAddrs is a list of one or more IPv4 and/or IPv6 addresses and CIDR to assign to this device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_addrs: Option<Vec<String>>,
    /// nameservers is a list of IPv4 and/or IPv6 addresses used as DNS nameservers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nameservers: Option<Vec<String>>,
    /// addressesFromPools is a list of references to IP pool types and instances which are handled
    /// by an external controller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addresses_from_pools: Option<Vec<AddressesFromPool>>,
}

/// AddressesFromPool is an IPAddressPool that will be used to create IPAddressClaims.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct AddressesFromPool {
    /// group of the IP address pool type known to an external IPAM controller.
    #[schemars(regex(
        pattern = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
    ))]
    pub group: String,
    /// resource of the IP address pool type known to an external IPAM controller. Upstream
    /// documents a lowercase plural (`ippools`), but the OpenShift installer writes the kind
    /// (`IPPool`), so no pattern is checked here.
    pub resource: String,
    /// name of an IP address pool.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
}

/// VSphereDisk describes additional disks for vSphere.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereDisk {
    /// name is used to identify the disk definition.
    #[schemars(length(max = 80))]
    #[schemars(regex(pattern = r"^[a-zA-Z0-9]([-_a-zA-Z0-9]*[a-zA-Z0-9])?$"))]
    #[serde(default)]
    pub name: String,
    /// sizeGiB is the size of the disk in GiB.
    #[serde(rename = "sizeGiB", default)]
    #[schemars(range(min = 1, max = 16384))]
    pub size_gib: i32,
    /// provisioningMode: Thin, Thick or EagerlyZeroed.
    /// Kept as a string: upstream never enforces the values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "provisioning_mode_schema")]
    pub provisioning_mode: Option<String>,
}

/// The provisioning type of a data disk.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ProvisioningMode {
    /// Thin provisioning.
    Thin,
    /// Thick provisioning.
    Thick,
    /// Eager-zeroed thick provisioning.
    EagerlyZeroed,
}

/// Workspace defines a workspace configuration for the vSphere cloud provider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    /// server is the IP address or FQDN of the vSphere endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// datacenter is the datacenter in which VMs are created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datacenter: Option<String>,
    /// folder is the folder in which VMs are created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// datastore is the datastore in which VMs are created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datastore: Option<String>,
    /// resourcePool is the resource pool in which VMs are created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
    /// vmGroup is the cluster vm group in which virtual machines will be added for vm host group
    /// based zonal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_group: Option<String>,
}

fn clone_mode_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["fullClone", "linkedClone"]})
}

fn provisioning_mode_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["Thin", "Thick", "EagerlyZeroed"]})
}

/// `spec.authoritativeAPI` and `status.synchronizedAPI`: upstream's enum, kept as a string so an
/// object written by a newer upstream still decodes.
fn authoritative_api_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["MachineAPI", "ClusterAPI"]})
}

/// `status.authoritativeAPI`: the spec values and `Migrating`, changed only through `Migrating`.
fn authoritative_api_status_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["MachineAPI", "ClusterAPI", "Migrating"],
        "x-kubernetes-validations": [
            {"message": status_cel::AUTHORITY_TRANSITION_MESSAGE, "rule": status_cel::AUTHORITY_TRANSITION_RULE}
        ]
    })
}

/// The CEL rules of upstream's `MachineAPIMigration` status fields (openshift/api), kept so the
/// API server guards them as upstream's does; admission implements them for offline checks.
pub mod status_cel {
    /// `status.authoritativeAPI`.
    pub const AUTHORITY_TRANSITION_RULE: &str =
        "self == 'Migrating' || self == oldSelf || oldSelf == 'Migrating'";
    /// Message of [`AUTHORITY_TRANSITION_RULE`].
    pub const AUTHORITY_TRANSITION_MESSAGE: &str = "The authoritativeAPI field must not transition directly from MachineAPI to ClusterAPI or vice versa. It must transition through Migrating.";
    /// `status` (reported at `status.synchronizedGeneration`).
    pub const SYNCHRONIZED_GENERATION_RULE: &str = "!has(oldSelf.synchronizedGeneration) || (has(self.synchronizedGeneration) && self.synchronizedGeneration >= oldSelf.synchronizedGeneration) || (oldSelf.authoritativeAPI == 'Migrating' && self.authoritativeAPI != 'Migrating')";
    /// Message of [`SYNCHRONIZED_GENERATION_RULE`].
    pub const SYNCHRONIZED_GENERATION_MESSAGE: &str = "synchronizedGeneration must not decrease unless authoritativeAPI is transitioning from Migrating to another value";
    /// `status`.
    pub const AUTHORITY_KEPT_RULE: &str =
        "has(self.authoritativeAPI) || !has(oldSelf.authoritativeAPI)";
    /// Message of [`AUTHORITY_KEPT_RULE`].
    pub const AUTHORITY_KEPT_MESSAGE: &str = "authoritativeAPI may not be removed once set";
}

/// Secret holding the ignition user data, when a Machine names none (upstream's default).
pub const DEFAULT_USER_DATA_SECRET: &str = "worker-user-data";
/// Secret holding the vCenter credentials, when a Machine names none (upstream's default).
pub const DEFAULT_CREDENTIALS_SECRET: &str = "vsphere-cloud-credentials";

/// A vSphere provider spec's defaults, as machine-api-operator's mutating webhook sets them: a
/// missing user-data or credentials secret reference gets upstream's default name. Defaulting is
/// a property of the type, so it lives here: the webhook, local mode's admission and the
/// machine set's comparison of template and machines (`plan::cpms::spec`) call this one
/// function. Returns the defaulted paths (under `path`).
pub fn default_provider_spec(value: &mut serde_json::Value, path: &str) -> Vec<String> {
    let mut defaulted = Vec::new();
    if !is_vsphere_provider_spec(value) {
        return defaulted;
    }
    let Some(map) = value.as_object_mut() else {
        return defaulted;
    };
    for (field, name) in [
        ("userDataSecret", DEFAULT_USER_DATA_SECRET),
        ("credentialsSecret", DEFAULT_CREDENTIALS_SECRET),
    ] {
        if map.get(field).is_none_or(serde_json::Value::is_null) {
            map.insert(field.into(), serde_json::json!({ "name": name }));
            defaulted.push(if path.is_empty() {
                field.to_string()
            } else {
                format!("{path}.{field}")
            });
        }
    }
    defaulted
}

/// True if a `providerSpec.value` is a vSphere provider spec: its `kind` is
/// `VSphereMachineProviderSpec`, or it has none (machine-api-operator reads every provider spec
/// on a vSphere cluster as one, and so does this vSphere-only provider).
pub fn is_vsphere_provider_spec(value: &serde_json::Value) -> bool {
    match value.get("kind") {
        None | Some(serde_json::Value::Null) => true,
        Some(k) => k
            .as_str()
            .is_some_and(|k| k.is_empty() || k == PROVIDER_SPEC_KIND),
    }
}

impl VSphereMachineProviderSpec {
    /// The clone mode: `linkedClone` only when asked for exactly, else a full clone (as the
    /// upstream actuator does).
    pub fn clone_mode(&self) -> CloneMode {
        match self.clone_mode.as_deref() {
            Some("linkedClone") => CloneMode::LinkedClone,
            _ => CloneMode::FullClone,
        }
    }

    /// The JSON schema used to check a provider spec (generated like the CRD schemas).
    pub fn schema() -> serde_json::Value {
        crate::api::structural_schema_for::<VSphereMachineProviderSpec>()
    }
}

impl Machine {
    /// The typed vSphere provider spec, if `spec.providerSpec.value` is one.
    pub fn vsphere_provider_spec(
        &self,
    ) -> Option<Result<VSphereMachineProviderSpec, serde_json::Error>> {
        let value = self.spec.provider_spec.as_ref()?.value.as_ref()?;
        is_vsphere_provider_spec(value).then(|| serde_json::from_value(value.clone()))
    }

    /// All lifecycle hooks, preDrain first.
    pub fn hooks(&self) -> (&[LifecycleHook], &[LifecycleHook]) {
        match &self.spec.lifecycle_hooks {
            Some(h) => (
                h.pre_drain.as_deref().unwrap_or(&[]),
                h.pre_terminate.as_deref().unwrap_or(&[]),
            ),
            None => (&[], &[]),
        }
    }
}
