//! The VSphereCluster controller, limited to failure-domain publication (reference §4): the
//! zones a cluster selects (same server, label selector) become `status.failureDomains`; a zone
//! that has not reported makes the cluster wait 10 s. Any other VSphereCluster duty is not
//! this provider's.
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::patch::apply_status;
use super::{Context, Error, now};
use crate::api::{VSphereCluster, VSphereDeploymentZone};
use crate::plan::cluster::{apply, plan_cluster, selects};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "vspherecluster";
/// Settled clusters are re-published this often, in case a zone vanished without the
/// finalizer (zone deletions are otherwise seen through the deletion timestamp).
pub const RESYNC: Duration = Duration::from_secs(300);

/// The clusters a zone change concerns: every cluster selecting it.
pub fn clusters_selecting(
    clusters: &[Arc<VSphereCluster>],
    zone: &VSphereDeploymentZone,
) -> Vec<ObjectRef<VSphereCluster>> {
    clusters
        .iter()
        .filter(|c| selects(c, zone))
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
    ctx.record(CONTROLLER, &key(&cluster), started, &result);
    result
}

async fn publish(cluster: &VSphereCluster, ctx: &Context) -> Result<Action, Error> {
    let zones: Vec<VSphereDeploymentZone> = ctx
        .stores
        .zones
        .state()
        .iter()
        .map(|z| (**z).clone())
        .collect();
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
        apply_status(&api, &cluster.name_any(), &status).await?;
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
    use crate::api::{VSphereClusterSpec, VSphereDeploymentZoneSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    #[test]
    fn a_zone_wakes_the_clusters_on_its_server_that_select_it() {
        let cluster = |name: &str, server: &str, selector: Option<LabelSelector>| {
            let mut c = VSphereCluster::new(
                name,
                VSphereClusterSpec {
                    server: Some(server.into()),
                    failure_domain_selector: selector,
                    ..VSphereClusterSpec::default()
                },
            );
            c.metadata.namespace = Some("ns".into());
            Arc::new(c)
        };
        let clusters = [
            cluster("all", "vc.example.com", Some(LabelSelector::default())),
            cluster(
                "other-server",
                "vc2.example.com",
                Some(LabelSelector::default()),
            ),
            cluster("disabled", "vc.example.com", None),
        ];
        let zone = VSphereDeploymentZone::new(
            "z1",
            VSphereDeploymentZoneSpec {
                server: Some("https://vc.example.com/sdk".into()),
                ..VSphereDeploymentZoneSpec::default()
            },
        );
        let refs = clusters_selecting(&clusters, &zone);
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].name, "all");
        assert_eq!(refs[0].namespace.as_deref(), Some("ns"));
    }
}
