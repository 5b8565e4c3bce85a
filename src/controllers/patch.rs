//! The writes the controllers make, each in one place: status by server-side apply with one
//! field manager (sending only the fields we own), owner references by a merge patch guarded by
//! the resourceVersion (two zones adding themselves to one failure domain at once must not
//! overwrite each other).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::FIELD_MANAGER;
use crate::api::conditions::cluster::{self, FAILURE_DOMAINS_READY};
use crate::api::vsphere_cluster::VSphereClusterStatus;
use crate::api::{VSphereCluster, VSphereFailureDomain};

/// Apply `status` as the whole status this provider owns (server-side apply with our field
/// manager, forced). For kinds whose status is entirely ours (VSphereDeploymentZone); fields we
/// stop sending are removed.
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

/// The v1beta2 condition types of a VSphereCluster this provider writes.
pub const CLUSTER_META_CONDITIONS: [&str; 4] = [
    FAILURE_DOMAINS_READY,
    cluster::READY,
    cluster::PAUSED,
    cluster::VCENTER_AVAILABLE,
];

/// The part of a VSphereCluster status this provider owns: `failureDomains`, the v1beta1
/// `conditions` (an atomic list, so sent whole: applying it takes the list over), our own
/// entries of `v1beta2.conditions` (a list keyed by type: other entries stay their writers'),
/// and, once it has set them, `ready`, `initialization` and `vCenterVersion` (`ready` is only
/// ever sent as true, so it is never taken back). What is unset is not sent, so a field another
/// writer set stays theirs.
pub fn cluster_status_body(status: &VSphereClusterStatus) -> serde_json::Value {
    let mut owned = serde_json::Map::new();
    // An empty map is never applied: see `apply_cluster_status`.
    if let Some(fds) = status.failure_domains.as_ref().filter(|f| !f.is_empty()) {
        owned.insert("failureDomains".into(), json!(fds));
    }
    if let Some(conditions) = &status.conditions {
        owned.insert("conditions".into(), json!(conditions));
    }
    if status.ready == Some(true) {
        owned.insert("ready".into(), json!(true));
    }
    if let Some(init) = &status.initialization {
        owned.insert("initialization".into(), json!(init));
    }
    if let Some(v) = &status.vcenter_version {
        owned.insert("vCenterVersion".into(), json!(v));
    }
    let ours: Vec<_> = status
        .v1beta2
        .as_ref()
        .and_then(|v| v.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| CLUSTER_META_CONDITIONS.contains(&c.type_.as_str()))
        .collect();
    if !ours.is_empty() {
        owned.insert("v1beta2".into(), json!({ "conditions": ours }));
    }
    json!({
        "apiVersion": VSphereCluster::api_version(&()),
        "kind": VSphereCluster::kind(&()),
        "status": owned,
    })
}

/// Apply the status a VSphereCluster reconcile decided (server-side apply with our field
/// manager, forced, sending only [`cluster_status_body`]): what we stop sending (all failure
/// domains, a condition) is removed, what others wrote stays.
///
/// Publishing no failure domain is a merge patch deleting `status.failureDomains`, then the
/// apply without it: kube-apiserver 1.37 turns an applied map whose last entries go away
/// (`{}`, or the key no longer sent) into `null` and refuses it (422 "failureDomains in body
/// must be of type object"; found on the real API server when a cluster's last zone stopped
/// being published). The caller writes only when the status changed.
pub async fn apply_cluster_status(
    api: &Api<VSphereCluster>,
    name: &str,
    status: &VSphereClusterStatus,
) -> kube::Result<()> {
    if status
        .failure_domains
        .as_ref()
        .is_some_and(|f| f.is_empty())
    {
        api.patch_status(
            name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&json!({"status": {"failureDomains": null}})),
        )
        .await?;
    }
    let body = cluster_status_body(status);
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

/// Set an object's finalizers to `finalizers`, failing with a conflict if the object changed
/// since `resource_version` (a merge patch replaces the whole list, so the guard keeps another
/// writer's finalizer from being dropped). An empty list is sent as `[]`.
pub async fn set_finalizers<K>(
    api: &Api<K>,
    name: &str,
    resource_version: Option<&str>,
    finalizers: &[String],
) -> kube::Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let body = json!({
        "metadata": {
            "resourceVersion": resource_version,
            "finalizers": finalizers,
        }
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vsphere_cluster::FailureDomainSpec;

    /// Failure domains are applied when there are some; an empty map is never applied (the real
    /// API server turns it into `null` and refuses the write), `apply_cluster_status`
    /// deletes the field instead.
    #[test]
    fn an_empty_publication_sends_no_failure_domains_map() {
        let mut status = VSphereClusterStatus {
            failure_domains: Some([("zone-a".to_string(), FailureDomainSpec::default())].into()),
            ..VSphereClusterStatus::default()
        };
        let body = cluster_status_body(&status);
        assert!(
            body["status"]["failureDomains"]["zone-a"].is_object(),
            "{body}"
        );
        status.failure_domains = Some(Default::default());
        let body = cluster_status_body(&status);
        assert!(body["status"].get("failureDomains").is_none(), "{body}");
        assert_eq!(body["kind"], "VSphereCluster");
    }
}
