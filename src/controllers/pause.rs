//! The I/O of Cluster API's pause for machines (`plan::capi_machine::pause` decides): the
//! Cluster an object belongs to, read at most once per pass.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::api_server::dynamic_api;
use super::{Context, Error};
use crate::api::capi_core::CORE_API_VERSION;
use crate::plan::capi_machine::pause;
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
        let api = dynamic_api(&ctx.client, &ns, CORE_API_VERSION, "Cluster");
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
