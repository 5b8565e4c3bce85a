//! The in-cluster side of [`KubeOps`]: the API server. Metadata and spec changes go out as a
//! merge patch guarded by the resourceVersion the decision was made on (a stale decision is a
//! conflict, never an overwrite); status as a merge patch of the status subresource; drains
//! through the Eviction API, so PodDisruptionBudgets are the API server's to enforce.
//!
//! Every call has a timeout ([`WRITE_TIMEOUT`]): the machine sweep makes these calls while it
//! holds its server's gate, and one API call that never answers must not park every worker
//! waiting on that server (a timeout is a typed [`KubeErrorKind::Timeout`], retried with
//! backoff).
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::events::{EventType, Recorder};
use serde_json::{Value, json};

use super::FIELD_MANAGER;
use crate::api::control_plane_machine_set::{ControlPlaneMachineSet, ControlPlaneMachineSetStatus};
use crate::api::ipam::{CLAIM_API_VERSION, CLAIM_FINALIZER, CLAIM_KIND, IpAddressClaim};
use crate::api::machine::Machine;
use crate::api::machine_health_check::MachineHealthCheck;
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::health::RequestRef;
use crate::plan::machine::drain::PodRef;
use crate::reconcile::kube_ops::{EventRecord, Eviction, KubeError, KubeErrorKind, KubeOps};

/// How long one API call may take before it counts as failed (client-go's default request
/// timeout is 32 s for a whole reconcile; one write answers in milliseconds when the server
/// is well).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The API server, as the reconcilers' [`KubeOps`].
#[derive(Clone)]
pub struct ApiServer {
    pub client: kube::Client,
    pub recorder: Recorder,
    /// Each call's limit ([`WRITE_TIMEOUT`] unless a test says otherwise).
    pub timeout: Duration,
}

impl ApiServer {
    pub fn new(client: kube::Client, recorder: Recorder) -> Self {
        ApiServer {
            client,
            recorder,
            timeout: WRITE_TIMEOUT,
        }
    }

