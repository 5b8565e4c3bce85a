//! What the MHC reports: condition types and reasons (upstream's, then ours), event reasons, and
//! the status the planner writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions::{ConditionUpdate, remove_capi_condition, set_capi_condition};
use crate::api::machine_health_check::MachineHealthCheckStatus;

/// Condition types and reasons (openshift/api `machine/v1beta1`; ours are marked).
pub mod condition {
    pub use crate::api::conditions::mhc::{
        EXTERNAL_REMEDIATION_REQUEST_AVAILABLE, EXTERNAL_REMEDIATION_REQUEST_CREATION_FAILED,
        EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE, EXTERNAL_REMEDIATION_TEMPLATE_NOT_FOUND,
        REMEDIATION_ALLOWED, TOO_MANY_UNHEALTHY,
    };

    /// Ours: `maxUnhealthy`, `nodeStartupTimeout` or a condition timeout cannot be read (admission
    /// rejects these; an object stored before it existed can still carry one). No remediation.
    pub const INVALID_CONFIGURATION: &str = "InvalidConfiguration";

    /// Ours: whether a control plane remediation may go ahead now. Set only while the MHC
    /// selects a control plane machine.
    pub const CONTROL_PLANE_REMEDIATION_ALLOWED: &str = "ControlPlaneRemediationAllowed";
    /// The ControlPlaneMachineSet is replacing a machine.
    pub const CONTROL_PLANE_REPLACEMENT_IN_PROGRESS: &str = "ControlPlaneReplacementInProgress";
    /// Another control plane machine is being deleted.
    pub const CONTROL_PLANE_MACHINE_DELETING: &str = "ControlPlaneMachineDeleting";
    /// Another control plane machine is not healthy.
    pub const CONTROL_PLANE_MACHINE_UNHEALTHY: &str = "ControlPlaneMachineUnhealthy";
    /// Removing the member would leave etcd without quorum.
    pub const ETCD_QUORUM_AT_RISK: &str = "EtcdQuorumAtRisk";
    /// Another control plane remediation goes first (one at a time).
    pub const CONTROL_PLANE_REMEDIATION_IN_PROGRESS: &str = "ControlPlaneRemediationInProgress";
}

/// Event reasons (MAO's, then ours).
pub mod event {
    /// `RemediationRestricted`: short-circuited (on the MHC); `SkippedNoController`: no
    /// controller owns the machine, nothing would replace it (on the Machine).
    pub use crate::api::conditions::mhc::{
        REMEDIATION_RESTRICTED_EVENT as REMEDIATION_RESTRICTED,
        SKIPPED_NO_CONTROLLER_EVENT as SKIPPED_NO_CONTROLLER,
    };
    /// A target will become unhealthy unless it recovers (on the Machine).
    pub const DETECTED_UNHEALTHY: &str = "DetectedUnhealthy";
    /// The machine was remediated (on the Machine; recorded once the action succeeded).
    pub const MACHINE_REMEDIATED: &str = "MachineRemediated";
    /// Deleting the machine failed (the shell records it).
    pub const MACHINE_DELETION_FAILED: &str = "MachineDeletionFailed";
    /// Ours: the external remediation annotation could not be set on the machine.
    pub const EXTERNAL_ANNOTATION_FAILED: &str = "ExternalRemediationAnnotationFailed";
    /// Ours (as CAPI's reason): the remediation request could not be created; the MHC's
    /// `ExternalRemediationRequestAvailable` condition says why.
    pub const REQUEST_CREATION_FAILED: &str = "ExternalRemediationRequestCreationFailed";
    /// Ours: a control plane remediation is held back; the message says why (on the Machine).
    pub const CONTROL_PLANE_REMEDIATION_HELD: &str = "ControlPlaneRemediationHeld";
    /// Ours: the replacement of a machine remediated moments ago failed again; remediation
    /// waits out an exponential backoff (on the Machine).
    pub const REMEDIATION_BACKOFF: &str = "RemediationBackoff";
    /// Event action (events.k8s.io `action`), as MAO.
    pub const ACTION_REMEDIATE: &str = "Remediate";
    pub const ACTION_HEALTH_CHECK: &str = "HealthCheck";
}

/// What an event is recorded on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventObject {
    /// The MachineHealthCheck.
    Mhc,
    /// The Machine of that name (in the MHC's namespace).
    Machine(String),
}

/// An event to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthEvent {
    pub object: EventObject,
    pub warning: bool,
    pub reason: &'static str,
    pub action: &'static str,
    pub message: String,
}

/// The status counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub expected: u64,
    pub healthy: u64,
    pub remediations_allowed: i32,
}

/// `status` with the counts written and `update` applied (transition times kept).
pub fn with_counts(
    before: Option<&MachineHealthCheckStatus>,
    counts: Counts,
) -> MachineHealthCheckStatus {
    let mut s = before.cloned().unwrap_or_default();
    s.expected_machines = Some(i64::try_from(counts.expected).unwrap_or(i64::MAX));
    s.current_healthy = Some(i64::try_from(counts.healthy).unwrap_or(i64::MAX));
    s.remediations_allowed = Some(counts.remediations_allowed);
    s
}

/// Sets a condition on the status.
pub fn set(status: &mut MachineHealthCheckStatus, update: &ConditionUpdate<'_>, now: &Time) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_capi_condition(conditions, update, now);
}

/// Removes a condition from the status.
pub fn remove(status: &mut MachineHealthCheckStatus, type_: &str) {
    if let Some(c) = status.conditions.as_mut() {
        remove_capi_condition(c, type_);
        if c.is_empty() {
            status.conditions = None;
        }
    }
}

/// For the shell: creating a remediation request failed (MAO marks
/// `ExternalRemediationRequestAvailable` False with the error).
pub fn request_creation_failed(status: &mut MachineHealthCheckStatus, message: &str, now: &Time) {
    set(
        status,
        &ConditionUpdate::false_(
            condition::EXTERNAL_REMEDIATION_REQUEST_AVAILABLE,
            condition::EXTERNAL_REMEDIATION_REQUEST_CREATION_FAILED,
            crate::api::conditions::severity::ERROR,
            message,
        ),
        now,
    );
}
