//! Publication of ready zones as failure domains on a VSphereCluster (reference §4), pure.
//!
//! Upstream behaviour kept: `failureDomainSelector` unset → nothing happens (unless the admin
//! gave the manager a default selector, `--default-failure-domain-selector`, for clusters that
//! set none: a ClusterClass such as CAPV's own cannot carry one); `{}` selects all zones; zones must also name the cluster's server; a zone whose `ready` is unset is published
//! but makes the cluster wait (`WaitingForFailureDomainStatus`, requeue 10 s); `ready: false`
//! zones are skipped (`FailureDomainsSkipped`). Servers match by host (see
//! `vcenter::model::endpoint::same_server`), where CAPV compared strings.
pub mod identity;
pub mod identity_secret;
pub mod lifecycle;
pub mod secret_adoption;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};

use crate::api::conditions::{
    self, CapiCondition, ConditionUpdate, MetaCondition, cluster, severity,
};
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::infrastructure::v1beta2::common::DeprecatedStatus;
use crate::api::vsphere_cluster::{FailureDomain, VSphereCluster, VSphereClusterStatus};
use crate::vcenter::model::endpoint::same_server;

use super::selector;

/// How long a cluster waits for zones that have not reported yet.
pub const WAIT_FOR_ZONES: Duration = Duration::from_secs(10);

/// What the cluster's status should say about failure domains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publication {
    /// No `failureDomainSelector`: leave the status alone.
    Disabled,
    /// No zone matched: clear the failure domains and drop the condition.
    NoZones,
    Zones {
        /// Sorted by name, as the contract wants the list.
        failure_domains: Vec<FailureDomain>,
        /// Zones whose `ready` is unset.
        waiting: Vec<String>,
        /// Zones with `ready: false`, not published.
        skipped: Vec<String>,
    },
}

impl Publication {
    /// Requeue while zones have not reported.
    pub fn requeue(&self) -> Option<Duration> {
        match self {
            Publication::Zones { waiting, .. } if !waiting.is_empty() => Some(WAIT_FOR_ZONES),
            _ => None,
        }
    }

    /// Whether the rest of the cluster reconcile may go on (upstream stops while waiting).
    pub fn settled(&self) -> bool {
        self.requeue().is_none()
    }

    /// Why the cluster waits for its zones (`None` when settled).
    pub fn waiting_message(&self) -> Option<String> {
        match self {
            Publication::Zones { waiting, .. } if !waiting.is_empty() => Some(format!(
                "waiting for failure domain status of {}",
                waiting.join(", ")
            )),
            _ => None,
        }
    }
}

/// The selector a cluster's zones are chosen by: its own `failureDomainSelector`, else the
/// manager's default (`None`: CAPV's rule, no failure domains for a cluster that sets none).
pub fn selector_of<'a>(
    cluster: &'a VSphereCluster,
    default: Option<&'a LabelSelector>,
) -> Option<&'a LabelSelector> {
    cluster.spec.failure_domain_selector.as_ref().or(default)
}

/// Whether a zone belongs to a cluster: selected by label (see [`selector_of`]) and on the
/// same server.
pub fn selects(
    cluster: &VSphereCluster,
    zone: &VSphereDeploymentZone,
    default: Option<&LabelSelector>,
) -> bool {
    let Some(sel) = selector_of(cluster, default) else {
        return false;
    };
    let labels = zone.metadata.labels.clone().unwrap_or_default();
    let server_ok = match (cluster.spec.server(), &zone.spec.server) {
        (Some(a), Some(b)) => same_server(a, b),
        _ => false,
    };
    server_ok && selector::matches(sel, &labels)
}

