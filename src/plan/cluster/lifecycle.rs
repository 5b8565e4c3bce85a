//! The VSphereCluster as a Cluster API InfraCluster (reference capi-infra-contract.md §1 and §5),
//! pure: who owns it, whether it is paused, when it holds a finalizer, and what its status says
//! (`initialization.provisioned`, `vCenterVersion`, `Ready`/`VCenterAvailable`/`Paused`
//! conditions in both styles). The controller gathers the facts and writes the result.
//!
//! Upstream order kept (CAPV v1.15.0 `controllers/vspherecluster_reconciler.go`): pause first
//! (only the `Paused` condition is written), then deletion (waits for the cluster's machines),
//! then the owner, the failure domains (wait while a zone has not reported), the identity and a
//! vCenter session, and `status.initialization.provisioned = true` (v1beta1's `status.ready`),
//! never reset after.
//!
//! Deliberate differences: without an owner Cluster the failure domains are still published (the
//! VSphereCluster also serves OpenShift, where no Cluster API `Cluster` exists), no finalizer is
//! added (nothing would wait on it), and the wait is a `Ready` condition (`WaitingForClusterOwner`)
//! rather than a log line; deletion counts Cluster API `Machine`s as well as VSphereMachines.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::api::capi_core::PAUSED_ANNOTATION;
use crate::api::conditions::{
    self, CapiCondition, ConditionUpdate, MetaCondition, cluster, severity,
};
use crate::api::infrastructure::v1beta2::common::Initialization;
use crate::api::vsphere_cluster::{CLUSTER_FINALIZER, VSphereCluster, VSphereClusterStatus};

/// The Cluster API core group.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";

/// The Cluster (cluster.x-k8s.io) this VSphereCluster's ownerReferences name:
/// `(apiVersion, name)`. Any version of the group counts.
pub fn owner_cluster_ref(c: &VSphereCluster) -> Option<(String, String)> {
    c.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "Cluster" && o.api_version.split('/').next() == Some(CAPI_GROUP))
        .map(|o| (o.api_version.clone(), o.name.clone()))
}

/// The owner Cluster as the controller found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// No ownerReference to a Cluster (CAPI has not adopted the VSphereCluster yet, or there is
    /// no Cluster API here).
    None,
    /// An ownerReference names `name`, which does not exist (yet, or any more).
    Missing { name: String },
    /// The owner Cluster: its name and whether `spec.paused` is true or it carries the paused
    /// annotation (which of them, for the message).
    Found {
        name: String,
        paused: Option<String>,
    },
}

impl Owner {
    /// The owner's name, if an ownerReference names one.
    pub fn name(&self) -> Option<&str> {
        match self {
            Owner::None => None,
            Owner::Missing { name } | Owner::Found { name, .. } => Some(name),
        }
    }
}

/// Why a Cluster object (its spec and metadata as JSON, any version) is paused, if it is.
pub fn cluster_paused(cluster: &serde_json::Value) -> Option<String> {
    let name = cluster["metadata"]["name"].as_str().unwrap_or_default();
    if cluster["spec"]["paused"].as_bool() == Some(true) {
        return Some(format!("Cluster {name} has spec.paused: true"));
    }
    cluster["metadata"]["annotations"]
        .get(PAUSED_ANNOTATION)
        .map(|_| format!("Cluster {name} has the annotation {PAUSED_ANNOTATION}"))
}

/// Why this VSphereCluster is paused (its own annotation, then its owner's), if it is.
pub fn paused(meta: &ObjectMeta, owner: &Owner) -> Option<String> {
    if meta
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PAUSED_ANNOTATION))
    {
        return Some(format!(
            "VSphereCluster has the annotation {PAUSED_ANNOTATION}"
        ));
    }
    match owner {
        Owner::Found { paused, .. } => paused.clone(),
        _ => None,
    }
}

/// Whether the finalizer must be added now: owned by a Cluster, not deleting, not paused, and
/// not there yet.
pub fn needs_finalizer(c: &VSphereCluster, owner: &Owner, paused: bool) -> bool {
    !paused
        && c.metadata.deletion_timestamp.is_none()
        && matches!(owner, Owner::Found { .. })
        && !has_finalizer(c)
}

