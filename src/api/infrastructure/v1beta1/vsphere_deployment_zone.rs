//! `VSphereDeploymentZone` (`infrastructure.cluster.x-k8s.io/v1beta1`, cluster-scoped): a
//! VSphereFailureDomain on a given vCenter server, with the resource pool and folder machines are
//! placed in, and whether control plane machines may use it.
//!
//! Fields and JSON names are those of cluster-api-provider-vsphere v1.15.0
//! (`apis/v1beta1/vspheredeploymentzone_types.go`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::conditions::{CapiCondition, MetaCondition};

/// VSphereDeploymentZoneSpec defines the desired state of VSphereDeploymentZone.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "VSphereDeploymentZone",
    plural = "vspheredeploymentzones",
    shortname = "vspherezone",
    category = "cluster-api",
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
    /// Server is the address of the vSphere endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Thumbprint is the SHA-256 or SHA-1 thumbprint of the vCenter server's certificate: it pins
    /// TLS for this zone's identityRef credentials only (as in CAPV v1beta2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thumbprint: Option<String>,
    /// IdentityRef names the credentials this zone is verified and configured with: a Secret
    /// (with `username` and `password`) in the controller's namespace, or a
    /// VSphereClusterIdentity (its Secret, also in the controller's namespace). Zones are
    /// cluster-scoped and admin-owned, so their credentials come only from there or from the
    /// manager's own, never from a tenant's VSphereCluster. Unset: the manager's credentials,
    /// if they are bound to this server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<super::vsphere_cluster::VSphereIdentityReference>,
    /// FailureDomain is the name of the VSphereFailureDomain used for this VSphereDeploymentZone
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// ControlPlane determines if this failure domain is suitable for use by control plane machines.
    /// Defaults to true (mutating webhook).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// PlacementConstraint encapsulates the placement constraints used within this deployment zone.
    pub placement_constraint: PlacementConstraint,
}

/// The resource pool and folder machines of a zone are placed in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementConstraint {
    /// ResourcePool is the name or inventory path of the resource pool in which
    /// the virtual machine is created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
    /// Folder is the name or inventory path of the folder in which the
    /// virtual machine is created/located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
}

/// VSphereDeploymentZoneStatus contains the status for a VSphereDeploymentZone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereDeploymentZoneStatus {
    /// Ready is true when the VSphereDeploymentZone resource is ready.
    /// If set to false, it will be ignored by VSphereClusters
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Conditions defines current service state of the VSphereDeploymentZone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
    /// v1beta2 groups all the fields that will be added or modified in VSphereDeploymentZone's
    /// status with the V1Beta2 version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
}

/// The `status.v1beta2` group: new-style (metav1) conditions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta2Status {
    /// conditions represents the observations of the object's current state.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<MetaCondition>>,
}
