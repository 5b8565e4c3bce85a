//! Condition types, reasons and pure helpers to set them.
//!
//! Two formats, as upstream uses them:
//!
//! * [`CapiCondition`] — the Cluster API v1beta1 condition (`type`, `status`, `severity`, `reason`,
//!   `message`, `lastTransitionTime`). Used in `status.conditions` of the infrastructure kinds
//!   (VSphereDeploymentZone, VSphereCluster) and, in the same shape, by the Machine API kinds
//!   (Machine, MachineHealthCheck), whose `machine.openshift.io/v1beta1` `Condition` has the same
//!   fields.
//! * [`MetaCondition`] — `metav1.Condition` (`type`, `status`, `reason`, `message`,
//!   `observedGeneration`, `lastTransitionTime`). Used in `status.v1beta2.conditions` of the
//!   infrastructure kinds and in `status.conditions` of ControlPlaneMachineSet.
//!
//! Every type and reason string lives here. Names and values follow upstream
//! (cluster-api-provider-vsphere v1.15.0 `apis/v1beta1/condition_consts.go` and the v1beta2 condition
//! constants; openshift/api and the OpenShift operators for the machine kinds). Reasons that upstream
//! does not have are marked **ours**.
//!
//! The helpers are pure: they never read a clock, the caller passes `now`. `lastTransitionTime` only
//! changes when the condition's status flips (or the condition is new).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `metav1.Condition`.
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as MetaCondition;

/// Condition status `True`.
pub const STATUS_TRUE: &str = "True";
/// Condition status `False`.
pub const STATUS_FALSE: &str = "False";
/// Condition status `Unknown`.
pub const STATUS_UNKNOWN: &str = "Unknown";

/// Severity of a False CAPI-style condition.
pub mod severity {
    /// The condition is an error.
    pub const ERROR: &str = "Error";
    /// The condition is a warning.
    pub const WARNING: &str = "Warning";
    /// The condition is informative.
    pub const INFO: &str = "Info";
}

/// A Cluster API v1beta1 condition (`sigs.k8s.io/cluster-api/api/v1beta1.Condition`), also the
/// shape of `machine.openshift.io/v1beta1` `Condition`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapiCondition {
    /// type of condition in CamelCase or in foo.example.com/CamelCase.
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 256))]
    pub type_: String,
    /// status of the condition, one of True, False, Unknown.
    pub status: String,
    /// severity provides an explicit classification of Reason code, so the users or machines can
    /// immediately understand the current situation and act accordingly. The Severity field MUST be
    /// set only when Status=False.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub severity: Option<String>,
    /// lastTransitionTime is the last time the condition transitioned from one status to another.
    pub last_transition_time: Time,
    /// reason is the reason for the condition's last transition in CamelCase.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub reason: Option<String>,
    /// message is a human readable message indicating details about the transition.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10240))]
    pub message: Option<String>,
}

/// What a condition should say; `set_*` turns it into a condition with a transition time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionUpdate<'a> {
    /// Condition type.
    pub type_: &'a str,
    /// `True`, `False` or `Unknown`.
    pub status: &'a str,
    /// Reason (CamelCase); empty for none.
    pub reason: &'a str,
    /// Human readable message; empty for none.
    pub message: &'a str,
    /// Severity (CAPI style only, only when status is False); empty for none.
    pub severity: &'a str,
}

impl<'a> ConditionUpdate<'a> {
    /// A True condition without reason.
    pub fn true_(type_: &'a str) -> Self {
        ConditionUpdate {
            type_,
            status: STATUS_TRUE,
            reason: "",
            message: "",
            severity: "",
        }
    }

    /// A True condition with a reason (metav1 style requires one).
    pub fn true_reason(type_: &'a str, reason: &'a str, message: &'a str) -> Self {
        ConditionUpdate {
            type_,
            status: STATUS_TRUE,
            reason,
            message,
            severity: "",
        }
    }

