//! The VSphereDeploymentZone decision: is the zone usable, what must change in vCenter for it to
//! be (autoConfigure), and what its status says. Pure: the vCenter view and the clock are inputs.
//!
//! The order and the condition types/reasons follow CAPV (reference/capv-failure-domains.md §3):
//! every reason is upstream's where upstream has one for that class of failure, in both
//! condition styles, and what we know beyond upstream goes in the message. Its gaps are fixed:
//! * a missing VSphereFailureDomain makes the zone not ready with `FailureDomainNotFound` (the
//!   one reason of ours: CAPV sets no condition and leaves `ready` unset forever, so
//!   VSphereClusters wait forever);
//! * every lookup is scoped: the resource pool to the compute cluster, folder, datastore and
//!   networks to the datacenter; an ambiguous name is an error naming the candidates (#1913);
//! * a tag counts only in its own category (CAPV compares names); a tag of that name in another
//!   category is `FailureDomainZoneMisconfigured`/`ZoneMisconfigured` (or the region's), naming
//!   the other category in the message;
//! * the host group and VM group of a HostGroup zone must exist and a disabled affinity rule
//!   makes the zone not ready, all as `HostsMisconfigured` saying which; a non-mandatory rule is
//!   reported in the message; autoConfigure plans the rule only once both groups exist or are
//!   created by the same plan, never one naming a group that is not there;
//! * independent checks are all evaluated, so one reconcile reports every problem.
//!
//! Files: [`steps`] (the vCenter changes autoConfigure asks for), [`verdict`] (what the planner
//! decides and how a failure is classified), [`reasons`] (failure domain problems → CAPV
//! reasons), [`plan_zone`](mod@plan_zone) (the decision itself: datacenter, placement, topology),
//! [`tags`] (region/zone tag checks) and [`host_groups`] (host group, VM group, VM-host rule).
mod context;
pub mod host_groups;
pub mod plan_zone;
pub mod reasons;
pub mod steps;
pub mod tags;
pub mod verdict;

pub use host_groups::rule_name;
pub use plan_zone::{plan_zone, plan_zone_against};
pub use reasons::FdProblem;
pub use steps::{CATEGORY_DESCRIPTION, Step, dedup_steps};
pub use tags::associable_type;
pub use verdict::{Check, ZonePlacement, ZoneState, ZoneVerdict};

#[cfg(test)]
mod tests;
