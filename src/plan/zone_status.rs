//! Turning a zone verdict into status (both condition styles), owner references and the
//! deletion decision. Pure; `now` is an input.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::Resource;

use super::zone::{Check, ZoneVerdict};
use crate::api::conditions::{
    self, CapiCondition, ConditionUpdate, MetaCondition, severity, zone, zone_v1beta1,
};
use crate::api::deployment_zone::{VSphereDeploymentZone, VSphereDeploymentZoneStatus};
use crate::api::failure_domain::VSphereFailureDomain;
use crate::api::infrastructure::v1beta2::common::DeprecatedStatus;
use crate::api::machine::Machine;
use crate::vcenter::model::endpoint::same_server;

/// Condition types per check: (v1beta1 type, v1beta2 type, v1beta2 ok reason).
const VCENTER: (&str, &str, &str) = (
    zone_v1beta1::VCENTER_AVAILABLE,
    zone::VCENTER_AVAILABLE,
    zone::AVAILABLE_REASON,
);
const PLACEMENT: (&str, &str, &str) = (
    zone_v1beta1::PLACEMENT_CONSTRAINT_MET,
    zone::PLACEMENT_CONSTRAINT_READY,
    zone::READY_REASON,
);
const FAILURE_DOMAIN: (&str, &str, &str) = (
    zone_v1beta1::VSPHERE_FAILURE_DOMAIN_VALIDATED,
    zone::FAILURE_DOMAIN_VALIDATED,
    zone::VALIDATED,
);

/// Write the verdict into the zone status. Transition times move only when a status flips, so
/// re-running an unchanged reconcile changes nothing (no hot loop from status writes).
/// Returns whether the status changed.
pub fn apply_zone_status(
    status: &mut VSphereDeploymentZoneStatus,
    verdict: &ZoneVerdict,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    let before = status.clone();
    let mut capi: Vec<CapiCondition> = std::mem::take(DeprecatedStatus::v1beta1_conditions_mut(
        &mut status.deprecated,
    ));
    let mut meta: Vec<MetaCondition> = status.conditions.take().unwrap_or_default();
    for (check, (t1, t2, ok_reason)) in [
        (&verdict.vcenter, VCENTER),
        (&verdict.placement, PLACEMENT),
        (&verdict.failure_domain, FAILURE_DOMAIN),
    ] {
        match check {
            Check::Skipped => {
                conditions::remove_capi_condition(&mut capi, t1);
                conditions::remove_meta_condition(&mut meta, t2);
            }
            Check::Ok { message } => {
                conditions::set_capi_condition(
                    &mut capi,
                    &ConditionUpdate {
                        message,
                        ..ConditionUpdate::true_(t1)
                    },
                    now,
                );
                conditions::set_meta_condition(
                    &mut meta,
                    &ConditionUpdate::true_reason(t2, ok_reason, message),
                    generation,
                    now,
                );
            }
            Check::Failed {
                v1beta1_reason,
                v1beta2_reason,
                message,
            } => {
                conditions::set_capi_condition(
                    &mut capi,
                    &ConditionUpdate::false_(t1, v1beta1_reason, severity::ERROR, message),
                    now,
                );
                conditions::set_meta_condition(
                    &mut meta,
                    &ConditionUpdate::false_(t2, v1beta2_reason, "", message),
                    generation,
                    now,
                );
            }
        }
    }
    // Ready: the summary of the three, as CAPI's summary does (first failure wins).
    match verdict.first_problem() {
        None => {
            conditions::set_capi_condition(&mut capi, &ConditionUpdate::true_(zone::READY), now);
            conditions::set_meta_condition(
                &mut meta,
                &ConditionUpdate::true_reason(zone::READY, zone::READY_REASON, ""),
                generation,
                now,
            );
        }
        Some((reason, message)) => {
            conditions::set_capi_condition(
                &mut capi,
                &ConditionUpdate::false_(zone::READY, reason, severity::ERROR, message),
                now,
            );
            conditions::set_meta_condition(
                &mut meta,
                &ConditionUpdate::false_(zone::READY, zone::NOT_READY_REASON, "", message),
                generation,
                now,
            );
        }
    }
    status.ready = Some(verdict.ready());
    *DeprecatedStatus::v1beta1_conditions_mut(&mut status.deprecated) = capi;
    status.conditions = Some(meta);
    *status != before
}

