//! The vCenter changes autoConfigure asks for, in the order they run.
use std::collections::BTreeSet;
use std::fmt;

use crate::vcenter::moref::MoRef;

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
    let mut seen = BTreeSet::new();
    steps.retain(|s| seen.insert(s.clone()));
    steps.sort_by_key(Step::phase);
}
