//! What the failure domain checks read: the view, resolved to the zone's datacenter, compute
//! cluster (with its configuration) and host group.
use crate::vcenter::model::cluster::{ClusterConfig, ClusterGroup};
use crate::vcenter::model::inventory::{Entity, Inventory};
use crate::vcenter::model::moref::MoRef;
use crate::vcenter::model::tags::TagCatalog;

use crate::plan::view::VcenterView;

pub(super) struct FdContext<'a> {
    pub(super) inv: &'a Inventory,
    pub(super) view: &'a VcenterView,
    pub(super) dc: &'a Entity,
    pub(super) cluster: Option<&'a Entity>,
    pub(super) config: Option<&'a ClusterConfig>,
    pub(super) host_group: Option<&'a str>,
}

impl FdContext<'_> {
    pub(super) fn catalog(&self) -> &TagCatalog {
        &self.view.tags
    }

    /// The hosts of the zone's host group, when the cluster has that group.
    pub(super) fn host_group_members(&self) -> Option<Vec<MoRef>> {
        match self.config?.group(self.host_group?)? {
            ClusterGroup::Host { hosts, .. } => Some(hosts.clone()),
            _ => None,
        }
    }
}
