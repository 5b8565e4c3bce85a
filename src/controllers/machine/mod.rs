//! The Machine controller: Kubernetes hands Machines over one at a time, but vCenter is read per
//! server, for all its machines at once (`reconcile::machines::sweep`, the same sweep local mode
//! runs, driven like the zones under the server's write lock in [`Context::views`]). A reconcile
//! therefore asks the server's [`Sweeps`] gate: if a sweep since the machine last changed has
//! already decided for it and it is not due yet, that decision stands; otherwise one sweep runs
//! for every machine of the server and records a decision for each.
//! N machines woken together (a resync, a restart) cost one sweep, not N.
//!
//! Requeues come from the planner: a task in flight or a node expected → 10 s; a deleting VM →
//! 10 s; idle → [`IDLE_REQUEUE`]; a failure → the per-object exponential backoff. A task the
//! server's long poll watches ([`long_poll`]) wakes its machine when it ends instead: such a
//! machine waits for the periodic full read (`--machine-resync-interval`), and `--task-poll-interval`
//! is the fallback re-look where the long poll does not watch.
pub mod gate;
pub mod long_poll;
pub mod node_join;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::api_server::{dynamic_api, typed};
use super::context::now;
use super::pause::{ClusterReads, paused};
use super::watch::fingerprint;
use super::{Context, Error, NOT_SYNCED_REQUEUE};
use crate::api::Machine;
use crate::api::ipam::{ADDRESS_KIND, CLAIM_API_VERSION, CLAIM_KIND, IpAddress, IpAddressClaim};
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::capi_machine::actuated::{machine_for, vm_key};
use crate::plan::capi_machine::pause::PAUSED_POLL;
use crate::plan::credentials::{Principal, principal};
use crate::plan::failure::Failure;
use crate::plan::machine::drain::PodInfo;
use crate::plan::machine::ipam::wanted_claims;
use crate::plan::machine::user_data::secret_name;
use crate::plan::machine::{Requeue, VcenterTrouble};
use crate::reconcile::kube_ops::KubeError;
use crate::reconcile::machines::{
    IpamObjects, SweepInput, SweepOutcome, key, machine_server, sweep,
};
pub use gate::{IDLE_REQUEUE, Sweeps};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "machine";

/// The machine's verdict as the controller's result: a failure is an error, so it is counted
/// as one and its retry comes from the error policy's per-machine backoff, which grows.
fn verdict(k: &str, r: Requeue, resync: std::time::Duration) -> Result<Action, Error> {
    match r {
        Requeue::Idle => Ok(Action::requeue(resync)),
        Requeue::After(d) => Ok(Action::requeue(d)),
        Requeue::NodeJoin => Ok(Action::requeue(crate::plan::machine::TASK_POLL)),
        Requeue::Backoff(why) => Err(Error::Machine(format!("machine {k}: {why}"))),
    }
}

/// Pods on the nodes of deleting machines (listed only for those: a drain is rare).
async fn pods_for_drains(
    ctx: &Context,
    machines: &[Machine],
) -> Result<BTreeMap<String, Vec<PodInfo>>, Error> {
    let mut out = BTreeMap::new();
    let api: Api<Pod> = Api::all(ctx.client.clone());
    for m in machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_some())
    {
        let Some(node) = m
            .status
            .as_ref()
            .and_then(|s| s.node_ref.as_ref())
            .and_then(|r| r.name.clone())
        else {
            continue;
        };
        let pods = api
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await?;
        out.insert(node, pods.items.iter().map(pod_info).collect());
    }
    Ok(out)
}

/// The user data Secrets of the machines not yet provisioned (read directly, one GET per
/// Secret: a handful per namespace, and Secrets are not watched). A Secret that is not there is
/// the planner's to report; any other read failure fails the sweep, typed.
async fn user_data_secrets(
    ctx: &Context,
    machines: &[Machine],
) -> Result<BTreeMap<String, Secret>, Error> {
    let wanted: std::collections::BTreeSet<(String, String)> = machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none() && m.spec.provider_id.is_none())
        .filter_map(|m| {
            let ns = m.metadata.namespace.clone().unwrap_or_default();
            Some((ns, secret_name(m)?))
        })
        .collect();
    let mut out = BTreeMap::new();
    for (ns, name) in wanted {
        let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
        match api.get_opt(&name).await {
            Ok(Some(s)) => {
                out.insert(format!("{ns}/{name}"), s);
            }
            Ok(None) => {}
            Err(e) => {
                return Err(KubeError::from_client(format!("get Secret {ns}/{name}"), &e).into());
            }
        }
    }
    Ok(out)
}

