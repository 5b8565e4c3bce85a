//! `MachineHealthCheck` (`machine.openshift.io/v1beta1`, namespaced).
//!
//! Fields, defaults and patterns follow openshift/api `machine/v1beta1/types_machinehealthcheck.go`
//! and its generated CRD (short names `mhc`, `mhcs`).

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::api::conditions::CapiCondition;

/// Annotation whose presence pauses a MachineHealthCheck.
pub const MHC_PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// MHC annotation selecting the external bare-metal remediation strategy.
pub const REMEDIATION_STRATEGY_ANNOTATION: &str = "machine.openshift.io/remediation-strategy";
/// `maxUnhealthy` pattern (upstream).
pub const MAX_UNHEALTHY_PATTERN: &str = "^((100|[0-9]{1,2})%|[0-9]+)$";
/// `nodeStartupTimeout` pattern (upstream; note that its `^0|…` alternation is loose, the webhook
/// checks the duration strictly).
pub const NODE_STARTUP_TIMEOUT_PATTERN: &str = r"^0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";
/// Unhealthy condition `timeout` pattern (upstream).
pub const TIMEOUT_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";
/// Default `maxUnhealthy`.
pub const DEFAULT_MAX_UNHEALTHY: &str = "100%";
/// Default `nodeStartupTimeout`.
pub const DEFAULT_NODE_STARTUP_TIMEOUT: &str = "10m";

/// MachineHealthCheckSpec defines the desired state of MachineHealthCheck
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "machine.openshift.io",
    version = "v1beta1",
    kind = "MachineHealthCheck",
    plural = "machinehealthchecks",
    namespaced,
    shortname = "mhc",
    shortname = "mhcs",
    category = "machine-api",
    status = "MachineHealthCheckStatus",
    doc = "MachineHealthCheck is the Schema for the machinehealthchecks API",
    derive = "PartialEq",
    printcolumn(
        name = "MaxUnhealthy",
        type_ = "string",
        json_path = ".spec.maxUnhealthy",
        description = "Maximum number of unhealthy machines allowed"
    ),
    printcolumn(
        name = "ExpectedMachines",
        type_ = "integer",
        json_path = ".status.expectedMachines",
        description = "Number of machines currently monitored"
    ),
    printcolumn(
        name = "CurrentHealthy",
        type_ = "integer",
        json_path = ".status.currentHealthy",
        description = "Current observed healthy machines"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineHealthCheckSpec {
    /// Label selector to match machines whose health will be exercised.
    /// Note: An empty selector will match all machines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// UnhealthyConditions contains a list of the conditions that determine whether a node is
    /// considered unhealthy. The conditions are combined in a logical OR.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub unhealthy_conditions: Option<Vec<UnhealthyCondition>>,
    /// Any farther remediation is only allowed if at most "MaxUnhealthy" machines selected by
    /// "selector" are not healthy. Expects either a postive integer value or a percentage value.
    /// Percentage values must be positive whole numbers and are capped at 100%.
    /// Both 0 and 0% are valid and will block all remediation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "max_unhealthy_schema")]
    pub max_unhealthy: Option<IntOrString>,
    /// Machines older than this duration without a node will be considered to have failed and
    /// will be remediated. To prevent Machines without Nodes from being removed, disable startup
    /// checks by setting this value explicitly to "0".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "node_startup_timeout_schema")]
    pub node_startup_timeout: Option<String>,
    /// RemediationTemplate is a reference to a remediation template provided by an
    /// infrastructure provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation_template: Option<ObjectReference>,
}

/// UnhealthyCondition represents a Node condition type and value with a timeout specified as a
/// duration. When the named condition has been in the given status for at least the timeout
/// value, a node is considered unhealthy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct UnhealthyCondition {
    /// The node condition type.
    #[serde(rename = "type")]
    #[schemars(length(min = 1))]
    pub type_: String,
    /// The node condition status.
    #[schemars(length(min = 1))]
    pub status: String,
    /// Expects an unsigned duration string of decimal numbers each with optional fraction and a
    /// unit suffix, eg "300ms", "1.5h" or "2h45m".
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"))]
    pub timeout: String,
}

/// MachineHealthCheckStatus defines the observed state of MachineHealthCheck
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineHealthCheckStatus {
    /// total number of machines counted by this machine health check
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub expected_machines: Option<i64>,
    /// total number of machines counted by this machine health check
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub current_healthy: Option<i64>,
    /// RemediationsAllowed is the number of further remediations allowed by this machine health
    /// check before maxUnhealthy short circuiting will be applied
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub remediations_allowed: Option<i32>,
    /// Conditions defines the current state of the MachineHealthCheck
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
}

fn max_unhealthy_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "default": DEFAULT_MAX_UNHEALTHY,
        "description": "Any farther remediation is only allowed if at most \"MaxUnhealthy\" machines selected by \"selector\" are not healthy. Expects either a postive integer value or a percentage value. Percentage values must be positive whole numbers and are capped at 100%. Both 0 and 0% are valid and will block all remediation.",
        "pattern": MAX_UNHEALTHY_PATTERN,
        "x-kubernetes-int-or-string": true
    })
}

fn node_startup_timeout_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "default": DEFAULT_NODE_STARTUP_TIMEOUT,
        "description": "Machines older than this duration without a node will be considered to have failed and will be remediated. To prevent Machines without Nodes from being removed, disable startup checks by setting this value explicitly to \"0\". Expects an unsigned duration string of decimal numbers each with optional fraction and a unit suffix, eg \"300ms\", \"1.5h\" or \"2h45m\". Valid time units are \"ns\", \"us\" (or \"µs\"), \"ms\", \"s\", \"m\", \"h\".",
        "pattern": NODE_STARTUP_TIMEOUT_PATTERN
    })
}
