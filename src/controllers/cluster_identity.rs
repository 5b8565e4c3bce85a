//! The VSphereClusterIdentity controller, as CAPV has one: the identity's Secret (`spec.secretName`,
//! in the manager's namespace) becomes the identity's own — owner reference and CAPV's Secret
//! finalizer, so that `clusterctl move` takes it along with the identity (whose CRD is a
//! move-hierarchy root) and it is not deleted while the identity lends it — and the identity's
//! status says whether it can be used. `plan::cluster::identity_secret` decides the Secret's
//! metadata, `plan::cluster::identity` the status; this file reads and writes.
//!
//! Order, as CAPV's: the identity's finalizer first (nothing is owned before the identity can
//! release it), then pause (the annotation only), then deletion or the Secret. Deletion releases
//! the Secret's finalizer (only when the Secret is this identity's, or nobody's) and then the
//! identity's; the garbage collector deletes the Secret with its last owner (CAPV deletes it
//! itself; see docs/differences.md).
//!
//! Requeues: Secrets are not watched (the manager reads them by name), so a missing Secret, one
//! another owner has, or a failed write is retried with the per-identity backoff (5 s doubling
//! to 5 min); a reconciled identity waits for its next change.
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::patch::{is_not_found, set_finalizers};
use super::{Context, Error, FIELD_MANAGER, now};
use crate::api::VSphereClusterIdentity;
use crate::api::cluster_identity::IDENTITY_FINALIZER;
use crate::plan::cluster::identity::{self, Credentials, Phase};
use crate::plan::cluster::identity_secret::{Edit, Owner, OwnerKind, Refusal, plan};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "vsphereclusteridentity";

fn key(identity: &VSphereClusterIdentity) -> String {
    format!("{CONTROLLER}/{}", identity.name_any())
}

/// The reconciler: finalizer, pause, then deletion or the Secret; measured, and a success
/// resets the identity's backoff.
pub async fn reconcile(
    identity: Arc<VSphereClusterIdentity>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_identity(&identity, &ctx).await;
    ctx.measure(CONTROLLER, started, &result);
    ctx.settle(&key(&identity), &result);
    result
}

/// Every failure backs off per identity: what fixes it (a Secret created, another owner gone)
/// is not watched, so it is looked at again, ever more rarely, never in a hot loop.
pub fn error_policy(
    identity: Arc<VSphereClusterIdentity>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    let delay = ctx.backoff.next(&key(&identity));
    tracing::warn!(identity = %identity.name_any(), category = error.category(), retry_in = ?delay, "{error}");
    Action::requeue(delay)
}

async fn reconcile_identity(
    identity: &VSphereClusterIdentity,
    ctx: &Context,
) -> Result<Action, Error> {
    let name = identity.name_any();
    let api: Api<VSphereClusterIdentity> = Api::all(ctx.client.clone());
    let finalizers = identity.finalizers().to_vec();
    let finalized = finalizers.iter().any(|f| f == IDENTITY_FINALIZER);
    let deleting = identity.metadata.deletion_timestamp.is_some();
    if !finalized {
        if deleting {
            return Ok(Action::await_change());
        }
        // First, so that an identity deleted right after it owns its Secret still releases
        // it. The write wakes the next pass.
        let mut with_ours = finalizers;
        with_ours.push(IDENTITY_FINALIZER.to_string());
        let rv = identity.metadata.resource_version.as_deref();
        set_finalizers(&api, &name, rv, &with_ours).await?;
        return Ok(Action::await_change());
    }
    if let Some(why) = identity::paused(&identity.metadata) {
        write_status(&api, identity, &Phase::Paused(why)).await?;
        return Ok(Action::await_change());
    }
    if deleting {
        return delete(&api, identity, ctx).await;
    }
    let (credentials, failure) = own_secret(identity, ctx).await;
    write_status(&api, identity, &Phase::Active(credentials)).await?;
    match failure {
        Some(e) => Err(e),
        None => Ok(Action::await_change()),
    }
}

/// The Secret `namespace/name` of the identity, as messages name it.
fn secret_ref(identity: &VSphereClusterIdentity, ctx: &Context) -> String {
    format!("{}/{}", ctx.namespace, identity.spec.secret_name)
}

/// What became of the Secret in one pass.
enum SecretPass {
    /// Not there.
    Missing,
    /// The plan refused it (another owner's, or leaving).
    Refused(Refusal),
    /// As the plan wants it (written, or already so).
    Done,
    /// Reading it failed.
    ReadFailed(kube::Error),
    /// Writing its metadata failed (a conflict: it changed since it was read).
    WriteFailed(kube::Error),
}

