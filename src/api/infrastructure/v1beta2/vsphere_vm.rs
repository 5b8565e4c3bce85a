//! VSphereVM at `infrastructure.cluster.x-k8s.io/v1beta2`, as CAPV v1.17 has it: the clone spec
//! once a failure domain's overrides are applied, with `bootstrapRef` reduced to a Secret name.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::clone_spec::{CloneMode, NetworkStatus, PowerOffMode, VirtualMachineCloneSpec};
use super::common::{Conditions, DeprecatedFailureStatus};

/// Finalizer CAPV puts on every VSphereVM.
pub const VM_FINALIZER: &str = "vspherevm.infrastructure.cluster.x-k8s.io";
/// How long trySoft waits for the guest when `guestSoftPowerOffTimeoutSeconds` is unset
/// (CAPV's default).
pub const GUEST_SOFT_POWER_OFF_DEFAULT: std::time::Duration = std::time::Duration::from_secs(300);

/// VSphereVMSpec: the VM to clone.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereVM",
    plural = "vspherevms",
    namespaced,
    category = "cluster-api",
    storage = false,
    status = "VSphereVMStatus",
    doc = "VSphereVM is the Schema for the vspherevms API.",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereVMSpec {
    /// The clone spec (flattened, as in CAPV).
    #[serde(flatten)]
    pub clone: VirtualMachineCloneSpec,
    /// bootstrapRef: the Secret holding the bootstrap data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap_ref: Option<SecretReference>,
    /// biosUUID of the VM, once it exists.
    #[serde(rename = "biosUUID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub bios_uuid: Option<String>,
    /// powerOffMode before the VM is destroyed; unset means hard.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_off_mode: Option<PowerOffMode>,
    /// guestSoftPowerOffTimeoutSeconds: how long trySoft waits for the guest.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub guest_soft_power_off_timeout_seconds: Option<i32>,
}

/// A Secret in the VM's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(transform = require_name)]
pub struct SecretReference {
    // Decoded absent as empty: a v1beta1 `bootstrapRef` could name none.
    /// name of the Secret.
    #[serde(default)]
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The schema requires `name`, whatever the Rust decoding tolerates.
fn require_name(schema: &mut schemars::Schema) {
    super::common::require(schema, "name");
}

/// VSphereVMStatus.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct VSphereVMStatus {
    /// conditions of the VM.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    /// host the VM runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub host: Option<String>,
    /// ready: the VM is powered on with its addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// addresses the guest reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), inner(length(min = 1, max = 39)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses: Option<Vec<String>>,
    /// cloneMode used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clone_mode: Option<CloneMode>,
    /// snapshot a linked clone was made from.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub snapshot: Option<String>,
    /// retryAfter: when a failed task may be retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<Time>,
    /// taskRef: the vCenter task in progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub task_ref: Option<String>,
    /// network devices as vCenter reports them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128), extend("x-kubernetes-list-type" = "atomic"))]
    pub network: Option<Vec<NetworkStatus>>,
    /// moduleUUID of the cluster module the VM joined.
    #[serde(rename = "moduleUUID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub module_uuid: Option<String>,
    /// vmRef: the VM's managed object reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub vm_ref: Option<String>,
    /// deprecated: the v1beta1 conditions and failure fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedFailureStatus>,
    /// actuatorState: vsphere-provider's own, not CAPV's (an addition, as `autoConfigure` on a
    /// failure domain): what the machine actuator it shares with OpenShift Machines keeps
    /// between passes (the task in flight, the adopted VM's instance UUID, the phase and
    /// conditions). The fields above are derived from it for CAPV's readers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::preserve_unknown_object")]
    pub actuator_state: Option<serde_json::Value>,
}
