//! The zone planner against hand-built views: [`placement`] (datacenter, pool, folder, vCenter
//! reachability), [`tags`] (region and zone tags, autoConfigure steps), [`host_groups`]
//! (groups and the VM-host rule). The fixtures below build the views.
mod host_groups;
mod placement;
mod reasons;
mod tags;

pub(super) use std::collections::BTreeMap;

pub(super) use super::*;
pub(super) use crate::api::conditions::zone_ours;
pub(super) use crate::api::deployment_zone::VSphereDeploymentZone;
pub(super) use crate::api::deployment_zone::{PlacementConstraint, VSphereDeploymentZoneSpec};
pub(super) use crate::api::failure_domain::{
    FailureDomain, FailureDomainType, VSphereFailureDomain,
};
pub(super) use crate::api::failure_domain::{
    FailureDomainHosts, Topology, VSphereFailureDomainSpec,
};
pub(super) use crate::plan::view::VcenterView;
pub(super) use crate::vcenter::model::cluster::ClusterRule;
pub(super) use crate::vcenter::model::cluster::VmHostRule;
pub(super) use crate::vcenter::model::cluster::{ClusterConfig, ClusterGroup};
pub(super) use crate::vcenter::model::inventory::Inventory;
pub(super) use crate::vcenter::model::inventory::tests::{record, sample_records};
pub(super) use crate::vcenter::model::moref::MoRef;
pub(super) use crate::vcenter::model::tags::{Category, Tag};

/// DC0 with clusters C0 (hosts h0, h1; pool rp0) and C1 (host h2; pool rp0), datastore ds0,
/// network net0, folder vm/capi.
pub(super) fn inventory() -> Inventory {
    let mut objects = sample_records();
    objects.extend([
        record("Folder", "f-ds", "datastore", Some(("Datacenter", "dc-1"))),
        record("Folder", "f-net", "network", Some(("Datacenter", "dc-1"))),
        record("Datastore", "ds-0", "ds0", Some(("Folder", "f-ds"))),
        record("Network", "net-0", "net0", Some(("Folder", "f-net"))),
        record(
            "HostSystem",
            "h-1",
            "h1",
            Some(("ClusterComputeResource", "c-0")),
        ),
        record(
            "HostSystem",
            "h-2",
            "h2",
            Some(("ClusterComputeResource", "c-1")),
        ),
    ]);
    Inventory::from_records(objects)
}

pub(super) fn m(kind: &str, v: &str) -> MoRef {
    MoRef::new(kind, v)
}

pub(super) struct World {
    pub(super) view: VcenterView,
}

impl World {
    pub(super) fn new() -> Self {
        Self {
            view: VcenterView {
                inventory: inventory(),
                ..VcenterView::default()
            },
        }
    }

    pub(super) fn category(mut self, id: &str, name: &str) -> Self {
        self.view.tags.insert_category(Category {
            id: id.into(),
            name: name.into(),
            description: String::new(),
            cardinality: "MULTIPLE".into(),
            associable_types: vec![],
        });
        self
    }

    pub(super) fn tag(mut self, id: &str, name: &str, category: &str, on: &[MoRef]) -> Self {
        self.view.tags.insert_tag(Tag {
            id: id.into(),
            name: name.into(),
            category_id: category.into(),
            description: String::new(),
        });
        for o in on {
            self.view
                .attachments
                .entry(o.clone())
                .or_default()
                .insert(id.into());
        }
        self
    }

    pub(super) fn config(mut self, cluster: &str, cfg: ClusterConfig) -> Self {
        self.view
            .cluster_configs
            .insert(m("ClusterComputeResource", cluster), cfg);
        self
    }

    /// As [`World::tagged`], but the region tag is attached to nothing.
    pub(super) fn region_untagged() -> Self {
        Self::new()
            .category("cat-r", "k8s-region")
            .category("cat-z", "k8s-zone")
            .tag("t-r", "region-a", "cat-r", &[])
            .tag(
                "t-z",
                "zone-a",
                "cat-z",
                &[m("ClusterComputeResource", "c-0")],
            )
    }

    /// Region DC0 (Datacenter) and zone C0 (ComputeCluster) tagged properly.
    pub(super) fn tagged() -> Self {
        Self::new()
            .category("cat-r", "k8s-region")
            .category("cat-z", "k8s-zone")
            .tag("t-r", "region-a", "cat-r", &[m("Datacenter", "dc-1")])
            .tag(
                "t-z",
                "zone-a",
                "cat-z",
                &[m("ClusterComputeResource", "c-0")],
            )
    }
}

pub(super) fn side(name: &str, t: FailureDomainType, cat: &str, auto: bool) -> FailureDomain {
    FailureDomain {
        name: name.into(),
        type_: t,
        tag_category: cat.into(),
        auto_configure: Some(auto),
    }
}

pub(super) fn fd(
    region: FailureDomain,
    zone: FailureDomain,
    topology: Topology,
) -> VSphereFailureDomain {
    VSphereFailureDomain::new(
        "fd",
        VSphereFailureDomainSpec {
            region,
            zone,
            topology,
        },
    )
}

pub(super) fn cc_fd(auto: bool) -> VSphereFailureDomain {
    fd(
        side(
            "region-a",
            FailureDomainType::Datacenter,
            "k8s-region",
            auto,
        ),
        side(
            "zone-a",
            FailureDomainType::ComputeCluster,
            "k8s-zone",
            auto,
        ),
        Topology {
            datacenter: "DC0".into(),
            compute_cluster: Some("C0".into()),
            datastore: Some("ds0".into()),
            networks: Some(vec!["net0".into()]),
            ..Topology::default()
        },
    )
}

pub(super) fn dz(pool: Option<&str>, folder: Option<&str>) -> VSphereDeploymentZone {
    VSphereDeploymentZone::new(
        "zone",
        VSphereDeploymentZoneSpec {
            thumbprint: None,
            identity_ref: None,
            server: Some("vc".into()),
            failure_domain: "fd".into(),
            control_plane: None,
            placement_constraint: Some(PlacementConstraint {
                resource_pool: pool.map(str::to_string),
                folder: folder.map(str::to_string),
            }),
        },
    )
}

pub(super) fn failed_reason(c: &Check) -> (&'static str, &'static str, String) {
    match c {
        Check::Failed {
            v1beta1_reason,
            v1beta2_reason,
            message,
        } => (v1beta1_reason, v1beta2_reason, message.clone()),
        other => panic!("expected a failure, got {other:?}"),
    }
}