/// Whether the VSphereCluster carries our finalizer.
pub fn has_finalizer(c: &VSphereCluster) -> bool {
    c.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == CLUSTER_FINALIZER)
}

/// Where the VSphereCluster stands this reconcile, in upstream's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Paused (the reason): only the `Paused` condition is written.
    Paused(String),
    /// Being deleted; `remaining` names the machines of its Cluster still there (`Kind name`).
    /// Empty: the finalizer goes.
    Deleting {
        cluster: Option<String>,
        remaining: Vec<String>,
    },
    /// Not owned by an existing Cluster.
    WaitingForOwner(Owner),
    /// Owned; some selected zone has not reported (the publication says which).
    WaitingForFailureDomains(String),
    /// Owned, failure domains settled: the identity and a vCenter session were tried.
    /// `Ok(version)` (the vCenter `about.version`, possibly empty) or why not (no secret in it).
    Connected(Result<String, String>),
}

/// The last vCenter session check of a cluster by this process: when, and at which generation
/// of the VSphereCluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastCheck {
    pub at: std::time::Instant,
    pub generation: Option<i64>,
}

/// The result of the last check to reuse instead of asking vCenter again, or `None` when vCenter
/// must be asked: never asked by this process, the spec changed since (another server or
/// identity), the last answer was a failure (retried at every pass), or the safety-net resync
/// is due. Owned clusters pass every 30 s to notice a pause of their Cluster, which is not
/// watched; asking vCenter each time was a read per cluster per 30 s at rest.
pub fn reuse_vcenter_check(
    status: &VSphereClusterStatus,
    generation: Option<i64>,
    last: Option<LastCheck>,
    now: std::time::Instant,
    resync: std::time::Duration,
) -> Option<Stage> {
    let last = last?;
    let fresh = last.generation == generation && now.duration_since(last.at) < resync;
    let available = status
        .conditions
        .as_deref()
        .is_some_and(|c| crate::api::conditions::is_meta_true(c, cluster::VCENTER_AVAILABLE));
    (fresh && available)
        .then(|| Stage::Connected(Ok(status.vcenter_version.clone().unwrap_or_default())))
}

/// The stage of a cluster that is not being deleted, as far as it can be told without vCenter:
/// paused, waiting for its owner, or for its zones; `None` when it is owned, running and its
/// failure domains are settled, so its identity and a vCenter session come next
/// ([`Stage::Connected`]).
pub fn stage_before_vcenter(
    meta: &ObjectMeta,
    owner: &Owner,
    publication: &super::Publication,
) -> Option<Stage> {
    if let Some(why) = paused(meta, owner) {
        return Some(Stage::Paused(why));
    }
    match (owner, publication.waiting_message()) {
        (Owner::None | Owner::Missing { .. }, _) => Some(Stage::WaitingForOwner(owner.clone())),
        (Owner::Found { .. }, Some(msg)) => Some(Stage::WaitingForFailureDomains(msg)),
        (Owner::Found { .. }, None) => None,
    }
}

/// Write `stage` into the status. Returns whether anything changed.
/// `initialization.provisioned` only ever goes from unset to true.
pub fn apply(
    status: &mut VSphereClusterStatus,
    stage: &Stage,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    super::edit_status(status, |status, capi, meta| {
        apply_stage(status, capi, meta, stage, generation, now)
    })
}