/// The IP address claims and addresses of the namespaces whose machines ask for IP pools
/// (listed directly, one list per kind and namespace, only when some machine does: a cluster
/// without static IPs needs neither the CRDs nor the permissions). A namespace that cannot be
/// read (no IPAM CRDs, no permission) holds only its machines with IP pools, named in
/// [`IpamObjects::unreadable`].
async fn ipam_objects(ctx: &Context, machines: &[Machine]) -> IpamObjects {
    let namespaces: std::collections::BTreeSet<String> = machines
        .iter()
        .filter(|m| !wanted_claims(m).is_empty())
        .map(|m| m.metadata.namespace.clone().unwrap_or_default())
        .collect();
    let mut out = IpamObjects::default();
    for ns in namespaces {
        if let Err(e) = ipam_namespace(ctx, &ns, &mut out).await {
            tracing::warn!(namespace = %ns, error = %e, "IP address claims unreadable");
            out.unreadable.insert(ns, e.to_string());
        }
    }
    out
}

async fn ipam_namespace(ctx: &Context, ns: &str, out: &mut IpamObjects) -> Result<(), Error> {
    for c in list_typed::<IpAddressClaim>(ctx, ns, CLAIM_KIND).await? {
        out.claims.insert(c.key(), c);
    }
    for a in list_typed::<IpAddress>(ctx, ns, ADDRESS_KIND).await? {
        let k = format!("{ns}/{}", a.metadata.name.as_deref().unwrap_or_default());
        out.addresses.insert(k, a);
    }
    Ok(())
}

/// Every object of an IPAM `kind` in `ns`, as our type.
async fn list_typed<T: serde::de::DeserializeOwned>(
    ctx: &Context,
    ns: &str,
    kind: &str,
) -> Result<Vec<T>, Error> {
    let api = dynamic_api(&ctx.client, ns, CLAIM_API_VERSION, kind);
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| KubeError::from_client(format!("list {kind}s in {ns}"), &e))?;
    list.items.into_iter().map(|o| typed(o, kind, ns)).collect()
}

/// What the drain needs to know of a pod.
pub fn pod_info(p: &Pod) -> PodInfo {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    PodInfo {
        namespace: p.namespace().unwrap_or_default(),
        name: p.name_any(),
        daemon_set: p
            .owner_references()
            .iter()
            .any(|o| o.kind == "DaemonSet" && o.controller == Some(true)),
        mirror: p.annotations().contains_key("kubernetes.io/config.mirror"),
        terminating: p.metadata.deletion_timestamp.is_some(),
        finished: matches!(phase, Some("Succeeded" | "Failed")),
    }
}