    /// A False condition.
    pub fn false_(type_: &'a str, reason: &'a str, severity: &'a str, message: &'a str) -> Self {
        ConditionUpdate {
            type_,
            status: STATUS_FALSE,
            reason,
            message,
            severity,
        }
    }

    /// An Unknown condition.
    pub fn unknown(type_: &'a str, reason: &'a str, message: &'a str) -> Self {
        ConditionUpdate {
            type_,
            status: STATUS_UNKNOWN,
            reason,
            message,
            severity: "",
        }
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Sets (adds or replaces) a CAPI-style condition. `lastTransitionTime` is `now` when the condition
/// is new or its status changed; otherwise it is kept. Returns true if anything changed.
pub fn set_capi_condition(
    conditions: &mut Vec<CapiCondition>,
    update: &ConditionUpdate<'_>,
    now: &Time,
) -> bool {
    let severity = if update.status == STATUS_FALSE {
        non_empty(update.severity)
    } else {
        None
    };
    let reason = non_empty(update.reason);
    let message = non_empty(update.message);
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == update.type_) {
        let flipped = existing.status != update.status;
        let changed = flipped
            || existing.severity != severity
            || existing.reason != reason
            || existing.message != message;
        if flipped {
            existing.last_transition_time = now.clone();
        }
        existing.status = update.status.to_string();
        existing.severity = severity;
        existing.reason = reason;
        existing.message = message;
        return changed;
    }
    conditions.push(CapiCondition {
        type_: update.type_.to_string(),
        status: update.status.to_string(),
        severity,
        last_transition_time: now.clone(),
        reason,
        message,
    });
    true
}

/// Sets (adds or replaces) a `metav1.Condition`. `lastTransitionTime` is `now` when the condition
/// is new or its status changed; otherwise it is kept. Returns true if anything changed.
pub fn set_meta_condition(
    conditions: &mut Vec<MetaCondition>,
    update: &ConditionUpdate<'_>,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == update.type_) {
        let flipped = existing.status != update.status;
        let changed = flipped
            || existing.reason != update.reason
            || existing.message != update.message
            || existing.observed_generation != observed_generation;
        if flipped {
            existing.last_transition_time = now.clone();
        }
        existing.status = update.status.to_string();
        existing.reason = update.reason.to_string();
        existing.message = update.message.to_string();
        existing.observed_generation = observed_generation;
        return changed;
    }
    conditions.push(MetaCondition {
        type_: update.type_.to_string(),
        status: update.status.to_string(),
        reason: update.reason.to_string(),
        message: update.message.to_string(),
        observed_generation,
        last_transition_time: now.clone(),
    });
    true
}

/// Removes the condition of the given type; returns true if one was removed.
pub fn remove_capi_condition(conditions: &mut Vec<CapiCondition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    before != conditions.len()
}

/// Removes the condition of the given type; returns true if one was removed.
pub fn remove_meta_condition(conditions: &mut Vec<MetaCondition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    before != conditions.len()
}

/// The CAPI-style condition of the given type.
pub fn find_capi<'c>(conditions: &'c [CapiCondition], type_: &str) -> Option<&'c CapiCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The metav1 condition of the given type.
pub fn find_meta<'c>(conditions: &'c [MetaCondition], type_: &str) -> Option<&'c MetaCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True if a CAPI-style condition of that type exists with status True.
pub fn is_capi_true(conditions: &[CapiCondition], type_: &str) -> bool {
    find_capi(conditions, type_).is_some_and(|c| c.status == STATUS_TRUE)
}

/// True if a metav1 condition of that type exists with status True.
pub fn is_meta_true(conditions: &[MetaCondition], type_: &str) -> bool {
    find_meta(conditions, type_).is_some_and(|c| c.status == STATUS_TRUE)
}

