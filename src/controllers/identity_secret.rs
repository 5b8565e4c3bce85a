//! The I/O of a VSphereCluster's identity Secret ownership (`plan::cluster::identity_secret`
//! and `plan::cluster::secret_adoption` decide): read the Secret named by
//! `identityRef: {kind: Secret}`, patch its owner references and finalizers when the plan says so
//! (compare-and-swap on its resourceVersion). The Secret is the one the vCenter credentials were
//! read from (`controllers::secrets`, remembered for a while): once the cluster owns it, a
//! reconcile reads nothing more. A stale copy costs at most a refused patch (the resourceVersion
//! moved), after which it is read again.
//!
//! The cluster controller calls [`reconcile`] to adopt only once vCenter accepted the Secret's
//! credentials: a Secret that never held a working identity is never adopted, so deleting the
//! cluster never lets the garbage collector take it.
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::patch::is_not_found;
use super::{Context, Error};
use crate::api::VSphereCluster;
use crate::api::vsphere_cluster::VSphereIdentityKind;
use crate::plan::cluster::identity_secret::{Edit, Owner, OwnerKind, plan};
use crate::plan::cluster::secret_adoption::{refusal, release};

/// Makes the cluster's identity Secret its own (call it only once its credentials were accepted)
/// or, when `released`, lets it go. A Secret that is not only this cluster's identity
/// (`secret_adoption::refusal`) is left alone, and let go if this cluster held it: the answer
/// is then why, for the cluster's status (no secret value or user name in it). A cluster
/// without a Secret identity, or whose Secret is missing (the vCenter check says so), has
/// nothing to do.
pub async fn reconcile(
    cluster: &VSphereCluster,
    ctx: &Context,
    released: bool,
) -> Result<Option<String>, Error> {
    let Some(r) = cluster
        .spec
        .identity_ref
        .as_ref()
        .filter(|r| r.kind == VSphereIdentityKind::Secret)
    else {
        return Ok(None);
    };
    let ns = cluster.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let max_age = ctx.polling.credentials_reread;
    let secret = match ctx.secrets.get(&ctx.client, &ns, &r.name, max_age).await {
        Ok(Some((s, _))) => s,
        Ok(None) => return Ok(None),
        Err(e) if is_not_found(&e) => return Ok(None),
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
    let refused = if released {
        None
    } else {
        refusal(&secret, &owner)
    };
    let edit = match &refused {
        Some(_) => release(&secret, &owner),
        None => edit,
    };
    let Edit::Set {
        owner_references,
        finalizers,
    } = edit
    else {
        return Ok(refused);
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
    let adopted = refused.is_none() && !released;
    tracing::info!(cluster = %format!("{ns}/{}", owner.name), secret = %r.name, adopted, "identity Secret ownership updated");
    Ok(refused)
}
