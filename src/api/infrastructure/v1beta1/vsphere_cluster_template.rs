//! `VSphereClusterTemplate` (`infrastructure.cluster.x-k8s.io/v1beta1`, namespaced): the
//! InfraClusterTemplate a ClusterClass names. The topology controller creates a VSphereCluster
//! from `spec.template.spec` for each Cluster of the class. CAPV serves it in v1beta1 and
//! v1beta2; its v1beta2 is in [`crate::api::infrastructure::v1beta2::vsphere_cluster_template`].

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::vsphere_cluster::VSphereClusterSpec;

/// VSphereClusterTemplateSpec: the VSphereCluster to stamp.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "VSphereClusterTemplate",
    plural = "vsphereclustertemplates",
    namespaced,
    category = "cluster-api",
    doc = "VSphereClusterTemplate is the Schema for the vsphereclustertemplates API.",
    derive = "PartialEq"
)]
pub struct VSphereClusterTemplateSpec {
    /// template: the VSphereCluster's spec.
    #[serde(default)]
    pub template: VSphereClusterTemplateResource,
}

/// The VSphereCluster a template stamps.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct VSphereClusterTemplateResource {
    /// spec of the stamped VSphereCluster.
    #[serde(default)]
    pub spec: VSphereClusterSpec,
}
