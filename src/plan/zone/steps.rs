//! The vCenter changes autoConfigure asks for, in the order they run.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::vcenter::model::cluster::{ClusterGroup, VmHostRule};
use crate::vcenter::model::moref::MoRef;

/// The description CAPV gives categories it creates; kept so existing estates look the same.
pub const CATEGORY_DESCRIPTION: &str = "CAPV generated category for Failure Domain support";

/// A change in vCenter that autoConfigure asks for. Names, not ids: the executor resolves them
/// against the catalog as it goes, so a tag created by an earlier step can be attached by a
/// later one, and re-running after a crash finds what exists instead of creating it twice.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum Step {
    CreateCategory {
        name: String,
        associable_types: Vec<String>,
    },
    /// Add associable types to an existing category (vCenter only allows widening).
    WidenCategory {
        name: String,
        associable_types: Vec<String>,
    },
    CreateTag {
        category: String,
        name: String,
    },
    AttachTag {
        category: String,
        tag: String,
        object: MoRef,
        object_path: String,
    },
    CreateHostGroup {
        cluster: MoRef,
        cluster_path: String,
        name: String,
        hosts: Vec<MoRef>,
    },
    CreateVmGroup {
        cluster: MoRef,
        cluster_path: String,
        name: String,
    },
    CreateVmHostRule {
        cluster: MoRef,
        cluster_path: String,
        name: String,
        vm_group: String,
        host_group: String,
    },
    EnableVmHostRule {
        cluster: MoRef,
        cluster_path: String,
        rule: String,
    },
}

impl Step {
    /// Steps run in this order: categories, tags, attachments, groups, rules.
    pub fn phase(&self) -> u8 {
        match self {
            Step::CreateCategory { .. } | Step::WidenCategory { .. } => 0,
            Step::CreateTag { .. } => 1,
            Step::AttachTag { .. } => 2,
            Step::CreateHostGroup { .. } | Step::CreateVmGroup { .. } => 3,
            Step::CreateVmHostRule { .. } | Step::EnableVmHostRule { .. } => 4,
        }
    }

    /// The group a create step adds, as vCenter then holds it: defined once, so the executor's
    /// change and a re-plan against its result (the planner's crash tests) agree.
    pub fn new_group(&self) -> Option<ClusterGroup> {
        match self {
            Step::CreateHostGroup { name, hosts, .. } => Some(ClusterGroup::Host {
                name: name.clone(),
                hosts: hosts.clone(),
            }),
            Step::CreateVmGroup { name, .. } => Some(ClusterGroup::Vm {
                name: name.clone(),
                vms: vec![],
            }),
            _ => None,
        }
    }

    /// The VM-host rule a create step adds: enabled and mandatory (DRS must not place the
    /// zone's VMs elsewhere), its key left for vCenter to assign.
    pub fn new_rule(&self) -> Option<VmHostRule> {
        match self {
            Step::CreateVmHostRule {
                name,
                vm_group,
                host_group,
                ..
            } => Some(VmHostRule {
                key: None,
                name: name.clone(),
                enabled: true,
                mandatory: true,
                vm_group: vm_group.clone(),
                affine_host_group: Some(host_group.clone()),
                anti_affine_host_group: None,
            }),
            _ => None,
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::CreateCategory {
                name,
                associable_types,
            } => write!(
                f,
                "create tag category {name} for {}",
                associable_types.join(", ")
            ),
            Step::WidenCategory {
                name,
                associable_types,
            } => write!(
                f,
                "allow tag category {name} on {}",
                associable_types.join(", ")
            ),
            Step::CreateTag { category, name } => {
                write!(f, "create tag {name} in category {category}")
            }
            Step::AttachTag {
                category,
                tag,
                object_path,
                ..
            } => write!(f, "attach tag {tag} ({category}) to {object_path}"),
            Step::CreateHostGroup {
                cluster_path,
                name,
                hosts,
                ..
            } => write!(
                f,
                "create host group {name} in {cluster_path} with {} host(s)",
                hosts.len()
            ),
            Step::CreateVmGroup {
                cluster_path, name, ..
            } => write!(f, "create VM group {name} in {cluster_path}"),
            Step::CreateVmHostRule {
                cluster_path,
                name,
                vm_group,
                host_group,
                ..
            } => write!(
                f,
                "create VM-host rule {name} in {cluster_path}: VMs of {vm_group} must run on hosts of {host_group}"
            ),
            Step::EnableVmHostRule {
                cluster_path, rule, ..
            } => write!(f, "enable VM-host rule {rule} in {cluster_path}"),
        }
    }
}

/// Keep the first occurrence of each step, ordered by phase.
pub fn dedup_steps(steps: &mut Vec<Step>) {
    merge_category_steps(steps);
    let mut seen = BTreeSet::new();
    steps.retain(|s| seen.insert(s.clone()));
    steps.sort_by_key(Step::phase);
}

/// Zones of different types sharing one tag category each ask for their own associable type:
/// one create (or widen) per category carries them all, in first-seen order, else the second
/// create fails as a duplicate and a later widen drops an earlier one's type.
fn merge_category_steps(steps: &mut [Step]) {
    let mut union: BTreeMap<(bool, String), Vec<String>> = BTreeMap::new();
    for s in steps.iter() {
        if let Step::CreateCategory {
            name,
            associable_types,
        }
        | Step::WidenCategory {
            name,
            associable_types,
        } = s
        {
            let create = matches!(s, Step::CreateCategory { .. });
            let all = union.entry((create, name.clone())).or_default();
            for t in associable_types {
                if !all.contains(t) {
                    all.push(t.clone());
                }
            }
        }
    }
    for s in steps.iter_mut() {
        let create = matches!(s, Step::CreateCategory { .. });
        if let Step::CreateCategory {
            name,
            associable_types,
        }
        | Step::WidenCategory {
            name,
            associable_types,
        } = s
            && let Some(all) = union.get(&(create, name.clone()))
        {
            associable_types.clone_from(all);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_of_three_types_sharing_a_category_create_it_once_with_every_type() {
        let create = |t: &str| Step::CreateCategory {
            name: "k8s-zone".into(),
            associable_types: vec![t.into()],
        };
        let mut steps = vec![
            create("Datacenter"),
            create("ClusterComputeResource"),
            create("HostSystem"),
        ];
        dedup_steps(&mut steps);
        assert_eq!(
            steps,
            [Step::CreateCategory {
                name: "k8s-zone".into(),
                associable_types: vec![
                    "Datacenter".into(),
                    "ClusterComputeResource".into(),
                    "HostSystem".into()
                ],
            }]
        );
    }
}
