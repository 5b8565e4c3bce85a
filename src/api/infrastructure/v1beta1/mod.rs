//! `infrastructure.cluster.x-k8s.io/v1beta1`: CAPV's v1beta1 schemas, served and deprecated
//! (CAPV v1.21 stops serving them). The enums both versions share live on the hub
//! ([`super::v1beta2`]) and are re-exported here, so the hub depends on no spoke.

pub mod vsphere_cluster;
pub mod vsphere_cluster_identity;
pub mod vsphere_cluster_template;
pub mod vsphere_deployment_zone;
pub mod vsphere_failure_domain;
pub mod vsphere_machine;

/// The `apiVersion` of this module's kinds.
pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
