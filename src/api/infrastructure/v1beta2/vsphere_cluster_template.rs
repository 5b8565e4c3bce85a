//! VSphereClusterTemplate at `infrastructure.cluster.x-k8s.io/v1beta2`: the InfraClusterTemplate
//! a ClusterClass names; the topology controller stamps VSphereClusters from it.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::ObjectMeta;
use super::vsphere_cluster::VSphereClusterSpec;

/// VSphereClusterTemplateSpec: the VSphereCluster to stamp.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereClusterTemplate",
    plural = "vsphereclustertemplates",
    namespaced,
    category = "cluster-api",
    storage = false,
    doc = "VSphereClusterTemplate is the Schema for the vsphereclustertemplates API.",
    derive = "PartialEq",
    printcolumn(
        name = "ClusterClass",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"ClusterClass\")].name",
        description = "Name of the ClusterClass owning this template"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of VSphereClusterTemplate"
    )
)]
#[schemars(transform = require_template)]
pub struct VSphereClusterTemplateSpec {
    /// template: the VSphereCluster's metadata and spec.
    // Required by the schema of `spec`, but `spec` itself is optional, and CAPV v1.17's
    // clusterclass-template.yaml has none: such a template decodes as an empty one.
    #[serde(default)]
    pub template: VSphereClusterTemplateResource,
}

/// The schema requires `template` in a `spec`, whatever the Rust decoding tolerates.
fn require_template(schema: &mut schemars::Schema) {
    super::common::require(schema, "template");
}

/// The VSphereCluster a template stamps.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct VSphereClusterTemplateResource {
    /// metadata put on the stamped VSphereCluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// spec of the stamped VSphereCluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<VSphereClusterSpec>,
}
