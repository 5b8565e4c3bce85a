//! The VSphereMachine controller (Cluster API's InfraMachine): CAPV's first half. It resolves
//! what a Machine wants ([`resolve`]: owner Machine and Cluster, bootstrap data, the failure
//! domain's zone) into a VSphereVM, which the machine actuator's per-server sweep makes into a
//! VM ([`super::machine::reconcile_vsphere_vm`]), and reports the VM back to CAPI (providerID,
//! ready, addresses, conditions). Deleting a VSphereMachine deletes its VSphereVM and waits for
//! it (the VM destroyed) before the finalizer goes.
//!
//! CAPI's Machine and Cluster come from their caches ([`super::Stores`]), and their changes
//! wake the machine: a Machine's to its VSphereMachine (`spec.infrastructureRef`), a Cluster's
//! to the VSphereMachines labelled with its name. Where Cluster API is not installed those
//! caches are absent and hold nothing back. The bootstrap data Secret is read by name, and
//! only by the pass that makes the VSphereVM ([`machine::bootstrap_secret_to_read`]).
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, PostParams};
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::context::now;
use super::{Context, Error, FIELD_MANAGER, NOT_SYNCED_REQUEUE};
use crate::api::capi_core::{CLUSTER_NAME_LABEL, CapiCluster, CapiMachine};
use crate::api::vsphere_cluster::VSphereCluster;
use crate::api::vsphere_machine::VSphereMachine;
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::capi_machine::machine::{self, Next, VmAction};
use crate::reconcile::kube_ops::{KubeError, KubeOps};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "vspheremachine";

/// How often a machine waiting on something that does not wake it looks again: its zone, the
/// bootstrap Secret the Machine names (not watched), its VSphereVM's provisioning. Changes of
/// its Machine and Cluster wake it sooner.
pub const WAIT_POLL: Duration = Duration::from_secs(10);

/// A provisioned machine's periodic look (its VSphereVM's changes wake it sooner).
const IDLE: Duration = Duration::from_secs(600);

/// The VSphereMachine a VSphereVM event concerns: its controller owner.
pub fn owner_of(
    vm: &DeserializeGuard<VSphereVM>,
) -> Option<ObjectRef<DeserializeGuard<VSphereMachine>>> {
    let meta = vm.meta();
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "VSphereMachine" && o.controller == Some(true))?;
    Some(ObjectRef::new(&owner.name).within(meta.namespace.as_deref().unwrap_or_default()))
}

/// The VSphereMachine a CAPI Machine event concerns: the one its `spec.infrastructureRef`
/// names, in its namespace (the reconcile checks the VSphereMachine's owner reference).
pub fn infrastructure_of(
    machine: &DeserializeGuard<CapiMachine>,
) -> Option<ObjectRef<DeserializeGuard<VSphereMachine>>> {
    let m = machine.0.as_ref().ok()?;
    let r = m.spec.infrastructure_ref.as_ref()?;
    (r.kind == "VSphereMachine" && !r.name.is_empty()).then(|| {
        ObjectRef::new(&r.name).within(m.metadata.namespace.as_deref().unwrap_or_default())
    })
}

/// The VSphereMachines a CAPI Cluster event concerns: those of its namespace labelled with its
/// name (`cluster.x-k8s.io/cluster-name`, which CAPI sets on every infrastructure machine).
pub fn machines_of_cluster(
    vsphere_machines: &[Arc<DeserializeGuard<VSphereMachine>>],
    cluster: &DeserializeGuard<CapiCluster>,
) -> Vec<ObjectRef<DeserializeGuard<VSphereMachine>>> {
    let meta = cluster.meta();
    let (ns, name) = (meta.namespace.as_deref(), meta.name.as_deref());
    vsphere_machines
        .iter()
        .filter(|v| {
            let m = v.meta();
            m.namespace.as_deref() == ns
                && m.labels
                    .as_ref()
                    .and_then(|l| l.get(CLUSTER_NAME_LABEL))
                    .map(String::as_str)
                    == name
        })
        .map(|v| ObjectRef::from_obj(v.as_ref()))
        .collect()
}

/// What of a Cluster wakes its machines when it changes: its identity, its deletion and what a
/// pass reads of it ([`machine::cluster_read`]); its other status changes do not.
pub fn cluster_fingerprint(cluster: &DeserializeGuard<CapiCluster>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let meta = cluster.meta();
    meta.uid.hash(&mut h);
    meta.deletion_timestamp.is_some().hash(&mut h);
    match &cluster.0 {
        Ok(c) => {
            let (paused, infra, cp, infra_ref) = machine::cluster_read(c);
            (paused, infra, cp).hash(&mut h);
            infra_ref.map(|r| r.to_string()).hash(&mut h);
        }
        Err(e) => e.error.hash(&mut h),
    }
    h.finish()
}

