//! VSphereFailureDomain admission.
//!
//! Upstream (CAPV v1.15.0 `internal/webhooks/vspherefailuredomain.go`): the defaulter sets a nil
//! `region.autoConfigure` / `zone.autoConfigure` to false; on create, the five topology rules and
//! the two network rules; on update, the spec is immutable. Upstream writes Go field names in its
//! paths (`spec.Topology.ComputeCluster`); ours are JSON names, the messages are upstream's.
//!
//! Added here (upstream misses them, capv-failure-domains.md §2 "Not checked"):
//! * empty region/zone names, tag categories, datacenter, compute cluster and group names;
//! * a zone type wider than its region type (a Datacenter zone under a ComputeCluster region);
//! * hosts for a non-HostGroup zone without a compute cluster (covered by upstream's first rule,
//!   tested for that case too);
//! * the VM group and host group sharing one name (they share one namespace in a cluster);
//! * the 2020 proposal's autoConfigure constraints as far as the v1beta1 API can express them:
//!   the datacenter must be set, and both group names must be set (a HostGroup zone with
//!   autoConfigure creates them). The proposal's "not autoConfigure on both the host group and
//!   the failure domain" has no field to check in v1beta1 (`hosts` has no autoConfigure); the
//!   exclusivity it wanted — build the group from tagged hosts, *or* tag the hosts of an existing
//!   group, never both — is enforced by the zone planner, which picks one by whether the group
//!   exists (`plan::zone`).
//!
//! Warned, not rejected: region and zone sharing one tag category. CAPV accepts it and its own
//! test objects do it, but whatever reads topology back from tags (the vSphere cloud provider)
//! tells a region tag from a zone tag by its category only.

use serde_json::Value;

use super::{Ctx, FieldError, child, index};
use crate::api::VSphereFailureDomain;
use crate::api::failure_domain::{FailureDomain, FailureDomainType, VSphereFailureDomainSpec};

/// The mutating webhook: a missing `autoConfigure` becomes false in region and zone. Returns the
/// defaulted paths.
pub fn default(obj: &mut Value) -> Vec<String> {
    let mut defaulted = Vec::new();
    for part in ["region", "zone"] {
        if let Some(fd) = obj
            .pointer_mut(&format!("/spec/{part}"))
            .and_then(Value::as_object_mut)
            && fd.get("autoConfigure").is_none_or(Value::is_null)
        {
            fd.insert("autoConfigure".into(), Value::Bool(false));
            defaulted.push(format!("spec.{part}.autoConfigure"));
        }
    }
    defaulted
}

/// Validation on create.
pub fn validate_create(fd: &VSphereFailureDomain, ctx: &Ctx) -> Vec<FieldError> {
    validate_spec(&fd.spec, ctx)
}

/// Validation on update: the spec is immutable (upstream), and must still be valid.
pub fn validate_update(
    old: &VSphereFailureDomain,
    new: &VSphereFailureDomain,
    ctx: &Ctx,
) -> Vec<FieldError> {
    let mut old_spec = old.spec.clone();
    let mut new_spec = new.spec.clone();
    // Compare as the defaulter leaves them (objects stored before defaulting existed).
    for spec in [&mut old_spec, &mut new_spec] {
        spec.region.auto_configure.get_or_insert(false);
        spec.zone.auto_configure.get_or_insert(false);
    }
    if old_spec != new_spec {
        return vec![FieldError::forbidden(
            "spec",
            "VSphereFailureDomainSpec is immutable",
        )];
    }
    validate_spec(&new.spec, ctx)
}

