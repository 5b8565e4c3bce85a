//! Datacenter, resource pool and folder resolution, and an unreachable vCenter.
use super::*;

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
fn a_missing_datacenter_is_named() {
    let w = World::tagged();
    let mut f = cc_fd(false);
    f.spec.topology.datacenter = "DC9".into();
    let v = plan_zone(&dz(None, None), Some(&f), Ok(&w.view));
    // CAPV sets the datacenter while getting the session: VCenterUnreachable, nothing else
    // checked. Not a connection failure, so the zone is not ready rather than retrying.
    let (r1, r2, msg) = failed_reason(&v.vcenter);
    assert_eq!((r1, r2), ("VCenterUnreachable", "VCenterUnreachable"));
    assert!(msg.contains("DC9"), "{msg}");
    assert_eq!(v.placement, Check::Skipped);
    assert_eq!(v.failure_domain, Check::Skipped);
    assert_eq!(v.state(), ZoneState::NotReady);
}
