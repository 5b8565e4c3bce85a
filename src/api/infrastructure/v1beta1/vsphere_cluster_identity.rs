//! `VSphereClusterIdentity` (`infrastructure.cluster.x-k8s.io/v1beta1`, cluster-scoped): vCenter
//! credentials an administrator lends to the VSphereClusters of chosen namespaces. The Secret
//! (`spec.secretName`, keys `username` and `password`) lives in the controller's own namespace,
//! so tenants never read it; `spec.allowedNamespaces.selector` says which namespaces may name the
//! identity in `VSphereCluster.spec.identityRef` (unset: none).
//!
//! The fields are those of cluster-api-provider-vsphere v1.15.0
//! `apis/v1beta1/vsphereclusteridentity_types.go`, so upstream manifests apply unchanged.
//! As with CAPV, the identity controller (`controllers::cluster_identity`) makes the Secret the
//! identity's own (owner reference and finalizer, so `clusterctl move` takes it along) and
//! maintains `status` (`plan::cluster::identity`); a VSphereCluster naming the identity still
//! checks the Secret itself each time it reconciles (see `plan::credentials`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::vsphere_deployment_zone::V1Beta2Status;
use crate::api::conditions::CapiCondition;

/// VSphereClusterIdentitySpec contains a secret reference and a group of allowed namespaces.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "VSphereClusterIdentity",
    plural = "vsphereclusteridentities",
    category = "cluster-api",
    status = "VSphereClusterIdentityStatus",
    doc = "VSphereClusterIdentity defines the account to be used for reconciling clusters",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereClusterIdentitySpec {
    /// SecretName references a Secret inside the controller namespace with the credentials to use
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1))]
    pub secret_name: String,
    /// AllowedNamespaces is used to identify which namespaces are allowed to use this account.
    /// Namespaces can be selected with a label selector.
    /// If this object is nil, no namespaces will be allowed
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<AllowedNamespaces>,
}

/// AllowedNamespaces restricts the namespaces this VSphereClusterIdentity can be used from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllowedNamespaces {
    /// Selector is a standard Kubernetes LabelSelector. A label query over a set of resources.
    #[serde(default)]
    pub selector: LabelSelector,
}

/// VSphereClusterIdentityStatus contains the status of the VSphereClusterIdentity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereClusterIdentityStatus {
    /// Ready is true when the VSphereClusterIdentity's Secret is its own and can be used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Conditions defines current service state of the VSphereCluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
    /// v1beta2 groups all the fields that will be added or modified in VSphereClusterIdentity's
    /// status with the V1Beta2 version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
}
