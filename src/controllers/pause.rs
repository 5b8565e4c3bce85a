//! The I/O of Cluster API's pause for machines (`plan::capi_machine::pause` decides): the
//! Cluster an object belongs to, read at most once per pass.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::api_server::dynamic_api;
use super::{Context, Error};
use crate::plan::capi_machine::pause;
use crate::plan::cluster::lifecycle::owner_cluster_ref;
use crate::reconcile::kube_ops::KubeError;
use std::collections::BTreeMap;

/// The Clusters a pass has read, by `(namespace, name)` (`None`: not there).
pub type ClusterReads = BTreeMap<(String, String), Option<serde_json::Value>>;

/// Why the `kind` object with `meta` is paused, if it is. Its Cluster is read at the version
/// its VSphereCluster's owner reference names (the one its Cluster API serves), else at
/// v1beta1, which every current Cluster API serves.
pub async fn paused(
    ctx: &Context,
    kind: &str,
    meta: &ObjectMeta,
    reads: &mut ClusterReads,
) -> Result<Option<String>, Error> {
    let Some(name) = pause::cluster_name(meta) else {
        return Ok(pause::paused(kind, meta, None));
    };
    let ns = meta.namespace.clone().unwrap_or_default();
    let read_key = (ns.clone(), name.to_string());
    if !reads.contains_key(&read_key) {
        let api_version = ctx
            .stores
            .clusters
            .valid()
            .iter()
            .filter(|c| c.metadata.namespace.as_deref() == Some(ns.as_str()))
            .filter_map(owner_cluster_ref)
            .find(|(_, owner)| owner == name)
            .map(|(v, _)| v)
            .unwrap_or_else(|| "cluster.x-k8s.io/v1beta1".into());
        let api = dynamic_api(&ctx.client, &ns, &api_version, "Cluster");
        let cluster = match api.get_opt(name).await {
            Ok(c) => c.map(|c| serde_json::to_value(c).unwrap_or_default()),
            Err(e) => {
                return Err(KubeError::from_client(format!("get Cluster {ns}/{name}"), &e).into());
            }
        };
        reads.insert(read_key.clone(), cluster);
    }
    Ok(pause::paused(kind, meta, reads[&read_key].as_ref()))
}
