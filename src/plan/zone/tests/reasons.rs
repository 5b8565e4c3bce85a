//! Every condition reason the zone planner can emit, with its upstream source.
//!
//! The rule (issue 10): where upstream CAPV has a reason for a class of failure we use it, in
//! both condition styles, and say what we know beyond it in the message. [`EMITTED`] lists every
//! (style, type, reason) the planner sets; the test drives the planner into every class of
//! failure, writes the status, and checks that what it set is exactly that list, that each
//! entry is upstream's (transcribed below from capv-failure-domains.md §1/§3), and that each of
//! ours is named in docs/differences.md.
use std::collections::BTreeSet;

use super::host_groups::{groups, hg_fd, hg_world, rule};
use super::*;
use crate::api::conditions::{STATUS_FALSE, STATUS_TRUE};
use crate::api::deployment_zone::VSphereDeploymentZoneStatus;
use crate::api::infrastructure::v1beta2::common::DeprecatedStatus;
use crate::plan::failure::Failure;
use crate::plan::zone_status::{apply_deleting, apply_zone_status};

/// Where a reason comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// CAPV v1.15.0 `apis/v1beta1/condition_consts.go` (v1beta1 `status.conditions`).
    CapvV1beta1(&'static str),
    /// CAPV v1.15.0 `apis/v1beta1/vspheredeploymentzone_types.go` V1Beta2 constants
    /// (`status.v1beta2.conditions`), or CAPI's generic v1beta2 reasons for `Ready`.
    CapvV1beta2(&'static str),
    /// Ours: upstream has no reason for this class. Must be in docs/differences.md.
    Ours,
}

const V1: &str = "v1beta1";
const V2: &str = "v1beta2";

/// (style, condition type, status, reason, source). `Ready` in v1beta1 style is CAPI's summary:
/// it carries the reason of the first failing condition, so it is checked against the False
/// reasons of the other three rather than listed.
const EMITTED: &[(&str, &str, &str, &str, Source)] = &[
    // VCenterAvailable: unreachable, no credentials, or the datacenter missing (CAPV sets the
    // finder's datacenter while getting the session).
    (
        V1,
        "VCenterAvailable",
        STATUS_FALSE,
        "VCenterUnreachable",
        Source::CapvV1beta1("VCenterUnreachableReason"),
    ),
    (
        V2,
        "VCenterAvailable",
        STATUS_TRUE,
        "Available",
        Source::CapvV1beta2("VSphereDeploymentZoneVCenterAvailableV1Beta2Reason"),
    ),
    (
        V2,
        "VCenterAvailable",
        STATUS_FALSE,
        "VCenterUnreachable",
        Source::CapvV1beta2("VSphereDeploymentZoneVCenterUnreachableV1Beta2Reason"),
    ),
    (
        V2,
        "VCenterAvailable",
        STATUS_FALSE,
        "Deleting",
        Source::CapvV1beta2("VSphereDeploymentZoneVCenterAvailableDeletingV1Beta2Reason"),
    ),
    // Placement constraint.
    (
        V1,
        "PlacementConstraintMet",
        STATUS_FALSE,
        "ResourcePoolNotFound",
        Source::CapvV1beta1("ResourcePoolNotFoundReason"),
    ),
    (
        V1,
        "PlacementConstraintMet",
        STATUS_FALSE,
        "FolderNotFound",
        Source::CapvV1beta1("FolderNotFoundReason"),
    ),
    (
        V2,
        "PlacementConstraintReady",
        STATUS_TRUE,
        "Ready",
        Source::CapvV1beta2("VSphereDeploymentZonePlacementConstraintReadyV1Beta2Reason"),
    ),
    (
        V2,
        "PlacementConstraintReady",
        STATUS_FALSE,
        "ResourcePoolNotFound",
        Source::CapvV1beta2(
            "VSphereDeploymentZonePlacementConstraintResourcePoolNotFoundV1Beta2Reason",
        ),
    ),
    (
        V2,
        "PlacementConstraintReady",
        STATUS_FALSE,
        "FolderNotFound",
        Source::CapvV1beta2("VSphereDeploymentZonePlacementConstraintFolderNotFoundV1Beta2Reason"),
    ),
    (
        V2,
        "PlacementConstraintReady",
        STATUS_FALSE,
        "Deleting",
        Source::CapvV1beta2("VSphereDeploymentZonePlacementConstraintDeletingV1Beta2Reason"),
    ),
    // Failure domain validation.
    (
        V1,
        "VSphereFailureDomainValidated",
        STATUS_FALSE,
        "FailureDomainRegionMisconfigured",
        Source::CapvV1beta1("RegionMisconfiguredReason"),
    ),
    (
        V1,
        "VSphereFailureDomainValidated",
        STATUS_FALSE,
        "FailureDomainZoneMisconfigured",
        Source::CapvV1beta1("ZoneMisconfiguredReason"),
    ),
    (
        V1,
        "VSphereFailureDomainValidated",
        STATUS_FALSE,
        "ComputeClusterNotFound",
        Source::CapvV1beta1("ComputeClusterNotFoundReason"),
    ),
    (
        V1,
        "VSphereFailureDomainValidated",
        STATUS_FALSE,
        "ResourcePoolNotFound",
        Source::CapvV1beta1("ResourcePoolNotFoundReason"),
    ),
    (
        V1,
        "VSphereFailureDomainValidated",
        STATUS_FALSE,
        "DatastoreNotFound",
        Source::CapvV1beta1("DatastoreNotFoundReason"),
    ),
    (
        V1,
        "VSphereFailureDomainValidated",
        STATUS_FALSE,
        "NetworkNotFound",
        Source::CapvV1beta1("NetworkNotFoundReason"),
    ),
    (
        V1,
        "VSphereFailureDomainValidated",
        STATUS_FALSE,
        "HostsMisconfigured",
        Source::CapvV1beta1("HostsMisconfiguredReason"),
    ),
    (
        V1,
        "VSphereFailureDomainValidated",
        STATUS_FALSE,
        "FailureDomainNotFound",
        Source::Ours,
    ),
    (
        V2,
        "FailureDomainValidated",
        STATUS_TRUE,
        "Validated",
        Source::CapvV1beta2("VSphereDeploymentZoneFailureDomainValidatedV1Beta2Reason"),
    ),
    (
        V2,
        "FailureDomainValidated",
        STATUS_FALSE,
        "RegionMisconfigured",
        Source::CapvV1beta2("VSphereDeploymentZoneFailureDomainRegionMisconfiguredV1Beta2Reason"),
    ),
    (
        V2,
        "FailureDomainValidated",
        STATUS_FALSE,
        "ZoneMisconfigured",
        Source::CapvV1beta2("VSphereDeploymentZoneFailureDomainZoneMisconfiguredV1Beta2Reason"),
    ),
    (
        V2,
        "FailureDomainValidated",
        STATUS_FALSE,
        "ComputeClusterNotFound",
        Source::CapvV1beta2(
            "VSphereDeploymentZoneFailureDomainComputeClusterNotFoundV1Beta2Reason",
        ),
    ),
    (
        V2,
        "FailureDomainValidated",
        STATUS_FALSE,
        "ResourcePoolNotFound",
        Source::CapvV1beta2("VSphereDeploymentZoneFailureDomainResourcePoolNotFoundV1Beta2Reason"),
    ),
    (
        V2,
        "FailureDomainValidated",
        STATUS_FALSE,
        "DatastoreNotFound",
        Source::CapvV1beta2("VSphereDeploymentZoneFailureDomainDatastoreNotFoundV1Beta2Reason"),
    ),
    (
        V2,
        "FailureDomainValidated",
        STATUS_FALSE,
        "NetworkNotFound",
        Source::CapvV1beta2("VSphereDeploymentZoneFailureDomainNetworkNotFoundV1Beta2Reason"),
    ),
    (
        V2,
        "FailureDomainValidated",
        STATUS_FALSE,
        "HostsMisconfigured",
        Source::CapvV1beta2("VSphereDeploymentZoneFailureDomainHostsMisconfiguredV1Beta2Reason"),
    ),
    (
        V2,
        "FailureDomainValidated",
        STATUS_FALSE,
        "Deleting",
        Source::CapvV1beta2("VSphereDeploymentZoneFailureDomainDeletingV1Beta2Reason"),
    ),
    (
        V2,
        "FailureDomainValidated",
        STATUS_FALSE,
        "FailureDomainNotFound",
        Source::Ours,
    ),
    // Ready (v1beta2; the v1beta1 summary is checked separately).
    (
        V2,
        "Ready",
        STATUS_TRUE,
        "Ready",
        Source::CapvV1beta2("clusterv1.ReadyV1Beta2Reason"),
    ),
    (
        V2,
        "Ready",
        STATUS_FALSE,
        "NotReady",
        Source::CapvV1beta2("clusterv1.NotReadyV1Beta2Reason"),
    ),
];

/// Upstream's reasons per (style, type), from capv-failure-domains.md §1 (False reasons, and
/// the new-style lists, which include the True ones).
fn upstream(style: &str, type_: &str) -> &'static [&'static str] {
    match (style, type_) {
        (V1, "VCenterAvailable") => &["VCenterUnreachable"],
        (V1, "PlacementConstraintMet") => &["ResourcePoolNotFound", "FolderNotFound"],
        (V1, "VSphereFailureDomainValidated") => &[
            "FailureDomainRegionMisconfigured",
            "FailureDomainZoneMisconfigured",
            "ComputeClusterNotFound",
            "HostsMisconfigured",
            "NetworkNotFound",
            "DatastoreNotFound",
            "ResourcePoolNotFound",
        ],
        (V2, "Ready") => &["Ready", "NotReady", "ReadyUnknown"],
        (V2, "VCenterAvailable") => &["Available", "VCenterUnreachable", "Deleting"],
        (V2, "PlacementConstraintReady") => &[
            "Ready",
            "ResourcePoolNotFound",
            "FolderNotFound",
            "Deleting",
        ],
        (V2, "FailureDomainValidated") => &[
            "Validated",
            "ValidationFailed",
            "RegionMisconfigured",
            "ZoneMisconfigured",
            "HostsMisconfigured",
            "DatastoreNotFound",
            "NetworkNotFound",
            "ComputeClusterNotFound",
            "ResourcePoolNotFound",
            "Deleting",
        ],
        _ => &[],
    }
}

