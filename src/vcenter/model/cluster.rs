//! Cluster groups and VM-host rules as planners see them (read from `configurationEx` and
//! changed incrementally by `vcenter::cluster`).
use super::moref::MoRef;

/// A cluster group. A group's key is its name.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ClusterGroup {
    Host {
        name: String,
        hosts: Vec<MoRef>,
    },
    Vm {
        name: String,
        vms: Vec<MoRef>,
    },
    /// A group of another (or no) type, e.g. a bare `ClusterGroupInfo`.
    Other {
        name: String,
        type_name: String,
    },
}

impl ClusterGroup {
    pub fn name(&self) -> &str {
        match self {
            ClusterGroup::Host { name, .. }
            | ClusterGroup::Vm { name, .. }
            | ClusterGroup::Other { name, .. } => name,
        }
    }
}

/// A VM-host rule (`ClusterVmHostRuleInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VmHostRule {
    /// Server-assigned; unset when adding.
    pub key: Option<i32>,
    pub name: String,
    pub enabled: bool,
    pub mandatory: bool,
    pub vm_group: String,
    pub affine_host_group: Option<String>,
    pub anti_affine_host_group: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ClusterRule {
    VmHost(VmHostRule),
    /// Affinity/anti-affinity and dependency rules: kept so names stay unique.
    Other {
        key: Option<i32>,
        name: String,
        type_name: String,
        enabled: bool,
    },
}

impl ClusterRule {
    pub fn name(&self) -> &str {
        match self {
            ClusterRule::VmHost(r) => &r.name,
            ClusterRule::Other { name, .. } => name,
        }
    }
}

/// Groups and rules of one cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClusterConfig {
    pub groups: Vec<ClusterGroup>,
    pub rules: Vec<ClusterRule>,
}

impl ClusterConfig {
    pub fn group(&self, name: &str) -> Option<&ClusterGroup> {
        self.groups.iter().find(|g| g.name() == name)
    }

    pub fn rule(&self, name: &str) -> Option<&ClusterRule> {
        self.rules.iter().find(|r| r.name() == name)
    }

    pub fn vm_host_rules(&self) -> impl Iterator<Item = &VmHostRule> {
        self.rules.iter().filter_map(|r| match r {
            ClusterRule::VmHost(r) => Some(r),
            ClusterRule::Other { .. } => None,
        })
    }
}

/// A change to a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupChange {
    Add(ClusterGroup),
    /// Replaces the whole member list.
    Edit(ClusterGroup),
    Remove(String),
}

/// A change to a VM-host rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleChange {
    Add(VmHostRule),
    /// Carries the existing key and the same name (real vCenter matches by key, vcsim by name).
    Edit(VmHostRule),
    Remove(i32),
}