/// Shared condition types and reasons (CAPI `Ready`, `Paused`, and the v1beta2 generic reasons).
pub mod common {
    /// `Ready` — summary condition (both styles).
    pub const READY: &str = "Ready";
    /// `Paused` (new style).
    pub const PAUSED: &str = "Paused";
    /// v1beta2 reason: readiness criteria met.
    pub const READY_REASON: &str = "Ready";
    /// v1beta2 reason: readiness criteria not met.
    pub const NOT_READY_REASON: &str = "NotReady";
    /// v1beta2 reason: at least one readiness criterion is unknown.
    pub const READY_UNKNOWN_REASON: &str = "ReadyUnknown";
    /// v1beta2 reason: available.
    pub const AVAILABLE_REASON: &str = "Available";
    /// v1beta2 reason: the object is being deleted.
    pub const DELETING_REASON: &str = "Deleting";
    /// v1beta2 `Paused` reason when paused.
    pub const PAUSED_REASON: &str = "Paused";
    /// v1beta2 `Paused` reason when not paused.
    pub const NOT_PAUSED_REASON: &str = "NotPaused";
}

/// VSphereClusterIdentity conditions, v1beta1 style (`status.conditions`; CAPV v1.15
/// `condition_consts.go`). `Ready` summarizes `CredentialsAvailable`.
pub mod identity_v1beta1 {
    /// The Secret exists and is the identity's own (CAPV's `CredentialsAvailableV1Beta1Condition`).
    pub const CREDENTIALS_AVAILABLE: &str = "CredentialsAvailable";
    /// Reason (Warning): the Secret cannot be read.
    pub const SECRET_NOT_AVAILABLE: &str = "SecretNotAvailable";
    /// Reason (Error): another VSphereCluster or VSphereClusterIdentity owns the Secret. CAPV's
    /// `SecretAlreadyInUseV1Beta1Reason`, whose value is `SecretInUse`.
    pub const SECRET_IN_USE: &str = "SecretInUse";
    /// Reason (Warning): the owner reference or finalizer could not be written to the Secret.
    pub const SECRET_OWNER_REFERENCE_FAILED: &str = "SecretOwnerReferenceFailed";
}

/// VSphereClusterIdentity conditions, v1beta2 style (`status.v1beta2.conditions` at v1beta1,
/// `status.conditions` at v1beta2; CAPV's `VSphereClusterIdentity*` constants). Its `Available`
/// reasons besides these are `common::AVAILABLE_REASON` and `common::DELETING_REASON`; `Paused`
/// is `common::PAUSED`.
pub mod identity {
    /// The identity's Secret can be used (`VSphereClusterIdentityAvailableCondition`).
    pub const AVAILABLE: &str = "Available";
    /// Reason: the Secret cannot be read.
    pub const SECRET_NOT_AVAILABLE: &str = "SecretNotAvailable";
    /// Reason: another VSphereCluster or VSphereClusterIdentity owns the Secret.
    pub const SECRET_ALREADY_IN_USE: &str = "SecretAlreadyInUse";
    /// Reason: the owner reference or finalizer could not be written to the Secret.
    pub const SETTING_SECRET_OWNER_REFERENCE_FAILED: &str = "SettingSecretOwnerReferenceFailed";
}