/// One verdict per class of failure (and the good and deleting cases).
fn scenarios() -> Vec<(&'static str, ZoneVerdict)> {
    let tagged = World::tagged();
    let mut out = Vec::new();
    let mut add = |name, v: ZoneVerdict| out.push((name, v));
    add(
        "ready",
        plan_zone(
            &dz(Some("rp0"), Some("capi")),
            Some(&cc_fd(false)),
            Ok(&tagged.view),
        ),
    );
    add(
        "failure domain missing",
        plan_zone(&dz(None, None), None, Err("unused")),
    );
    add(
        "vCenter unreachable",
        plan_zone(&dz(None, None), Some(&cc_fd(false)), Err("refused")),
    );
    let mut f = cc_fd(false);
    f.spec.topology.datacenter = "DC9".into();
    add(
        "datacenter missing",
        plan_zone(&dz(None, None), Some(&f), Ok(&tagged.view)),
    );
    add(
        "pool missing",
        plan_zone(
            &dz(Some("nope"), None),
            Some(&cc_fd(false)),
            Ok(&tagged.view),
        ),
    );
    add(
        "folder missing",
        plan_zone(
            &dz(None, Some("nope")),
            Some(&cc_fd(false)),
            Ok(&tagged.view),
        ),
    );
    add(
        "pool of another cluster",
        plan_zone(
            &dz(Some("/DC0/host/C1/Resources/rp0"), None),
            Some(&cc_fd(false)),
            Ok(&tagged.view),
        ),
    );
    let untagged_region = World::region_untagged();
    add(
        "region tag not attached",
        plan_zone(
            &dz(None, None),
            Some(&cc_fd(false)),
            Ok(&untagged_region.view),
        ),
    );
    let mut f = cc_fd(false);
    f.spec.zone.tag_category = "no-such-category".into();
    add(
        "zone category missing",
        plan_zone(&dz(None, None), Some(&f), Ok(&tagged.view)),
    );
    let (other, f) = region_tag_in_another_category();
    add(
        "region tag in another category",
        plan_zone(&dz(None, None), Some(&f), Ok(&other.view)),
    );
    let mut f = cc_fd(false);
    f.spec.topology.compute_cluster = Some("C9".into());
    add(
        "compute cluster missing",
        plan_zone(&dz(None, None), Some(&f), Ok(&tagged.view)),
    );
    let mut f = cc_fd(false);
    f.spec.topology.datastore = Some("nope".into());
    add(
        "datastore missing",
        plan_zone(&dz(None, None), Some(&f), Ok(&tagged.view)),
    );
    let mut f = cc_fd(false);
    f.spec.topology.networks = Some(vec!["nope".into()]);
    add(
        "network missing",
        plan_zone(&dz(None, None), Some(&f), Ok(&tagged.view)),
    );
    let no_groups = hg_world(ClusterConfig::default(), &["h-0"]);
    add(
        "groups missing",
        plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&no_groups.view)),
    );
    let cfg = |rules| ClusterConfig {
        groups: groups(&["h-0"]),
        rules,
    };
    let disabled = hg_world(cfg(vec![rule(false, true)]), &["h-0"]);
    add(
        "rule disabled",
        plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&disabled.view)),
    );
    let no_rule = hg_world(cfg(vec![]), &["h-0"]);
    add(
        "rule missing",
        plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&no_rule.view)),
    );
    // autoConfigure: a change pending (dry run), and a change vCenter refused.
    let fresh = World::new();
    let mut pending = plan_zone(&dz(None, None), Some(&cc_fd(true)), Ok(&fresh.view));
    pending.mark_pending(Some(&cc_fd(true)));
    add("autoConfigure pending", pending);
    let mut refused = plan_zone(&dz(None, None), Some(&cc_fd(true)), Ok(&fresh.view));
    let step = refused.steps[0].clone();
    refused.mark_auto_configure_failed(Some(&cc_fd(true)), [(&step, &Failure::config("denied"))]);
    add("autoConfigure refused", refused);
    out
}

