use std::collections::BTreeMap;

use super::*;
use crate::api::conditions::zone_ours;
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::deployment_zone::{PlacementConstraint, VSphereDeploymentZoneSpec};
use crate::api::failure_domain::{FailureDomain, FailureDomainType, VSphereFailureDomain};
use crate::api::failure_domain::{FailureDomainHosts, Topology, VSphereFailureDomainSpec};
use crate::plan::view::VcenterView;
use crate::vcenter::cluster::ClusterRule;
use crate::vcenter::cluster::VmHostRule;
use crate::vcenter::cluster::{ClusterConfig, ClusterGroup};
use crate::vcenter::inventory::Inventory;
use crate::vcenter::inventory::tests::{content, sample_contents};
use crate::vcenter::moref::MoRef;
use crate::vcenter::rest::{Category, Tag};

/// DC0 with clusters C0 (hosts h0, h1; pool rp0) and C1 (host h2; pool rp0), datastore ds0,
/// network net0, folder vm/capi.
fn inventory() -> Inventory {
    let mut objects = sample_contents();
    objects.extend([
        content("Folder", "f-ds", "datastore", Some(("Datacenter", "dc-1"))),
        content("Folder", "f-net", "network", Some(("Datacenter", "dc-1"))),
        content("Datastore", "ds-0", "ds0", Some(("Folder", "f-ds"))),
        content("Network", "net-0", "net0", Some(("Folder", "f-net"))),
        content(
            "HostSystem",
            "h-1",
            "h1",
            Some(("ClusterComputeResource", "c-0")),
        ),
        content(
            "HostSystem",
            "h-2",
            "h2",
            Some(("ClusterComputeResource", "c-1")),
        ),
    ]);
    Inventory::from_contents(objects)
}

fn m(kind: &str, v: &str) -> MoRef {
    MoRef::new(kind, v)
}

struct World {
    view: VcenterView,
}

impl World {
    fn new() -> Self {
        Self {
            view: VcenterView {
                inventory: inventory(),
                ..VcenterView::default()
            },
        }
    }

    fn category(mut self, id: &str, name: &str) -> Self {
        self.view.tags.insert_category(Category {
            id: id.into(),
            name: name.into(),
            description: String::new(),
            cardinality: "MULTIPLE".into(),
            associable_types: vec![],
        });
        self
    }

