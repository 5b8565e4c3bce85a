//! What this provider reads of Cluster API's other groups: core (`cluster.x-k8s.io`) and IPAM
//! (`ipam.cluster.x-k8s.io`). Their CRDs are Cluster API's; these are views, not schemas.

pub mod capi_core;
pub mod ipam;