/// The create rules on a spec.
pub fn validate_spec(spec: &VSphereFailureDomainSpec, ctx: &Ctx) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let topo = &spec.topology;

    // Upstream rules, in upstream's order.
    if topo.compute_cluster.is_none() && topo.hosts.is_some() {
        errors.push(FieldError::forbidden(
            "spec.topology.computeCluster",
            "cannot be empty if Hosts is not empty",
        ));
    }
    if spec.region.type_ == FailureDomainType::HostGroup {
        errors.push(FieldError::forbidden(
            "spec.region.type",
            "region's Failure Domain type cannot be HostGroup",
        ));
    }
    if spec.zone.type_ == FailureDomainType::HostGroup && topo.hosts.is_none() {
        errors.push(FieldError::forbidden(
            "spec.topology.hosts",
            "cannot be nil if zone's Failure Domain type is HostGroup",
        ));
    }
    if spec.region.type_ == FailureDomainType::ComputeCluster && topo.compute_cluster.is_none() {
        errors.push(FieldError::forbidden(
            "spec.topology.computeCluster",
            "cannot be nil if region's Failure Domain type is ComputeCluster",
        ));
    }
    if spec.zone.type_ == FailureDomainType::ComputeCluster && topo.compute_cluster.is_none() {
        errors.push(FieldError::forbidden(
            "spec.topology.computeCluster",
            "cannot be nil if zone's Failure Domain type is ComputeCluster",
        ));
    }
    if topo.networks.is_some() && topo.network_configurations.is_some() {
        errors.push(FieldError::forbidden(
            "spec.topology.networks",
            "cannot be set if spec.topology.networkConfigurations is already set",
        ));
    }
    for (i, nc) in topo.network_configurations.iter().flatten().enumerate() {
        if nc.network_name.is_empty() {
            errors.push(FieldError::required(
                child(
                    &index("spec.topology.networkConfigurations", i),
                    "networkName",
                ),
                "cannot be empty",
            ));
        }
    }

    // Ours.
    check_failure_domain("spec.region", &spec.region, &mut errors);
    check_failure_domain("spec.zone", &spec.zone, &mut errors);
    if spec.zone.type_.breadth() > spec.region.type_.breadth() {
        errors.push(FieldError::forbidden(
            "spec.zone.type",
            format!(
                "zone's Failure Domain type {} is wider than region's Failure Domain type {}: a zone must lie within its region",
                spec.zone.type_, spec.region.type_
            ),
        ));
    }
    if topo.datacenter.is_empty() {
        errors.push(FieldError::required(
            "spec.topology.datacenter",
            "cannot be empty",
        ));
    }
    if topo.compute_cluster.as_deref() == Some("") {
        errors.push(FieldError::required(
            "spec.topology.computeCluster",
            "cannot be empty if set",
        ));
    }
    if topo.datastore.as_deref() == Some("") {
        errors.push(FieldError::required(
            "spec.topology.datastore",
            "cannot be empty if set",
        ));
    }
    for (i, n) in topo.networks.iter().flatten().enumerate() {
        if n.is_empty() {
            errors.push(FieldError::required(
                index("spec.topology.networks", i),
                "cannot be empty",
            ));
        }
    }
    if let Some(hosts) = &topo.hosts {
        if hosts.vm_group_name.is_empty() {
            errors.push(FieldError::required(
                "spec.topology.hosts.vmGroupName",
                "cannot be empty",
            ));
        }
        if hosts.host_group_name.is_empty() {
            errors.push(FieldError::required(
                "spec.topology.hosts.hostGroupName",
                "cannot be empty",
            ));
        }
        if !hosts.vm_group_name.is_empty()
            && hosts.vm_group_name == hosts.host_group_name
            && !ctx.exempt(&hosts.vm_group_name)
        {
            errors.push(FieldError::invalid_str(
                "spec.topology.hosts.vmGroupName",
                &hosts.vm_group_name,
                "must differ from hostGroupName: VM groups and host groups share one namespace in a compute cluster",
            ));
        }
    }
    errors
}

/// Warnings: region and zone sharing one tag category.
pub fn warnings(fd: &VSphereFailureDomain) -> Vec<String> {
    let spec = &fd.spec;
    let mut out = Vec::new();
    if !spec.region.tag_category.is_empty() && spec.region.tag_category == spec.zone.tag_category {
        let same_tag = if spec.region.name == spec.zone.name {
            format!(
                "; with the same name {:?} region and zone are even the same tag",
                spec.zone.name
            )
        } else {
            String::new()
        };
        out.push(format!(
            "spec.zone.tagCategory: {:?} is also spec.region.tagCategory: the vSphere cloud provider tells a region tag from a zone tag by its category, so nodes may get wrong or missing topology labels; use two categories (e.g. k8s-region and k8s-zone){same_tag}",
            spec.zone.tag_category
        ));
    }
    out
}

