//! The I/O of a VSphereCluster's identity Secret ownership (`plan::cluster::identity_secret`
//! decides): read the Secret named by `identityRef: {kind: Secret}`, patch its owner references
//! and finalizers when the plan says so (compare-and-swap on its resourceVersion). The Secret
//! is the one the vCenter credentials were read from (`controllers::secrets`, remembered for a
//! while): once the cluster owns it, a reconcile reads nothing more. A stale copy costs at most
//! a refused patch (the resourceVersion moved), after which it is read again.
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::patch::is_not_found;
use super::{Context, Error};
use crate::api::VSphereCluster;
use crate::api::vsphere_cluster::VSphereIdentityKind;
use crate::plan::cluster::identity_secret::{Edit, Owner, OwnerKind, plan};

/// Makes the cluster's identity Secret its own, or (`released`) lets it go. A cluster without
/// a Secret identity, or whose Secret is missing (the vCenter check says so), has nothing to do.
pub async fn reconcile(
    cluster: &VSphereCluster,
    ctx: &Context,
    released: bool,
) -> Result<(), Error> {
    let Some(r) = cluster
        .spec
        .identity_ref
        .as_ref()
        .filter(|r| r.kind == VSphereIdentityKind::Secret)
    else {
        return Ok(());
    };
    let ns = cluster.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let max_age = ctx.polling.credentials_reread;
    let secret = match ctx.secrets.get(&ctx.client, &ns, &r.name, max_age).await {
        Ok(Some((s, _))) => s,
        Ok(None) => return Ok(()),
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let api_version = VSphereCluster::api_version(&());
    let owner = Owner {
        kind: OwnerKind::VSphereCluster,
        api_version: &api_version,
        name: &cluster.name_any(),
        uid: cluster.metadata.uid.as_deref().unwrap_or_default(),
        released,
    };
    let edit = plan(&secret.metadata, &owner)
        .map_err(|e| Error::Conflict(format!("VSphereCluster {ns}/{}: {e}", owner.name)))?;
    let Edit::Set {
        owner_references,
        finalizers,
    } = edit
    else {
        return Ok(());
    };
    let body = json!({"metadata": {
        "resourceVersion": secret.metadata.resource_version,
        "ownerReferences": owner_references,
        "finalizers": finalizers,
    }});
    // The copy remembered no longer holds what the Secret will (nor, if refused, what it does).
    ctx.secrets.forget(&ns, &r.name);
    secrets
        .patch_metadata(&r.name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    tracing::info!(cluster = %format!("{ns}/{}", owner.name), secret = %r.name, released, "identity Secret ownership updated");
    Ok(())
}