fn apply_stage(
    status: &mut VSphereClusterStatus,
    capi: &mut Vec<CapiCondition>,
    meta: &mut Vec<MetaCondition>,
    stage: &Stage,
    generation: Option<i64>,
    now: &Time,
) {
    let mut conds = Conds {
        capi,
        meta,
        generation,
        now,
    };
    match stage {
        Stage::Paused(why) => {
            conds.meta_only(&ConditionUpdate::true_reason(
                cluster::PAUSED,
                cluster::PAUSED_REASON,
                why,
            ));
        }
        other => {
            conds.meta_only(&ConditionUpdate {
                type_: cluster::PAUSED,
                status: conditions::STATUS_FALSE,
                reason: cluster::NOT_PAUSED_REASON,
                message: "",
                severity: "",
            });
            match other {
                Stage::Paused(_) => {}
                Stage::Deleting {
                    cluster: c,
                    remaining,
                } => {
                    let msg = deleting_message(c.as_deref(), remaining);
                    conds.set(
                        ConditionUpdate::false_(
                            cluster::READY,
                            cluster::DELETING,
                            severity::INFO,
                            &msg,
                        ),
                        ConditionUpdate::false_(cluster::READY, cluster::DELETING_REASON, "", &msg),
                    );
                }
                Stage::WaitingForOwner(owner) => {
                    let msg = match owner {
                        Owner::Missing { name } => format!(
                            "the owner Cluster {name} (cluster.x-k8s.io) does not exist; failure domains are published, provisioning waits for it"
                        ),
                        _ => "waiting for a Cluster (cluster.x-k8s.io) to own this VSphereCluster; failure domains are published, provisioning waits for the owner".to_string(),
                    };
                    conds.set(
                        ConditionUpdate::false_(
                            cluster::READY,
                            cluster::WAITING_FOR_CLUSTER_OWNER,
                            severity::INFO,
                            &msg,
                        ),
                        ConditionUpdate::false_(
                            cluster::READY,
                            cluster::WAITING_FOR_CLUSTER_OWNER,
                            "",
                            &msg,
                        ),
                    );
                }
                Stage::WaitingForFailureDomains(msg) => conds.set(
                    ConditionUpdate::false_(
                        cluster::READY,
                        cluster::WAITING_FOR_FAILURE_DOMAIN_STATUS,
                        severity::INFO,
                        msg,
                    ),
                    ConditionUpdate::false_(cluster::READY, cluster::NOT_READY_REASON, "", msg),
                ),
                Stage::Connected(Err(why)) => {
                    conds.set(
                        ConditionUpdate::false_(
                            cluster::VCENTER_AVAILABLE,
                            cluster::VCENTER_UNREACHABLE,
                            severity::ERROR,
                            why,
                        ),
                        ConditionUpdate::false_(
                            cluster::VCENTER_AVAILABLE,
                            cluster::VCENTER_UNREACHABLE,
                            "",
                            why,
                        ),
                    );
                    // v1beta1 Ready summarizes VCenterAvailable, as CAPV's SetSummary does.
                    conds.set(
                        ConditionUpdate::false_(
                            cluster::READY,
                            cluster::VCENTER_UNREACHABLE,
                            severity::ERROR,
                            why,
                        ),
                        ConditionUpdate::false_(cluster::READY, cluster::NOT_READY_REASON, "", why),
                    );
                }
                Stage::Connected(Ok(version)) => {
                    conds.set(
                        ConditionUpdate::true_(cluster::VCENTER_AVAILABLE),
                        ConditionUpdate::true_reason(
                            cluster::VCENTER_AVAILABLE,
                            cluster::VCENTER_AVAILABLE_REASON,
                            "",
                        ),
                    );
                    // v1beta1 Ready summarizes VCenterAvailable only; v1beta2 Ready also
                    // FailureDomainsReady (CAPV's summaries), so skipped zones hold it False
                    // while the cluster is ready.
                    let skipped = conditions::find_meta(conds.meta, cluster::FAILURE_DOMAINS_READY)
                        .filter(|c| c.status == conditions::STATUS_FALSE)
                        .map(|c| c.message.clone());
                    conditions::set_capi_condition(
                        conds.capi,
                        &ConditionUpdate::true_(cluster::READY),
                        now,
                    );
                    conds.meta_only(&match &skipped {
                        Some(msg) => ConditionUpdate::false_(
                            cluster::READY,
                            cluster::NOT_READY_REASON,
                            "",
                            msg,
                        ),
                        None => {
                            ConditionUpdate::true_reason(cluster::READY, cluster::READY_REASON, "")
                        }
                    });
                    status.initialization = Some(Initialization {
                        provisioned: Some(true),
                    });
                    if !version.is_empty() {
                        status.vcenter_version = Some(version.clone());
                    }
                }
            }
        }
    }
}

