//! The VSphereCluster controller: failure-domain publication (capv-failure-domains.md §
//! publication: the zones a cluster selects, same server and label selector, become
//! `status.failureDomains`; a zone that has not reported makes the cluster wait 10 s), and the
//! Cluster API InfraCluster duties (capi-infra-contract.md §1, §5): pause, the finalizer once a
//! Cluster owns it, its identity and a vCenter session, `status.ready`, and a deletion that waits
//! for the Cluster's machines. The decisions are `plan::cluster` and `plan::cluster::lifecycle`;
//! this file reads and writes.
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{DynamicObject, ListParams};
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::api_server::dynamic_api;
use super::patch::{apply_cluster_status, is_not_found, set_finalizers};
use super::{Context, Error, NOT_SYNCED_REQUEUE, now};
use crate::api::capi_core::CLUSTER_NAME_LABEL;
use crate::api::capi_core::CORE_API_VERSION;
use crate::api::cluster_identity::VSphereClusterIdentity;
use crate::api::vsphere_cluster::{CLUSTER_FINALIZER, VSphereIdentityKind};
use crate::api::{INFRA_GROUP, VSphereCluster, VSphereClusterStatus, VSphereDeploymentZone};
use crate::plan::cluster::lifecycle::{
    self, Owner, Stage, has_finalizer, needs_finalizer, owner_cluster_ref,
};
use crate::plan::cluster::{apply, plan_cluster, secret_adoption, selects};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "vspherecluster";
/// A cluster a Cluster owns (or names as owner, or one paused) looks again this often: the Cluster API `Cluster` is
/// not watched (its CRD is absent where there is no Cluster API, e.g. OpenShift), so this is
/// how `spec.paused` changes are noticed; a failed vCenter session is retried as often.
pub const OWNED_REQUEUE: Duration = Duration::from_secs(30);
/// A deletion waiting for machines looks again this often (as CAPV: 10 s).
pub const DELETE_REQUEUE: Duration = Duration::from_secs(10);

/// Whether `cluster` publishes a zone named `zone` in `status.failureDomains`.
fn publishes(cluster: &VSphereCluster, zone: &str) -> bool {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.failure_domains.as_ref())
        .is_some_and(|f| f.iter().any(|f| f.name == zone))
}