fn check_failure_domain(path: &str, fd: &FailureDomain, errors: &mut Vec<FieldError>) {
    if fd.name.is_empty() {
        errors.push(FieldError::required(
            child(path, "name"),
            "cannot be empty: it is the name of the tag",
        ));
    }
    if fd.tag_category.is_empty() {
        errors.push(FieldError::required(
            child(path, "tagCategory"),
            "cannot be empty",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::failure_domain::{FailureDomainHosts, NetworkConfiguration, Topology};

    fn fd(
        region: FailureDomainType,
        zone: FailureDomainType,
        topology: Topology,
    ) -> VSphereFailureDomain {
        VSphereFailureDomain::new(
            "fd",
            VSphereFailureDomainSpec {
                region: FailureDomain {
                    name: "region-a".into(),
                    type_: region,
                    tag_category: "k8s-region".into(),
                    auto_configure: None,
                },
                zone: FailureDomain {
                    name: "zone-a".into(),
                    type_: zone,
                    tag_category: "k8s-zone".into(),
                    auto_configure: None,
                },
                topology,
            },
        )
    }

    fn topo(cc: Option<&str>, hosts: bool) -> Topology {
        Topology {
            datacenter: "DC0".into(),
            compute_cluster: cc.map(Into::into),
            hosts: hosts.then(|| FailureDomainHosts {
                vm_group_name: "vms".into(),
                host_group_name: "hosts".into(),
            }),
            ..Default::default()
        }
    }

    fn shown(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    use FailureDomainType::{ComputeCluster as CC, Datacenter as DC, HostGroup as HG};

    #[test]
    fn good_neighbours_pass() {
        let ctx = Ctx::default();
        assert!(validate_create(&fd(DC, CC, topo(Some("C0"), false)), &ctx).is_empty());
        assert!(validate_create(&fd(DC, DC, topo(None, false)), &ctx).is_empty());
        assert!(validate_create(&fd(CC, HG, topo(Some("C0"), true)), &ctx).is_empty());
        assert!(validate_create(&fd(CC, CC, topo(Some("C0"), true)), &ctx).is_empty());
    }

    #[test]
    fn capv_hosts_without_compute_cluster() {
        let e = validate_create(&fd(DC, DC, topo(None, true)), &Ctx::default());
        assert_eq!(
            shown(&e),
            ["spec.topology.computeCluster: Forbidden: cannot be empty if Hosts is not empty"]
        );
    }

    #[test]
    fn ours_hosts_for_non_hostgroup_zone_without_compute_cluster() {
        // A ComputeCluster-less Datacenter zone that names hosts: rejected at the compute cluster.
        let e = validate_create(&fd(DC, DC, topo(None, true)), &Ctx::default());
        assert_eq!(e[0].path, "spec.topology.computeCluster");
        // The neighbour with the compute cluster passes.
        assert!(validate_create(&fd(DC, DC, topo(Some("C0"), true)), &Ctx::default()).is_empty());
    }

    #[test]
    fn capv_region_hostgroup() {
        let e = validate_create(&fd(HG, HG, topo(Some("C0"), true)), &Ctx::default());
        assert_eq!(
            shown(&e),
            ["spec.region.type: Forbidden: region's Failure Domain type cannot be HostGroup"]
        );
    }

    #[test]
    fn capv_hostgroup_zone_needs_hosts() {
        let e = validate_create(&fd(CC, HG, topo(Some("C0"), false)), &Ctx::default());
        assert_eq!(
            shown(&e),
            [
                "spec.topology.hosts: Forbidden: cannot be nil if zone's Failure Domain type is HostGroup"
            ]
        );
    }

    #[test]
    fn capv_compute_cluster_region_and_zone_need_compute_cluster() {
        let e = validate_create(&fd(CC, CC, topo(None, false)), &Ctx::default());
        assert_eq!(
            shown(&e),
            [
                "spec.topology.computeCluster: Forbidden: cannot be nil if region's Failure Domain type is ComputeCluster",
                "spec.topology.computeCluster: Forbidden: cannot be nil if zone's Failure Domain type is ComputeCluster",
            ]
        );
        let e = validate_create(&fd(DC, CC, topo(None, false)), &Ctx::default());
        assert_eq!(
            shown(&e),
            [
                "spec.topology.computeCluster: Forbidden: cannot be nil if zone's Failure Domain type is ComputeCluster"
            ]
        );
    }

    #[test]
    fn capv_networks_and_network_configurations() {
        let mut t = topo(Some("C0"), false);
        t.networks = Some(vec!["VM Network".into()]);
        t.network_configurations = Some(vec![NetworkConfiguration {
            network_name: "VM Network".into(),
            ..Default::default()
        }]);
        let e = validate_create(&fd(DC, CC, t.clone()), &Ctx::default());
        assert_eq!(
            shown(&e),
            [
                "spec.topology.networks: Forbidden: cannot be set if spec.topology.networkConfigurations is already set"
            ]
        );
        t.networks = None;
        assert!(validate_create(&fd(DC, CC, t.clone()), &Ctx::default()).is_empty());
        t.network_configurations.as_mut().unwrap()[0].network_name = String::new();
        let e = validate_create(&fd(DC, CC, t), &Ctx::default());
        assert_eq!(
            shown(&e),
            ["spec.topology.networkConfigurations[0].networkName: Required value: cannot be empty"]
        );
    }

    #[test]
    fn capv_spec_immutable() {
        let old = fd(DC, CC, topo(Some("C0"), false));
        let mut new = old.clone();
        assert!(validate_update(&old, &new, &Ctx::default()).is_empty());
        new.spec.topology.compute_cluster = Some("C1".into());
        assert_eq!(
            shown(&validate_update(&old, &new, &Ctx::default())),
            ["spec: Forbidden: VSphereFailureDomainSpec is immutable"]
        );
        // Defaulting autoConfigure is not a change.
        let mut defaulted = old.clone();
        defaulted.spec.region.auto_configure = Some(false);
        assert!(validate_update(&old, &defaulted, &Ctx::default()).is_empty());
        // Metadata changes are allowed.
        let mut labelled = old.clone();
        labelled.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
        assert!(validate_update(&old, &labelled, &Ctx::default()).is_empty());
    }

    #[test]
    fn capv_defaulter() {
        let mut v = serde_json::json!({"spec": {"region": {"name": "r"}, "zone": {"name": "z", "autoConfigure": true}}});
        assert_eq!(default(&mut v), ["spec.region.autoConfigure"]);
        assert_eq!(v["spec"]["region"]["autoConfigure"], false);
        assert_eq!(v["spec"]["zone"]["autoConfigure"], true);
        assert!(default(&mut v).is_empty());
    }

    #[test]
    fn ours_empty_names_and_categories() {
        let mut f = fd(DC, CC, topo(Some("C0"), false));
        f.spec.region.name = String::new();
        f.spec.zone.tag_category = String::new();
        f.spec.topology.datacenter = String::new();
        assert_eq!(
            shown(&validate_create(&f, &Ctx::default())),
            [
                "spec.region.name: Required value: cannot be empty: it is the name of the tag",
                "spec.zone.tagCategory: Required value: cannot be empty",
                "spec.topology.datacenter: Required value: cannot be empty",
            ]
        );
        let mut f = fd(DC, CC, topo(Some(""), false));
        f.spec.topology.networks = Some(vec![String::new()]);
        assert_eq!(
            shown(&validate_create(&f, &Ctx::default())),
            [
                "spec.topology.computeCluster: Required value: cannot be empty if set",
                "spec.topology.networks[0]: Required value: cannot be empty",
            ]
        );
    }

    #[test]
    fn ours_zone_wider_than_region() {
        let e = validate_create(&fd(CC, DC, topo(Some("C0"), false)), &Ctx::default());
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].path, "spec.zone.type");
        assert!(
            e[0].message
                .contains("Datacenter is wider than region's Failure Domain type ComputeCluster")
        );
        // Same breadth and narrower are fine.
        assert!(validate_create(&fd(CC, CC, topo(Some("C0"), false)), &Ctx::default()).is_empty());
    }

    #[test]
    fn shared_tag_category_is_admitted_with_a_warning() {
        let mut f = fd(DC, CC, topo(Some("C0"), false));
        assert!(warnings(&f).is_empty());
        f.spec.zone.tag_category = "k8s-region".into();
        assert!(validate_create(&f, &Ctx::default()).is_empty());
        let w = warnings(&f);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("spec.zone.tagCategory: \"k8s-region\" is also spec.region.tagCategory: the vSphere cloud provider tells a region tag from a zone tag by its category"), "{w:?}");
        assert!(!w[0].contains("same tag"));
        f.spec.zone.name = f.spec.region.name.clone();
        assert!(warnings(&f)[0].ends_with("region and zone are even the same tag"));
    }

    #[test]
    fn ours_group_names() {
        let mut f = fd(CC, HG, topo(Some("C0"), true));
        f.spec.zone.auto_configure = Some(true);
        assert!(validate_create(&f, &Ctx::default()).is_empty());
        let hosts = f.spec.topology.hosts.as_mut().unwrap();
        hosts.vm_group_name = "same".into();
        hosts.host_group_name = "same".into();
        let e = validate_create(&f, &Ctx::default());
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].path, "spec.topology.hosts.vmGroupName");
        let hosts = f.spec.topology.hosts.as_mut().unwrap();
        hosts.vm_group_name = String::new();
        let e = validate_create(&f, &Ctx::default());
        assert_eq!(
            shown(&e),
            ["spec.topology.hosts.vmGroupName: Required value: cannot be empty"]
        );
    }
}
