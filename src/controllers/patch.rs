//! The writes the controllers make, each in one place: status by server-side apply with one
//! field manager, owner references by a merge patch guarded by the resourceVersion (two zones
//! adding themselves to one failure domain at once must not overwrite each other).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::FIELD_MANAGER;
use crate::api::VSphereFailureDomain;

/// Replace the status we own with `status` (server-side apply, forced: this provider is the
/// only writer of these statuses). Fields we stop sending are removed.
pub async fn apply_status<K>(api: &Api<K>, name: &str, status: &impl Serialize) -> kube::Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

/// Set the failure domain's owner references, failing with a conflict if it changed since it
/// was read.
pub async fn set_owner_references(
    api: &Api<VSphereFailureDomain>,
    fd: &VSphereFailureDomain,
    refs: &[OwnerReference],
) -> kube::Result<()> {
    let name = fd.metadata.name.clone().unwrap_or_default();
    let body = json!({
        "metadata": {
            "resourceVersion": fd.metadata.resource_version,
            "ownerReferences": refs,
        }
    });
    api.patch(
        &name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(&body),
    )
    .await?;
    Ok(())
}

/// Delete the failure domain exactly as it was read (uid and resourceVersion preconditions);
/// already gone counts as done.
pub async fn delete_failure_domain(
    api: &Api<VSphereFailureDomain>,
    fd: &VSphereFailureDomain,
) -> kube::Result<()> {
    let name = fd.metadata.name.clone().unwrap_or_default();
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: fd.metadata.uid.clone(),
            resource_version: fd.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A 404 from the API server.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