/// (style, type, status, reason) of every condition a status carries.
fn conditions_of(
    status: &VSphereDeploymentZoneStatus,
) -> Vec<(&'static str, String, String, String)> {
    let mut out = Vec::new();
    for c in DeprecatedStatus::v1beta1_conditions(&status.deprecated) {
        out.push((
            V1,
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone().unwrap_or_default(),
        ));
    }
    for c in status.conditions.iter().flatten() {
        out.push((V2, c.type_.clone(), c.status.clone(), c.reason.clone()));
    }
    out
}

#[test]
fn every_reason_the_zone_planner_emits_is_upstreams_or_a_listed_difference() {
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    );
    let mut seen: BTreeSet<(&str, String, String, String)> = BTreeSet::new();
    let mut v1_failures: BTreeSet<String> = BTreeSet::new();
    let mut v1_ready: Vec<(String, String)> = Vec::new();
    for (name, verdict) in scenarios() {
        let mut status = VSphereDeploymentZoneStatus::default();
        apply_zone_status(&mut status, &verdict, Some(1), &now);
        if name != "ready" {
            assert!(!verdict.ready(), "{name}: {verdict:?}");
        }
        for (style, type_, st, reason) in conditions_of(&status) {
            if style == V1 && type_ == "Ready" {
                v1_ready.push((name.to_string(), reason));
                continue;
            }
            if style == V1 && st == STATUS_TRUE {
                assert_eq!(
                    reason, "",
                    "{name}: v1beta1 True conditions carry no reason"
                );
                continue;
            }
            if style == V1 {
                v1_failures.insert(reason.clone());
            }
            seen.insert((style, type_, st, reason));
        }
    }
    let mut deleting = VSphereDeploymentZoneStatus::default();
    apply_deleting(&mut deleting, Some(1), &now, "deleting");
    seen.extend(conditions_of(&deleting));

    let listed: BTreeSet<(&str, String, String, String)> = EMITTED
        .iter()
        .map(|(style, t, st, r, _)| (*style, t.to_string(), st.to_string(), r.to_string()))
        .collect();
    // The planner emits exactly what the table lists: nothing unlisted, nothing listed in vain.
    let unlisted: Vec<_> = seen.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "emitted but not in EMITTED: {unlisted:?}"
    );
    let never: Vec<_> = listed.difference(&seen).collect();
    assert!(never.is_empty(), "listed but never emitted: {never:?}");
    // v1beta1 Ready is the summary: the first failing condition's reason.
    for (name, reason) in &v1_ready {
        assert!(
            (name == "ready" && reason.is_empty()) || v1_failures.contains(reason),
            "{name}: v1beta1 Ready reason {reason:?} is not a reason of the summarised conditions"
        );
    }

    // Each reason is upstream's for its style and type, or ours and documented.
    let differences = include_str!("../../../../docs/differences.md");
    for (style, type_, _, reason, source) in EMITTED {
        match source {
            Source::CapvV1beta1(name) | Source::CapvV1beta2(name) => {
                assert!(!name.is_empty());
                assert!(
                    upstream(style, type_).contains(reason),
                    "{style} {type_} {reason}: not an upstream reason for that condition"
                );
            }
            Source::Ours => {
                assert!(
                    !upstream(style, type_).contains(reason),
                    "{reason} is upstream's: do not mark it ours"
                );
                assert!(
                    differences.contains(&format!("`{reason}`")),
                    "docs/differences.md must name our reason `{reason}`"
                );
            }
        }
    }
    // Every failure domain problem class maps to upstream's reasons in both styles.
    for p in FdProblem::ALL {
        let (r1, r2) = p.reasons();
        assert!(
            upstream(V1, "VSphereFailureDomainValidated").contains(&r1),
            "{p:?}"
        );
        assert!(
            upstream(V2, "FailureDomainValidated").contains(&r2),
            "{p:?}"
        );
    }
}