    /// Run one API call under the timeout; a client error is typed by its status.
    async fn call<T>(
        &self,
        action: impl FnOnce() -> String,
        f: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<Result<T, kube::Error>, KubeError> {
        tokio::time::timeout(self.timeout, f)
            .await
            .map_err(|_| KubeError::timeout(action(), self.timeout))
    }

    /// [`ApiServer::call`], with any client error as a typed [`KubeError`].
    async fn call_typed<T>(
        &self,
        action: impl FnOnce() -> String,
        f: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, KubeError> {
        let action = action();
        match self.call(|| action.clone(), f).await? {
            Ok(v) => Ok(v),
            Err(e) => Err(KubeError::from_client(action, &e)),
        }
    }
}

impl ApiServer {
    /// A delete under the timeout; gone already is done.
    async fn delete_gone_ok<T>(
        &self,
        action: impl Fn() -> String,
        f: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<(), KubeError> {
        match self.call(&action, f).await? {
            Ok(_) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            Err(e) => Err(KubeError::from_client(action(), &e)),
        }
    }
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A merge patch of a string map: the new entries, and `null` for each removed key (a merge
/// patch of the new map alone would leave removed keys on the server).
fn map_patch(
    before: Option<&BTreeMap<String, String>>,
    after: Option<&BTreeMap<String, String>>,
) -> Value {
    let mut out = serde_json::Map::new();
    for k in before.into_iter().flatten().map(|(k, _)| k) {
        if after.is_none_or(|a| !a.contains_key(k)) {
            out.insert(k.clone(), Value::Null);
        }
    }
    for (k, v) in after.into_iter().flatten() {
        out.insert(k.clone(), Value::String(v.clone()));
    }
    Value::Object(out)
}

/// The JSON merge patch (RFC 7396) taking `before` to `after`: changed keys, recursively into
/// objects, and `null` for every key `after` no longer has. Sending `after` whole instead
/// leaves removed keys on the server: a machine's cleared `providerStatus.taskRef` (omitted
/// when empty) stayed, so a failed clone task was reported again on every pass and the machine
/// never went on to adopt the VM of the same name (found on the real API server, after a
/// manager was killed while vcsim held its clone).
/// And it made every resync of every Machine a write (found by hack/bench-cluster.sh).
pub fn merge_diff(before: &Value, after: &Value) -> Value {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut out = serde_json::Map::new();
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            for (k, v) in a {
                match b.get(k) {
                    Some(old) if old == v => {}
                    Some(old) if old.is_object() && v.is_object() => {
                        out.insert(k.clone(), merge_diff(old, v));
                    }
                    _ => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            Value::Object(out)
        }
        _ => after.clone(),
    }
}

/// `{"status": …}`: the merge patch from one status to the other (see [`merge_diff`]).
pub(crate) fn status_patch(before: &impl serde::Serialize, after: &impl serde::Serialize) -> Value {
    let b = serde_json::to_value(before).unwrap_or(Value::Null);
    let a = serde_json::to_value(after).unwrap_or(Value::Null);
    json!({ "status": merge_diff(&b, &a) })
}

/// The merge patch of what the machine controller owns outside the status: labels,
/// annotations, finalizers and `spec.providerID`; `None` when nothing changed.
pub fn metadata_patch(before: &Machine, after: &Machine) -> Option<Value> {
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
                "labels": map_patch(b.labels.as_ref(), a.labels.as_ref()),
                "annotations": map_patch(b.annotations.as_ref(), a.annotations.as_ref()),
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

/// A namespaced API for an arbitrary `apiVersion` and kind (remediation templates and requests
/// are of kinds we do not compile in).
pub fn dynamic_api(
    client: &kube::Client,
    ns: &str,
    api_version: &str,
    kind: &str,
) -> Api<DynamicObject> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// A read object as our type (a shape we cannot read is its provider's error to report).
pub fn typed<T: serde::de::DeserializeOwned>(
    o: kube::api::DynamicObject,
    kind: &str,
    ns: &str,
) -> Result<T, super::Error> {
    let name = o.metadata.name.clone().unwrap_or_default();
    serde_json::to_value(o)
        .and_then(serde_json::from_value)
        .map_err(|e| {
            KubeError::new(
                format!("read {kind} {ns}/{name}"),
                KubeErrorKind::Invalid,
                e.to_string(),
            )
            .into()
        })
}

impl ApiServer {
    /// Write an object the machine actuator changed: metadata (and spec) first, guarded by the
    /// resourceVersion the decision was made on (a status write first would move it), then the
    /// status. A released last finalizer deletes the object, and the status of a deleted
    /// object no longer matters.
    pub(crate) async fn write_object<K>(
        &self,
        after: &kube::api::ObjectMeta,
        metadata: Option<Value>,
        status: Option<Value>,
    ) -> Result<(), KubeError>
    where
        K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let ns = after.namespace.clone().unwrap_or_default();
        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        self.write_via(&api, &K::kind(&()), after, metadata, status)
            .await
    }

    /// [`ApiServer::write_object`] at `api_version` (`group/version`) of `kind`, whatever
    /// version this crate's types are. Cluster API applies (server-side) its objects at the
    /// contract version; a write of ours at another version makes the API server prune, at
    /// Cluster API's next apply, the fields nobody owns any more (KCP's and the MachineSet's
    /// `cloned-from` annotations, which their rollouts compare), so writes to the objects they
    /// apply go at the version they apply.
    pub(crate) async fn write_object_at(
        &self,
        api_version: &str,
        kind: &str,
        after: &kube::api::ObjectMeta,
        metadata: Option<Value>,
        status: Option<Value>,
    ) -> Result<(), KubeError> {
        let ns = after.namespace.clone().unwrap_or_default();
        let api = dynamic_api(&self.client, &ns, api_version, kind);
        self.write_via(&api, kind, after, metadata, status).await
    }

    async fn write_via<K>(
        &self,
        api: &Api<K>,
        kind: &str,
        after: &kube::api::ObjectMeta,
        metadata: Option<Value>,
        status: Option<Value>,
    ) -> Result<(), KubeError>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let ns = after.namespace.clone().unwrap_or_default();
        let name = after.name.clone().unwrap_or_default();
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let deleting = after.deletion_timestamp.is_some();
        if let Some(patch) = metadata {
            let action = || format!("patch {kind} {ns}/{name}");
            match self
                .call(action, api.patch(&name, &pp, &Patch::Merge(&patch)))
                .await?
            {
                Ok(_) => {}
                Err(e) if not_found(&e) && deleting => return Ok(()),
                Err(e) => return Err(KubeError::from_client(action(), &e)),
            }
        }
        let released = deleting && after.finalizers.as_ref().is_none_or(Vec::is_empty);
        if let Some(patch) = status.filter(|_| !released) {
            let action = || format!("patch status of {kind} {ns}/{name}");
            match self
                .call(action, api.patch_status(&name, &pp, &Patch::Merge(&patch)))
                .await?
            {
                Ok(_) => {}
                Err(e) if not_found(&e) && deleting => {}
                Err(e) => return Err(KubeError::from_client(action(), &e)),
            }
        }
        Ok(())
    }
}

impl KubeOps for ApiServer {
    async fn update_machine(&self, before: &Machine, after: &Machine) -> Result<(), KubeError> {
        let status =
            (before.status != after.status).then(|| status_patch(&before.status, &after.status));
        self.write_object::<Machine>(&after.metadata, metadata_patch(before, after), status)
            .await
    }

    async fn update_vsphere_vm(
        &self,
        before: &VSphereVM,
        after: &VSphereVM,
    ) -> Result<(), KubeError> {
        let (b, a) = (&before.metadata, &after.metadata);
        let mut meta = None;
        if b.finalizers != a.finalizers || before.spec.bios_uuid != after.spec.bios_uuid {
            let mut p = json!({ "metadata": {
                "resourceVersion": b.resource_version,
                "finalizers": a.finalizers.clone().unwrap_or_default(),
            }});
            if before.spec.bios_uuid != after.spec.bios_uuid {
                p["spec"] = json!({ "biosUUID": after.spec.bios_uuid });
            }
            meta = Some(p);
        }
        let status =
            (before.status != after.status).then(|| status_patch(&before.status, &after.status));
        self.write_object::<VSphereVM>(&after.metadata, meta, status)
            .await
    }

    async fn create_machine(&self, m: &Machine) -> Result<Machine, KubeError> {
        let ns = m.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Machine> = Api::namespaced(self.client.clone(), &ns);
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        let action = || {
            format!(
                "create Machine {ns}/{}",
                m.metadata.name.as_deref().unwrap_or_default()
            )
        };
        self.call_typed(action, api.create(&pp, m)).await
    }

    async fn list_machines(&self, namespace: &str) -> Result<Vec<Machine>, KubeError> {
        let api: Api<Machine> = Api::namespaced(self.client.clone(), namespace);
        self.call_typed(
            || format!("list Machines in {namespace}"),
            api.list(&ListParams::default()),
        )
        .await
        .map(|l| l.items)
    }

    async fn set_machine_set_status(
        &self,
        set: &ControlPlaneMachineSet,
        status: &ControlPlaneMachineSetStatus,
    ) -> Result<(), KubeError> {
        let ns = set.metadata.namespace.clone().unwrap_or_default();
        let name = set.metadata.name.clone().unwrap_or_default();
        let api: Api<ControlPlaneMachineSet> = Api::namespaced(self.client.clone(), &ns);
        let patch = json!({ "status": status });
        self.call_typed(
            || format!("patch status of ControlPlaneMachineSet {ns}/{name}"),
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        .map(|_| ())
    }

    async fn delete_machine(&self, namespace: &str, name: &str) -> Result<(), KubeError> {
        let api: Api<Machine> = Api::namespaced(self.client.clone(), namespace);
        let action = || format!("delete Machine {namespace}/{name}");
        self.delete_gone_ok(action, api.delete(name, &DeleteParams::default()))
            .await
    }

    async fn cordon(&self, node: &str) -> Result<(), KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = json!({ "spec": { "unschedulable": true } });
        self.call_typed(
            || format!("cordon Node {node}"),
            api.patch(node, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        .map(|_| ())
    }

    async fn evict(&self, pod: &PodRef) -> Result<Eviction, KubeError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let action = || format!("evict Pod {}/{}", pod.namespace, pod.name);
        match self
            .call(action, api.evict(&pod.name, &EvictParams::default()))
            .await?
        {
            Ok(_) => Ok(Eviction::Evicted),
            Err(e) if not_found(&e) => Ok(Eviction::Evicted),
            // 429: a PodDisruptionBudget does not allow it now. Its name is only in the
            // causes ("The disruption budget web needs 2 healthy pods and has 2 currently"):
            // they go with the message, so the Machine can name the budget.
            Err(kube::Error::Api(s)) if s.code == 429 => {
                let causes = s
                    .details
                    .iter()
                    .flat_map(|d| d.causes.iter())
                    .map(|c| c.message.as_str())
                    .filter(|m| !m.is_empty())
                    .collect::<Vec<_>>();
                Ok(Eviction::Refused(if causes.is_empty() {
                    s.message.clone()
                } else {
                    format!("{} {}", s.message, causes.join("; "))
                }))
            }
            Err(e) => Err(KubeError::from_client(action(), &e)),
        }
    }

    async fn delete_node(&self, node: &str) -> Result<(), KubeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let action = || format!("delete Node {node}");
        self.delete_gone_ok(action, api.delete(node, &DeleteParams::default()))
            .await
    }

    async fn create_ip_address_claim(&self, claim: &IpAddressClaim) -> Result<(), KubeError> {
        let ns = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let action = || format!("create IPAddressClaim {ns}/{name}");
        let obj: DynamicObject = serde_json::to_value(claim)
            .and_then(serde_json::from_value)
            .map_err(|e| KubeError::new(action(), KubeErrorKind::Invalid, e.to_string()))?;
        let api = dynamic_api(&self.client, &ns, CLAIM_API_VERSION, CLAIM_KIND);
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match self.call(action, api.create(&pp, &obj)).await? {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(KubeError::from_client(action(), &e)),
        }
    }

    async fn release_ip_address_claim(&self, namespace: &str, name: &str) -> Result<(), KubeError> {
        let api = dynamic_api(&self.client, namespace, CLAIM_API_VERSION, CLAIM_KIND);
        let claim = self
            .call_typed(
                || format!("get IPAddressClaim {namespace}/{name}"),
                api.get_opt(name),
            )
            .await?;
        let Some(claim) = claim else {
            return Ok(());
        };
        let finalizers = claim.metadata.finalizers.clone().unwrap_or_default();
        if finalizers.iter().any(|f| f == CLAIM_FINALIZER) {
            // Only our finalizer goes, guarded by the version read (another one may be added).
            let keep: Vec<&String> = finalizers
                .iter()
                .filter(|f| *f != CLAIM_FINALIZER)
                .collect();
            let patch = json!({"metadata": {
                "resourceVersion": claim.metadata.resource_version,
                "finalizers": keep,
            }});
            let action = || format!("remove the finalizer of IPAddressClaim {namespace}/{name}");
            match self
                .call(
                    action,
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
                )
                .await?
            {
                Ok(_) => {}
                Err(e) if not_found(&e) => return Ok(()),
                Err(e) => return Err(KubeError::from_client(action(), &e)),
            }
        }
        let action = || format!("delete IPAddressClaim {namespace}/{name}");
        self.delete_gone_ok(action, api.delete(name, &DeleteParams::default()))
            .await
    }

    /// Published in the background: an event is best effort, and a sweep that waited for each
    /// of its machines' events put an API round trip between a vCenter task's end and the
    /// machines' next step. Each publish is bounded by the request timeout.
    async fn event(&self, e: EventRecord) {
        let type_ = if e.type_ == "Warning" {
            EventType::Warning
        } else {
            EventType::Normal
        };
        let recorder = self.recorder.clone();
        let timeout = self.timeout;
        tokio::spawn(async move {
            let publish = super::events::publish_with(
                &recorder,
                &e.regarding,
                type_,
                &e.reason,
                &e.reason,
                e.message,
            );
            if tokio::time::timeout(timeout, publish).await.is_err() {
                tracing::debug!(object = ?e.regarding.name, "event not published within {timeout:?}");
            }
        });
    }

    async fn update_health_check(
        &self,
        before: &MachineHealthCheck,
        after: &MachineHealthCheck,
    ) -> Result<(), KubeError> {
        let ns = before.metadata.namespace.clone().unwrap_or_default();
        let name = before.metadata.name.clone().unwrap_or_default();
        let api: Api<MachineHealthCheck> = Api::namespaced(self.client.clone(), &ns);
        let pp = PatchParams::default();
        if before.metadata.annotations != after.metadata.annotations {
            let patch = json!({"metadata": {
                "resourceVersion": before.metadata.resource_version,
                "annotations": map_patch(
                    before.metadata.annotations.as_ref(),
                    after.metadata.annotations.as_ref(),
                ),
            }});
            self.call_typed(
                || format!("patch MachineHealthCheck {ns}/{name}"),
                api.patch(&name, &pp, &Patch::Merge(&patch)),
            )
            .await?;
        }
        if before.status != after.status {
            let patch = status_patch(&before.status, &after.status);
            self.call_typed(
                || format!("patch status of MachineHealthCheck {ns}/{name}"),
                api.patch_status(&name, &pp, &Patch::Merge(&patch)),
            )
            .await?;
        }
        Ok(())
    }

    async fn create_remediation_request(
        &self,
        namespace: &str,
        request: &Value,
    ) -> Result<(), KubeError> {
        let av = request["apiVersion"].as_str().unwrap_or_default();
        let kind = request["kind"].as_str().unwrap_or_default();
        let name = request["metadata"]["name"].as_str().unwrap_or_default();
        let action = || format!("create {kind} {namespace}/{name}");
        let obj: DynamicObject = serde_json::from_value(request.clone())
            .map_err(|e| KubeError::new(action(), KubeErrorKind::Invalid, e.to_string()))?;
        let api = dynamic_api(&self.client, namespace, av, kind);
        self.call_typed(action, api.create(&PostParams::default(), &obj))
            .await
            .map(|_| ())
    }

    async fn delete_remediation_request(
        &self,
        namespace: &str,
        request: &RequestRef,
    ) -> Result<(), KubeError> {
        let api = dynamic_api(&self.client, namespace, &request.api_version, &request.kind);
        let action = || format!("delete {} {namespace}/{}", request.kind, request.name);
        self.delete_gone_ok(action, api.delete(&request.name, &DeleteParams::default()))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member the new status no longer has is sent as `null` (removed on the server), nested
    /// objects are diffed, unchanged members are not sent, lists are sent whole.
    #[test]
    fn merge_diff_removes_what_is_gone() {
        let before = json!({"phase": "Running", "lastUpdated": "t1",
            "providerStatus": {"instanceState": "poweredOn", "taskRef": "task-82"},
            "addresses": [{"address": "a", "type": "InternalDNS"}]});
        let after = json!({"phase": "Running", "lastUpdated": "t2",
            "providerStatus": {"instanceState": "poweredOn"},
            "addresses": [{"address": "b", "type": "InternalDNS"}]});
        assert_eq!(
            merge_diff(&before, &after),
            json!({"lastUpdated": "t2", "providerStatus": {"taskRef": null},
                   "addresses": [{"address": "b", "type": "InternalDNS"}]})
        );
        assert_eq!(merge_diff(&after, &after), json!({}));
        assert_eq!(merge_diff(&Value::Null, &after), after);
        // Applying the patch gives `after` back.
        let mut patched = before.clone();
        json_patch::merge(&mut patched, &merge_diff(&before, &after));
        assert_eq!(patched, after);
    }

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

    #[test]
    fn a_status_patch_removes_what_the_new_status_no_longer_has() {
        let before = json!({"phase": "Provisioning", "providerStatus": {
            "taskRef": "task-100", "conditions": [{"type": "A"}], "instanceId": "x"}});
        let after = json!({"phase": "Provisioning", "providerStatus": {
            "conditions": [{"type": "B"}], "instanceId": "x"}});
        assert_eq!(
            merge_diff(&before, &after),
            json!({"providerStatus": {"taskRef": null, "conditions": [{"type": "B"}]}})
        );
        assert_eq!(merge_diff(&Value::Null, &after), after);
        assert_eq!(merge_diff(&after, &after), json!({}));
    }
}