/// Decide the publication for one cluster from all zones; `default` as in [`selector_of`].
pub fn plan_cluster(
    cluster: &VSphereCluster,
    zones: &[VSphereDeploymentZone],
    default: Option<&LabelSelector>,
) -> Publication {
    if selector_of(cluster, default).is_none() {
        return Publication::Disabled;
    }
    let mut failure_domains = BTreeMap::new();
    let mut waiting = Vec::new();
    let mut skipped = Vec::new();
    for z in zones.iter().filter(|z| selects(cluster, z, default)) {
        if z.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = z.metadata.name.clone().unwrap_or_default();
        let ready = z.status.as_ref().and_then(|s| s.ready);
        match ready {
            Some(false) => {
                skipped.push(name);
                continue;
            }
            None => waiting.push(name.clone()),
            Some(true) => {}
        }
        let control_plane = Some(z.spec.is_control_plane());
        failure_domains.insert(name, control_plane);
    }
    let failure_domains: Vec<FailureDomain> = failure_domains
        .into_iter()
        .map(|(name, control_plane)| FailureDomain {
            name,
            control_plane,
            attributes: None,
        })
        .collect();
    if failure_domains.is_empty() && waiting.is_empty() && skipped.is_empty() {
        return Publication::NoZones;
    }
    Publication::Zones {
        failure_domains,
        waiting,
        skipped,
    }
}

/// Write a publication into the status (both condition styles); `now` stamps transitions.
/// Returns whether anything changed.
pub fn apply(
    status: &mut VSphereClusterStatus,
    p: &Publication,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    edit_status(status, |status, capi, meta| match p {
        Publication::Disabled => {}
        Publication::NoZones => {
            status.failure_domains = None;
            // Upstream #1542: the v1beta1 condition goes with the zones. v1beta2 says why the
            // list is gone.
            conditions::remove_capi_condition(capi, cluster::FAILURE_DOMAINS_AVAILABLE);
            conditions::set_meta_condition(
                meta,
                &ConditionUpdate::true_reason(
                    cluster::FAILURE_DOMAINS_READY,
                    cluster::NO_FAILURE_DOMAINS,
                    cluster::NO_FAILURE_DOMAINS_MESSAGE,
                ),
                generation,
                now,
            );
        }
        Publication::Zones {
            failure_domains,
            skipped,
            ..
        } => {
            // Never an empty list: v1beta2's `failureDomains` has MinItems 1, and an empty map
            // would tell CAPI "zones, none usable" where there is nothing to choose from.
            status.failure_domains = (!failure_domains.is_empty()).then(|| failure_domains.clone());
            // (v1beta1 status, reason, severity, v1beta2 reason, message)
            let (st, reason, sev, reason2, msg) = if let Some(msg) = p.waiting_message() {
                (
                    conditions::STATUS_FALSE,
                    cluster::WAITING_FOR_FAILURE_DOMAIN_STATUS,
                    severity::INFO,
                    cluster::NOT_READY_REASON,
                    msg,
                )
            } else if !skipped.is_empty() {
                let msg = if failure_domains.is_empty() {
                    format!(
                        "no failure domain is ready, so none is published ({} not ready)",
                        skipped.join(", ")
                    )
                } else {
                    format!(
                        "{} ({})",
                        cluster::FAILURE_DOMAINS_SKIPPED_MESSAGE,
                        skipped.join(", ")
                    )
                };
                (
                    conditions::STATUS_FALSE,
                    cluster::FAILURE_DOMAINS_SKIPPED,
                    severity::INFO,
                    cluster::NOT_READY_REASON,
                    msg,
                )
            } else {
                (
                    conditions::STATUS_TRUE,
                    "",
                    "",
                    cluster::READY_REASON,
                    String::new(),
                )
            };
            conditions::set_capi_condition(
                capi,
                &ConditionUpdate {
                    type_: cluster::FAILURE_DOMAINS_AVAILABLE,
                    status: st,
                    reason,
                    message: &msg,
                    severity: sev,
                },
                now,
            );
            conditions::set_meta_condition(
                meta,
                &ConditionUpdate {
                    type_: cluster::FAILURE_DOMAINS_READY,
                    status: st,
                    reason: reason2,
                    message: &msg,
                    severity: "",
                },
                generation,
                now,
            );
        }
    })
}