/// The reconciler.
pub async fn reconcile(machine: Arc<Machine>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.stores.all_synced() {
        return Ok(Action::requeue(NOT_SYNCED_REQUEUE));
    }
    if machine.vsphere_provider_spec().is_none() {
        // Another provider's machine.
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let k = key(&machine);
    let result = decide(&machine, None, &k, &ctx)
        .await
        .and_then(|r| verdict(&k, r, ctx.long_polls.polling().resync));
    ctx.measure(CONTROLLER, started, &result);
    ctx.settle(&backoff_key(&machine), &result);
    result
}

/// The machine's decision: the last sweep's if it still stands, else a new sweep's.
///
/// Nothing copied from the caches is held while waiting for the server's gate: every machine
/// of a server may be queued behind one sweep (300 at a start), and each holding its own copy of
/// the zones was most of the manager's memory.
async fn decide(
    machine: &Machine,
    vm: Option<&VSphereVM>,
    k: &str,
    ctx: &Context,
) -> Result<Requeue, Error> {
    let server = machine_server(machine, &ctx.stores.zones_by_name()).unwrap_or_default();
    let acting_as = principal_key(&principal_of(machine, vm, &ctx.stores.clusters.valid()));
    let gate_key = gate_key(&server, &acting_as);
    let gate = ctx.machine_sweeps.gate(&gate_key);
    let mut decisions = gate.lock().await;
    if let Some(d) = decisions.get_mut(k)
        && d.covers(
            fingerprint(&machine.metadata),
            ctx.long_polls.polling().resync,
        )
    {
        return Ok(d.answer());
    }
    let zones = ctx.stores.zones_by_name();
    let (outcome, fingerprints) =
        sweep_server(ctx, &server, &acting_as, &zones, (&gate_key, &gate)).await?;
    ctx.metrics.machine_swept();
    gate::record(&mut decisions, &outcome.requeues, &fingerprints);
    Ok(decisions
        .get_mut(k)
        .map(gate::Decision::answer)
        .unwrap_or(Requeue::Idle))
}

fn backoff_key(machine: &Machine) -> String {
    format!("{CONTROLLER}/{}", key(machine))
}

/// The VSphereVM controller's name in metrics and logs.
pub const VM_CONTROLLER: &str = "vspherevm";

/// A Cluster API machine's VSphereVM: decided by the same per-server sweep, through its
/// stand-in Machine ([`machine_for`]), under the same gate as the server's OpenShift Machines.
pub async fn reconcile_vsphere_vm(vm: Arc<VSphereVM>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.stores.all_synced() {
        return Ok(Action::requeue(NOT_SYNCED_REQUEUE));
    }
    let started = Instant::now();
    let vm = Arc::unwrap_or_clone(vm);
    let standin = machine_for(&vm);
    let k = key(&standin);
    let result = match paused(&ctx, "VSphereVM", &vm.metadata, &mut ClusterReads::new()).await {
        Ok(Some(why)) => {
            if vm.metadata.deletion_timestamp.is_some() {
                tracing::info!(vm = %vm_key(&vm), %why, "deleted while paused: the VM is left alone");
            } else {
                tracing::debug!(vm = %vm_key(&vm), %why, "paused; nothing is done");
            }
            Ok(Action::requeue(PAUSED_POLL))
        }
        Ok(None) => decide(&standin, Some(&vm), &k, &ctx)
            .await
            .and_then(|r| verdict(&k, r, ctx.long_polls.polling().resync)),
        Err(e) => Err(e),
    };
    ctx.measure(VM_CONTROLLER, started, &result);
    ctx.settle(&format!("{VM_CONTROLLER}/{}", vm_key(&vm)), &result);
    result
}

/// Failures were recorded on the VSphereVM (conditions, events); Kubernetes errors back off.
pub fn vsphere_vm_error_policy(vm: Arc<VSphereVM>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx
        .backoff
        .next(&format!("{VM_CONTROLLER}/{}", vm_key(&vm)));
    tracing::warn!(error = %error, ?delay, "VSphereVM reconcile failed; retrying");
    Action::requeue(delay)
}

/// Machine key → its fingerprint when the sweep read it.
type Fingerprints = BTreeMap<String, u64>;

/// Who a machine acts as on vCenter: a Cluster API machine (its VSphereVM's stand-in) as its
/// own cluster, an OpenShift Machine as its credentialsSecret (`plan::credentials::principal`).
fn principal_of(
    machine: &Machine,
    vm: Option<&VSphereVM>,
    clusters: &[crate::api::VSphereCluster],
) -> Result<Principal, String> {
    let ns = machine.metadata.namespace.as_deref().unwrap_or_default();
    match vm {
        Some(vm) => {
            principal::for_capi_machine(ns, &vm.name_any(), vm.metadata.labels.as_ref(), clusters)
        }
        None => Ok(principal::for_openshift_spec(ns, &machine.spec)),
    }
}

/// Machines are swept per (server, principal): one bulk read per server and identity, and a
/// machine whose principal cannot be told is swept with the others that fail the same way.
fn principal_key(p: &Result<Principal, String>) -> String {
    match p {
        Ok(p) => p.key(),
        Err(e) => format!("unresolved: {e}"),
    }
}

/// The key of a gate (and of its long poll): the vCenter and who the machines act as.
fn gate_key(server: &str, acting_as: &str) -> String {
    format!("{server}\n{acting_as}")
}

/// Drop the gates and long polls no machine needs any more (its last machine on that server
/// and identity went): server names come from objects tenants write, so what is kept per
/// server must go with the objects. Run after each sweep; a gate whose last machine went after
/// the last sweep anywhere waits for the next one (at the latest a resync of any machine).
fn prune_gates(
    ctx: &Context,
    all: &[Machine],
    zones: &BTreeMap<String, crate::api::VSphereDeploymentZone>,
    clusters: &[crate::api::VSphereCluster],
) {
    let vms = ctx
        .stores
        .vsphere_vms
        .valid()
        .into_iter()
        .map(|vm| (machine_for(&vm), Some(vm)));
    let live: std::collections::BTreeSet<String> = all
        .iter()
        .cloned()
        .map(|m| (m, None))
        .chain(vms)
        .filter(|(m, _)| m.vsphere_provider_spec().is_some())
        .map(|(m, vm)| {
            let server = machine_server(&m, zones).unwrap_or_default();
            gate_key(
                &server,
                &principal_key(&principal_of(&m, vm.as_ref(), clusters)),
            )
        })
        .collect();
    let polls = ctx.long_polls.retain(&live);
    let gates = ctx.machine_sweeps.retain(&live);
    if !polls.is_empty() || !gates.is_empty() {
        tracing::debug!(
            long_polls = polls.len(),
            gates = gates.len(),
            "dropped the long polls and gates of servers with no machine left"
        );
    }
}

/// One sweep over every machine of `server` acting as `acting_as`, through the API server.
async fn sweep_server(
    ctx: &Context,
    server: &str,
    acting_as: &str,
    zones: &BTreeMap<String, crate::api::VSphereDeploymentZone>,
    (gate_key, gate): (&str, &gate::Gate),
) -> Result<(SweepOutcome, Fingerprints), Error> {
    let all: Vec<Machine> = ctx.stores.machines.valid();
    let clusters = ctx.stores.clusters.valid();
    // Cluster API machines join as their VSphereVMs' stand-ins: one bulk read for both kinds.
    let mut vsphere_vms = BTreeMap::new();
    let mut principal = None;
    let openshift = all.iter().cloned().map(|m| (m, None));
    // A paused VSphereVM is not swept at all, whichever machine woke the sweep.
    let mut reads = ClusterReads::new();
    let mut standins: Vec<(Machine, Option<VSphereVM>)> = Vec::new();
    for vm in ctx.stores.vsphere_vms.valid() {
        let m = machine_for(&vm);
        if machine_server(&m, zones).unwrap_or_default() != server {
            continue;
        }
        if let Some(why) = paused(ctx, "VSphereVM", &vm.metadata, &mut reads).await? {
            tracing::debug!(vm = %vm_key(&vm), %why, "paused; left out of the sweep");
            continue;
        }
        standins.push((m, Some(vm)));
    }
    let machines: Vec<Machine> = openshift
        .chain(standins)
        .filter(|(m, _)| m.vsphere_provider_spec().is_some())
        .filter(|(m, _)| machine_server(m, zones).unwrap_or_default() == server)
        .filter_map(|(m, vm)| {
            let p = principal_of(&m, vm.as_ref(), &clusters);
            if principal_key(&p) != acting_as {
                return None;
            }
            principal.get_or_insert(p);
            if let Some(vm) = vm {
                vsphere_vms.insert(key(&m), vm);
            }
            Some(m)
        })
        .collect();
    let fingerprints: Fingerprints = machines
        .iter()
        .map(|m| (key(m), fingerprint(&m.metadata)))
        .collect();
    let fds = ctx.stores.failure_domains_by_name();
    let nodes: Vec<Node> = ctx.stores.nodes.valid();
    let pods = pods_for_drains(ctx, &machines).await?;
    let secrets = user_data_secrets(ctx, &machines).await?;
    let ipam = ipam_objects(ctx, &machines).await;
    let client = if server.is_empty() {
        Err(Failure::config(
            "spec.providerSpec.value.workspace.server: no vCenter named",
        ))
    } else {
        match principal {
            Some(Ok(p)) => ctx.client_as(server, &p).await,
            Some(Err(e)) => Err(Failure::config(e)),
            None => Err(Failure::config("no machine acts as this principal")),
        }
    };
    let kube = ctx.api_server();
    let input = SweepInput {
        machines,
        all_machines: &all,
        vsphere_vms: &vsphere_vms,
        zones,
        failure_domains: &fds,
        nodes: &nodes,
        pods: &pods,
        secrets: &secrets,
        ipam: &ipam,
        now: now(),
        dry_run: false,
    };
    let client = client.as_ref().map_err(VcenterTrouble::from);
    let mut outcome = sweep(&ctx.views, client.clone(), &kube, input).await;
    // What the machines now wait on goes to the server's long poll; their requeues follow.
    let read = client.ok().filter(|_| outcome.inventory.is_some());
    let watch = std::mem::take(&mut outcome.watch);
    ctx.long_polls
        .after_sweep(gate_key, gate, read, &watch, &mut outcome.requeues);
    prune_gates(ctx, &all, zones, &clusters);
    for w in &outcome.vcenter_writes {
        tracing::info!(%server, change = %w, "vCenter change");
    }
    for (machine, why) in outcome.failures() {
        tracing::warn!(%server, %machine, failure = %why, "machine reconcile failed");
    }
    Ok((outcome, fingerprints))
}

/// Failures were recorded on the machines (conditions, events); Kubernetes errors back off.
pub fn error_policy(machine: Arc<Machine>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.next(&backoff_key(&machine));
    tracing::warn!(error = %error, ?delay, "machine reconcile failed; retrying");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_facts_come_from_owner_references_annotations_and_phase() {
        let mut p = Pod::default();
        p.metadata.name = Some("x".into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                kind: "DaemonSet".into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        let i = pod_info(&p);
        assert!(i.daemon_set && !i.mirror && !i.finished);
        p.metadata.owner_references = None;
        p.metadata.annotations =
            Some([("kubernetes.io/config.mirror".to_string(), "x".to_string())].into());
        assert!(pod_info(&p).mirror);
    }
}