/// The region tag `region-b` exists only in category `other` (attached to the datacenter).
fn region_tag_in_another_category() -> (World, VSphereFailureDomain) {
    let dc = [m("Datacenter", "dc-1")];
    let w = World::tagged()
        .category("cat-o", "other")
        .tag("t-o", "region-b", "cat-o", &dc);
    let mut f = cc_fd(false);
    f.spec.region.name = "region-b".into();
    (w, f)
}

/// The failure domain check of a zone with no placement constraint: reasons and message.
fn fd_check(w: &World, f: &VSphereFailureDomain) -> (&'static str, &'static str, String) {
    failed_reason(&plan_zone(&dz(None, None), Some(f), Ok(&w.view)).failure_domain)
}

#[test]
fn a_tag_found_only_in_another_category_is_the_region_or_zone_misconfigured() {
    // Region side: the region tag name exists only in another category.
    let (w, mut f) = region_tag_in_another_category();
    let (r1, r2, msg) = fd_check(&w, &f);
    assert_eq!(
        (r1, r2),
        ("FailureDomainRegionMisconfigured", "RegionMisconfigured")
    );
    assert!(msg.contains("region tag region-b is not in category k8s-region (a tag of that name exists in category other)"), "{msg}");

    // Attached from another category while the wanted one exists unattached: the object is named.
    let c0 = [m("ClusterComputeResource", "c-0")];
    let w = World::tagged()
        .category("cat-o", "other")
        .tag("t-z2", "zone-b", "cat-z", &[])
        .tag("t-o", "zone-b", "cat-o", &c0);
    f = cc_fd(false);
    f.spec.zone.name = "zone-b".into();
    let (r1, r2, msg) = fd_check(&w, &f);
    assert_eq!(
        (r1, r2),
        ("FailureDomainZoneMisconfigured", "ZoneMisconfigured")
    );
    assert!(msg.contains("object /DC0/host/C0 does not have tag zone-b (category k8s-zone): the tag of that name attached to it is in category other"), "{msg}");
}

#[test]
fn autoconfigure_reasons_follow_the_class_of_the_change() {
    let fd = hg_fd(true);
    let region_tag = Step::CreateTag {
        category: "k8s-region".into(),
        name: "region-a".into(),
    };
    let zone_tag = Step::CreateTag {
        category: "k8s-zone".into(),
        name: "rack-1".into(),
    };
    let group = Step::CreateVmGroup {
        cluster: m("ClusterComputeResource", "c-0"),
        cluster_path: "/DC0/host/C0".into(),
        name: "vms".into(),
    };
    assert_eq!(
        FdProblem::of_step(&region_tag, Some(&fd)),
        FdProblem::Region
    );
    assert_eq!(FdProblem::of_step(&zone_tag, Some(&fd)), FdProblem::Zone);
    assert_eq!(
        FdProblem::of_step(&group, Some(&fd)).reasons(),
        ("HostsMisconfigured", "HostsMisconfigured")
    );
}