/// VSphereDeploymentZone conditions, v1beta1 style (`status.conditions`). Every False reason has
/// severity Error.
pub mod zone_v1beta1 {
    /// Summary of the three below.
    pub const READY: &str = "Ready";
    /// The vCenter session could be established.
    pub const VCENTER_AVAILABLE: &str = "VCenterAvailable";
    /// Reason: the vCenter could not be reached or logged into.
    pub const VCENTER_UNREACHABLE: &str = "VCenterUnreachable";
    /// The placement constraint (resource pool, folder) was found.
    pub const PLACEMENT_CONSTRAINT_MET: &str = "PlacementConstraintMet";
    /// Reason: the resource pool was not found.
    pub const RESOURCE_POOL_NOT_FOUND: &str = "ResourcePoolNotFound";
    /// Reason: the folder was not found.
    pub const FOLDER_NOT_FOUND: &str = "FolderNotFound";
    /// The VSphereFailureDomain was verified against vCenter.
    pub const VSPHERE_FAILURE_DOMAIN_VALIDATED: &str = "VSphereFailureDomainValidated";
    /// Reason: region tag missing or wrong.
    pub const FAILURE_DOMAIN_REGION_MISCONFIGURED: &str = "FailureDomainRegionMisconfigured";
    /// Reason: zone tag missing or wrong.
    pub const FAILURE_DOMAIN_ZONE_MISCONFIGURED: &str = "FailureDomainZoneMisconfigured";
    /// Reason: compute cluster not found (or a resource pool's owner unreadable).
    pub const COMPUTE_CLUSTER_NOT_FOUND: &str = "ComputeClusterNotFound";
    /// Reason: VM-host affinity rule missing.
    pub const HOSTS_MISCONFIGURED: &str = "HostsMisconfigured";
    /// Reason: defined upstream but never set there.
    pub const HOSTS_AFFINITY_MISCONFIGURED: &str = "HostsAffinityMisconfigured";
    /// Reason: a network was not found.
    pub const NETWORK_NOT_FOUND: &str = "NetworkNotFound";
    /// Reason: the datastore was not found.
    pub const DATASTORE_NOT_FOUND: &str = "DatastoreNotFound";
    // ResourcePoolNotFound is also used for VSphereFailureDomainValidated (see above).
}

/// VSphereDeploymentZone conditions, new style (`status.v1beta2.conditions`; `status.conditions`
/// in CAPV v1beta2).
pub mod zone {
    pub use super::common::{
        AVAILABLE_REASON, DELETING_REASON, NOT_READY_REASON, PAUSED, READY, READY_REASON,
        READY_UNKNOWN_REASON,
    };
    /// The vCenter session could be established.
    pub const VCENTER_AVAILABLE: &str = "VCenterAvailable";
    /// Reason: the vCenter could not be reached or logged into.
    pub const VCENTER_UNREACHABLE: &str = "VCenterUnreachable";
    /// The placement constraint (resource pool, folder) was found.
    pub const PLACEMENT_CONSTRAINT_READY: &str = "PlacementConstraintReady";
    /// Reason: the resource pool was not found.
    pub const RESOURCE_POOL_NOT_FOUND: &str = "ResourcePoolNotFound";
    /// Reason: the folder was not found.
    pub const FOLDER_NOT_FOUND: &str = "FolderNotFound";
    /// The failure domain was verified against vCenter.
    pub const FAILURE_DOMAIN_VALIDATED: &str = "FailureDomainValidated";
    /// Reason: validated.
    pub const VALIDATED: &str = "Validated";
    /// Reason: validation failed (e.g. the ownerReference could not be written).
    pub const VALIDATION_FAILED: &str = "ValidationFailed";
    /// Reason: region tag missing or wrong.
    pub const REGION_MISCONFIGURED: &str = "RegionMisconfigured";
    /// Reason: zone tag missing or wrong.
    pub const ZONE_MISCONFIGURED: &str = "ZoneMisconfigured";
    /// Reason: VM-host affinity rule missing.
    pub const HOSTS_MISCONFIGURED: &str = "HostsMisconfigured";
    /// Reason: the datastore was not found.
    pub const DATASTORE_NOT_FOUND: &str = "DatastoreNotFound";
    /// Reason: a network was not found.
    pub const NETWORK_NOT_FOUND: &str = "NetworkNotFound";
    /// Reason: the compute cluster was not found.
    pub const COMPUTE_CLUSTER_NOT_FOUND: &str = "ComputeClusterNotFound";
}

