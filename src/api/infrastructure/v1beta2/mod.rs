//! `infrastructure.cluster.x-k8s.io/v1beta2`: CAPV v1.17's v1beta2 schemas for every CAPV kind
//! this provider serves, so CAPV v1.16+ templates (written in v1beta2 throughout) apply
//! unchanged. One addition: the failure domain's region and zone keep `autoConfigure`, which
//! CAPV dropped and this provider implements.
//!
//! The hub and the storage version: the planners, the controllers, admission and local mode
//! work on these types only. A v1beta1 object meets them at the edge, through
//! [`crate::api::conversion`] (the webhook, the manifest loader, admission), without loss: what
//! one version cannot hold is kept in the `cluster.x-k8s.io/conversion-data` annotation.

pub mod clone_spec;
pub mod common;
pub mod vsphere_cluster;
pub mod vsphere_cluster_identity;
pub mod vsphere_cluster_template;
pub mod vsphere_deployment_zone;
pub mod vsphere_failure_domain;
pub mod vsphere_machine;
pub mod vsphere_machine_template;
pub mod vsphere_vm;

pub use vsphere_cluster::{VSphereCluster, VSphereClusterSpec, VSphereClusterStatus};
pub use vsphere_cluster_identity::{VSphereClusterIdentity, VSphereClusterIdentitySpec};
pub use vsphere_cluster_template::{VSphereClusterTemplate, VSphereClusterTemplateSpec};
pub use vsphere_deployment_zone::{
    PlacementConstraint, VSphereDeploymentZone, VSphereDeploymentZoneSpec,
    VSphereDeploymentZoneStatus,
};
pub use vsphere_failure_domain::{
    FailureDomain, FailureDomainHosts, NetworkConfiguration, Topology, VSphereFailureDomain,
    VSphereFailureDomainSpec,
};
pub use vsphere_machine::{VSphereMachine, VSphereMachineSpec, VSphereMachineStatus};
pub use vsphere_machine_template::{VSphereMachineTemplate, VSphereMachineTemplateSpec};
pub use vsphere_vm::{VSphereVM, VSphereVMSpec, VSphereVMStatus};

/// The `apiVersion` of this module's kinds.
pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta2";