/// Both condition lists of a status, with the generation and time to stamp.
struct Conds<'a> {
    capi: &'a mut Vec<CapiCondition>,
    meta: &'a mut Vec<MetaCondition>,
    generation: Option<i64>,
    now: &'a Time,
}

impl Conds<'_> {
    /// The same fact in both styles.
    fn set(&mut self, capi: ConditionUpdate<'_>, meta: ConditionUpdate<'_>) {
        conditions::set_capi_condition(self.capi, &capi, self.now);
        self.meta_only(&meta);
    }

    /// A v1beta2-only condition (`Paused`).
    fn meta_only(&mut self, meta: &ConditionUpdate<'_>) {
        conditions::set_meta_condition(self.meta, meta, self.generation, self.now);
    }
}

/// "waiting for 2 machines of Cluster c1 to be deleted: Machine m1, VSphereMachine m1" (at most
/// five names).
pub fn deleting_message(cluster: Option<&str>, remaining: &[String]) -> String {
    if remaining.is_empty() {
        return "no machines remain; removing the finalizer".into();
    }
    let of = cluster
        .map(|c| format!(" of Cluster {c}"))
        .unwrap_or_default();
    let mut names: Vec<&str> = remaining.iter().take(5).map(String::as_str).collect();
    if remaining.len() > 5 {
        names.push("…");
    }
    format!(
        "waiting for {} machine{}{of} to be deleted: {}",
        remaining.len(),
        if remaining.len() == 1 { "" } else { "s" },
        names.join(", ")
    )
}