    fn tag(mut self, id: &str, name: &str, category: &str, on: &[MoRef]) -> Self {
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

    fn config(mut self, cluster: &str, cfg: ClusterConfig) -> Self {
        self.view
            .cluster_configs
            .insert(m("ClusterComputeResource", cluster), cfg);
        self
    }

    /// Region DC0 (Datacenter) and zone C0 (ComputeCluster) tagged properly.
    fn tagged() -> Self {
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

fn side(name: &str, t: FailureDomainType, cat: &str, auto: bool) -> FailureDomain {
    FailureDomain {
        name: name.into(),
        type_: t,
        tag_category: cat.into(),
        auto_configure: Some(auto),
    }
}

fn fd(region: FailureDomain, zone: FailureDomain, topology: Topology) -> VSphereFailureDomain {
    VSphereFailureDomain::new(
        "fd",
        VSphereFailureDomainSpec {
            region,
            zone,
            topology,
        },
    )
}

fn cc_fd(auto: bool) -> VSphereFailureDomain {
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

fn dz(pool: Option<&str>, folder: Option<&str>) -> VSphereDeploymentZone {
    VSphereDeploymentZone::new(
        "zone",
        VSphereDeploymentZoneSpec {
            server: Some("vc".into()),
            failure_domain: Some("fd".into()),
            control_plane: None,
            placement_constraint: PlacementConstraint {
                resource_pool: pool.map(str::to_string),
                folder: folder.map(str::to_string),
            },
        },
    )
}

fn failed_reason(c: &Check) -> (&'static str, &'static str, String) {
    match c {
        Check::Failed {
            v1beta1_reason,
            v1beta2_reason,
            message,
        } => (v1beta1_reason, v1beta2_reason, message.clone()),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn a_missing_failure_domain_is_a_reason_not_silence() {
    let v = plan_zone(&dz(None, None), None, Err("unused"));
    assert!(!v.ready());
    let (r1, _, msg) = failed_reason(&v.failure_domain);
    assert_eq!(r1, zone_ours::FAILURE_DOMAIN_NOT_FOUND);
    assert!(msg.contains("\"fd\""), "{msg}");
    assert_eq!(v.vcenter, Check::Skipped);
}

#[test]
fn an_unreachable_vcenter_is_vcenter_unreachable() {
    let v = plan_zone(
        &dz(None, None),
        Some(&cc_fd(false)),
        Err("cannot connect to vCenter vc: refused"),
    );
    let (r1, r2, msg) = failed_reason(&v.vcenter);
    assert_eq!((r1, r2), ("VCenterUnreachable", "VCenterUnreachable"));
    assert!(msg.contains("refused"));
    assert!(!v.ready());
}

#[test]
fn a_well_tagged_compute_cluster_zone_is_ready_with_its_placement() {
    let w = World::tagged();
    let v = plan_zone(
        &dz(Some("rp0"), Some("capi")),
        Some(&cc_fd(false)),
        Ok(&w.view),
    );
    assert!(v.ready(), "{v:?}");
    assert!(v.steps.is_empty());
    let p = v.placement_refs.unwrap();
    assert_eq!(
        p.resource_pool,
        Some(m("ResourcePool", "rp-0a")),
        "rp0 resolved inside C0 (#1913)"
    );
    assert_eq!(p.folder, m("Folder", "f-capi"));
    assert_eq!(p.datastore, Some(m("Datastore", "ds-0")));
    assert_eq!(p.networks, vec![m("Network", "net-0")]);
    // Without a pool: the cluster's root pool; without a folder: the datacenter's vm folder.
    let v = plan_zone(&dz(None, None), Some(&cc_fd(false)), Ok(&w.view));
    let p = v.placement_refs.unwrap();
    assert_eq!(p.resource_pool, Some(m("ResourcePool", "rp-0")));
    assert_eq!(p.folder, m("Folder", "f-vm"));
}

#[test]
fn a_pool_of_another_cluster_is_named_with_its_owner() {
    let w = World::tagged();
    let v = plan_zone(
        &dz(Some("/DC0/host/C1/Resources/rp0"), None),
        Some(&cc_fd(false)),
        Ok(&w.view),
    );
    let (r1, _, msg) = failed_reason(&v.placement);
    assert_eq!(r1, "ResourcePoolNotFound");
    assert!(msg.contains("not in compute cluster /DC0/host/C0"), "{msg}");
    let (r1, _, msg) = failed_reason(&v.failure_domain);
    assert_eq!(r1, "ResourcePoolNotFound");
    assert!(
        msg.contains("not owned by compute cluster") && msg.contains("/DC0/host/C1"),
        "{msg}"
    );
}

#[test]
fn an_ambiguous_pool_without_a_cluster_lists_the_candidates() {
    let w = World::tagged();
    let mut f = cc_fd(false);
    f.spec.topology.compute_cluster = None;
    f.spec.zone.type_ = FailureDomainType::Datacenter;
    f.spec.zone.name = "region-a".into();
    f.spec.zone.tag_category = "k8s-region".into();
    let v = plan_zone(&dz(Some("rp0"), None), Some(&f), Ok(&w.view));
    let (_, _, msg) = failed_reason(&v.placement);
    assert!(msg.contains("ambiguous"), "{msg}");
    assert!(
        msg.contains("/DC0/host/C0/Resources/rp0") && msg.contains("/DC0/host/C1/Resources/rp0"),
        "{msg}"
    );
}

#[test]
fn untagged_objects_and_missing_tags_name_what_is_missing() {
    let w = World::new()
        .category("cat-r", "k8s-region")
        .category("cat-z", "k8s-zone")
        .tag("t-r", "region-a", "cat-r", &[])
        .tag(
            "t-z",
            "zone-a",
            "cat-z",
            &[m("ClusterComputeResource", "c-0")],
        );
    let v = plan_zone(&dz(None, None), Some(&cc_fd(false)), Ok(&w.view));
    let (r1, r2, msg) = failed_reason(&v.failure_domain);
    assert_eq!(
        (r1, r2),
        ("FailureDomainRegionMisconfigured", "RegionMisconfigured")
    );
    assert_eq!(
        msg,
        "object /DC0 does not have tag region-a (category k8s-region)"
    );

    let w = World::new().category("cat-r", "k8s-region").tag(
        "t-r",
        "region-a",
        "cat-r",
        &[m("Datacenter", "dc-1")],
    );
    let v = plan_zone(&dz(None, None), Some(&cc_fd(false)), Ok(&w.view));
    let (r1, _, msg) = failed_reason(&v.failure_domain);
    assert_eq!(r1, "FailureDomainZoneMisconfigured");
    assert!(
        msg.contains("zone tag category k8s-zone not found"),
        "{msg}"
    );
}

#[test]
fn a_tag_in_the_wrong_category_is_not_accepted() {
    // CAPV compares tag names only and would accept this.
    let w = World::tagged().category("cat-o", "other").tag(
        "t-o",
        "zone-b",
        "cat-o",
        &[m("ClusterComputeResource", "c-0")],
    );
    let mut f = cc_fd(false);
    f.spec.zone.name = "zone-b".into();
    let v = plan_zone(&dz(None, None), Some(&f), Ok(&w.view));
    let (r1, _, msg) = failed_reason(&v.failure_domain);
    assert_eq!(r1, zone_ours::TAG_CATEGORY_MISMATCH);
    assert!(msg.contains("category other"), "{msg}");
}

#[test]
fn auto_configure_plans_categories_tags_and_attachments_in_order() {
    let w = World::new();
    let v = plan_zone(&dz(None, None), Some(&cc_fd(true)), Ok(&w.view));
    assert!(!v.ready(), "changes pending");
    let shown: Vec<String> = v.steps.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        shown,
        [
            "create tag category k8s-region for Datacenter",
            "create tag category k8s-zone for ClusterComputeResource",
            "create tag region-a in category k8s-region",
            "create tag zone-a in category k8s-zone",
            "attach tag region-a (k8s-region) to /DC0",
            "attach tag zone-a (k8s-zone) to /DC0/host/C0",
        ]
    );
    // An existing category restricted to other types is widened, keeping their order.
    let mut w = World::tagged();
    w.view.tags.insert_category(Category {
        id: "cat-z".into(),
        name: "k8s-zone".into(),
        description: String::new(),
        cardinality: "SINGLE".into(),
        associable_types: vec!["HostSystem".into()],
    });
    let v = plan_zone(&dz(None, None), Some(&cc_fd(true)), Ok(&w.view));
    assert_eq!(
        v.steps,
        [Step::WidenCategory {
            name: "k8s-zone".into(),
            associable_types: vec!["HostSystem".into(), "ClusterComputeResource".into()]
        }]
    );
}

fn hg_fd(auto: bool) -> VSphereFailureDomain {
    fd(
        side(
            "region-a",
            FailureDomainType::Datacenter,
            "k8s-region",
            false,
        ),
        side("rack-1", FailureDomainType::HostGroup, "k8s-zone", auto),
        Topology {
            datacenter: "DC0".into(),
            compute_cluster: Some("C0".into()),
            hosts: Some(FailureDomainHosts {
                vm_group_name: "vms".into(),
                host_group_name: "hosts".into(),
            }),
            ..Topology::default()
        },
    )
}

fn hg_world(cfg: ClusterConfig, tagged_hosts: &[&str]) -> World {
    let hosts: Vec<MoRef> = tagged_hosts.iter().map(|h| m("HostSystem", h)).collect();
    World::new()
        .category("cat-r", "k8s-region")
        .category("cat-z", "k8s-zone")
        .tag("t-r", "region-a", "cat-r", &[m("Datacenter", "dc-1")])
        .tag("t-z", "rack-1", "cat-z", &hosts)
        .config("c-0", cfg)
}

fn rule(enabled: bool, mandatory: bool) -> ClusterRule {
    ClusterRule::VmHost(VmHostRule {
        key: Some(1),
        name: "r".into(),
        enabled,
        mandatory,
        vm_group: "vms".into(),
        affine_host_group: Some("hosts".into()),
        anti_affine_host_group: None,
    })
}

fn groups(hosts: &[&str]) -> Vec<ClusterGroup> {
    vec![
        ClusterGroup::Host {
            name: "hosts".into(),
            hosts: hosts.iter().map(|h| m("HostSystem", h)).collect(),
        },
        ClusterGroup::Vm {
            name: "vms".into(),
            vms: vec![],
        },
    ]
}

#[test]
fn auto_configure_builds_the_host_group_from_tagged_hosts() {
    let w = hg_world(ClusterConfig::default(), &["h-1"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
    let shown: Vec<String> = v.steps.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        shown,
        [
            "create host group hosts in /DC0/host/C0 with 1 host(s)",
            "create VM group vms in /DC0/host/C0",
            "create VM-host rule vms-hosts-affinity in /DC0/host/C0: VMs of vms must run on hosts of hosts",
        ]
    );
    assert!(
        matches!(&v.steps[0], Step::CreateHostGroup { hosts, .. } if hosts == &[m("HostSystem", "h-1")])
    );
    // Nobody tagged: nothing to build from, said so.
    let w = hg_world(ClusterConfig::default(), &[]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
    let (r1, _, msg) = failed_reason(&v.failure_domain);
    assert_eq!(r1, zone_ours::HOST_GROUP_NOT_FOUND);
    assert!(
        msg.contains("no host of /DC0/host/C0 carries zone tag rack-1"),
        "{msg}"
    );
}

#[test]
fn auto_configure_tags_the_hosts_of_an_existing_group() {
    let cfg = ClusterConfig {
        groups: groups(&["h-0", "h-1"]),
        rules: vec![rule(true, true)],
    };
    let w = hg_world(cfg, &["h-0"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
    assert_eq!(
        v.steps,
        [Step::AttachTag {
            category: "k8s-zone".into(),
            tag: "rack-1".into(),
            object: m("HostSystem", "h-1"),
            object_path: "/DC0/host/C0/h1".into(),
        }]
    );
}

#[test]
fn host_group_rules_disabled_missing_or_soft_are_reported() {
    let ready_cfg = |r: Vec<ClusterRule>| ClusterConfig {
        groups: groups(&["h-0"]),
        rules: r,
    };
    let w = hg_world(ready_cfg(vec![rule(true, true)]), &["h-0"]);
    assert!(plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view)).ready());

    let w = hg_world(ready_cfg(vec![rule(true, false)]), &["h-0"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
    assert!(v.ready());
    assert!(
        matches!(&v.failure_domain, Check::Ok { message } if message.contains("not mandatory"))
    );

    let w = hg_world(ready_cfg(vec![rule(false, true)]), &["h-0"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
    assert_eq!(
        failed_reason(&v.failure_domain).0,
        zone_ours::AFFINITY_RULE_DISABLED
    );
    let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
    assert!(matches!(&v.steps[..], [Step::EnableVmHostRule { rule, .. }] if rule == "r"));

    let w = hg_world(ready_cfg(vec![]), &["h-0"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
    let (r1, r2, msg) = failed_reason(&v.failure_domain);
    assert_eq!((r1, r2), ("HostsMisconfigured", "HostsMisconfigured"));
    assert!(
        msg.contains("vm host affinity rule does not exist"),
        "{msg}"
    );

    let w = hg_world(ClusterConfig::default(), &["h-0"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
    let (r1, _, msg) = failed_reason(&v.failure_domain);
    assert_eq!(r1, zone_ours::HOST_GROUP_NOT_FOUND);
    assert!(
        msg.contains("host group hosts not found") && msg.contains("VM group vms not found"),
        "{msg}"
    );
}

#[test]
fn a_missing_datacenter_is_named() {
    let w = World::tagged();
    let mut f = cc_fd(false);
    f.spec.topology.datacenter = "DC9".into();
    let v = plan_zone(&dz(None, None), Some(&f), Ok(&w.view));
    let (r1, _, msg) = failed_reason(&v.failure_domain);
    assert_eq!(r1, zone_ours::DATACENTER_NOT_FOUND);
    assert!(msg.contains("DC9"), "{msg}");
}

#[test]
fn steps_shared_by_zones_are_planned_once() {
    let mut steps = vec![
        Step::CreateTag {
            category: "c".into(),
            name: "t".into(),
        },
        Step::CreateCategory {
            name: "c".into(),
            associable_types: vec![],
        },
        Step::CreateTag {
            category: "c".into(),
            name: "t".into(),
        },
    ];
    dedup_steps(&mut steps);
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].phase(), 0);
    let _ = BTreeMap::<u8, u8>::new();
}
