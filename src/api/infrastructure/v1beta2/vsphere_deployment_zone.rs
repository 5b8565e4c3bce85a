//! VSphereDeploymentZone at `infrastructure.cluster.x-k8s.io/v1beta2`, as CAPV v1.17 has it:
//! metav1 conditions, the v1beta1 ones under `status.deprecated`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Conditions, DeprecatedStatus};

/// VSphereDeploymentZoneSpec defines the desired state of VSphereDeploymentZone.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereDeploymentZone",
    plural = "vspheredeploymentzones",
    shortname = "vspherezone",
    category = "cluster-api",
    storage = false,
    status = "VSphereDeploymentZoneStatus",
    doc = "VSphereDeploymentZone is the Schema for the vspheredeploymentzones API.",
    derive = "PartialEq",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.ready",
        description = "The zone was verified in vCenter"
    ),
    printcolumn(
        name = "Failure Domain",
        type_ = "string",
        json_path = ".spec.failureDomain",
        description = "The VSphereFailureDomain of this zone"
    ),
    printcolumn(
        name = "Server",
        type_ = "string",
        json_path = ".spec.server",
        description = "The vCenter server"
    ),
    printcolumn(
        name = "Control Plane",
        type_ = "boolean",
        json_path = ".spec.controlPlane",
        description = "Usable by control plane machines",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since creation"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereDeploymentZoneSpec {
    /// server is the address of the vSphere endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub server: Option<String>,
    /// thumbprint is the SHA-256 or SHA-1 thumbprint of the vCenter's certificate, pinning TLS
    /// for this zone's identityRef only. Ours, not CAPV v1.17's (as `autoConfigure`): zones act
    /// as their own admin-owned credentials, never a tenant's (security review F2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thumbprint: Option<String>,
    /// identityRef names the credentials this zone is verified and configured with: a Secret or
    /// a VSphereClusterIdentity, both resolved in the manager's namespace. Unset: the manager's
    /// own credentials, if they are bound to this server. Ours, not CAPV v1.17's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<super::common::VSphereIdentityReference>,
    /// failureDomain is the name of the VSphereFailureDomain used for this VSphereDeploymentZone
    #[schemars(length(min = 1, max = 253))]
    pub failure_domain: String,
    /// controlPlane determines if this failure domain is suitable for use by control plane machines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// placementConstraint encapsulates the placement constraints used within this deployment zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_constraint: Option<PlacementConstraint>,
}

/// PlacementConstraint is the context information for VM placements within a failure domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct PlacementConstraint {
    /// resourcePool is the name or inventory path of the resource pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub resource_pool: Option<String>,
    /// folder is the name or inventory path of the folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub folder: Option<String>,
}

/// VSphereDeploymentZoneStatus contains the status for a VSphereDeploymentZone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct VSphereDeploymentZoneStatus {
    /// conditions represents the observations of a VSphereDeploymentZone's current state.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    /// ready is true when the VSphereDeploymentZone resource is ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// deprecated groups all the status fields that are deprecated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedStatus>,
}