/// Mark the new-style conditions `Deleting` (upstream does this first on delete).
pub fn apply_deleting(
    status: &mut VSphereDeploymentZoneStatus,
    generation: Option<i64>,
    now: &Time,
    message: &str,
) {
    let meta = status.conditions.get_or_insert_with(Vec::new);
    for t in [
        zone::VCENTER_AVAILABLE,
        zone::PLACEMENT_CONSTRAINT_READY,
        zone::FAILURE_DOMAIN_VALIDATED,
    ] {
        conditions::set_meta_condition(
            meta,
            &ConditionUpdate::false_(t, zone::DELETING_REASON, "", message),
            generation,
            now,
        );
    }
}

/// The owner reference a zone puts on its failure domain (not a controller reference: one
/// failure domain may back several zones).
pub fn owner_reference(dz: &VSphereDeploymentZone) -> OwnerReference {
    OwnerReference {
        api_version: VSphereDeploymentZone::api_version(&()).into_owned(),
        kind: VSphereDeploymentZone::kind(&()).into_owned(),
        name: dz.metadata.name.clone().unwrap_or_default(),
        uid: dz.metadata.uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }
}

fn same_owner(a: &OwnerReference, b: &OwnerReference) -> bool {
    a.kind == b.kind && a.name == b.name && (a.uid.is_empty() || b.uid.is_empty() || a.uid == b.uid)
}

/// The failure domain's owner references with this zone added, or None if already there.
pub fn with_owner(
    fd: &VSphereFailureDomain,
    dz: &VSphereDeploymentZone,
) -> Option<Vec<OwnerReference>> {
    let mine = owner_reference(dz);
    let mut refs = fd.metadata.owner_references.clone().unwrap_or_default();
    if refs.iter().any(|r| same_owner(r, &mine)) {
        return None;
    }
    refs.push(mine);
    Some(refs)
}

/// What to do when a zone is being deleted.
#[derive(Clone, Debug, PartialEq)]
pub enum Deletion {
    /// Machines still use the zone: keep the finalizer and say who.
    Blocked { machines: Vec<String> },
    /// Remove the finalizer; first update the failure domain's owners, and delete it when this
    /// was its last zone.
    Proceed {
        remaining_owners: Option<Vec<OwnerReference>>,
        delete_failure_domain: bool,
    },
}

impl Deletion {
    pub fn blocked_message(machines: &[String]) -> String {
        format!(
            "blocking VSphereDeploymentZone deletion: currently in use by Machines {}",
            machines.join(", ")
        )
    }
}

/// Decide a zone deletion. `machines` are all Machines the controller can see.
pub fn plan_zone_deletion(
    dz: &VSphereDeploymentZone,
    fd: Option<&VSphereFailureDomain>,
    machines: &[Machine],
) -> Deletion {
    let using = machines_in_zone(dz, fd, machines);
    if !using.is_empty() {
        return Deletion::Blocked { machines: using };
    }
    let Some(fd) = fd else {
        return Deletion::Proceed {
            remaining_owners: None,
            delete_failure_domain: false,
        };
    };
    let mine = owner_reference(dz);
    let refs = fd.metadata.owner_references.clone().unwrap_or_default();
    let remaining: Vec<OwnerReference> = refs
        .iter()
        .filter(|r| !same_owner(r, &mine))
        .cloned()
        .collect();
    let changed = remaining.len() != refs.len();
    let fd_deleting = fd.metadata.deletion_timestamp.is_some();
    Deletion::Proceed {
        delete_failure_domain: remaining.is_empty() && changed && !fd_deleting,
        remaining_owners: changed.then_some(remaining),
    }
}

/// Names (`namespace/name`) of live Machines placed in this zone.
///
/// A Machine is in the zone when the label `vsphere-provider.io/deployment-zone` names it (we set
/// it on machines we create), or when its providerSpec workspace points into the zone's
/// placement: same server (by host), datacenter, and resource pool (the zone's, else the compute
/// cluster's), as the control plane machine set extracts domains from machines.
pub fn machines_in_zone(
    dz: &VSphereDeploymentZone,
    fd: Option<&VSphereFailureDomain>,
    machines: &[Machine],
) -> Vec<String> {
    let zone_name = dz.metadata.name.clone().unwrap_or_default();
    let mut out: Vec<String> = machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .filter(|m| {
            let labelled = m
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(ZONE_LABEL))
                .is_some_and(|z| *z == zone_name);
            labelled || fd.is_some_and(|fd| workspace_in_zone(m, dz, fd))
        })
        .map(|m| {
            format!(
                "{}/{}",
                m.metadata.namespace.clone().unwrap_or_default(),
                m.metadata.name.clone().unwrap_or_default()
            )
        })
        .collect();
    out.sort();
    out
}

