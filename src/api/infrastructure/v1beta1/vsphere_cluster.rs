//! `VSphereCluster` (`infrastructure.cluster.x-k8s.io/v1beta1`, namespaced): the vCenter server,
//! credentials and failure-domain selection of one workload cluster. This provider publishes the
//! selected deployment zones to `status.failureDomains` and, for a VSphereCluster a Cluster API
//! `Cluster` owns, plays the InfraCluster of the contract (`status.ready`, finalizer, pause).
//!
//! Every field of cluster-api-provider-vsphere v1.15.0 `apis/v1beta1/vspherecluster_types.go` is
//! here, so upstream manifests validate unchanged.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::vsphere_deployment_zone::V1Beta2Status;
use crate::api::conditions::CapiCondition;

pub use super::super::v1beta2::vsphere_cluster::CLUSTER_FINALIZER;

/// VSphereClusterSpec defines the desired state of VSphereCluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "VSphereCluster",
    plural = "vsphereclusters",
    namespaced,
    category = "cluster-api",
    status = "VSphereClusterStatus",
    doc = "VSphereCluster is the Schema for the vsphereclusters API.",
    derive = "PartialEq",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.ready",
        description = "Cluster infrastructure is ready for VSphereMachine"
    ),
    printcolumn(
        name = "Server",
        type_ = "string",
        json_path = ".spec.server",
        description = "Server is the address of the vSphere endpoint."
    ),
    printcolumn(
        name = "ControlPlaneEndpoint",
        type_ = "string",
        json_path = ".spec.controlPlaneEndpoint.host",
        description = "API Endpoint",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of Machine"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereClusterSpec {
    /// Server is the address of the vSphere endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Thumbprint is the colon-separated SHA-1 checksum of the given vCenter server's host certificate
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thumbprint: Option<String>,
    /// ControlPlaneEndpoint represents the endpoint used to communicate with the control plane.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// IdentityRef is a reference to either a Secret or VSphereClusterIdentity that contains
    /// the identity to use when reconciling the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<VSphereIdentityReference>,
    /// ClusterModules hosts information regarding the anti-affinity vSphere constructs
    /// for each of the objects responsible for creation of VM objects belonging to the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_modules: Option<Vec<ClusterModule>>,
    /// DisableClusterModule is used to explicitly turn off the ClusterModule feature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_cluster_module: Option<bool>,
    /// FailureDomainSelector is the label selector to use for failure domain selection
    /// for the control plane nodes of the cluster.
    /// If not set (`nil`), selecting failure domains will be disabled.
    /// An empty value (`{}`) selects all existing failure domains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_domain_selector: Option<LabelSelector>,
}

/// APIEndpoint represents a reachable Kubernetes API endpoint.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiEndpoint {
    /// The hostname on which the API server is serving.
    pub host: String,
    /// The port on which the API server is serving.
    pub port: i32,
}

/// VSphereIdentityReference names a Secret (in the cluster's namespace) or a
/// VSphereClusterIdentity holding the vCenter credentials.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereIdentityReference {
    /// Kind of the identity. Can either be VSphereClusterIdentity or Secret
    pub kind: VSphereIdentityKind,
    /// Name of the identity.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// The kind of an identity reference.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum VSphereIdentityKind {
    /// A VSphereClusterIdentity (cluster-scoped).
    VSphereClusterIdentity,
    /// A Secret in the VSphereCluster's namespace with keys `username` and `password`.
    Secret,
}

/// ClusterModule holds the anti affinity construct `ClusterModule` identifier
/// in use by the VMs owned by the object referred by the TargetObjectName field.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterModule {
    /// ControlPlane indicates whether the referred object is responsible for control plane nodes.
    pub control_plane: bool,
    /// TargetObjectName points to the object that uses the Cluster Module information to enforce
    /// anti-affinity amongst its descendant VM objects.
    pub target_object_name: String,
    /// ModuleUUID is the unique identifier of the `ClusterModule` used by the object.
    #[serde(rename = "moduleUUID")]
    pub module_uuid: String,
}

/// VSphereClusterStatus defines the observed state of VSphereClusterSpec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereClusterStatus {
    /// Ready is true when the cluster infrastructure is ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Conditions defines current service state of the VSphereCluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
    /// FailureDomains is a list of failure domain objects synced from the infrastructure provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<BTreeMap<String, FailureDomainSpec>>,
    /// VCenterVersion defines the version of the vCenter server defined in the spec.
    #[serde(rename = "vCenterVersion", skip_serializing_if = "Option::is_none")]
    pub vcenter_version: Option<String>,
    /// v1beta2 groups all the fields that will be added or modified in VSphereCluster's status
    /// with the V1Beta2 version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
    /// initialization provides observations of the VSphereCluster initialization process: the
    /// Cluster API v1beta2 contract's ready signal, set with `ready` (not in CAPV's v1beta1
    /// schema; an addition, so v1beta2-contract readers find it too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initialization: Option<VSphereClusterInitializationStatus>,
}

/// `status.initialization` of the Cluster API v1beta2 contract.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereClusterInitializationStatus {
    /// provisioned is true when the infrastructure provider reports that the Cluster's
    /// infrastructure is fully provisioned. It is never set back to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// FailureDomainSpec is the Cluster API failure domain: whether control plane machines may use it,
/// and free-form attributes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainSpec {
    /// ControlPlane determines if this failure domain is suitable for use by control plane machines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Attributes is a free form map of attributes an infrastructure provider might use or require.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, String>>,
}
