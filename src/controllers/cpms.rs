//! The ControlPlaneMachineSet controller: the pure planner (`plan::cpms`) over the shared
//! caches, its decisions applied through the API server like local mode applies them to its
//! store. The finalizer is the only top-level action, as upstream: Apply plans and acts;
//! Cleanup releases the machines (strips the set's owner references) and deletes nothing.
//!
//! The plan is applied by `reconcile::cpms`, the same code local mode runs: before each creation
//! the machines of the namespace are listed directly from the API server, not from the cache,
//! and the planner's `confirm_create` decides on that fresh read — a stale cache must never make
//! a second replacement (OCPBUGS-4297, OCPBUGS-7516).
//!
//! Failure domains that are no VSphereDeploymentZone come from OpenShift's `Infrastructure`
//! `cluster`, read directly when the set names one (no watch: it changes about never and
//! the set is looked at again every [`IDLE_REQUEUE`]).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::context::now;
use super::{Context, Error, NOT_SYNCED_REQUEUE};
use crate::api::Machine;
use crate::api::control_plane_machine_set::{CPMS_FINALIZER, ControlPlaneMachineSet};
use crate::api::openshift_config::v1::infrastructure::{CLUSTER, Infrastructure};
use crate::plan::cpms::domains::{domain_states, node_states, servers};
use crate::plan::cpms::{CpmsInput, plan};
use crate::plan::credentials::Principal;
use crate::plan::credentials::principal::for_openshift_spec;
use crate::reconcile::cpms::{apply as apply_plan, release as release_machines};
use crate::vcenter::Inventory;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "controlplanemachineset";
/// With nothing pending, the set is looked at again this often.
pub const IDLE_REQUEUE: Duration = Duration::from_secs(300);

/// `namespace/name`, as metrics label the set.
fn set_name(c: &ControlPlaneMachineSet) -> String {
    format!(
        "{}/{}",
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.name_any()
    )
}

fn key(c: &ControlPlaneMachineSet) -> String {
    format!("{CONTROLLER}/{}", set_name(c))
}

/// The sets a Machine change concerns: its controller owner.
pub fn sets_owning(
    m: &Machine,
) -> Vec<ObjectRef<kube::core::DeserializeGuard<ControlPlaneMachineSet>>> {
    m.owner_references()
        .iter()
        .filter(|o| o.kind == "ControlPlaneMachineSet" && o.controller == Some(true))
        .map(|o| {
            ObjectRef::new(&o.name).within(m.metadata.namespace.as_deref().unwrap_or_default())
        })
        .collect()
}

