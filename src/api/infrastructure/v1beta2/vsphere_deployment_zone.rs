//! VSphereDeploymentZone at `infrastructure.cluster.x-k8s.io/v1beta2`, as CAPV v1.17 has it:
//! metav1 conditions, the v1beta1 ones under `status.deprecated`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Conditions, DeprecatedStatus, require};

/// Finalizer CAPV puts on every zone.
pub const ZONE_FINALIZER: &str = "vspheredeploymentzone.infrastructure.cluster.x-k8s.io";

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
#[schemars(transform = require_failure_domain)]
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
    // Required by the schema, but absent decodes as "": a zone written at v1beta1 (where it
    // was optional) is stored as it was, and must still get a condition saying what is missing
    // rather than be skipped as undecodable.
    #[serde(default)]
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

/// The schema requires `failureDomain`, whatever the Rust decoding tolerates.
fn require_failure_domain(schema: &mut schemars::Schema) {
    require(schema, "failureDomain");
}

impl VSphereDeploymentZoneSpec {
    /// The VSphereFailureDomain's name; `None` when unset (only a zone written at v1beta1,
    /// where the field was optional, can lack it).
    pub fn failure_domain_name(&self) -> Option<&str> {
        Some(self.failure_domain.as_str()).filter(|n| !n.is_empty())
    }

    /// `placementConstraint.resourcePool`.
    pub fn resource_pool(&self) -> Option<&str> {
        self.placement_constraint.as_ref()?.resource_pool.as_deref()
    }

    /// `placementConstraint.folder`.
    pub fn folder(&self) -> Option<&str> {
        self.placement_constraint.as_ref()?.folder.as_deref()
    }

    /// `controlPlane`, defaulting to true as upstream does.
    pub fn is_control_plane(&self) -> bool {
        self.control_plane.unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Kind;

    #[test]
    fn a_zone_stored_without_failure_domain_still_decodes_but_the_schema_requires_it() {
        // Written at v1beta1 (optional there), stored converted: the planner must still see
        // it to say what is missing.
        let z: VSphereDeploymentZone = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "VSphereDeploymentZone",
            "metadata": {"name": "z"},
            "spec": {"server": "vc"}
        }))
        .unwrap();
        assert_eq!(z.spec.failure_domain_name(), None);
        assert_eq!(z.spec.resource_pool(), None);
        let spec = &Kind::VSphereDeploymentZone.schema_for(super::super::API_VERSION)["properties"]
            ["spec"];
        assert!(
            spec["required"]
                .as_array()
                .unwrap()
                .contains(&"failureDomain".into())
        );
        assert!(spec["properties"]["failureDomain"].get("default").is_none());
    }
}
