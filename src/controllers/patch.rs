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
use crate::api::infrastructure::v1beta2::common::DeprecatedStatus;
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
pub const CLUSTER_META_CONDITIONS: [&str; 5] = [
    FAILURE_DOMAINS_READY,
    cluster::READY,
    cluster::PAUSED,
    cluster::VCENTER_AVAILABLE,
    crate::plan::cluster::secret_adoption::CONDITION,
];

/// The part of a VSphereCluster status this provider owns, at v1beta2: `failureDomains` (a
/// list keyed by name), `deprecated.v1beta1.conditions` (an atomic list, so sent whole: applying
/// it takes the list over), our own entries of `conditions` (a list keyed by type: other
/// entries stay their writers'), and, once it has set them, `initialization` and
/// `vCenterVersion` (`provisioned` is only ever sent as true, so it is never taken back). What
/// is unset is not sent, so a field another writer set stays theirs.
pub fn cluster_status_body(status: &VSphereClusterStatus) -> serde_json::Value {
    let mut owned = serde_json::Map::new();
    // An empty list is never applied (minItems 1): see `apply_cluster_status`.
    if let Some(fds) = status.failure_domains.as_ref().filter(|f| !f.is_empty()) {
        owned.insert("failureDomains".into(), json!(fds));
    }
    let v1beta1 = DeprecatedStatus::v1beta1_conditions(&status.deprecated);
    if !v1beta1.is_empty() {
        owned.insert(
            "deprecated".into(),
            json!({"v1beta1": {"conditions": v1beta1}}),
        );
    }
    if let Some(init) = status
        .initialization
        .as_ref()
        .filter(|i| i.provisioned == Some(true))
    {
        owned.insert("initialization".into(), json!(init));
    }
    if let Some(v) = &status.vcenter_version {
        owned.insert("vCenterVersion".into(), json!(v));
    }
    let ours: Vec<_> = status
        .conditions
        .iter()
        .flatten()
        .filter(|c| CLUSTER_META_CONDITIONS.contains(&c.type_.as_str()))
        .collect();
    if !ours.is_empty() {
        owned.insert("conditions".into(), json!(ours));
    }
    json!({
        "apiVersion": VSphereCluster::api_version(&()),
        "kind": VSphereCluster::kind(&()),
        "status": owned,
    })
}

/// Apply the status a VSphereCluster reconcile decided (server-side apply with our field
/// manager, forced, sending only [`cluster_status_body`]): what we stop sending (a condition,
/// some failure domains) is removed, what others wrote stays.
///
/// Publishing no failure domain where `before` had some is a merge patch deleting
/// `status.failureDomains`, then the apply without it: the API server turns an applied
/// collection whose last entries go away into an empty or null value and refuses it (a map:
/// 422 "failureDomains in body must be of type object", found on kube-apiserver 1.37 when a
/// cluster's last zone stopped being published; the v1beta2 list has minItems 1). The caller
/// writes only when the status changed.
pub async fn apply_cluster_status(
    api: &Api<VSphereCluster>,
    name: &str,
    before: Option<&VSphereClusterStatus>,
    status: &VSphereClusterStatus,
) -> kube::Result<()> {
    let had = |s: Option<&VSphereClusterStatus>| {
        s.and_then(|s| s.failure_domains.as_ref())
            .is_some_and(|f| !f.is_empty())
    };
    if had(before) && !had(Some(status)) {
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
    use crate::api::vsphere_cluster::FailureDomain;

    /// Failure domains are applied when there are some, as the v1beta2 list; an empty list is
    /// never applied (minItems 1), `apply_cluster_status` deletes the field instead.
    #[test]
    fn an_empty_publication_sends_no_failure_domains_list() {
        let mut status = VSphereClusterStatus {
            failure_domains: Some(vec![FailureDomain {
                name: "zone-a".into(),
                control_plane: Some(true),
                attributes: None,
            }]),
            ..VSphereClusterStatus::default()
        };
        let body = cluster_status_body(&status);
        assert_eq!(
            body["status"]["failureDomains"][0]["name"], "zone-a",
            "{body}"
        );
        assert_eq!(
            body["apiVersion"],
            "infrastructure.cluster.x-k8s.io/v1beta2"
        );
        status.failure_domains = Some(Vec::new());
        let body = cluster_status_body(&status);
        assert!(body["status"].get("failureDomains").is_none(), "{body}");
        assert_eq!(body["kind"], "VSphereCluster");
    }

    /// The v1beta1 conditions go whole under `deprecated.v1beta1`, for v1beta1 readers; an
    /// unprovisioned `initialization` is not sent (never taken back from true).
    #[test]
    fn v1beta1_conditions_go_under_deprecated() {
        let mut status = VSphereClusterStatus::default();
        crate::api::conditions::set_capi_condition(
            DeprecatedStatus::v1beta1_conditions_mut(&mut status.deprecated),
            &crate::api::conditions::ConditionUpdate::true_("Ready"),
            &crate::controllers::now(),
        );
        status.initialization = Some(Default::default());
        let body = cluster_status_body(&status);
        assert_eq!(
            body["status"]["deprecated"]["v1beta1"]["conditions"][0]["type"], "Ready",
            "{body}"
        );
        assert!(body["status"].get("initialization").is_none(), "{body}");
    }
}