/// The sets a zone change concerns: those naming it as a failure domain.
pub fn sets_naming(
    sets: &[Arc<kube::core::DeserializeGuard<ControlPlaneMachineSet>>],
    zone: &str,
) -> Vec<ObjectRef<kube::core::DeserializeGuard<ControlPlaneMachineSet>>> {
    sets.iter()
        .filter(|c| {
            c.0.as_ref()
                .is_ok_and(|c| c.spec.vsphere_failure_domains().contains(&zone))
        })
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// The reconciler.
pub async fn reconcile(
    cpms: Arc<ControlPlaneMachineSet>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    if !ctx.stores.all_synced() {
        return Ok(Action::requeue(NOT_SYNCED_REQUEUE));
    }
    let started = Instant::now();
    let k = key(&cpms);
    let ns = cpms.metadata.namespace.clone().unwrap_or_default();
    let api: Api<ControlPlaneMachineSet> = Api::namespaced(ctx.client.clone(), &ns);
    let result = finalizer(&api, CPMS_FINALIZER, cpms, |event| async {
        match event {
            finalizer::Event::Apply(c) => apply(&c, &ctx).await,
            finalizer::Event::Cleanup(c) => release(&c, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)));
    ctx.measure(CONTROLLER, started, &result);
    ctx.settle(&k, &result);
    result
}

/// The OpenShift `Infrastructure` named `cluster`, read directly (it changes about never, and
/// only when the set names a domain that is no deployment zone; a cluster without OpenShift's
/// config API answers 404 and has none).
async fn infrastructure(ctx: &Context) -> Result<Option<Infrastructure>, Error> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "Infrastructure"),
        "infrastructures",
    );
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
    match api.get_opt(CLUSTER).await {
        Ok(None) => Ok(None),
        Ok(Some(o)) => serde_json::to_value(o)
            .and_then(serde_json::from_value)
            .map(Some)
            .map_err(|e| Error::Unreadable(format!("Infrastructure {CLUSTER}: {e}"))),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The inventory of each server (one read per server), read as the set's machines act: the
/// template's credentialsSecret, else the manager.
async fn inventories(
    ctx: &Context,
    servers: BTreeSet<String>,
    principal: &Principal,
) -> BTreeMap<String, Inventory> {
    let mut out = BTreeMap::new();
    for server in servers {
        match ctx.client_as(&server, principal).await {
            Ok(c) => match c.inventory().await {
                Ok(inv) => {
                    out.insert(server, inv);
                }
                Err(e) => tracing::warn!(%server, error = %e, "cannot read the inventory"),
            },
            Err(f) => tracing::warn!(%server, error = %f, "no vCenter client"),
        }
    }
    out
}

async fn apply(cpms: &ControlPlaneMachineSet, ctx: &Context) -> Result<Action, Error> {
    let zones = ctx.stores.zones_by_name();
    let fds = ctx.stores.failure_domains_by_name();
    let infra = if cpms
        .spec
        .vsphere_failure_domains()
        .iter()
        .any(|d| !zones.contains_key(*d))
    {
        infrastructure(ctx).await?
    } else {
        None
    };
    let principal = cpms
        .spec
        .template
        .machines_v1beta1_machine_openshift_io
        .as_ref()
        .map_or(Principal::Manager, |t| {
            for_openshift_spec(
                cpms.metadata.namespace.as_deref().unwrap_or_default(),
                &t.spec,
            )
        });
    let invs = inventories(ctx, servers(cpms, &zones, infra.as_ref()), &principal).await;
    let doms = domain_states(cpms, &zones, &fds, infra.as_ref(), &invs);
    let nodes = node_states(
        &ctx.stores
            .nodes
            .valid()
            .into_iter()
            .map(|n| (n.name_any(), n))
            .collect(),
    );
    let machines: Vec<Machine> = ctx.stores.machines.valid();
    let now = now();
    let input = CpmsInput {
        cpms,
        machines: &machines,
        domains: &doms.states,
        nodes: &nodes,
        now: &now,
        seed: uuid::Uuid::new_v4().as_u128() as u64,
        recovered: &Default::default(),
    };
    let p = plan(&input);
    let kube = ctx.api_server();
    let done = apply_plan(&kube, &input, &p, &doms).await;
    ctx.metrics.machine_set_applied(
        &set_name(cpms),
        i64::from(cpms.spec.replicas_or_default()),
        &p.status,
        done.created.len(),
        done.deleted.len(),
    );
    if let Some(first) = done.failed.into_iter().next() {
        return Err(Error::KubeOps(first));
    }
    Ok(Action::requeue(p.requeue.unwrap_or(IDLE_REQUEUE)))
}

/// Deleting the set releases its machines and deletes nothing.
async fn release(cpms: &ControlPlaneMachineSet, ctx: &Context) -> Result<Action, Error> {
    let kube = ctx.api_server();
    let done = release_machines(&kube, cpms, &ctx.stores.machines.valid()).await;
    ctx.metrics.machine_set_gone(&set_name(cpms));
    match done.failed.into_iter().next() {
        Some(first) => Err(Error::KubeOps(first)),
        None => Ok(Action::await_change()),
    }
}

/// Failures back off per set.
pub fn error_policy(cpms: Arc<ControlPlaneMachineSet>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.next(&key(&cpms));
    tracing::warn!(error = %error, ?delay, "control plane machine set reconcile failed; retrying");
    Action::requeue(delay)
}
