//! The MachineHealthCheck controller: the pure planner (`plan::health`) over the shared caches,
//! its remediations carried out through the API server — a Machine deleted goes through the
//! machine controller's deletion lifecycle (hooks, drain, VM, Node), and its control plane
//! machine set replaces it in the same domain. Woken by its own changes and by Machine and Node
//! changes in its namespace; otherwise it comes back exactly when a verdict can change.
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::context::now;
use super::kube_ops::ApiServer;
use super::{Context, Error, NOT_SYNCED_REQUEUE};
use crate::api::Machine;
use crate::api::machine_health_check::MachineHealthCheck;
use crate::plan::health::remediation::{BACKOFF_ANNOTATION, RemediationAction, request_ref};
use crate::plan::health::status::EventObject;
use crate::plan::health::targets::EXTERNAL_REMEDIATION_ANNOTATION;
use crate::plan::health::{HealthInput, plan_health};
use crate::reconcile::kube::{KubeOps, machine_ref};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "machinehealthcheck";
/// With nothing that can change on its own, the check is looked at again this often.
pub const IDLE_REQUEUE: Duration = Duration::from_secs(600);

fn key(h: &MachineHealthCheck) -> String {
    format!(
        "{CONTROLLER}/{}/{}",
        h.metadata.namespace.as_deref().unwrap_or_default(),
        h.name_any()
    )
}

/// The checks of a namespace (a Machine or Node change may concern any of them; Nodes are
/// cluster-scoped, so `None` means every namespace).
pub fn checks_in(
    checks: &[Arc<DeserializeGuard<MachineHealthCheck>>],
    namespace: Option<&str>,
) -> Vec<ObjectRef<DeserializeGuard<MachineHealthCheck>>> {
    checks
        .iter()
        .filter(|c| namespace.is_none() || c.meta().namespace.as_deref() == namespace)
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

fn api_for(client: &kube::Client, ns: &str, api_version: &str, kind: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// The reconciler.
pub async fn reconcile(mhc: Arc<MachineHealthCheck>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.stores.all_synced() {
        return Ok(Action::requeue(NOT_SYNCED_REQUEUE));
    }
    let started = Instant::now();
    let k = key(&mhc);
    let result = check(&mhc, &ctx).await;
    ctx.record(CONTROLLER, &k, started, &result);
    result
}

async fn check(mhc: &MachineHealthCheck, ctx: &Context) -> Result<Action, Error> {
    let ns = mhc.metadata.namespace.clone().unwrap_or_default();
    let machines: Vec<Machine> = ctx.stores.machines.valid();
    let nodes = ctx.stores.nodes.valid();
    let replacing = ctx.stores.machine_sets.valid().iter().any(|c| {
        c.metadata.namespace.as_deref() == Some(ns.as_str())
            && c.status.as_ref().and_then(|s| s.replicas).unwrap_or(0)
                > c.spec.replicas_or_default()
    });
    // A remediation template and the requests it made: read directly (rare, and of kinds we do
    // not watch).
    let mut template = None;
    let mut requests = BTreeSet::new();
    if let Some(t) = &mhc.spec.remediation_template {
        let kind = t.kind.clone().unwrap_or_default();
        let av = t.api_version.clone().unwrap_or_default();
        let tns = t.namespace.clone().unwrap_or_else(|| ns.clone());
        if let Ok(obj) = api_for(&ctx.client, &tns, &av, &kind)
            .get(t.name.as_deref().unwrap_or_default())
            .await
        {
            template = serde_json::to_value(obj).ok();
        }
        let req_kind = kind.strip_suffix("Template").unwrap_or(&kind).to_string();
        if let Ok(list) = api_for(&ctx.client, &ns, &av, &req_kind)
            .list(&Default::default())
            .await
        {
            requests.extend(list.items.into_iter().map(|o| o.name_any()));
        }
    }
    let input = HealthInput {
        mhc,
        machines: &machines,
        nodes: &nodes,
        cpms_replacement_in_progress: replacing,
        remediation_template: template.as_ref(),
        remediation_requests: &requests,
        now: now(),
    };
    let plan = plan_health(&input);
    if plan.paused {
        return Ok(Action::await_change());
    }
    let name = mhc.name_any();
    let api: Api<MachineHealthCheck> = Api::namespaced(ctx.client.clone(), &ns);
    if plan.status.is_some() && mhc.status != plan.status {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": plan.status})),
        )
        .await?;
    }
    let current = mhc.annotations().get(BACKOFF_ANNOTATION).cloned();
    if current != plan.backoff_annotation {
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {BACKOFF_ANNOTATION: plan.backoff_annotation}}})),
        )
        .await?;
    }
    let kube = ApiServer {
        client: ctx.client.clone(),
        recorder: ctx.recorder.clone(),
    };
    let regarding = |o: &EventObject| -> ObjectReference {
        match o {
            EventObject::Mhc => mhc.object_ref(&()),
            EventObject::Machine(m) => machines
                .iter()
                .find(|x| {
                    x.metadata.namespace.as_deref() == Some(ns.as_str()) && x.name_any() == *m
                })
                .map(machine_ref)
                .unwrap_or_else(|| mhc.object_ref(&())),
        }
    };
    let machine_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    for r in &plan.remediations {
        let done: Result<(), String> = match &r.action {
            RemediationAction::DeleteMachine => kube
                .delete_machine(&ns, &r.machine)
                .await
                .map_err(|e| e.to_string()),
            RemediationAction::AnnotateExternal => machine_api
                .patch(
                    &r.machine,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"metadata": {"annotations": {EXTERNAL_REMEDIATION_ANNOTATION: ""}}})),
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            RemediationAction::CreateRequest(obj) => {
                let av = obj["apiVersion"].as_str().unwrap_or_default();
                let kind = obj["kind"].as_str().unwrap_or_default();
                match serde_json::from_value::<DynamicObject>(obj.clone()) {
                    Ok(d) => api_for(&ctx.client, &ns, av, kind)
                        .create(&PostParams::default(), &d)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                }
            }
        };
        match done {
            Ok(()) => {
                kube.record(
                    regarding(&r.event.object),
                    r.event.warning,
                    r.event.reason,
                    &r.event.message,
                )
                .await;
            }
            Err(e) => {
                tracing::warn!(machine = %r.machine, error = %e, "remediation failed");
                kube.record(
                    regarding(&EventObject::Machine(r.machine.clone())),
                    true,
                    crate::plan::health::status::event::MACHINE_DELETION_FAILED,
                    &format!("remediation ({}) failed: {e}", r.action.describe()),
                )
                .await;
            }
        }
    }
    if let Some(t) = &mhc.spec.remediation_template {
        for req in &plan.delete_requests {
            let _ = api_for(&ctx.client, &ns, &req.api_version, &req.kind)
                .delete(&req.name, &DeleteParams::default())
                .await;
            let _ = request_ref(t, &req.name);
        }
    }
    for e in &plan.events {
        kube.record(regarding(&e.object), e.warning, e.reason, &e.message)
            .await;
    }
    ctx.metrics.health_checked(
        &format!("{ns}/{name}"),
        plan.unhealthy() as i64,
        plan.short_circuited,
    );
    Ok(Action::requeue(plan.requeue.unwrap_or(IDLE_REQUEUE)))
}

/// Failures back off per check.
pub fn error_policy(mhc: Arc<MachineHealthCheck>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.next(&key(&mhc));
    tracing::warn!(error = %error, ?delay, "machine health check failed; retrying");
    Action::requeue(delay)
}