/// The label naming a machine's deployment zone.
pub const ZONE_LABEL: &str = "vsphere-provider.io/deployment-zone";

fn trim_path(p: &str) -> String {
    p.split('/')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether `a` and `b` name the same inventory object, one possibly relative: the shorter must
/// be a component-wise suffix of the longer.
fn same_path(a: &str, b: &str) -> bool {
    let (a, b) = (trim_path(a), trim_path(b));
    if a.is_empty() || b.is_empty() {
        return false;
    }
    a == b || a.ends_with(&format!("/{b}")) || b.ends_with(&format!("/{a}"))
}

fn workspace_in_zone(m: &Machine, dz: &VSphereDeploymentZone, fd: &VSphereFailureDomain) -> bool {
    let Some(ws) = m
        .spec
        .provider_spec
        .as_ref()
        .and_then(|p| p.value.as_ref())
        .and_then(|v| v.get("workspace"))
    else {
        return false;
    };
    let field = |k: &str| {
        ws.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let server_ok = dz
        .spec
        .server
        .as_deref()
        .is_some_and(|s| same_server(s, &field("server")));
    let dc_ok = same_path(&field("datacenter"), &fd.spec.topology.datacenter);
    let pool = field("resourcePool");
    let pool_ok = match (
        dz.spec.resource_pool().filter(|s| !s.is_empty()),
        fd.spec.topology.compute_cluster.as_deref(),
    ) {
        (Some(rp), _) => same_path(&pool, rp),
        (None, Some(cc)) => {
            // The pool is under the cluster: some run of its components is the cluster path.
            let pool = trim_path(&pool);
            let cc = trim_path(cc);
            let parts: Vec<&str> = pool.split('/').collect();
            let want: Vec<&str> = cc.split('/').collect();
            !want.is_empty() && parts.windows(want.len()).any(|w| w == want.as_slice())
        }
        (None, None) => true,
    };
    let group_ok = match &fd.spec.topology.hosts {
        Some(h) => field("vmGroup") == h.vm_group_name,
        None => true,
    };
    server_ok && dc_ok && pool_ok && group_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_absolute_paths_compare_by_suffix() {
        assert!(same_path("/DC0/host/C0/Resources/RP1", "RP1"));
        assert!(same_path("DC0", "/DC0"));
        assert!(!same_path("/DC0/host/C0/Resources/RP10", "RP1"));
        assert!(!same_path("", "RP1"));
    }

    #[test]
    fn machines_match_the_zone_cluster_by_path_components() {
        use crate::api::deployment_zone::VSphereDeploymentZoneSpec;
        use crate::api::failure_domain::{
            FailureDomain, FailureDomainType, Topology, VSphereFailureDomainSpec,
        };
        let dz = VSphereDeploymentZone::new(
            "z",
            VSphereDeploymentZoneSpec {
                thumbprint: None,
                identity_ref: None,
                server: Some("vc".into()),
                failure_domain: "fd".into(),
                control_plane: None,
                placement_constraint: None,
            },
        );
        let side = |t| FailureDomain {
            name: "n".into(),
            type_: t,
            tag_category: "c".into(),
            auto_configure: None,
        };
        let fd = VSphereFailureDomain::new(
            "fd",
            VSphereFailureDomainSpec {
                region: side(FailureDomainType::Datacenter),
                zone: side(FailureDomainType::ComputeCluster),
                topology: Topology {
                    datacenter: "DC0".into(),
                    compute_cluster: Some("C0".into()),
                    ..Topology::default()
                },
            },
        );
        let machine = |name: &str, pool: &str| {
            serde_json::from_value::<Machine>(serde_json::json!({
                "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"providerSpec": {"value": {"workspace": {
                    "server": "vc", "datacenter": "DC0", "resourcePool": pool}}}}
            }))
            .unwrap()
        };
        let ms = [
            machine("in", "/DC0/host/C0/Resources"),
            machine("other-cluster", "/DC0/host/C1/Resources"),
        ];
        // "DC0/host/C1" contains the substring "C0" of "DC0": components must match.
        assert_eq!(machines_in_zone(&dz, Some(&fd), &ms), ["ns/in"]);
    }
}