/// Reasons this project adds to the zone conditions (both styles), only for classes of failure
/// upstream has no reason for (capv-failure-domains.md §1, §3, §9). **Ours**, not upstream; each
/// is listed in docs/differences.md. Everything else the zone planner knows
/// beyond upstream (a tag in another category, a missing group, a disabled rule, a refused or
/// pending autoConfigure change, an ambiguous name) is said in the message under upstream's
/// reason.
pub mod zone_ours {
    /// **Ours.** The VSphereFailureDomain named by `spec.failureDomain` does not exist. Upstream
    /// sets no condition at all (it returns the error and leaves `ready` unset forever, so
    /// VSphereClusters selecting the zone wait forever). Used on `VSphereFailureDomainValidated`
    /// / `FailureDomainValidated`.
    pub const FAILURE_DOMAIN_NOT_FOUND: &str = "FailureDomainNotFound";
}

/// VSphereCluster conditions.
pub mod cluster {
    pub use super::common::{
        DELETING_REASON, NOT_PAUSED_REASON, NOT_READY_REASON, PAUSED, PAUSED_REASON, READY,
        READY_REASON,
    };
    /// v1beta1: whether the failure domains are available.
    pub const FAILURE_DOMAINS_AVAILABLE: &str = "FailureDomainsAvailable";
    /// v1beta1 reason (severity Info): some zone has not reported `ready` yet.
    pub const WAITING_FOR_FAILURE_DOMAIN_STATUS: &str = "WaitingForFailureDomainStatus";
    /// v1beta1 reason: some zone is not ready and was skipped.
    pub const FAILURE_DOMAINS_SKIPPED: &str = "FailureDomainsSkipped";
    /// v1beta1 message for `FailureDomainsSkipped`.
    pub const FAILURE_DOMAINS_SKIPPED_MESSAGE: &str = "one or more failure domains are not ready";
    /// v1beta2: failure domains ready.
    pub const FAILURE_DOMAINS_READY: &str = "FailureDomainsReady";
    /// **Ours**, v1beta2 reason of `FailureDomainsReady` (True): the selector matches no zone of
    /// the cluster's server, so none is published and machines go without a failure domain.
    /// True, not False: nothing is waited for, and a zoneless cluster stays Available as with
    /// CAPV (which leaves the condition stale instead).
    pub const NO_FAILURE_DOMAINS: &str = "NoFailureDomains";
    /// Message of [`NO_FAILURE_DOMAINS`].
    pub const NO_FAILURE_DOMAINS_MESSAGE: &str = "no VSphereDeploymentZone on this cluster's server matches failureDomainSelector, so no failure domain is published";
    /// Both styles: vCenter reachable.
    pub const VCENTER_AVAILABLE: &str = "VCenterAvailable";
    /// Reason: vCenter unreachable.
    pub const VCENTER_UNREACHABLE: &str = "VCenterUnreachable";
    /// v1beta2: cluster modules ready.
    pub const CLUSTER_MODULES_READY: &str = "ClusterModulesReady";
    /// v1beta2 reason of `VCenterAvailable` when True.
    pub const VCENTER_AVAILABLE_REASON: &str = "VCenterAvailable";
    /// **Ours** (both styles, on `Ready`): no Cluster (cluster.x-k8s.io) owns the VSphereCluster
    /// yet, or the one its ownerReference names does not exist (CAPV only logs this).
    pub const WAITING_FOR_CLUSTER_OWNER: &str = "WaitingForClusterOwner";
    /// v1beta1 reason on `Ready` while deleting (CAPI's `Deleting`).
    pub const DELETING: &str = "Deleting";
}

