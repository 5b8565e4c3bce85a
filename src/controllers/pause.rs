//! The I/O of Cluster API's pause for machines (`plan::capi_machine::pause` decides): the
//! Cluster an object belongs to, from the Cluster cache, read at most once per pass.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::api_server::{dynamic_api, typed};
use super::{Context, Error};
use crate::api::capi_core::{CORE_API_VERSION, CapiCluster};
use crate::plan::capi_machine::pause;
use crate::reconcile::kube_ops::KubeError;
use std::collections::BTreeMap;

/// The Clusters a pass has read, by `(namespace, name)` (`None`: not there).
pub type ClusterReads = BTreeMap<(String, String), Option<serde_json::Value>>;

/// Why the `kind` object with `meta` is paused, if it is.
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
        let cluster = capi_cluster(ctx, &ns, name)
            .await?
            .map(|c| serde_json::to_value(c).unwrap_or_default());
        reads.insert(read_key.clone(), cluster);
    }
    Ok(pause::paused(kind, meta, reads[&read_key].as_ref()))
}

/// The Cluster `ns/name`, from the cache. While the cache says Cluster API is not served, it
/// is read directly instead: Cluster API installed under a running manager is watched only
/// from the next look ([`super::watch::ABSENT_RECHECK`]), and a Cluster paused meanwhile (a
/// `clusterctl move` into a fresh management cluster) must still pause its machines.
pub async fn capi_cluster(
    ctx: &Context,
    ns: &str,
    name: &str,
) -> Result<Option<CapiCluster>, Error> {
    if name.is_empty() {
        return Ok(None);
    }
    let cache = &ctx.stores.capi_clusters;
    if cache.is_served() {
        return match cache.get(Some(ns), name) {
            None => Ok(None),
            Some(Ok(c)) => Ok(Some(c)),
            Some(Err(why)) => Err(Error::InvalidObject(format!("Cluster {ns}/{name}: {why}"))),
        };
    }
    let api = dynamic_api(&ctx.client, ns, CORE_API_VERSION, "Cluster");
    match api.get_opt(name).await {
        Ok(Some(c)) => typed(c, "Cluster", ns).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(KubeError::from_client(format!("get Cluster {ns}/{name}"), &e).into()),
    }
}
