//! The MachineHealthCheck controller: the pure planner (`plan::health`) over the shared caches,
//! its remediations carried out through the API server — a Machine deleted goes through the
//! machine controller's deletion lifecycle (hooks, drain, VM, Node), and its control plane
//! machine set replaces it in the same domain. Woken by its own changes and by Machine and Node
//! changes in its namespace; otherwise it comes back exactly when a verdict can change.
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::api_server::{ApiServer, dynamic_api};
use super::context::now;
use super::{Context, Error, NOT_SYNCED_REQUEUE};
use crate::api::Machine;
use crate::api::machine_health_check::MachineHealthCheck;
use crate::plan::health::{HealthInput, plan_health, replacement_in_progress};
use crate::reconcile::health::{apply, namespace};
use crate::reconcile::kube_ops::KubeError;

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

/// The reconciler.
pub async fn reconcile(mhc: Arc<MachineHealthCheck>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.stores.all_synced() {
        return Ok(Action::requeue(NOT_SYNCED_REQUEUE));
    }
    let started = Instant::now();
    let k = key(&mhc);
    let result = check(&mhc, &ctx).await;
    ctx.measure(CONTROLLER, started, &result);
    ctx.settle(&k, &result);
    result
}

async fn check(mhc: &MachineHealthCheck, ctx: &Context) -> Result<Action, Error> {
    let ns = namespace(mhc);
    let machines: Vec<Machine> = ctx.stores.machines.valid();
    let nodes = ctx.stores.nodes.valid();
    let sets = ctx.stores.machine_sets.valid();
    let kube = ctx.api_server();
    let (template, requests) = remediation_reads(mhc, &kube, &ns).await?;
    let input = HealthInput {
        mhc,
        machines: &machines,
        nodes: &nodes,
        cpms_replacement_in_progress: replacement_in_progress(&sets, &ns),
        remediation_template: template.as_ref(),
        remediation_requests: &requests,
        now: now(),
    };
    let plan = plan_health(&input);
    if plan.paused {
        return Ok(Action::await_change());
    }
    let done = apply(&kube, mhc, &machines, &plan, &input.now).await;
    ctx.metrics.health_checked(
        &format!("{ns}/{}", mhc.name_any()),
        plan.unhealthy() as i64,
        plan.short_circuited,
    );
    match done.failed.into_iter().next() {
        Some(first) => Err(Error::KubeOps(first)),
        None => Ok(Action::requeue(plan.requeue.unwrap_or(IDLE_REQUEUE))),
    }
}

/// The remediation template a check names and the requests of its kind that exist: read
/// directly (rare, and of kinds we do not watch). A template that is not there is the planner's
/// to report (`None`); any other failure — a list that failed is not "no requests" — fails the
/// reconcile, typed, so it is retried rather than decided on a partial read.
async fn remediation_reads(
    mhc: &MachineHealthCheck,
    kube: &ApiServer,
    ns: &str,
) -> Result<(Option<serde_json::Value>, BTreeSet<String>), Error> {
    let Some(t) = &mhc.spec.remediation_template else {
        return Ok((None, BTreeSet::new()));
    };
    // A refused reference is never read (the planner says why in the check's condition): a
    // read with the manager's rights would tell a tenant whether that object exists.
    if crate::plan::health::remediation::template_ref_refused(t, ns).is_some() {
        return Ok((None, BTreeSet::new()));
    }
    let kind = t.kind.clone().unwrap_or_default();
    let av = t.api_version.clone().unwrap_or_default();
    let tns = t.namespace.clone().unwrap_or_else(|| ns.to_string());
    let tname = t.name.clone().unwrap_or_default();
    let template = match dynamic_api(&kube.client, &tns, &av, &kind)
        .get_opt(&tname)
        .await
    {
        Ok(obj) => obj.and_then(|o| serde_json::to_value(o).ok()),
        Err(e) => {
            return Err(KubeError::from_client(format!("get {kind} {tns}/{tname}"), &e).into());
        }
    };
    let req_kind = kind.strip_suffix("Template").unwrap_or(&kind).to_string();
    let requests = match dynamic_api(&kube.client, ns, &av, &req_kind)
        .list(&Default::default())
        .await
    {
        Ok(list) => list.items.into_iter().map(|o| o.name_any()).collect(),
        // The request kind may not be served at all (no CRD): then none exists.
        Err(kube::Error::Api(s)) if s.code == 404 => BTreeSet::new(),
        Err(e) => {
            return Err(KubeError::from_client(format!("list {req_kind} in {ns}"), &e).into());
        }
    };
    Ok((template, requests))
}

/// Failures back off per check.
pub fn error_policy(mhc: Arc<MachineHealthCheck>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.next(&key(&mhc));
    tracing::warn!(error = %error, ?delay, "machine health check failed; retrying");
    Action::requeue(delay)
}