fn backoff_key(vsm: &VSphereMachine) -> String {
    format!(
        "{CONTROLLER}/{}/{}",
        vsm.namespace().unwrap_or_default(),
        vsm.name_any()
    )
}

pub async fn reconcile(vsm: Arc<VSphereMachine>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.stores.all_synced() {
        return Ok(Action::requeue(NOT_SYNCED_REQUEUE));
    }
    let started = Instant::now();
    let result = reconcile_one(&vsm, &ctx).await;
    ctx.measure(CONTROLLER, started, &result);
    ctx.settle(&backoff_key(&vsm), &result);
    result
}

/// The machine's VSphereVM, as cached: the one it controls.
fn vsphere_vm_of(vsm: &VSphereMachine, ctx: &Context) -> Option<VSphereVM> {
    let uid = vsm.metadata.uid.as_deref()?;
    ctx.stores.vsphere_vms.find(|vm| {
        vm.metadata.namespace == vsm.metadata.namespace
            && vm
                .owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
    })
}

async fn reconcile_one(vsm: &VSphereMachine, ctx: &Context) -> Result<Action, Error> {
    let ns = vsm.namespace().unwrap_or_default();
    let existing = vsphere_vm_of(vsm, ctx);
    let zones = ctx.stores.zones_by_name();
    let fds = ctx.stores.failure_domains_by_name();
    // Deleting: only the VSphereVM matters; CAPI's objects are not read, but for the pause
    // (`plan::capi_machine::pause`: clusterctl move deletes the source's paused objects).
    let deleting = vsm.metadata.deletion_timestamp.is_some();
    if deleting
        && let Some(why) = super::pause::paused(
            ctx,
            "VSphereMachine",
            &vsm.metadata,
            &mut Default::default(),
        )
        .await?
    {
        tracing::debug!(machine = %format!("{ns}/{}", vsm.name_any()), %why, "paused; deletion waits");
        return Ok(Action::requeue(
            crate::plan::capi_machine::pause::PAUSED_SAFETY_POLL,
        ));
    }
    let machine = match deleting {
        true => None,
        false => owner_machine(vsm, ctx)?,
    };
    let cluster = match &machine {
        Some(m) => super::pause::capi_cluster(ctx, &ns, &m.spec.cluster_name).await?,
        None => None,
    };
    let vsphere_cluster = cluster.as_ref().and_then(|c| infra_cluster(c, ctx));
    let secret = match machine::bootstrap_secret_to_read(vsm, machine.as_ref(), existing.as_ref()) {
        Some(name) => {
            let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
            api.get_opt(name)
                .await
                .map_err(|e| KubeError::from_client(format!("get Secret {ns}/{name}"), &e))?
        }
        None => None,
    };
    let now = now();
    let legacy_failure_domain = crate::api::conversion::legacy_failure_domain(vsm);
    let plan = machine::plan(&machine::Input {
        vsphere_machine: vsm,
        machine: machine.as_ref(),
        cluster: cluster.as_ref(),
        vsphere_cluster: vsphere_cluster.as_ref(),
        zones: &zones,
        failure_domains: &fds,
        bootstrap_secret: secret.as_ref(),
        existing_vm: existing.as_ref(),
        legacy_failure_domain: legacy_failure_domain.as_deref(),
        now: &now,
    });
    match &plan.vm {
        VmAction::None => {}
        VmAction::Create(vm) => create_vm(ctx, vsm, vm, &plan.ignored).await?,
        VmAction::Delete(name) => delete_vm(ctx, &ns, name).await?,
    }
    if let Some(after) = &plan.after {
        write(ctx, vsm, after).await?;
    }
    if machine.is_none() && !deleting {
        tracing::debug!("waiting for the owner Machine");
    }
    Ok(match plan.next {
        Next::AwaitChange => Action::await_change(),
        Next::Paused => Action::requeue(crate::plan::capi_machine::pause::PAUSED_SAFETY_POLL),
        Next::Poll => Action::requeue(WAIT_POLL),
        Next::Idle => Action::requeue(IDLE),
    })
}

/// Delete the machine's VSphereVM (its VM powered off and destroyed by the sweep); gone
/// already is done.
async fn delete_vm(ctx: &Context, ns: &str, name: &str) -> Result<(), Error> {
    let api: Api<VSphereVM> = Api::namespaced(ctx.client.clone(), ns);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => tracing::info!(vspherevm = %name, "deleting the machine's VSphereVM"),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => {
            return Err(KubeError::from_client(format!("delete VSphereVM {ns}/{name}"), &e).into());
        }
    }
    Ok(())
}

