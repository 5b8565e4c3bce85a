//! VSphereMachine at `infrastructure.cluster.x-k8s.io/v1beta2`, as CAPV v1.17 has it: the
//! InfraMachine of the v1beta2 contract. Compared with v1beta1 there is no `failureDomain`
//! (the CAPI Machine's is used), `providerID` is a plain string, the soft power-off timeout is
//! in seconds and `namingStrategy` became `naming`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::clone_spec::{NetworkStatus, PowerOffMode, VirtualMachineCloneSpec};
use super::common::{Conditions, DeprecatedFailureStatus, Initialization};
pub use super::vsphere_machine_template::{
    VSphereMachineTemplate, VSphereMachineTemplateResource, VSphereMachineTemplateSpec,
};

/// Finalizer CAPV puts on every VSphereMachine.
pub const MACHINE_FINALIZER: &str = "vspheremachine.infrastructure.cluster.x-k8s.io";

/// VSphereMachineSpec: the VM to clone for a CAPI Machine.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereMachine",
    plural = "vspheremachines",
    namespaced,
    category = "cluster-api",
    storage = false,
    status = "VSphereMachineStatus",
    doc = "VSphereMachine is the Schema for the vspheremachines API.",
    derive = "PartialEq",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Provider ID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID",
        priority = 10
    ),
    printcolumn(
        name = "Template",
        type_ = "string",
        json_path = ".spec.template",
        description = "Template is the name, inventory path, managed object reference or the managed object ID of the template used to clone the VM",
        priority = 10
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Paused\")].status",
        description = "Reconciliation paused",
        priority = 10
    ),
    printcolumn(
        name = "Provisioned",
        type_ = "string",
        json_path = ".status.initialization.provisioned",
        description = "VSphereMachine is provisioned"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of VSphereMachine"
    )
)]
#[schemars(extend("x-kubernetes-validations" = [
    {"fieldPath": ".providerID", "message": crate::api::provider_id_cel::MESSAGE,
     "rule": crate::api::provider_id_cel::RULE}
]))]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineSpec {
    /// The clone spec (flattened, as in CAPV).
    #[serde(flatten)]
    pub clone: VirtualMachineCloneSpec,
    /// providerID of the VM (`vsphere://<bios uuid>`), once it exists.
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: String,
    /// powerOffMode before the VM is destroyed; unset means hard.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_off_mode: Option<PowerOffMode>,
    /// guestSoftPowerOffTimeoutSeconds: how long trySoft waits for the guest.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub guest_soft_power_off_timeout_seconds: Option<i32>,
    /// naming of the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub naming: Option<VSphereVmNaming>,
}

/// How the VM of a machine is named.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct VSphereVmNaming {
    /// template: a Go template over `.machine.name` and `.random`; unset means the machine's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub template: Option<String>,
}

/// An address of a machine, as CAPI's MachineAddress.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct MachineAddress {
    /// type of the address.
    #[serde(rename = "type")]
    pub type_: MachineAddressType,
    /// address itself.
    #[schemars(length(min = 1, max = 256))]
    pub address: String,
}

/// VSphereMachineStatus.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct VSphereMachineStatus {
    /// conditions of the machine (Ready, VirtualMachineProvisioned, Paused).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    /// initialization: the contract's provisioned flag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    /// addresses of the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses: Option<Vec<MachineAddress>>,
    /// network devices of the VM as vCenter reports them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), extend("x-kubernetes-list-type" = "atomic"))]
    pub network: Option<Vec<NetworkStatus>>,
    /// deprecated: the v1beta1 conditions and failure fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedFailureStatus>,
}

impl VSphereMachineStatus {
    /// `initialization.provisioned`: the contract's "infrastructure ready", never set back to
    /// false.
    pub fn provisioned(&self) -> bool {
        self.initialization
            .as_ref()
            .and_then(|i| i.provisioned)
            .unwrap_or(false)
    }
}

/// The Cluster API address types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineAddressType {
    /// Hostname.
    Hostname,
    /// ExternalIP.
    #[serde(rename = "ExternalIP")]
    ExternalIp,
    /// InternalIP.
    #[serde(rename = "InternalIP")]
    InternalIp,
    /// ExternalDNS.
    #[serde(rename = "ExternalDNS")]
    ExternalDns,
    /// InternalDNS.
    #[serde(rename = "InternalDNS")]
    InternalDns,
}
