//! Region and zone tags: verified, or planned by autoConfigure.
use super::*;

#[test]
fn untagged_objects_and_missing_tags_name_what_is_missing() {
    let w = World::region_untagged();
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
    // Upstream's reason for the zone tag; the other category is in the message.
    let (r1, r2, msg) = failed_reason(&v.failure_domain);
    assert_eq!(
        (r1, r2),
        ("FailureDomainZoneMisconfigured", "ZoneMisconfigured")
    );
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