/// ControlPlaneMachineSet conditions (`metav1.Condition`).
pub mod cpms {
    /// All replicas available.
    pub const AVAILABLE: &str = "Available";
    /// Reason (True): all replicas available.
    pub const ALL_REPLICAS_AVAILABLE: &str = "AllReplicasAvailable";
    /// Reason (False): "Missing N available replica(s)".
    pub const UNAVAILABLE_REPLICAS: &str = "UnavailableReplicas";
    /// Degraded: the operator refuses to act.
    pub const DEGRADED: &str = "Degraded";
    /// Reason (False): as expected.
    pub const AS_EXPECTED: &str = "AsExpected";
    /// Reason (True): no index has a ready machine.
    pub const NO_READY_MACHINES: &str = "NoReadyMachines";
    /// Reason (True): a control plane node has no machine.
    pub const UNMANAGED_NODES: &str = "UnmanagedNodes";
    /// Reason (True): more indexes than replicas.
    pub const EXCESS_INDEXES: &str = "ExcessIndexes";
    /// Reason (True, OnDelete): an index has more than one updated machine.
    pub const EXCESS_UPDATED_REPLICAS: &str = "ExcessUpdatedReplicas";
    /// Reason (True): a replacement machine failed while the old one is still there.
    pub const FAILED_REPLACEMENT: &str = "FailedReplacement";
    /// Reason (True): machines are owned by another controller.
    pub const MACHINES_ALREADY_OWNED: &str = "MachinesAlreadyOwned";
    /// Reason (True): the strategy type is not supported.
    pub const INVALID_STRATEGY: &str = "InvalidStrategy";
    /// Progressing.
    pub const PROGRESSING: &str = "Progressing";
    /// Reason (True): replicas need an update.
    pub const NEEDS_UPDATE_REPLICAS: &str = "NeedsUpdateReplicas";
    /// Reason (True): more ready machines than replicas.
    pub const EXCESS_REPLICAS: &str = "ExcessReplicas";
    /// Reason (False): all replicas updated.
    pub const ALL_REPLICAS_UPDATED: &str = "AllReplicasUpdated";
    /// Reason (False): the operator is degraded.
    pub const OPERATOR_DEGRADED: &str = "OperatorDegraded";
    /// Error: continuous identical errors.
    pub const ERROR: &str = "Error";
    /// Reason (True): 15 identical consecutive errors.
    pub const CONTINUOUS_ERRORS: &str = "ContinuousErrors";
}

/// MachineHealthCheck conditions (CAPI style, `machine.openshift.io/v1beta1`).
pub mod mhc {
    /// Whether remediation is allowed (short-circuit).
    pub const REMEDIATION_ALLOWED: &str = "RemediationAllowed";
    /// Reason (False, Warning): too many unhealthy machines.
    pub const TOO_MANY_UNHEALTHY: &str = "TooManyUnhealthy";
    /// The external remediation template is available.
    pub const EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE: &str =
        "ExternalRemediationTemplateAvailable";
    /// Reason (False): the template was not found.
    pub const EXTERNAL_REMEDIATION_TEMPLATE_NOT_FOUND: &str = "ExternalRemediationTemplateNotFound";
    /// The external remediation request could be created.
    pub const EXTERNAL_REMEDIATION_REQUEST_AVAILABLE: &str = "ExternalRemediationRequestAvailable";
    /// Reason (False): the request could not be created.
    pub const EXTERNAL_REMEDIATION_REQUEST_CREATION_FAILED: &str =
        "ExternalRemediationRequestCreationFailed";
    /// Event reason when remediation is restricted by maxUnhealthy.
    pub const REMEDIATION_RESTRICTED_EVENT: &str = "RemediationRestricted";
    /// Event reason when a machine without a controller owner is not remediated.
    pub const SKIPPED_NO_CONTROLLER_EVENT: &str = "SkippedNoController";
}