/// The clusters a zone event (change or deletion, decodable or not) concerns: those selecting
/// the zone now, and those publishing it (a zone that stopped matching, or is gone, must be
/// unpublished).
pub fn clusters_concerned(
    clusters: &[Arc<DeserializeGuard<VSphereCluster>>],
    zone: &DeserializeGuard<VSphereDeploymentZone>,
    default: Option<&LabelSelector>,
) -> Vec<ObjectRef<DeserializeGuard<VSphereCluster>>> {
    let name = zone.meta().name.clone().unwrap_or_default();
    clusters
        .iter()
        .filter(|c| {
            c.0.as_ref().is_ok_and(|c| {
                publishes(c, &name) || zone.0.as_ref().is_ok_and(|z| selects(c, z, default))
            })
        })
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// The clusters whose identityRef names the VSphereClusterIdentity of an event. Identities are
/// looked up in their cache: one that arrives (or whose Secret or allowed namespaces change)
/// after its clusters were reconciled wakes them, rather than leaving them to their backoff.
pub fn clusters_naming_identity(
    clusters: &[Arc<DeserializeGuard<VSphereCluster>>],
    identity: &DeserializeGuard<VSphereClusterIdentity>,
) -> Vec<ObjectRef<DeserializeGuard<VSphereCluster>>> {
    let name = identity.meta().name.clone().unwrap_or_default();
    clusters
        .iter()
        .filter(|c| {
            c.0.as_ref().is_ok_and(|c| {
                c.spec.identity_ref.as_ref().is_some_and(|r| {
                    r.kind == VSphereIdentityKind::VSphereClusterIdentity && r.name == name
                })
            })
        })
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

fn key(cluster: &VSphereCluster) -> String {
    format!(
        "{CONTROLLER}/{}/{}",
        cluster.namespace().unwrap_or_default(),
        cluster.name_any()
    )
}

/// Publish the selected zones; patch the status only when it changed.
pub async fn reconcile(cluster: Arc<VSphereCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = publish(&cluster, &ctx).await;
    ctx.measure(CONTROLLER, started, &result);
    ctx.settle(&key(&cluster), &result);
    result
}

async fn publish(cluster: &VSphereCluster, ctx: &Context) -> Result<Action, Error> {
    // An unloaded zone cache is not "no zones": publishing it would unpublish everything.
    if !ctx.stores.zones.is_synced() {
        tracing::debug!(cluster = %cluster.name_any(), "zone cache not loaded; retrying soon");
        return Ok(Action::requeue(NOT_SYNCED_REQUEUE));
    }
    let owner = owner_cluster(cluster, ctx).await?;
    let mut status = cluster.status.clone().unwrap_or_default();
    // Paused: the Paused condition and nothing else (clusterctl move relies on it), deletion
    // included.
    if let Some(why) = lifecycle::paused(&cluster.metadata, &owner) {
        let stage = Stage::Paused(why.clone());
        if lifecycle::apply(&mut status, &stage, cluster.metadata.generation, &now()) {
            write_status(cluster, ctx, &status).await?;
        }
        tracing::debug!(cluster = %full_name(cluster), %why, "paused");
        return Ok(Action::requeue(OWNED_REQUEUE));
    }
    if cluster.metadata.deletion_timestamp.is_some() {
        return delete(cluster, ctx, &owner, status).await;
    }
    // Owned: the finalizer first, as CAPV (the status apply below needs no resourceVersion).
    if needs_finalizer(cluster, &owner, false) {
        let mut finalizers = cluster.finalizers().to_vec();
        finalizers.push(CLUSTER_FINALIZER.to_string());
        let rv = cluster.metadata.resource_version.as_deref();
        set_finalizers(&api_for(cluster, ctx), &cluster.name_any(), rv, &finalizers).await?;
        tracing::info!(cluster = %full_name(cluster), "finalizer added");
    }
    // Failure domains. An undecodable zone is not a deleted one: keep what is published until
    // it can be read.
    let unreadable: Vec<String> = ctx
        .stores
        .zones
        .invalid()
        .iter()
        .filter_map(|z| z.metadata.name.clone())
        .filter(|n| publishes(cluster, n))
        .collect();
    if !unreadable.is_empty() {
        return Err(Error::Unreadable(format!(
            "published VSphereDeploymentZones cannot be decoded: {}",
            unreadable.join(", ")
        )));
    }
    let zones = ctx.stores.zones.valid();
    let publication = plan_cluster(cluster, &zones, ctx.default_zone_selector.as_ref());
    let (generation, stamp) = (cluster.metadata.generation, now());
    let mut changed = apply(&mut status, &publication, generation, &stamp);
    let stage = match lifecycle::stage_before_vcenter(&cluster.metadata, &owner, &publication) {
        Some(stage) => stage,
        None => connected(cluster, &status, ctx).await,
    };
    // The identity Secret is adopted only once vCenter accepted its credentials (and only if
    // it is nothing but this cluster's identity): a Secret a tenant names that never worked, or
    // that serves something else, is never deleted with the cluster.
    if matches!(stage, Stage::Connected(Ok(_))) {
        let refused = super::identity_secret::reconcile(cluster, ctx, false).await?;
        changed |= secret_adoption::apply(&mut status, refused.as_deref(), generation, &stamp);
    }
    changed |= lifecycle::apply(&mut status, &stage, generation, &stamp);
    if changed {
        write_status(cluster, ctx, &status).await?;
        tracing::info!(cluster = %full_name(cluster), provisioned = status.provisioned(), "status updated");
    }
    let mut next = publication
        .requeue()
        .unwrap_or(ctx.polling.infrastructure_resync);
    if owner != Owner::None {
        next = next.min(OWNED_REQUEUE);
    }
    Ok(Action::requeue(next))
}

/// Deletion: wait (saying so) while machines of the owner Cluster remain, then release the
/// finalizer. Nothing in vCenter belongs to the VSphereCluster itself.
async fn delete(
    cluster: &VSphereCluster,
    ctx: &Context,
    owner: &Owner,
    mut status: VSphereClusterStatus,
) -> Result<Action, Error> {
    if !has_finalizer(cluster) {
        return Ok(Action::await_change());
    }
    let remaining = match owner.name() {
        Some(owner_name) => machines_of(ctx, owner_name, cluster).await?,
        None => Vec::new(),
    };
    if !remaining.is_empty() {
        let stage = Stage::Deleting {
            cluster: owner.name().map(str::to_string),
            remaining: remaining.clone(),
        };
        if lifecycle::apply(&mut status, &stage, cluster.metadata.generation, &now()) {
            write_status(cluster, ctx, &status).await?;
        }
        tracing::info!(cluster = %full_name(cluster), "{}", lifecycle::deleting_message(owner.name(), &remaining));
        return Ok(Action::requeue(DELETE_REQUEUE));
    }
    // Nothing needs the credentials any more: the identity Secret may go with the cluster.
    super::identity_secret::reconcile(cluster, ctx, true).await?;
    let rest: Vec<String> = cluster
        .finalizers()
        .iter()
        .filter(|f| *f != CLUSTER_FINALIZER)
        .cloned()
        .collect();
    let rv = cluster.metadata.resource_version.as_deref();
    set_finalizers(&api_for(cluster, ctx), &cluster.name_any(), rv, &rest).await?;
    tracing::info!(cluster = %full_name(cluster), "no machines remain; finalizer removed");
    Ok(Action::await_change())
}

fn api_for(cluster: &VSphereCluster, ctx: &Context) -> Api<VSphereCluster> {
    Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default())
}

fn full_name(cluster: &VSphereCluster) -> String {
    format!(
        "{}/{}",
        cluster.namespace().unwrap_or_default(),
        cluster.name_any()
    )
}

async fn write_status(
    cluster: &VSphereCluster,
    ctx: &Context,
    status: &VSphereClusterStatus,
) -> Result<(), Error> {
    let before = cluster.status.as_ref();
    apply_cluster_status(&api_for(cluster, ctx), &cluster.name_any(), before, status).await?;
    Ok(())
}

/// The owner Cluster: none referenced, referenced but absent, or found (with why it is
/// paused). From the Cluster cache (read at v1beta2, which every supported Cluster API serves,
/// whatever version the owner reference names); a Cluster API that is not installed reads as
/// absent.
async fn owner_cluster(cluster: &VSphereCluster, ctx: &Context) -> Result<Owner, Error> {
    let Some((_, name)) = owner_cluster_ref(cluster) else {
        return Ok(Owner::None);
    };
    let ns = cluster.namespace().unwrap_or_default();
    match super::pause::capi_cluster(ctx, &ns, &name).await? {
        Some(c) => {
            let value = serde_json::to_value(&c).unwrap_or_default();
            Ok(Owner::Found {
                name,
                paused: lifecycle::cluster_paused(&value),
            })
        }
        None => Ok(Owner::Missing { name }),
    }
}

/// The machines of Cluster `owner` still in `ns` (label `cluster.x-k8s.io/cluster-name`):
/// VSphereMachines and Cluster API Machines, as `Kind name`. A kind not installed has none.
async fn machines_of(
    ctx: &Context,
    owner: &str,
    cluster: &VSphereCluster,
) -> Result<Vec<String>, Error> {
    let ns = cluster.namespace().unwrap_or_default();
    let kinds = [
        (format!("{INFRA_GROUP}/v1beta1"), "VSphereMachine"),
        (CORE_API_VERSION.to_string(), "Machine"),
    ];
    let params = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={owner}"));
    let mut out = Vec::new();
    for (api_version, kind) in kinds {
        let api: Api<DynamicObject> = dynamic_api(&ctx.client, &ns, &api_version, kind);
        match api.list(&params).await {
            Ok(list) => out.extend(
                list.items
                    .iter()
                    .map(|o| format!("{kind} {}", o.name_any())),
            ),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// The cluster's own credentials and a working vCenter session: `Ok(version)` or why not
/// (naming the identity or Secret at fault, never a secret value).
/// The cluster's vCenter session: the last successful check while it is fresh
/// (`lifecycle::reuse_vcenter_check` decides), else a new one, remembered.
async fn connected(
    cluster: &VSphereCluster,
    status: &VSphereClusterStatus,
    ctx: &Context,
) -> Stage {
    let uid = cluster.metadata.uid.clone().unwrap_or_default();
    let generation = cluster.metadata.generation;
    let last = ctx
        .vcenter_checks
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&uid)
        .copied();
    let now = Instant::now();
    if let Some(stage) = lifecycle::reuse_vcenter_check(
        status,
        generation,
        last,
        now,
        ctx.polling.infrastructure_resync,
    ) {
        return stage;
    }
    let result = check_vcenter(cluster, ctx).await;
    let mut checks = ctx.vcenter_checks.lock().unwrap_or_else(|e| e.into_inner());
    match &result {
        Ok(_) => checks.insert(
            uid,
            lifecycle::LastCheck {
                at: now,
                generation,
            },
        ),
        Err(_) => checks.remove(&uid),
    };
    Stage::Connected(result)
}

async fn check_vcenter(cluster: &VSphereCluster, ctx: &Context) -> Result<String, String> {
    let client = ctx
        .cluster_vcenter_client(cluster)
        .await
        .map_err(|f| f.to_string())?;
    client.login().await.map_err(|e| e.to_string())?;
    client.current_time().await.map_err(|e| e.to_string())?;
    let content = client.service_content().await.map_err(|e| e.to_string())?;
    Ok(content.about.version.clone())
}

/// Kubernetes errors back off per cluster.
pub fn error_policy(cluster: Arc<VSphereCluster>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.next(&key(&cluster));
    tracing::warn!(
        cluster = %cluster.name_any(),
        category = error.category(),
        retry_in = ?delay,
        "{error}"
    );
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vsphere_cluster::{FailureDomain, VSphereClusterStatus};
    use crate::api::{VSphereClusterSpec, VSphereDeploymentZoneSpec};

    fn cluster(
        name: &str,
        server: &str,
        selector: Option<LabelSelector>,
        published: &[&str],
    ) -> Arc<DeserializeGuard<VSphereCluster>> {
        let mut c = VSphereCluster::new(
            name,
            VSphereClusterSpec {
                server: server.into(),
                failure_domain_selector: selector,
                ..VSphereClusterSpec::default()
            },
        );
        c.metadata.namespace = Some("ns".into());
        if !published.is_empty() {
            c.status = Some(VSphereClusterStatus {
                failure_domains: Some(
                    published
                        .iter()
                        .map(|z| FailureDomain {
                            name: z.to_string(),
                            ..FailureDomain::default()
                        })
                        .collect(),
                ),
                ..VSphereClusterStatus::default()
            });
        }
        Arc::new(DeserializeGuard(Ok(c)))
    }

    fn names(refs: Vec<ObjectRef<DeserializeGuard<VSphereCluster>>>) -> Vec<String> {
        let mut n: Vec<String> = refs.into_iter().map(|r| r.name).collect();
        n.sort();
        n
    }

    #[test]
    fn a_zone_wakes_the_clusters_on_its_server_that_select_it() {
        let clusters = [
            cluster("all", "vc.example.com", Some(LabelSelector::default()), &[]),
            cluster(
                "other-server",
                "vc2.example.com",
                Some(LabelSelector::default()),
                &[],
            ),
            cluster("disabled", "vc.example.com", None, &[]),
        ];
        let zone = DeserializeGuard(Ok(VSphereDeploymentZone::new(
            "z1",
            VSphereDeploymentZoneSpec {
                server: Some("https://vc.example.com/sdk".into()),
                ..VSphereDeploymentZoneSpec::default()
            },
        )));
        let refs = clusters_concerned(&clusters, &zone, None);
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].name, "all");
        assert_eq!(refs[0].namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn a_zone_also_wakes_the_clusters_publishing_it_even_unselected_or_undecodable() {
        let clusters = [
            // Published it, but the zone moved to another server.
            cluster(
                "was-selecting",
                "vc.example.com",
                Some(LabelSelector::default()),
                &["z1"],
            ),
            cluster(
                "publishes-others",
                "vc.example.com",
                Some(LabelSelector::default()),
                &["z2"],
            ),
        ];
        let moved = DeserializeGuard(Ok(VSphereDeploymentZone::new(
            "z1",
            VSphereDeploymentZoneSpec {
                server: Some("vc-elsewhere.example.com".into()),
                ..VSphereDeploymentZoneSpec::default()
            },
        )));
        assert_eq!(
            names(clusters_concerned(&clusters, &moved, None)),
            ["was-selecting"]
        );
        let undecodable: DeserializeGuard<VSphereDeploymentZone> =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "VSphereDeploymentZone",
                "metadata": {"name": "z2"},
                "spec": {"server": 1}
            }))
            .unwrap();
        assert!(undecodable.0.is_err());
        assert_eq!(
            names(clusters_concerned(&clusters, &undecodable, None)),
            ["publishes-others"]
        );
    }

    #[test]
    fn an_identity_wakes_the_clusters_naming_it() {
        use crate::api::cluster_identity::VSphereClusterIdentitySpec;
        use crate::api::infrastructure::v1beta2::common::VSphereIdentityReference;

        let with_ref = |name: &str, kind: VSphereIdentityKind, ref_name: &str| {
            let c = cluster(name, "vc", None, &[]);
            let mut c = c.0.clone().unwrap();
            c.spec.identity_ref = Some(VSphereIdentityReference {
                kind,
                name: ref_name.into(),
            });
            Arc::new(DeserializeGuard(Ok(c)))
        };
        let clusters = [
            with_ref("a", VSphereIdentityKind::VSphereClusterIdentity, "tenant"),
            with_ref("b", VSphereIdentityKind::VSphereClusterIdentity, "other"),
            // A Secret of the same name is not the identity.
            with_ref("c", VSphereIdentityKind::Secret, "tenant"),
            cluster("d", "vc", None, &[]),
        ];
        let identity = DeserializeGuard(Ok(VSphereClusterIdentity::new(
            "tenant",
            VSphereClusterIdentitySpec::default(),
        )));
        assert_eq!(names(clusters_naming_identity(&clusters, &identity)), ["a"]);
    }
}
