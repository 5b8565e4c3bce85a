//! What the vSphere machine actuator records on a Machine: the provider status
//! (`status.providerStatus`, openshift/api `VSphereMachineProviderStatus`), the Machine condition
//! types and reasons of machine-api-operator, and the terminal error reasons.
//!
//! The names are upstream's, so `oc get machines`, alerts and the etcd operator keep working;
//! our extra precision goes into messages, never into new reasons.
use serde::{Deserialize, Serialize};

use crate::api::conditions::MetaCondition;

/// `apiVersion` of the provider status.
pub const PROVIDER_STATUS_API_VERSION: &str = "machine.openshift.io/v1beta1";
/// `kind` of the provider status.
pub const PROVIDER_STATUS_KIND: &str = "VSphereMachineProviderStatus";

/// `status.providerStatus` of a vSphere Machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineProviderStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The VM's BIOS UUID (`config.uuid`), as upstream records it.
    #[serde(rename = "instanceId", skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    /// `poweredOn`, `poweredOff`, `suspended`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_state: Option<String>,
    /// The provider's own conditions (upstream: `MachineCreation`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<MetaCondition>,
    /// The instance UUID of the Machine's VM when it is not the Machine's UID: a VM adopted
    /// because it carries this Machine's identity (cloned for it before its UID changed: a lost
    /// local state file, the Machine re-created from the same manifest).
    #[serde(rename = "instanceUUID", skip_serializing_if = "Option::is_none")]
    pub instance_uuid: Option<String>,
    /// The vCenter task in flight (`task-123`); checked on the next reconcile, never waited on.
    #[serde(rename = "taskRef", default, skip_serializing_if = "String::is_empty")]
    pub task_ref: String,
}

impl VSphereMachineProviderStatus {
    /// Read from `status.providerStatus`; anything unreadable counts as empty (it is ours to
    /// rewrite).
    pub fn from_value(v: Option<&serde_json::Value>) -> Self {
        v.and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    /// As stored, with apiVersion and kind.
    pub fn to_value(&self) -> serde_json::Value {
        let mut s = self.clone();
        s.api_version = Some(PROVIDER_STATUS_API_VERSION.into());
        s.kind = Some(PROVIDER_STATUS_KIND.into());
        serde_json::to_value(s).unwrap_or_default()
    }
}

/// Machine condition types and reasons (machine-api-operator `pkg/apis/machine/v1beta1`): the
/// shared ones of [`crate::api::conditions::machine`], plus the provider status's own.
pub mod condition {
    pub use crate::api::conditions::machine::*;
    /// The provider status condition upstream records for creation.
    pub const MACHINE_CREATION: &str = "MachineCreation";
    /// MachineCreation succeeded.
    pub const MACHINE_CREATION_SUCCEEDED: &str = "MachineCreationSucceeded";
    /// MachineCreation failed (the task's message follows).
    pub const MACHINE_CREATION_FAILED: &str = "MachineCreationFailed";
    /// Ours: a VM with the machine's name is already in its folder and is not its own (another
    /// Machine's, or nobody's); nothing is cloned over it, nothing is done to it.
    pub const VM_NAME_IN_USE: &str = "VMNameInUse";
    /// Ours: the user data Secret (or its `userData` key) is missing; nothing is cloned.
    pub const USER_DATA_UNAVAILABLE: &str = "UserDataUnavailable";
    /// Ours: the machine's deployment zone, or that zone's failure domain, does not exist (yet);
    /// nothing is cloned.
    pub const WAITING_FOR_PLACEMENT: &str = "WaitingForPlacement";
    /// The provider status condition upstream records for the IP address claims.
    pub const IP_ADDRESS_CLAIMED: &str = "IPAddressClaimed";
    /// IPAddressClaimed: every claim is bound.
    pub const IP_ADDRESSES_CLAIMED: &str = "IPAddressesClaimed";
    /// IPAddressClaimed (and MachineCreation): claims not yet bound; nothing is cloned.
    pub const WAITING_FOR_IP_ADDRESS: &str = "WaitingForIPAddress";
    /// Ours (InstanceExists=False): the VM found for the machine carries another object's
    /// identity marker, or none while found by a UUID that is not the machine's own; it is
    /// never powered, written or destroyed for this machine.
    pub const INSTANCE_NOT_OWNED: &str = "InstanceNotOwned";
}

/// `status.errorReason` values (openshift/api `MachineStatusError`).
pub mod error_reason {
    /// The spec cannot be acted on: unknown template, zone, pool; no datacenter.
    pub const INVALID_CONFIGURATION: &str = "InvalidConfiguration";
    /// Creation failed in a way that needs a person.
    pub const CREATE_ERROR: &str = "CreateError";
    /// The VM disappeared after provisioning.
    pub const INSTANCE_MISSING: &str = "InstanceMissing";
}

/// Event reasons the machine controllers record (machine-api-operator's where it has one).
pub mod event {
    pub const CREATE: &str = "Create";
    pub const FAILED_CREATE: &str = "FailedCreate";
    pub const UPDATE: &str = "Update";
    pub const DELETE: &str = "Delete";
    pub const FAILED_DELETE: &str = "FailedDelete";
    pub const DRAIN_BLOCKED: &str = crate::api::conditions::machine::DRAIN_BLOCKED_EVENT;
    pub const DRAIN_PROCEEDING: &str = "DrainProceeding";
    pub const DRAIN_SUCCEEDED: &str = "Drained";
    pub const DRAIN_REQUEUED: &str = "DrainRequeued";
    pub const TERMINATE_BLOCKED: &str = "TerminateBlocked";
    pub const FAILED_VALIDATION: &str = "FailedValidation";
    /// Ours: a VM in the machine's folder carrying its identity was adopted instead of cloning
    /// a second one.
    pub const ADOPTED: &str = "Adopted";
    /// Ours: see [`super::condition::VM_NAME_IN_USE`].
    pub const VM_NAME_IN_USE: &str = "VMNameInUse";
    /// Ours: the machine created the IP address claims of its static IPs.
    pub const IP_ADDRESS_CLAIMED: &str = "IPAddressClaimCreated";
    /// Ours: the machine's linked Node lacks its providerID, so it is neither drained nor
    /// deleted (`plan::machine::node_link::may_drain_and_delete`).
    pub const NODE_NOT_OWNED: &str = "NodeNotOwned";
    /// Ours: see [`super::condition::INSTANCE_NOT_OWNED`].
    pub const INSTANCE_NOT_OWNED: &str = "InstanceNotOwned";
}