#[cfg(test)]
mod reuse_tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn available(version: &str) -> VSphereClusterStatus {
        let mut s = VSphereClusterStatus::default();
        apply(
            &mut s,
            &Stage::Connected(Ok(version.into())),
            Some(1),
            &now_time(),
        );
        s
    }

    fn now_time() -> Time {
        Time("2026-11-27T03:00:00Z".parse().unwrap())
    }

    #[test]
    fn a_fresh_successful_check_is_reused_until_the_resync_or_a_spec_change() {
        let t0 = Instant::now();
        let resync = Duration::from_secs(300);
        let s = available("8.0.3");
        let last = Some(LastCheck {
            at: t0,
            generation: Some(1),
        });
        let later = t0 + Duration::from_secs(30);
        assert_eq!(
            reuse_vcenter_check(&s, Some(1), last, later, resync),
            Some(Stage::Connected(Ok("8.0.3".into())))
        );
        // The resync is due.
        assert_eq!(
            reuse_vcenter_check(&s, Some(1), last, t0 + resync, resync),
            None
        );
        // Another spec (server, identity).
        assert_eq!(reuse_vcenter_check(&s, Some(2), last, later, resync), None);
        // Never checked by this process.
        assert_eq!(reuse_vcenter_check(&s, Some(1), None, later, resync), None);
    }

    #[test]
    fn a_failed_check_is_never_reused() {
        let t0 = Instant::now();
        let mut s = VSphereClusterStatus::default();
        apply(
            &mut s,
            &Stage::Connected(Err("connection refused".into())),
            Some(1),
            &now_time(),
        );
        let last = Some(LastCheck {
            at: t0,
            generation: Some(1),
        });
        assert_eq!(
            reuse_vcenter_check(
                &s,
                Some(1),
                last,
                t0 + Duration::from_secs(1),
                Duration::from_secs(300)
            ),
            None
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::VSphereClusterSpec;
    use crate::api::infrastructure::v1beta2::common::DeprecatedStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use serde_json::json;

    fn now() -> Time {
        Time("2026-11-24T03:00:00Z".parse().unwrap())
    }

    fn owned_by(api_version: &str, kind: &str, name: &str) -> VSphereCluster {
        let mut c = VSphereCluster::new("vc1", VSphereClusterSpec::default());
        c.metadata.namespace = Some("ns".into());
        c.metadata.owner_references = Some(vec![OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            ..OwnerReference::default()
        }]);
        c
    }

    fn meta_cond(s: &VSphereClusterStatus, t: &str) -> Option<(String, String, String)> {
        let c = conditions::find_meta(s.conditions.as_deref()?, t)?;
        Some((c.status.clone(), c.reason.clone(), c.message.clone()))
    }

    fn capi_cond(s: &VSphereClusterStatus, t: &str) -> Option<(String, String)> {
        let c = conditions::find_capi(DeprecatedStatus::v1beta1_conditions(&s.deprecated), t)?;
        Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
    }

    #[test]
    fn the_owner_is_a_cluster_of_the_cluster_api_group_at_any_version() {
        // CAPV's "owner cluster" lookup (util.GetOwnerCluster): kind Cluster, group cluster.x-k8s.io.
        let cases = [
            ("cluster.x-k8s.io/v1beta1", "Cluster", Some("c1")),
            ("cluster.x-k8s.io/v1beta2", "Cluster", Some("c1")),
            ("cluster.x-k8s.io/v1beta1", "MachineDeployment", None),
            ("example.com/v1", "Cluster", None),
            ("cluster.x-k8s.io.evil/v1", "Cluster", None),
        ];
        for (av, kind, want) in cases {
            let c = owned_by(av, kind, "c1");
            assert_eq!(
                owner_cluster_ref(&c).map(|(_, n)| n).as_deref(),
                want,
                "{av} {kind}"
            );
        }
        let mut c = owned_by("cluster.x-k8s.io/v1beta1", "Cluster", "c1");
        c.metadata.owner_references = None;
        assert_eq!(owner_cluster_ref(&c), None);
    }

    #[test]
    fn pause_comes_from_either_object() {
        // Table after CAPI's paused.EnsurePausedCondition: Cluster.spec.paused, or the annotation
        // on the Cluster or on the infrastructure object.
        let paused_cluster = json!({"metadata": {"name": "c1"}, "spec": {"paused": true}});
        let annotated_cluster =
            json!({"metadata": {"name": "c1", "annotations": {PAUSED_ANNOTATION: ""}}, "spec": {}});
        let running = json!({"metadata": {"name": "c1"}, "spec": {"paused": false}});
        assert_eq!(
            cluster_paused(&paused_cluster).as_deref(),
            Some("Cluster c1 has spec.paused: true")
        );
        assert!(
            cluster_paused(&annotated_cluster)
                .unwrap()
                .contains(PAUSED_ANNOTATION)
        );
        assert_eq!(cluster_paused(&running), None);

        let c = owned_by("cluster.x-k8s.io/v1beta1", "Cluster", "c1");
        let found = |p: Option<String>| Owner::Found {
            name: "c1".into(),
            paused: p,
        };
        assert_eq!(paused(&c.metadata, &found(None)), None);
        assert_eq!(
            paused(&c.metadata, &found(cluster_paused(&paused_cluster))).as_deref(),
            Some("Cluster c1 has spec.paused: true")
        );
        let mut annotated = c.clone();
        annotated.metadata.annotations =
            Some([(PAUSED_ANNOTATION.to_string(), "true".to_string())].into());
        for owner in [
            Owner::None,
            Owner::Missing { name: "c1".into() },
            found(None),
        ] {
            assert_eq!(
                paused(&annotated.metadata, &owner).as_deref(),
                Some("VSphereCluster has the annotation cluster.x-k8s.io/paused"),
                "{owner:?}"
            );
        }
    }

    #[test]
    fn the_stage_before_vcenter_follows_upstreams_order() {
        use crate::plan::cluster::Publication;
        let c = owned_by("cluster.x-k8s.io/v1beta1", "Cluster", "c1");
        let found = |p: Option<&str>| Owner::Found {
            name: "c1".into(),
            paused: p.map(str::to_string),
        };
        let waiting = Publication::Zones {
            failure_domains: Default::default(),
            waiting: vec!["z1".into()],
            skipped: vec![],
        };
        // (owner, publication, expected stage; None = ask vCenter)
        let cases = [
            (
                found(Some("Cluster c1 has spec.paused: true")),
                Publication::Disabled,
                Some("Paused"),
            ),
            (
                found(Some("Cluster c1 has spec.paused: true")),
                waiting.clone(),
                Some("Paused"),
            ),
            (Owner::None, Publication::Disabled, Some("WaitingForOwner")),
            (
                Owner::Missing { name: "c1".into() },
                waiting.clone(),
                Some("WaitingForOwner"),
            ),
            (
                found(None),
                waiting.clone(),
                Some("WaitingForFailureDomains"),
            ),
            (found(None), Publication::Disabled, None),
            (found(None), Publication::NoZones, None),
        ];
        for (owner, publication, want) in cases {
            let got = stage_before_vcenter(&c.metadata, &owner, &publication)
                .map(|s| format!("{s:?}").split('(').next().unwrap().to_string());
            assert_eq!(got.as_deref(), want, "{owner:?} {publication:?}");
        }
    }

    #[test]
    fn the_finalizer_is_added_once_owned_unless_paused_or_deleting() {
        let c = owned_by("cluster.x-k8s.io/v1beta1", "Cluster", "c1");
        let found = Owner::Found {
            name: "c1".into(),
            paused: None,
        };
        assert!(needs_finalizer(&c, &found, false));
        assert!(!needs_finalizer(&c, &found, true), "paused: no writes");
        assert!(!needs_finalizer(&c, &Owner::None, false));
        assert!(!needs_finalizer(
            &c,
            &Owner::Missing { name: "c1".into() },
            false
        ));
        let mut with = c.clone();
        with.metadata.finalizers = Some(vec![CLUSTER_FINALIZER.into()]);
        assert!(!needs_finalizer(&with, &found, false));
        let mut deleting = c;
        deleting.metadata.deletion_timestamp = Some(now());
        assert!(!needs_finalizer(&deleting, &found, false));
    }

    #[test]
    fn each_stage_writes_its_conditions() {
        // (stage, v1beta2 Ready (status, reason), v1beta1 Ready (status, reason), ready)
        type Case = (
            Stage,
            (&'static str, &'static str),
            (&'static str, &'static str),
            Option<bool>,
        );
        let cases: Vec<Case> = vec![
            (
                Stage::WaitingForOwner(Owner::None),
                ("False", "WaitingForClusterOwner"),
                ("False", "WaitingForClusterOwner"),
                None,
            ),
            (
                Stage::WaitingForOwner(Owner::Missing { name: "c1".into() }),
                ("False", "WaitingForClusterOwner"),
                ("False", "WaitingForClusterOwner"),
                None,
            ),
            (
                Stage::WaitingForFailureDomains("waiting for failure domain status of z1".into()),
                ("False", "NotReady"),
                ("False", "WaitingForFailureDomainStatus"),
                None,
            ),
            (
                Stage::Connected(Err("identity Secret ns/creds not found".into())),
                ("False", "NotReady"),
                ("False", "VCenterUnreachable"),
                None,
            ),
            (
                Stage::Connected(Ok("8.0.3".into())),
                ("True", "Ready"),
                ("True", ""),
                Some(true),
            ),
            (
                Stage::Deleting {
                    cluster: Some("c1".into()),
                    remaining: vec!["Machine m1".into()],
                },
                ("False", "Deleting"),
                ("False", "Deleting"),
                None,
            ),
        ];
        for (stage, v1beta2, v1beta1, ready) in cases {
            let mut s = VSphereClusterStatus::default();
            assert!(apply(&mut s, &stage, Some(2), &now()), "{stage:?}");
            let (st, reason, _) = meta_cond(&s, "Ready").unwrap();
            assert_eq!((st.as_str(), reason.as_str()), v1beta2, "{stage:?}");
            let (st, reason) = capi_cond(&s, "Ready").unwrap();
            assert_eq!((st.as_str(), reason.as_str()), v1beta1, "{stage:?}");
            assert_eq!(
                s.initialization.as_ref().and_then(|i| i.provisioned),
                ready,
                "{stage:?}"
            );
            assert_eq!(
                meta_cond(&s, "Paused").map(|c| c.1),
                Some("NotPaused".to_string())
            );
            // Same stage again: nothing changes (no write, no hot loop).
            assert!(!apply(&mut s, &stage, Some(2), &now()), "{stage:?}");
        }
    }

    #[test]
    fn skipped_zones_hold_the_v1beta2_ready_false_but_not_status_ready() {
        // CAPV: v1beta2 Ready summarizes FailureDomainsReady too; v1beta1 Ready only vCenter.
        let mut s = VSphereClusterStatus {
            conditions: Some(vec![MetaCondition {
                type_: "FailureDomainsReady".into(),
                status: "False".into(),
                reason: "NotReady".into(),
                message: "one or more failure domains are not ready (z2)".into(),
                observed_generation: None,
                last_transition_time: now(),
            }]),
            ..VSphereClusterStatus::default()
        };
        apply(&mut s, &Stage::Connected(Ok("8.0.3".into())), None, &now());
        assert!(s.provisioned());
        assert_eq!(capi_cond(&s, "Ready").unwrap().0, "True");
        assert_eq!(
            meta_cond(&s, "Ready").unwrap(),
            (
                "False".into(),
                "NotReady".into(),
                "one or more failure domains are not ready (z2)".into()
            )
        );
    }

    #[test]
    fn ready_is_never_reset_once_set() {
        // The contract: provisioned (v1beta1: status.ready) is not set back to false.
        let mut s = VSphereClusterStatus::default();
        apply(&mut s, &Stage::Connected(Ok("8.0.3".into())), None, &now());
        apply(
            &mut s,
            &Stage::Connected(Err("vCenter vc.example.com: connection refused".into())),
            None,
            &now(),
        );
        assert_eq!(s.initialization.as_ref().unwrap().provisioned, Some(true));
        assert_eq!(s.vcenter_version.as_deref(), Some("8.0.3"));
        assert_eq!(
            capi_cond(&s, "VCenterAvailable").unwrap(),
            ("False".into(), "VCenterUnreachable".into())
        );
        let (st, _, msg) = meta_cond(&s, "Ready").unwrap();
        assert_eq!(st, "False");
        assert!(msg.contains("connection refused"), "{msg}");
    }

    #[test]
    fn paused_writes_only_the_paused_condition() {
        let mut s = VSphereClusterStatus::default();
        apply(
            &mut s,
            &Stage::Connected(Ok("8.0.3".into())),
            Some(1),
            &now(),
        );
        let before = s.clone();
        let later = Time("2026-11-24T04:00:00Z".parse().unwrap());
        assert!(apply(
            &mut s,
            &Stage::Paused("Cluster c1 has spec.paused: true".into()),
            Some(1),
            &later
        ));
        let (st, reason, msg) = meta_cond(&s, "Paused").unwrap();
        assert_eq!(
            (st.as_str(), reason.as_str(), msg.as_str()),
            ("True", "Paused", "Cluster c1 has spec.paused: true")
        );
        // Everything else is as it was.
        let strip = |s: &VSphereClusterStatus| {
            let mut s = s.clone();
            if let Some(c) = s.conditions.as_mut() {
                c.retain(|c| c.type_ != "Paused");
            }
            s
        };
        assert_eq!(strip(&s), strip(&before));
    }

    #[test]
    fn the_deleting_message_counts_and_names_the_machines() {
        assert_eq!(
            deleting_message(Some("c1"), &["Machine m1".into()]),
            "waiting for 1 machine of Cluster c1 to be deleted: Machine m1"
        );
        let many: Vec<String> = (0..7).map(|i| format!("VSphereMachine m{i}")).collect();
        let msg = deleting_message(Some("c1"), &many);
        assert!(
            msg.starts_with("waiting for 7 machines of Cluster c1"),
            "{msg}"
        );
        assert!(msg.ends_with("VSphereMachine m4, …"), "{msg}");
    }
}
