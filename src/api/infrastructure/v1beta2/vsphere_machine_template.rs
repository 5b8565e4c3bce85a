//! VSphereMachineTemplate at `infrastructure.cluster.x-k8s.io/v1beta2`: what KubeadmControlPlane,
//! MachineDeployments and ClusterClass stamp VSphereMachines from.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::ObjectMeta;
use super::vsphere_machine::VSphereMachineSpec;

/// VSphereMachineTemplateSpec: the VSphereMachine to stamp.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereMachineTemplate",
    plural = "vspheremachinetemplates",
    namespaced,
    category = "cluster-api",
    storage = false,
    doc = "VSphereMachineTemplate is the Schema for the vspheremachinetemplates API.",
    derive = "PartialEq",
    printcolumn(
        name = "ClusterClass",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"ClusterClass\")].name",
        description = "Name of the ClusterClass owning this template"
    ),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"Cluster\")].name",
        description = "Name of the Cluster owning this template"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of VSphereMachineTemplate"
    )
)]
pub struct VSphereMachineTemplateSpec {
    /// template: the VSphereMachine's metadata and spec.
    pub template: VSphereMachineTemplateResource,
}

/// The VSphereMachine a template stamps.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct VSphereMachineTemplateResource {
    /// metadata put on the stamped VSphereMachine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// spec of the stamped VSphereMachine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<VSphereMachineSpec>,
}