/// Create the VSphereVM the plan made (one of that name already there is taken as this
/// machine's: the cache will show it), with its events.
async fn create_vm(
    ctx: &Context,
    vsm: &VSphereMachine,
    vm: &VSphereVM,
    ignored: &[&'static str],
) -> Result<(), Error> {
    let ns = vm.namespace().unwrap_or_default();
    let name = vm.name_any();
    let api: Api<VSphereVM> = Api::namespaced(ctx.client.clone(), &ns);
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    let created = match api.create(&pp, vm).await {
        Ok(vm) => vm,
        Err(kube::Error::Api(s)) if s.code == 409 => api
            .get(&name)
            .await
            .map_err(|e| KubeError::from_client(format!("get VSphereVM {ns}/{name}"), &e))?,
        Err(e) => {
            return Err(KubeError::from_client(format!("create VSphereVM {ns}/{name}"), &e).into());
        }
    };
    let kube = ctx.api_server();
    let regarding = crate::plan::capi_machine::actuated::vm_ref(&created);
    kube.record(
        regarding.clone(),
        false,
        "Created",
        &format!(
            "VSphereVM {ns}/{name} for VSphereMachine {}",
            vsm.name_any()
        ),
    )
    .await;
    if !ignored.is_empty() {
        kube.record(
            regarding,
            true,
            "FieldsIgnored",
            &format!(
                "set but not acted on by vsphere-provider (yet): {}",
                ignored.join(", ")
            ),
        )
        .await;
    }
    Ok(())
}

/// Write the VSphereMachine when it changed: finalizers and `spec.providerID` (guarded by the
/// resourceVersion read), then the status.
async fn write(
    ctx: &Context,
    before: &VSphereMachine,
    after: &VSphereMachine,
) -> Result<(), Error> {
    if before == after {
        return Ok(());
    }
    let (b, a) = (&before.metadata, &after.metadata);
    let meta = (b.finalizers != a.finalizers || before.spec.provider_id != after.spec.provider_id)
        .then(|| {
            let mut p = json!({ "metadata": {
                "resourceVersion": b.resource_version,
                "finalizers": a.finalizers.clone().unwrap_or_default(),
            }});
            if before.spec.provider_id != after.spec.provider_id {
                p["spec"] = json!({ "providerID": after.spec.provider_id });
            }
            p
        });
    // Written at the version Cluster API applies the VSphereMachine at (see `write_object_at`):
    // the hub, v1beta2, which Cluster API v1.11+ applies at; v1beta1 for the Machine of an older
    // Cluster API (a `cluster.x-k8s.io/v1beta1` owner reference), the status converted at this
    // edge, when this process serves the conversion webhook that stores such a write (without
    // it, a v1beta1 write would be stored unconverted, so the hub it is).
    if !ctx.converts || capi_version(before) != "cluster.x-k8s.io/v1beta1" {
        let status = (before.status != after.status)
            .then(|| super::api_server::status_patch(&before.status, &after.status));
        ctx.api_server()
            .write_object::<VSphereMachine>(&after.metadata, meta, status)
            .await?;
        return Ok(());
    }
    let status = (before.status != after.status)
        .then(|| {
            let (b, a) = (at_v1beta1(before)?, at_v1beta1(after)?);
            Ok::<_, Error>(super::api_server::status_patch(&b["status"], &a["status"]))
        })
        .transpose()?;
    ctx.api_server()
        .write_object_at(V1BETA1, "VSphereMachine", &after.metadata, meta, status)
        .await?;
    Ok(())
}

const V1BETA1: &str = crate::api::infrastructure::V1BETA1;

/// The VSphereMachine as its v1beta1 JSON.
fn at_v1beta1(vsm: &VSphereMachine) -> Result<serde_json::Value, Error> {
    let mut v = serde_json::to_value(vsm).map_err(|e| Error::InvalidObject(e.to_string()))?;
    v["apiVersion"] = json!(<VSphereMachine as kube::Resource>::api_version(&()));
    v["kind"] = json!("VSphereMachine");
    crate::api::conversion::convert(&v, V1BETA1).map_err(|e| Error::InvalidObject(e.to_string()))
}

/// The CAPI API version the machine's owner references name (`cluster.x-k8s.io/v1beta1` when
/// none does).
fn capi_version(vsm: &VSphereMachine) -> String {
    vsm.owner_references()
        .iter()
        .find(|o| o.kind == "Machine" && o.api_version.starts_with("cluster.x-k8s.io/"))
        .map(|o| o.api_version.clone())
        .unwrap_or_else(|| "cluster.x-k8s.io/v1beta1".into())
}

/// The CAPI Machine owning the VSphereMachine, from the cache (none where Cluster API is not
/// installed; once it is, the Machines' arrival in the cache wakes their VSphereMachines).
fn owner_machine(vsm: &VSphereMachine, ctx: &Context) -> Result<Option<CapiMachine>, Error> {
    let Some(owner) = vsm
        .owner_references()
        .iter()
        .find(|o| o.kind == "Machine" && o.api_version.starts_with("cluster.x-k8s.io/"))
    else {
        return Ok(None);
    };
    let ns = vsm.namespace().unwrap_or_default();
    match ctx.stores.capi_machines.get(Some(&ns), &owner.name) {
        None => Ok(None),
        Some(Ok(m)) => Ok(Some(m)),
        Some(Err(why)) => Err(Error::InvalidObject(format!(
            "Machine {ns}/{}: {why}",
            owner.name
        ))),
    }
}

/// The VSphereCluster the Cluster's `spec.infrastructureRef` names, from the cache, in the
/// Cluster's own namespace only: a v1beta1 reference may name another namespace, and a tenant's
/// Cluster naming another tenant's VSphereCluster must not place machines by it (v1beta2
/// references carry no namespace at all).
fn infra_cluster(cluster: &CapiCluster, ctx: &Context) -> Option<VSphereCluster> {
    let r = cluster.spec.get("infrastructureRef")?;
    if r.get("kind").and_then(|k| k.as_str()) != Some("VSphereCluster") {
        return None;
    }
    let name = r.get("name")?.as_str()?;
    let ns = cluster.metadata.namespace.as_deref().unwrap_or_default();
    if r.get("namespace")
        .and_then(|n| n.as_str())
        .is_some_and(|n| !n.is_empty() && n != ns)
    {
        tracing::warn!(cluster = %format!("{ns}/{}", cluster.metadata.name.as_deref().unwrap_or_default()),
            "spec.infrastructureRef names another namespace: ignored");
        return None;
    }
    ctx.stores.clusters.get(Some(ns), name)?.ok()
}

/// Kubernetes errors back off per machine.
pub fn error_policy(vsm: Arc<VSphereMachine>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.next(&backoff_key(&vsm));
    tracing::warn!(error = %error, ?delay, "VSphereMachine reconcile failed; retrying");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn guard<K: serde::de::DeserializeOwned>(v: serde_json::Value) -> DeserializeGuard<K> {
        DeserializeGuard(Ok(serde_json::from_value(v).unwrap()))
    }

    fn cluster(status: serde_json::Value, paused: bool) -> DeserializeGuard<CapiCluster> {
        guard(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "ns", "uid": "u1"},
            "spec": {"paused": paused}, "status": status
        }))
    }

    #[test]
    fn only_what_a_pass_reads_of_a_cluster_wakes_its_machines() {
        let base = cluster(
            json!({"initialization": {"infrastructureProvisioned": true}}),
            false,
        );
        let f = cluster_fingerprint(&base);
        let churn = cluster(
            json!({"initialization": {"infrastructureProvisioned": true},
                "conditions": [{"type": "Available", "status": "False"}], "phase": "Provisioned"}),
            false,
        );
        assert_eq!(
            cluster_fingerprint(&churn),
            f,
            "other status changes do not wake"
        );
        let paused = cluster(
            json!({"initialization": {"infrastructureProvisioned": true}}),
            true,
        );
        assert_ne!(cluster_fingerprint(&paused), f);
        let initialized = cluster(
            json!({"initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true}}),
            false,
        );
        assert_ne!(cluster_fingerprint(&initialized), f);
    }

    #[test]
    fn a_machine_wakes_the_vsphere_machine_it_names_and_a_cluster_those_labelled_with_it() {
        let m: DeserializeGuard<CapiMachine> = guard(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m1", "namespace": "ns"},
            "spec": {"clusterName": "c1", "infrastructureRef":
                {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "VSphereMachine", "name": "vm-1"}}
        }));
        assert_eq!(
            infrastructure_of(&m),
            Some(ObjectRef::new("vm-1").within("ns"))
        );
        let other: DeserializeGuard<CapiMachine> = guard(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m2", "namespace": "ns"},
            "spec": {"infrastructureRef": {"kind": "DockerMachine", "name": "d"}}
        }));
        assert_eq!(infrastructure_of(&other), None);
        let vsm = |name: &str, ns: &str, cluster: &str| {
            Arc::new(guard::<VSphereMachine>(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachine",
                "metadata": {"name": name, "namespace": ns,
                    "labels": {CLUSTER_NAME_LABEL: cluster}},
                "spec": {"template": "t"}
            })))
        };
        let all = [
            vsm("a", "ns", "c1"),
            vsm("b", "ns", "c2"),
            vsm("c", "other", "c1"),
        ];
        let woken = machines_of_cluster(&all, &cluster(json!({}), false));
        assert_eq!(woken, [ObjectRef::new("a").within("ns")]);
    }
}
