//! VSphereClusterIdentity at `infrastructure.cluster.x-k8s.io/v1beta2`, as CAPV v1.17 has it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Conditions, DeprecatedStatus, require};

/// CAPV's finalizer on an identity (and, by the identity controller, on its Secret).
pub const IDENTITY_FINALIZER: &str = "vsphereclusteridentity/infrastructure.cluster.x-k8s.io";

/// VSphereClusterIdentitySpec: a Secret an administrator lends to chosen namespaces.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereClusterIdentity",
    plural = "vsphereclusteridentities",
    category = "cluster-api",
    storage = false,
    status = "VSphereClusterIdentityStatus",
    doc = "VSphereClusterIdentity defines the account to be used for reconciling clusters",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = require_secret_name)]
pub struct VSphereClusterIdentitySpec {
    /// secretName: the Secret in the manager's namespace.
    // Required by the schema, but absent decodes as "" (optional at v1beta1, where objects
    // stored converted may lack it): the controller then says the Secret is not available.
    #[serde(default)]
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// allowedNamespaces that may use the identity (unset: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<AllowedNamespaces>,
}

/// The namespaces an identity is lent to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AllowedNamespaces {
    /// selector of the namespaces; empty selects all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// VSphereClusterIdentityStatus.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct VSphereClusterIdentityStatus {
    /// conditions of the identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    /// ready: the Secret is usable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// deprecated: the v1beta1 conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedStatus>,
}

/// The schema requires `secretName`, whatever the Rust decoding tolerates.
fn require_secret_name(schema: &mut schemars::Schema) {
    require(schema, "secretName");
}