/// Machine conditions (CAPI style, `machine.openshift.io/v1beta1`).
pub mod machine {
    /// The instance exists in the provider.
    pub const INSTANCE_EXISTS: &str = "InstanceExists";
    /// Reason (Unknown): error checking the provider.
    pub const ERROR_CHECKING_PROVIDER: &str = "ErrorCheckingProvider";
    /// Reason (False): the instance is missing.
    pub const INSTANCE_MISSING: &str = "InstanceMissing";
    /// Reason (False): the instance was not created yet.
    pub const INSTANCE_NOT_CREATED: &str = "InstanceNotCreated";
    /// The machine may be drained.
    pub const DRAINABLE: &str = "Drainable";
    /// The machine may be terminated.
    pub const TERMINABLE: &str = "Terminable";
    /// Reason (False, Warning): a lifecycle hook blocks the operation.
    pub const HOOK_PRESENT: &str = "HookPresent";
    /// The node was drained.
    pub const DRAINED: &str = "Drained";
    /// Reason (False): the drain failed.
    pub const DRAIN_ERROR: &str = "DrainError";
    /// Message when the drain finished.
    pub const DRAIN_FINISHED_MESSAGE: &str = "Drain finished successfully";
    /// Message when the drain was skipped.
    pub const DRAIN_SKIPPED_MESSAGE: &str = "Node drain skipped";
    /// Event reason when a preDrain hook blocks the drain.
    pub const DRAIN_BLOCKED_EVENT: &str = "DrainBlocked";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn capi_transition_time_only_changes_on_flip() {
        let mut conds = Vec::new();
        let t0 = t("2025-01-01T00:00:00Z");
        let t1 = t("2025-01-01T00:01:00Z");
        let t2 = t("2025-01-01T00:02:00Z");
        assert!(set_capi_condition(
            &mut conds,
            &ConditionUpdate::true_(zone_v1beta1::VCENTER_AVAILABLE),
            &t0
        ));
        assert!(!set_capi_condition(
            &mut conds,
            &ConditionUpdate::true_(zone_v1beta1::VCENTER_AVAILABLE),
            &t1
        ));
        assert_eq!(conds[0].last_transition_time, t0);
        let f = ConditionUpdate::false_(
            zone_v1beta1::VCENTER_AVAILABLE,
            zone_v1beta1::VCENTER_UNREACHABLE,
            severity::ERROR,
            "boom",
        );
        assert!(set_capi_condition(&mut conds, &f, &t2));
        assert_eq!(conds[0].last_transition_time, t2);
        assert_eq!(conds[0].severity.as_deref(), Some("Error"));
        assert_eq!(conds.len(), 1);
        // A message change alone keeps the time but reports a change.
        let f2 = ConditionUpdate {
            message: "boom again",
            ..f
        };
        assert!(set_capi_condition(&mut conds, &f2, &t0));
        assert_eq!(conds[0].last_transition_time, t2);
    }

    #[test]
    fn severity_dropped_unless_false() {
        let mut conds = Vec::new();
        let u = ConditionUpdate {
            severity: severity::ERROR,
            ..ConditionUpdate::true_("Ready")
        };
        set_capi_condition(&mut conds, &u, &t("2025-01-01T00:00:00Z"));
        assert_eq!(conds[0].severity, None);
    }

    #[test]
    fn meta_transition_time_only_changes_on_flip() {
        let mut conds = Vec::new();
        let t0 = t("2025-01-01T00:00:00Z");
        let t1 = t("2025-01-01T00:01:00Z");
        let ready = ConditionUpdate::true_reason(zone::READY, zone::READY_REASON, "");
        assert!(set_meta_condition(&mut conds, &ready, Some(1), &t0));
        assert!(!set_meta_condition(&mut conds, &ready, Some(1), &t1));
        assert!(set_meta_condition(&mut conds, &ready, Some(2), &t1));
        assert_eq!(conds[0].last_transition_time, t0);
        let nr = ConditionUpdate::false_(zone::READY, zone::NOT_READY_REASON, "", "x");
        assert!(set_meta_condition(&mut conds, &nr, Some(2), &t1));
        assert_eq!(conds[0].last_transition_time, t1);
        assert!(!is_meta_true(&conds, zone::READY));
        assert!(remove_meta_condition(&mut conds, zone::READY));
        assert!(conds.is_empty());
    }
}
