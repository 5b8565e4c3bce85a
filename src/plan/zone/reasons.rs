//! Why a failure domain did not validate, and the CAPV condition reasons each problem maps to.
use crate::api::conditions::{zone, zone_ours, zone_v1beta1};

/// Why the failure domain did not validate. Each maps to CAPV's reasons in both condition styles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdProblem {
    Region,
    Zone,
    TagCategoryMismatch,
    DatacenterNotFound,
    ComputeClusterNotFound,
    ResourcePoolNotOwned,
    DatastoreNotFound,
    NetworkNotFound,
    HostGroupNotFound,
    VmGroupNotFound,
    AffinityRuleMissing,
    AffinityRuleDisabled,
}

impl FdProblem {
    /// (v1beta1 reason, v1beta2 reason).
    pub fn reasons(self) -> (&'static str, &'static str) {
        match self {
            FdProblem::Region => (
                zone_v1beta1::FAILURE_DOMAIN_REGION_MISCONFIGURED,
                zone::REGION_MISCONFIGURED,
            ),
            FdProblem::Zone => (
                zone_v1beta1::FAILURE_DOMAIN_ZONE_MISCONFIGURED,
                zone::ZONE_MISCONFIGURED,
            ),
            FdProblem::TagCategoryMismatch => (
                zone_ours::TAG_CATEGORY_MISMATCH,
                zone_ours::TAG_CATEGORY_MISMATCH,
            ),
            FdProblem::DatacenterNotFound => (
                zone_ours::DATACENTER_NOT_FOUND,
                zone_ours::DATACENTER_NOT_FOUND,
            ),
            FdProblem::ComputeClusterNotFound => (
                zone_v1beta1::COMPUTE_CLUSTER_NOT_FOUND,
                zone::COMPUTE_CLUSTER_NOT_FOUND,
            ),
            FdProblem::ResourcePoolNotOwned => (
                zone_v1beta1::RESOURCE_POOL_NOT_FOUND,
                zone::RESOURCE_POOL_NOT_FOUND,
            ),
            FdProblem::DatastoreNotFound => {
                (zone_v1beta1::DATASTORE_NOT_FOUND, zone::DATASTORE_NOT_FOUND)
            }
            FdProblem::NetworkNotFound => {
                (zone_v1beta1::NETWORK_NOT_FOUND, zone::NETWORK_NOT_FOUND)
            }
            FdProblem::HostGroupNotFound => (
                zone_ours::HOST_GROUP_NOT_FOUND,
                zone_ours::HOST_GROUP_NOT_FOUND,
            ),
            FdProblem::VmGroupNotFound => {
                (zone_ours::VM_GROUP_NOT_FOUND, zone_ours::VM_GROUP_NOT_FOUND)
            }
            FdProblem::AffinityRuleMissing => {
                (zone_v1beta1::HOSTS_MISCONFIGURED, zone::HOSTS_MISCONFIGURED)
            }
            FdProblem::AffinityRuleDisabled => (
                zone_ours::AFFINITY_RULE_DISABLED,
                zone_ours::AFFINITY_RULE_DISABLED,
            ),
        }
    }
}
