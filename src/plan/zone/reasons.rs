//! Why a failure domain did not validate, and the CAPV condition reasons each problem maps to.
//!
//! Every class of failure maps to upstream's reason (capv-failure-domains.md §1, §3) in both
//! condition styles; what we know beyond upstream (the other category, the missing group, the
//! disabled rule, the step vCenter refused) goes in the message, never in a reason of our own.
use crate::api::conditions::{zone, zone_v1beta1};
use crate::api::failure_domain::VSphereFailureDomain;

use super::steps::Step;

/// Why the failure domain did not validate. Several map to one upstream reason: the variant is
/// our precision (it picks the message), the reason is CAPV's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdProblem {
    /// The region tag: category or tag missing, not attached, attached from another category,
    /// no taggable object, or an autoConfigure change to it pending or refused.
    Region,
    /// The zone tag, as for the region.
    Zone,
    ComputeClusterNotFound,
    /// The placement constraint's pool is outside the compute cluster.
    ResourcePoolNotOwned,
    DatastoreNotFound,
    NetworkNotFound,
    /// `topology.hosts.hostGroupName` names no host group (CAPV: the rule check fails).
    HostGroupNotFound,
    /// `topology.hosts.vmGroupName` names no VM group (CAPV: the rule check fails).
    VmGroupNotFound,
    /// No VM-host rule binds the VM group to the host group.
    AffinityRuleMissing,
    /// The binding rule exists but is disabled (CAPV only logs it).
    AffinityRuleDisabled,
}

impl FdProblem {
    /// Every problem, for tests that list the reasons the planner can emit.
    pub const ALL: [FdProblem; 10] = [
        FdProblem::Region,
        FdProblem::Zone,
        FdProblem::ComputeClusterNotFound,
        FdProblem::ResourcePoolNotOwned,
        FdProblem::DatastoreNotFound,
        FdProblem::NetworkNotFound,
        FdProblem::HostGroupNotFound,
        FdProblem::VmGroupNotFound,
        FdProblem::AffinityRuleMissing,
        FdProblem::AffinityRuleDisabled,
    ];

    /// (v1beta1 reason, v1beta2 reason): upstream's, always.
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
            FdProblem::HostGroupNotFound
            | FdProblem::VmGroupNotFound
            | FdProblem::AffinityRuleMissing
            | FdProblem::AffinityRuleDisabled => {
                (zone_v1beta1::HOSTS_MISCONFIGURED, zone::HOSTS_MISCONFIGURED)
            }
        }
    }

    /// The class of an autoConfigure change, for a zone whose change is pending or was refused:
    /// CAPV reports a failed category/tag/attach as the region or zone being misconfigured; groups
    /// and rules (which CAPV never creates) belong to the hosts.
    pub fn of_step(step: &Step, fd: Option<&VSphereFailureDomain>) -> FdProblem {
        let is_region = |category: &str, tag: Option<&str>| {
            fd.is_some_and(|fd| {
                let r = &fd.spec.region;
                r.tag_category == category && tag.is_none_or(|t| t == r.name)
            })
        };
        let side = |region: bool| {
            if region {
                FdProblem::Region
            } else {
                FdProblem::Zone
            }
        };
        match step {
            Step::CreateCategory { name, .. } | Step::WidenCategory { name, .. } => {
                side(is_region(name, None))
            }
            Step::CreateTag { category, name } => side(is_region(category, Some(name))),
            Step::AttachTag { category, tag, .. } => side(is_region(category, Some(tag))),
            Step::CreateHostGroup { .. } => FdProblem::HostGroupNotFound,
            Step::CreateVmGroup { .. } => FdProblem::VmGroupNotFound,
            Step::CreateVmHostRule { .. } => FdProblem::AffinityRuleMissing,
            Step::EnableVmHostRule { .. } => FdProblem::AffinityRuleDisabled,
        }
    }
}