/// Make the Secret the identity's (or, `released`, let it go): read its metadata, ask the
/// plan, patch what it answers (compare-and-swap on its resourceVersion).
async fn edit_secret(
    identity: &VSphereClusterIdentity,
    ctx: &Context,
    released: bool,
) -> SecretPass {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let secret_name = &identity.spec.secret_name;
    let secret = match secrets.get_metadata(secret_name).await {
        Ok(s) => s,
        Err(e) if is_not_found(&e) => return SecretPass::Missing,
        Err(e) => return SecretPass::ReadFailed(e),
    };
    let api_version = VSphereClusterIdentity::api_version(&());
    let name = identity.name_any();
    let owner = Owner {
        kind: OwnerKind::VSphereClusterIdentity,
        api_version: &api_version,
        name: &name,
        uid: identity.metadata.uid.as_deref().unwrap_or_default(),
        released,
    };
    let edit = match plan(&secret.metadata, &owner) {
        Ok(edit) => edit,
        Err(refusal) => return SecretPass::Refused(refusal),
    };
    if let Edit::Set {
        owner_references,
        finalizers,
    } = edit
    {
        let body = json!({"metadata": {
            "resourceVersion": secret.metadata.resource_version,
            "ownerReferences": owner_references,
            "finalizers": finalizers,
        }});
        if let Err(e) = secrets
            .patch_metadata(secret_name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            return SecretPass::WriteFailed(e);
        }
        tracing::info!(identity = %name, secret = %secret_ref(identity, ctx), released, "identity Secret ownership updated");
    }
    SecretPass::Done
}

/// What became of the Secret, and the error that makes the pass back off (the status says
/// the same to the user; the API server's messages name no credentials).
async fn own_secret(
    identity: &VSphereClusterIdentity,
    ctx: &Context,
) -> (Credentials, Option<Error>) {
    let secret = secret_ref(identity, ctx);
    match edit_secret(identity, ctx, false).await {
        SecretPass::Done => (Credentials::Available, None),
        SecretPass::Missing => {
            let m = format!("Secret {secret} not found");
            (
                Credentials::SecretNotAvailable(m.clone()),
                Some(Error::Unreadable(format!("VSphereClusterIdentity: {m}"))),
            )
        }
        SecretPass::Refused(Refusal::InUse(m)) => {
            let m = format!(
                "Secret {secret} is being used by another VSphereCluster or VSphereClusterIdentity: {m}"
            );
            (
                Credentials::SecretInUse(m.clone()),
                Some(Error::Conflict(m)),
            )
        }
        SecretPass::Refused(Refusal::Leaving(m)) => (
            Credentials::SecretNotAvailable(format!("Secret {secret}: {m}")),
            Some(Error::Unreadable(m)),
        ),
        SecretPass::ReadFailed(e) => (
            Credentials::SecretNotAvailable(format!("Secret {secret}: {e}")),
            Some(Error::Kube(e)),
        ),
        SecretPass::WriteFailed(e) => (
            Credentials::OwnerReferenceFailed(format!("Secret {secret}: {e}")),
            Some(Error::Kube(e)),
        ),
    }
}

/// Deletion: `Available` False (Deleting), the Secret's finalizer released, then the identity's.
async fn delete(
    api: &Api<VSphereClusterIdentity>,
    identity: &VSphereClusterIdentity,
    ctx: &Context,
) -> Result<Action, Error> {
    let rv = write_status(api, identity, &Phase::Deleting).await?;
    match edit_secret(identity, ctx, true).await {
        // Released, kept (another owner's), or gone: nothing holds the identity any more.
        SecretPass::Missing | SecretPass::Done => {}
        SecretPass::Refused(refusal) => return Err(Error::Conflict(refusal.to_string())),
        SecretPass::ReadFailed(e) | SecretPass::WriteFailed(e) => return Err(e.into()),
    }
    let rest: Vec<String> = identity
        .finalizers()
        .iter()
        .filter(|f| *f != IDENTITY_FINALIZER)
        .cloned()
        .collect();
    match set_finalizers(api, &identity.name_any(), rv.as_deref(), &rest).await {
        Ok(()) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    tracing::info!(identity = %identity.name_any(), "identity released");
    Ok(Action::await_change())
}

/// Write the status `phase` gives when it differs from the identity's (server-side apply with
/// our field manager, forced: the whole status is ours). Returns the resourceVersion the
/// identity has now, for the compare-and-swap of a finalizer write that follows.
async fn write_status(
    api: &Api<VSphereClusterIdentity>,
    identity: &VSphereClusterIdentity,
    phase: &Phase,
) -> Result<Option<String>, Error> {
    let current = identity.status.as_ref();
    let status = identity::status(current, phase, identity.metadata.generation, &now());
    if current == Some(&status) {
        return Ok(identity.metadata.resource_version.clone());
    }
    let body = json!({
        "apiVersion": VSphereClusterIdentity::api_version(&()),
        "kind": VSphereClusterIdentity::kind(&()),
        "status": status,
    });
    let name = identity.name_any();
    let written = api
        .patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await?;
    Ok(written.metadata.resource_version)
}
