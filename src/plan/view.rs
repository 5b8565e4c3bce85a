//! What the planners see of one vCenter: a snapshot gathered in a fixed number of bulk reads,
//! and the pure function that says what to gather for a set of failure domains.
use std::collections::{BTreeMap, BTreeSet};

use crate::api::failure_domain::{FailureDomainType, VSphereFailureDomain};
use crate::vcenter::model::cluster::ClusterConfig;
use crate::vcenter::model::inventory::{Inventory, Wanted};
use crate::vcenter::model::moref::MoRef;
use crate::vcenter::model::tags::TagCatalog;

/// One vCenter at one moment, as far as the zones on it need.
#[derive(Clone, Debug, Default)]
pub struct VcenterView {
    pub inventory: Inventory,
    /// Groups and rules of the compute clusters the failure domains name.
    pub cluster_configs: BTreeMap<MoRef, ClusterConfig>,
    pub tags: TagCatalog,
    /// Tag ids attached to each taggable object the failure domains name.
    pub attachments: BTreeMap<MoRef, BTreeSet<String>>,
    /// Said in the zone's VCenterAvailable condition (e.g. verification disabled).
    pub tls_note: Option<String>,
}

/// What to read for a set of failure domains, once the inventory is known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// (category name, tag name) pairs to resolve.
    pub tags: BTreeSet<(String, String)>,
    /// Clusters whose `configurationEx` is needed.
    pub clusters: BTreeSet<MoRef>,
    /// Objects whose attached tags are needed: datacenters, clusters and their hosts.
    pub tagged_objects: BTreeSet<MoRef>,
}

/// Pure: everything the zone planner may look at for these failure domains. Unresolvable names
/// are skipped (the planner reports them).
pub fn needs<'a>(
    inventory: &Inventory,
    fds: impl IntoIterator<Item = &'a VSphereFailureDomain>,
) -> Needs {
    let mut n = Needs::default();
    for fd in fds {
        for side in [&fd.spec.region, &fd.spec.zone] {
            n.tags
                .insert((side.tag_category.clone(), side.name.clone()));
        }
        let topo = &fd.spec.topology;
        let Ok(dc) = inventory.find(Wanted::Datacenter, &topo.datacenter, None) else {
            continue;
        };
        n.tagged_objects.insert(dc.moref.clone());
        let Some(name) = topo.compute_cluster.as_deref().filter(|s| !s.is_empty()) else {
            continue;
        };
        let Ok(cluster) = inventory.find(Wanted::ComputeCluster, name, Some(&dc.moref)) else {
            continue;
        };
        n.tagged_objects.insert(cluster.moref.clone());
        let needs_hosts = topo.hosts.is_some()
            || fd.spec.zone.type_ == FailureDomainType::HostGroup
            || fd.spec.region.type_ == FailureDomainType::HostGroup;
        if needs_hosts {
            n.clusters.insert(cluster.moref.clone());
            for h in inventory.hosts_of(&cluster.moref) {
                n.tagged_objects.insert(h.moref.clone());
            }
        }
    }
    n
}
