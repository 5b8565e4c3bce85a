//! VSphereCluster at `infrastructure.cluster.x-k8s.io/v1beta2`, as CAPV v1.17 has it: the
//! InfraCluster of the v1beta2 contract (`status.initialization.provisioned`, failure domains
//! as a list sorted by name, metav1 conditions).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Conditions, DeprecatedStatus, Initialization, require};
pub use super::common::{VSphereIdentityKind, VSphereIdentityReference};

/// Finalizer CAPV puts on every VSphereCluster.
pub const CLUSTER_FINALIZER: &str = "vspherecluster.infrastructure.cluster.x-k8s.io";

/// VSphereClusterSpec: where the cluster's machines live and with which credentials.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereCluster",
    plural = "vsphereclusters",
    namespaced,
    category = "cluster-api",
    storage = false,
    status = "VSphereClusterStatus",
    doc = "VSphereCluster is the Schema for the vsphereclusters API.",
    derive = "PartialEq",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Server",
        type_ = "string",
        json_path = ".spec.server",
        description = "Server is the address of the vSphere endpoint."
    ),
    printcolumn(
        name = "ControlPlane Endpoint",
        type_ = "string",
        json_path = ".spec.controlPlaneEndpoint.host",
        description = "API Endpoint"
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Paused\")].status",
        description = "Reconciliation paused",
        priority = 10
    ),
    printcolumn(
        name = "Provisioned",
        type_ = "string",
        json_path = ".status.initialization.provisioned",
        description = "VSphereCluster is provisioned"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of VSphereCluster"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = require_server)]
pub struct VSphereClusterSpec {
    /// server: the vCenter of the cluster.
    // Required by the schema, but absent decodes as "": a cluster written at v1beta1 (where it
    // was optional) is stored as it was, and must still be reconciled (and told what is
    // missing) rather than skipped as undecodable.
    #[serde(default)]
    #[schemars(length(min = 1, max = 1024))]
    pub server: String,
    /// thumbprint: SHA-1 of the vCenter's certificate, colon-separated.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub thumbprint: Option<String>,
    /// controlPlaneEndpoint: the API server address of the workload cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// identityRef: the credentials; unset means the manager's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<VSphereIdentityReference>,
    /// clusterModules: the anti-affinity modules of the cluster's machine sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512), extend("x-kubernetes-list-type" = "atomic"))]
    pub cluster_modules: Option<Vec<ClusterModule>>,
    /// disableClusterModule: no anti-affinity modules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_cluster_module: Option<bool>,
    /// failureDomainSelector: which VSphereDeploymentZones the cluster uses (unset: none, as
    /// CAPV; `{}`: every zone of its server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_domain_selector: Option<LabelSelector>,
}

/// The schema requires `server`, whatever the Rust decoding tolerates.
fn require_server(schema: &mut schemars::Schema) {
    require(schema, "server");
}

impl VSphereClusterSpec {
    /// The vCenter server; `None` when unset (only a cluster written at v1beta1, where the
    /// field was optional, can lack it).
    pub fn server(&self) -> Option<&str> {
        Some(self.server.as_str()).filter(|s| !s.is_empty())
    }
}

impl VSphereClusterStatus {
    /// `initialization.provisioned`: the contract's "infrastructure ready", never set back to
    /// false.
    pub fn provisioned(&self) -> bool {
        self.initialization
            .as_ref()
            .and_then(|i| i.provisioned)
            .unwrap_or(false)
    }
}

/// The control plane endpoint; either field may be left for CAPI to fill in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct ApiEndpoint {
    /// host of the endpoint.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 512))]
    pub host: String,
    /// port of the endpoint.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// A vCenter cluster module (VM anti-affinity group) for one machine set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterModule {
    /// controlPlane: whether the module is the control plane's.
    pub control_plane: bool,
    /// targetObjectName: the KubeadmControlPlane or MachineDeployment of the module.
    #[schemars(length(min = 1, max = 253))]
    pub target_object_name: String,
    /// moduleUUID in vCenter.
    #[serde(rename = "moduleUUID")]
    #[schemars(length(min = 1, max = 2048))]
    pub module_uuid: String,
}

/// VSphereClusterStatus: what the controller observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct VSphereClusterStatus {
    /// conditions of the cluster (Ready, VCenterAvailable, FailureDomainsReady, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    /// initialization: the contract's provisioned flag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    /// failureDomains the cluster's machines may be placed in, sorted by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub failure_domains: Option<Vec<FailureDomain>>,
    /// vCenterVersion of the cluster's vCenter.
    #[serde(rename = "vCenterVersion", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub vcenter_version: Option<String>,
    /// deprecated: the v1beta1 conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedStatus>,
}

/// A failure domain of the cluster, in the CAPI v1beta2 shape.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// name of the failure domain (a VSphereDeploymentZone).
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// controlPlane: whether control plane machines may go there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// attributes of the failure domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, String>>,
}
