//! The ControlPlaneMachineSet controller: the pure planner (`plan::cpms`) over the shared
//! caches, its decisions applied through the API server like local mode applies them to its
//! store. The finalizer is the only top-level action, as upstream: Apply plans and acts;
//! Cleanup releases the machines (strips the set's owner references) and deletes nothing.
//!
//! Before each creation the machines of the namespace are listed directly from the API server,
//! not from the cache, and the planner's `confirm_create` decides on that fresh read — a stale
//! cache must never make a second replacement (OCPBUGS-4297, OCPBUGS-7516).
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::context::now;
use super::kube_ops::ApiServer;
use super::{Context, Error, NOT_SYNCED_REQUEUE};
use crate::api::control_plane_machine_set::{CPMS_FINALIZER, ControlPlaneMachineSet};
use crate::api::{Machine, VSphereDeploymentZone};
use crate::plan::cpms::domains::{domain_states, node_states};
use crate::plan::cpms::{CpmsInput, confirm_create, owner_ref, plan};
use crate::plan::placement::DEPLOYMENT_ZONE_LABEL;
use crate::reconcile::kube::{EventRecord, KubeOps};
use crate::vcenter::Inventory;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "controlplanemachineset";
/// With nothing pending, the set is looked at again this often.
pub const IDLE_REQUEUE: Duration = Duration::from_secs(300);

fn key(c: &ControlPlaneMachineSet) -> String {
    format!(
        "{CONTROLLER}/{}/{}",
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.name_any()
    )
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
    ctx.record(CONTROLLER, &k, started, &result);
    result
}

/// The inventory of each zone server the set names (one read per server).
async fn inventories(
    ctx: &Context,
    cpms: &ControlPlaneMachineSet,
    zones: &BTreeMap<String, VSphereDeploymentZone>,
) -> BTreeMap<String, Inventory> {
    let mut out = BTreeMap::new();
    for name in cpms.spec.vsphere_failure_domains() {
        let Some(server) = zones.get(name).and_then(|z| z.spec.server.clone()) else {
            continue;
        };
        if out.contains_key(&server) {
            continue;
        }
        match ctx.vcenter_client(&server).await {
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
    let ns = cpms.metadata.namespace.clone().unwrap_or_default();
    let zones = ctx.stores.zones_by_name();
    let fds = ctx.stores.failure_domains_by_name();
    let invs = inventories(ctx, cpms, &zones).await;
    let lookup = |server: &str| invs.get(server).cloned();
    // The OpenShift Infrastructure fallback is local mode's for now (no Infrastructure watch).
    let domains = domain_states(cpms, &zones, &fds, None, &lookup).states;
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
        domains: &domains,
        nodes: &nodes,
        now: &now,
        seed: uuid::Uuid::new_v4().as_u128() as u64,
    };
    let p = plan(&input);
    let kube = ApiServer {
        client: ctx.client.clone(),
        recorder: ctx.recorder.clone(),
    };
    let name = cpms.name_any();
    let sets: Api<ControlPlaneMachineSet> = Api::namespaced(ctx.client.clone(), &ns);
    if cpms.status.as_ref() != Some(&p.status) {
        sets.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": p.status })),
        )
        .await?;
    }
    let machine_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    for m in &p.adopt {
        let owner = owner_ref(cpms);
        let Some(current) = machines.iter().find(|x| x.name_any() == *m) else {
            continue;
        };
        let mut refs = current.owner_references().to_vec();
        refs.push(owner);
        machine_api
            .patch(
                m,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"ownerReferences": refs, "resourceVersion": current.resource_version()}})),
            )
            .await?;
    }
    for d in &p.delete {
        kube.delete_machine(&ns, &d.name)
            .await
            .map_err(|e| Error::Unreadable(e.to_string()))?;
    }
    for c in &p.create {
        // The uncached re-read.
        let fresh = machine_api.list(&ListParams::default()).await?.items;
        if !confirm_create(&input, &fresh, c) {
            tracing::info!(
                index = c.index,
                "index already has a machine in a fresh read; not creating"
            );
            continue;
        }
        let mut m = c.machine.clone();
        if let Some(domain) = &c.domain {
            m.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(DEPLOYMENT_ZONE_LABEL.to_string(), domain.clone());
        }
        kube.create_machine(&m)
            .await
            .map_err(|e| Error::Unreadable(e.to_string()))?;
    }
    let regarding = cpms.object_ref(&());
    for e in &p.events {
        kube.event(EventRecord::new(
            regarding.clone(),
            e.warning,
            e.reason,
            &e.message,
        ))
        .await;
    }
    Ok(Action::requeue(p.requeue.unwrap_or(IDLE_REQUEUE)))
}

/// Deleting the set releases its machines and deletes nothing (upstream: the generator then
/// recreates an Inactive set).
async fn release(cpms: &ControlPlaneMachineSet, ctx: &Context) -> Result<Action, Error> {
    let ns = cpms.metadata.namespace.clone().unwrap_or_default();
    let uid = cpms.metadata.uid.clone().unwrap_or_default();
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    for m in ctx.stores.machines.valid() {
        if m.metadata.namespace.as_deref() != Some(ns.as_str()) {
            continue;
        }
        let refs = m.owner_references();
        if !refs.iter().any(|r| r.uid == uid) {
            continue;
        }
        let kept: Vec<_> = refs.iter().filter(|r| r.uid != uid).cloned().collect();
        api.patch(
            &m.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"ownerReferences": kept, "resourceVersion": m.resource_version()}})),
        )
        .await?;
    }
    Ok(Action::await_change())
}

/// Failures back off per set.
pub fn error_policy(cpms: Arc<ControlPlaneMachineSet>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.next(&key(&cpms));
    tracing::warn!(error = %error, ?delay, "control plane machine set reconcile failed; retrying");
    Action::requeue(delay)
}
