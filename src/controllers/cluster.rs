//! The VSphereCluster controller, limited to failure-domain publication (reference §4): the
//! zones a cluster selects (same server, label selector) become `status.failureDomains`; a zone
//! that has not reported makes the cluster wait 10 s. Any other VSphereCluster duty is not
//! this provider's.
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::patch::apply_cluster_publication;
use super::{Context, Error, NOT_SYNCED_REQUEUE, now};
use crate::api::{VSphereCluster, VSphereDeploymentZone};
use crate::plan::cluster::{apply, plan_cluster, selects};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "vspherecluster";
/// Settled clusters are re-published this often, in case a zone vanished while the watch was
/// down (a relist does not announce deletions).
pub const RESYNC: Duration = Duration::from_secs(300);

/// Whether `cluster` publishes a zone named `zone` in `status.failureDomains`.
fn publishes(cluster: &VSphereCluster, zone: &str) -> bool {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.failure_domains.as_ref())
        .is_some_and(|f| f.contains_key(zone))
}

/// The clusters a zone event (change or deletion, decodable or not) concerns: those selecting
/// the zone now, and those publishing it (a zone that stopped matching, or is gone, must be
/// unpublished).
pub fn clusters_concerned(
    clusters: &[Arc<DeserializeGuard<VSphereCluster>>],
    zone: &DeserializeGuard<VSphereDeploymentZone>,
) -> Vec<ObjectRef<DeserializeGuard<VSphereCluster>>> {
    let name = zone.meta().name.clone().unwrap_or_default();
    clusters
        .iter()
        .filter(|c| {
            c.0.as_ref()
                .is_ok_and(|c| publishes(c, &name) || zone.0.as_ref().is_ok_and(|z| selects(c, z)))
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
    // Nor is an undecodable zone a deleted one: keep what is published until it can be read.
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
    let publication = plan_cluster(cluster, &zones);
    let mut status = cluster.status.clone().unwrap_or_default();
    if apply(
        &mut status,
        &publication,
        cluster.metadata.generation,
        &now(),
    ) {
        let ns = cluster.namespace().unwrap_or_default();
        let api: Api<VSphereCluster> = Api::namespaced(ctx.client.clone(), &ns);
        apply_cluster_publication(&api, &cluster.name_any(), &status).await?;
        tracing::info!(cluster = %format!("{ns}/{}", cluster.name_any()), "failure domains published");
    }
    Ok(Action::requeue(publication.requeue().unwrap_or(RESYNC)))
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
    use crate::api::vsphere_cluster::{FailureDomainSpec, VSphereClusterStatus};
    use crate::api::{VSphereClusterSpec, VSphereDeploymentZoneSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn cluster(
        name: &str,
        server: &str,
        selector: Option<LabelSelector>,
        published: &[&str],
    ) -> Arc<DeserializeGuard<VSphereCluster>> {
        let mut c = VSphereCluster::new(
            name,
            VSphereClusterSpec {
                server: Some(server.into()),
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
                        .map(|z| (z.to_string(), FailureDomainSpec::default()))
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
        let refs = clusters_concerned(&clusters, &zone);
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
            names(clusters_concerned(&clusters, &moved)),
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
            names(clusters_concerned(&clusters, &undecodable)),
            ["publishes-others"]
        );
    }
}