/// Edit a cluster status with both of its condition lists taken out for `f` (the v1beta1
/// `deprecated.v1beta1.conditions`, the metav1 `conditions`) and put back (empty lists as
/// unset). Returns whether anything changed.
pub(crate) fn edit_status(
    status: &mut VSphereClusterStatus,
    f: impl FnOnce(&mut VSphereClusterStatus, &mut Vec<CapiCondition>, &mut Vec<MetaCondition>),
) -> bool {
    let before = status.clone();
    let mut capi: Vec<CapiCondition> = std::mem::take(DeprecatedStatus::v1beta1_conditions_mut(
        &mut status.deprecated,
    ));
    let mut meta: Vec<MetaCondition> = status.conditions.take().unwrap_or_default();
    f(status, &mut capi, &mut meta);
    if capi.is_empty() {
        status.deprecated = None;
    } else {
        *DeprecatedStatus::v1beta1_conditions_mut(&mut status.deprecated) = capi;
    }
    status.conditions = (!meta.is_empty()).then_some(meta);
    *status != before
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deployment_zone::{VSphereDeploymentZoneSpec, VSphereDeploymentZoneStatus};
    use crate::api::vsphere_cluster::VSphereClusterSpec;
    use proptest::prelude::*;

    fn zone(
        name: &str,
        server: &str,
        ready: Option<bool>,
        cp: Option<bool>,
        labels: &[(&str, &str)],
    ) -> VSphereDeploymentZone {
        let mut z = VSphereDeploymentZone::new(
            name,
            VSphereDeploymentZoneSpec {
                server: Some(server.into()),
                failure_domain: name.into(),
                control_plane: cp,
                ..VSphereDeploymentZoneSpec::default()
            },
        );
        z.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        z.status = Some(VSphereDeploymentZoneStatus {
            ready,
            ..VSphereDeploymentZoneStatus::default()
        });
        z
    }

    /// The publication with no manager default (CAPV's rule).
    fn plan(c: &VSphereCluster, zones: &[VSphereDeploymentZone]) -> Publication {
        plan_cluster(c, zones, None)
    }

    fn cluster(server: &str, selector: Option<LabelSelector>) -> VSphereCluster {
        VSphereCluster::new(
            "c",
            VSphereClusterSpec {
                server: server.into(),
                failure_domain_selector: selector,
                ..VSphereClusterSpec::default()
            },
        )
    }

    /// The v1beta2 `FailureDomainsReady` condition of a status (it must be there).
    fn failure_domains_ready(status: &VSphereClusterStatus) -> &MetaCondition {
        let v2 = status.conditions.as_deref();
        conditions::find_meta(v2.unwrap_or_default(), cluster::FAILURE_DOMAINS_READY)
            .expect("FailureDomainsReady is set")
    }

    /// The v1beta1 `FailureDomainsAvailable` condition of a status, if set.
    fn failure_domains_available(status: &VSphereClusterStatus) -> Option<&CapiCondition> {
        conditions::find_capi(
            DeprecatedStatus::v1beta1_conditions(&status.deprecated),
            cluster::FAILURE_DOMAINS_AVAILABLE,
        )
    }

    fn names(fds: &[FailureDomain]) -> Vec<&str> {
        fds.iter().map(|f| f.name.as_str()).collect()
    }

    fn now() -> Time {
        Time("2026-11-22T03:00:00Z".parse().unwrap())
    }

    #[test]
    fn no_selector_leaves_the_status_alone() {
        let c = cluster("vc", None);
        let p = plan(&c, &[zone("a", "vc", Some(true), None, &[])]);
        assert_eq!(p, Publication::Disabled);
        let mut status = VSphereClusterStatus::default();
        assert!(!apply(&mut status, &p, None, &now()));
    }

    #[test]
    fn ready_zones_publish_unset_wait_and_false_are_skipped() {
        // Upstream's table: ready nil → published + wait; true → published; false → skipped.
        let c = cluster("vc.example.com", Some(LabelSelector::default()));
        let zones = [
            zone("ready", "https://vc.example.com/sdk", Some(true), None, &[]),
            zone("worker", "vc.example.com", Some(true), Some(false), &[]),
            zone("unset", "vc.example.com", None, None, &[]),
            zone("broken", "vc.example.com", Some(false), None, &[]),
            zone("elsewhere", "other-vc", Some(true), None, &[]),
        ];
        let p = plan(&c, &zones);
        let Publication::Zones {
            failure_domains,
            waiting,
            skipped,
        } = &p
        else {
            panic!("{p:?}")
        };
        assert_eq!(
            names(failure_domains),
            ["ready", "unset", "worker"],
            "sorted by name"
        );
        assert_eq!(failure_domains[2].control_plane, Some(false));
        assert_eq!(
            failure_domains[0].control_plane,
            Some(true),
            "controlPlane defaults to true"
        );
        assert_eq!(waiting, &["unset"]);
        assert_eq!(skipped, &["broken"]);
        assert_eq!(p.requeue(), Some(WAIT_FOR_ZONES));
        let mut status = VSphereClusterStatus::default();
        apply(&mut status, &p, Some(1), &now());
        let cond = failure_domains_available(&status).unwrap();
        assert_eq!(
            cond.reason.as_deref(),
            Some(cluster::WAITING_FOR_FAILURE_DOMAIN_STATUS)
        );
        assert_eq!(cond.severity.as_deref(), Some(severity::INFO));
    }

    #[test]
    fn skipped_zones_give_failure_domains_skipped_then_true_once_ready() {
        let c = cluster("vc", Some(LabelSelector::default()));
        let mut zones = vec![
            zone("a", "vc", Some(true), None, &[]),
            zone("b", "vc", Some(false), None, &[]),
        ];
        let mut status = VSphereClusterStatus::default();
        apply(&mut status, &plan(&c, &zones), None, &now());
        let cond = failure_domains_available(&status).unwrap();
        assert_eq!(
            cond.reason.as_deref(),
            Some(cluster::FAILURE_DOMAINS_SKIPPED)
        );
        assert!(
            cond.message
                .as_deref()
                .unwrap()
                .contains("one or more failure domains are not ready")
        );
        zones[1].status.as_mut().unwrap().ready = Some(true);
        let later = Time("2026-11-22T04:00:00Z".parse().unwrap());
        assert!(apply(&mut status, &plan(&c, &zones), None, &later));
        let cond = failure_domains_available(&status).unwrap();
        assert_eq!(cond.status, "True");
        assert_eq!(cond.last_transition_time, later);
        // Unchanged input: nothing changes, not even the transition time (no hot loop).
        assert!(!apply(
            &mut status,
            &plan(&c, &zones),
            None,
            &Time("2026-11-22T05:00:00Z".parse().unwrap())
        ));
    }

    #[test]
    fn removing_every_zone_clears_the_condition() {
        // Upstream #1542: FailureDomainsAvailable stayed after the zones were deleted.
        let c = cluster("vc", Some(LabelSelector::default()));
        let mut status = VSphereClusterStatus::default();
        apply(
            &mut status,
            &plan(&c, &[zone("a", "vc", Some(true), None, &[])]),
            None,
            &now(),
        );
        assert!(failure_domains_available(&status).is_some());
        apply(&mut status, &plan(&c, &[]), None, &now());
        assert!(failure_domains_available(&status).is_none());
        assert!(
            status.deprecated.is_none(),
            "no empty v1beta1 list left: {status:?}"
        );
        assert!(status.failure_domains.is_none());
        // v1beta2 says why nothing is published, without holding the cluster's Ready.
        let cond = failure_domains_ready(&status);
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_str()),
            ("True", cluster::NO_FAILURE_DOMAINS)
        );
        assert!(cond.message.contains("failureDomainSelector"), "{cond:?}");
    }

    #[test]
    fn zones_none_of_which_is_ready_publish_no_list_and_say_why() {
        // v1beta2's failureDomains has MinItems 1: an empty list must not be written, and the
        // condition names the zones that hold it back.
        let c = cluster("vc", Some(LabelSelector::default()));
        let zones = [
            zone("a", "vc", Some(false), None, &[]),
            zone("b", "vc", Some(false), None, &[]),
        ];
        let mut status = VSphereClusterStatus {
            failure_domains: Some(vec![FailureDomain {
                name: "a".into(),
                ..FailureDomain::default()
            }]),
            ..VSphereClusterStatus::default()
        };
        assert!(apply(&mut status, &plan(&c, &zones), Some(3), &now()));
        assert_eq!(status.failure_domains, None, "the stale list is withdrawn");
        let cond = failure_domains_ready(&status);
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_str()),
            ("False", cluster::NOT_READY_REASON)
        );
        assert_eq!(
            cond.message,
            "no failure domain is ready, so none is published (a, b not ready)"
        );
        let v1 = failure_domains_available(&status).unwrap();
        assert_eq!(v1.reason.as_deref(), Some(cluster::FAILURE_DOMAINS_SKIPPED));
    }

    #[test]
    fn the_managers_default_selects_for_clusters_that_set_no_selector_only() {
        let tier = |t: &str| LabelSelector {
            match_labels: Some([("tier".to_string(), t.to_string())].into()),
            ..LabelSelector::default()
        };
        let zones = [
            zone("a", "vc", Some(true), None, &[("tier", "cp")]),
            zone("b", "vc", Some(true), None, &[("tier", "w")]),
            zone("c", "other-vc", Some(true), None, &[("tier", "cp")]),
        ];
        let published = |c: &VSphereCluster, default: Option<&LabelSelector>| match plan_cluster(
            c, &zones, default,
        ) {
            Publication::Zones {
                failure_domains, ..
            } => names(&failure_domains)
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        let unset = cluster("vc", None);
        // No default: CAPV's rule, nothing published.
        assert_eq!(plan_cluster(&unset, &zones, None), Publication::Disabled);
        // A default `{}` gives every zone on the cluster's server, and no other server's.
        assert_eq!(
            published(&unset, Some(&LabelSelector::default())),
            ["a", "b"]
        );
        assert_eq!(published(&unset, Some(&tier("w"))), ["b"]);
        assert!(selects(&unset, &zones[1], Some(&tier("w"))));
        assert!(!selects(&unset, &zones[0], Some(&tier("w"))));
        // A cluster's own selector wins over the default.
        let own = cluster("vc", Some(tier("cp")));
        assert_eq!(published(&own, Some(&tier("w"))), ["a"]);
    }

    #[test]
    fn the_selector_filters_by_labels() {
        let sel = LabelSelector {
            match_labels: Some([("tier".to_string(), "cp".to_string())].into()),
            ..LabelSelector::default()
        };
        let c = cluster("vc", Some(sel));
        let zones = [
            zone("a", "vc", Some(true), None, &[("tier", "cp")]),
            zone("b", "vc", Some(true), None, &[]),
        ];
        let Publication::Zones {
            failure_domains, ..
        } = plan(&c, &zones)
        else {
            panic!()
        };
        assert_eq!(names(&failure_domains), ["a"]);
    }

    proptest! {
        /// Whatever the zones, exactly the selected zones that are not `ready: false` are
        /// published, and the cluster waits iff one of them has not reported.
        #[test]
        fn publication_matches_readiness(readies in proptest::collection::vec(prop_oneof![Just(None), Just(Some(true)), Just(Some(false))], 0..8)) {
            let c = cluster("vc", Some(LabelSelector::default()));
            let zones: Vec<_> = readies.iter().enumerate().map(|(i, r)| zone(&format!("z{i}"), "vc", *r, None, &[])).collect();
            let p = plan(&c, &zones);
            let expected: Vec<String> = readies.iter().enumerate().filter(|(_, r)| **r != Some(false)).map(|(i, _)| format!("z{i}")).collect();
            match p {
                Publication::NoZones => prop_assert!(readies.is_empty()),
                Publication::Zones { failure_domains, waiting, .. } => {
                    let got: Vec<String> = failure_domains.iter().map(|f| f.name.clone()).collect();
                    let mut want = expected.clone();
                    want.sort();
                    prop_assert_eq!(got, want, "published, sorted by name");
                    prop_assert_eq!(!waiting.is_empty(), readies.contains(&None));
                }
                Publication::Disabled => prop_assert!(false),
            }
        }
    }
}
