//! The in-cluster side of [`KubeOps`]: the API server. Metadata and spec changes go out as a
//! merge patch guarded by the resourceVersion the decision was made on (a stale decision is a
//! conflict, never an overwrite); status as a merge patch of the status subresource; drains
//! through the Eviction API, so PodDisruptionBudgets are the API server's to enforce.
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{EventType, Recorder};
use serde_json::json;

use super::FIELD_MANAGER;
use crate::api::control_plane_machine_set::{ControlPlaneMachineSet, ControlPlaneMachineSetStatus};
use crate::api::machine::Machine;
use crate::plan::machine::drain::PodRef;
use crate::reconcile::kube::{EventRecord, Eviction, KubeError, KubeOps};

/// The API server, as the reconcilers' [`KubeOps`].
#[derive(Clone)]
pub struct ApiServer {
    pub client: kube::Client,
    pub recorder: Recorder,
}

fn err(action: String, e: kube::Error) -> KubeError {
    let stale = matches!(&e, kube::Error::Api(s) if s.code == 409 || s.code == 404);
    KubeError {
        action,
        message: e.to_string(),
        stale,
    }
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The merge patch of what the machine controller owns outside the status: labels,
/// annotations, finalizers and `spec.providerID`; `None` when nothing changed.
pub fn metadata_patch(before: &Machine, after: &Machine) -> Option<serde_json::Value> {
    let (b, a) = (&before.metadata, &after.metadata);
    let changed = b.labels != a.labels
        || b.annotations != a.annotations
        || b.finalizers != a.finalizers
        || b.owner_references != a.owner_references
        || before.spec.provider_id != after.spec.provider_id;
    changed.then(|| {
        let mut p = json!({
            "metadata": {
                "resourceVersion": b.resource_version,
                "labels": a.labels,
                "annotations": a.annotations,
                "finalizers": a.finalizers.clone().unwrap_or_default(),
            }
        });
        if b.owner_references != a.owner_references {
            p["metadata"]["ownerReferences"] =
                json!(a.owner_references.clone().unwrap_or_default());
        }
        if before.spec.provider_id != after.spec.provider_id {
            p["spec"] = json!({ "providerID": after.spec.provider_id });
        }
        p
    })
}

impl KubeOps for ApiServer {
    async fn update_machine(&self, before: &Machine, after: &Machine) -> Result<(), KubeError> {
        let ns = before.metadata.namespace.clone().unwrap_or_default();
        let name = before.metadata.name.clone().unwrap_or_default();
        let api: Api<Machine> = Api::namespaced(self.client.clone(), &ns);
        let pp = PatchParams::default();
        // Metadata first, guarded by the resourceVersion the decision was made on (a status
        // write first would move it); a released last finalizer deletes the object, and the
        // status of a deleted object no longer matters.
        if let Some(patch) = metadata_patch(before, after) {
            match api.patch(&name, &pp, &Patch::Merge(&patch)).await {
                Ok(_) => {}
                Err(e) if not_found(&e) && after.metadata.deletion_timestamp.is_some() => {
                    return Ok(());
                }
                Err(e) => return Err(err(format!("patch Machine {ns}/{name}"), e)),
            }
        }
        let released = after.metadata.deletion_timestamp.is_some()
            && after.metadata.finalizers.as_ref().is_none_or(Vec::is_empty);
        if before.status != after.status && !released {
            let patch = json!({ "status": after.status });
            match api.patch_status(&name, &pp, &Patch::Merge(&patch)).await {
                Ok(_) => {}
                Err(e) if not_found(&e) && after.metadata.deletion_timestamp.is_some() => {}
                Err(e) => return Err(err(format!("patch status of Machine {ns}/{name}"), e)),
            }
        }
        Ok(())
    }

    async fn create_machine(&self, m: &Machine) -> Result<Machine, KubeError> {
        let ns = m.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Machine> = Api::namespaced(self.client.clone(), &ns);
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        api.create(&pp, m).await.map_err(|e| {
            err(
                format!(
                    "create Machine {ns}/{}",
                    m.metadata.name.as_deref().unwrap_or_default()
                ),
                e,
            )
        })
    }

    async fn list_machines(&self, namespace: &str) -> Result<Vec<Machine>, KubeError> {
        let api: Api<Machine> = Api::namespaced(self.client.clone(), namespace);
        api.list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| err(format!("list Machines in {namespace}"), e))
    }

    async fn set_machine_set_status(
        &self,
        set: &ControlPlaneMachineSet,
        status: &ControlPlaneMachineSetStatus,
    ) -> Result<(), KubeError> {
        let ns = set.metadata.namespace.clone().unwrap_or_default();
        let name = set.metadata.name.clone().unwrap_or_default();
        let api: Api<ControlPlaneMachineSet> = Api::namespaced(self.client.clone(), &ns);
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": status })),
        )
        .await
        .map(|_| ())
        .map_err(|e| {
            err(
                format!("patch status of ControlPlaneMachineSet {ns}/{name}"),
                e,
            )
        })
    }

    async fn delete_machine(&self, namespace: &str, name: &str) -> Result<(), KubeError> {
        let api: Api<Machine> = Api::namespaced(self.client.clone(), namespace);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            Err(e) => Err(err(format!("delete Machine {namespace}/{name}"), e)),
        }
    }

    async fn cordon(&self, node: &str) -> Result<(), KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = json!({ "spec": { "unschedulable": true } });
        api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| err(format!("cordon Node {node}"), e))
    }

    async fn evict(&self, pod: &PodRef) -> Result<Eviction, KubeError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        match api.evict(&pod.name, &EvictParams::default()).await {
            Ok(_) => Ok(Eviction::Evicted),
            Err(e) if not_found(&e) => Ok(Eviction::Evicted),
            // 429: a PodDisruptionBudget does not allow it now.
            Err(kube::Error::Api(s)) if s.code == 429 => Ok(Eviction::Refused(s.message)),
            Err(e) => Err(err(format!("evict Pod {}/{}", pod.namespace, pod.name), e)),
        }
    }

    async fn delete_node(&self, node: &str) -> Result<(), KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        match api.delete(node, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            Err(e) => Err(err(format!("delete Node {node}"), e)),
        }
    }

    async fn event(&self, e: EventRecord) {
        let type_ = if e.type_ == "Warning" {
            EventType::Warning
        } else {
            EventType::Normal
        };
        super::events::publish_with(
            &self.recorder,
            &e.regarding,
            type_,
            &e.reason,
            &e.reason,
            e.message,
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_owned_fields_are_patched_and_guarded_by_the_resource_version() {
        let mut before = Machine::new("m", Default::default());
        before.metadata.resource_version = Some("42".into());
        assert_eq!(
            metadata_patch(&before, &before),
            None,
            "no change, no write"
        );
        let mut after = before.clone();
        after.metadata.finalizers = Some(vec!["machine.machine.openshift.io".into()]);
        after.spec.provider_id = Some("vsphere://x".into());
        let p = metadata_patch(&before, &after).unwrap();
        assert_eq!(p["metadata"]["resourceVersion"], "42");
        assert_eq!(
            p["metadata"]["finalizers"][0],
            "machine.machine.openshift.io"
        );
        assert_eq!(p["spec"]["providerID"], "vsphere://x");
        // Releasing the last finalizer sends an empty list (a merge patch of null would not
        // remove it).
        let mut released = after.clone();
        released.metadata.finalizers = Some(vec![]);
        let p = metadata_patch(&after, &released).unwrap();
        assert_eq!(p["metadata"]["finalizers"], json!([]));
        assert!(p.get("spec").is_none());
    }
}
