//! The Machine controller: Kubernetes hands Machines over one at a time, but vCenter is read per
//! server, for all its machines at once (`reconcile::machines::sweep`, the same sweep local mode
//! runs, driven like the zones under the server's write lock in [`Context::views`]). A reconcile
//! therefore asks the server's [`Sweeps`] gate: if a sweep since the machine last changed has
//! already decided for it and it is not due yet, that decision stands; otherwise one sweep runs
//! for every machine of the server and records a decision for each.
//! N machines woken together (a resync, a restart) cost one sweep, not N.
//!
//! Requeues come from the planner: a task in flight or a node expected → 10 s; a deleting VM →
//! 10 s; idle → [`IDLE_REQUEUE`]; a failure → the per-object exponential backoff.
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::context::now;
use super::kube_ops::ApiServer;
use super::watch::fingerprint;
use super::{Context, Error, NOT_SYNCED_REQUEUE};
use crate::api::Machine;
use crate::plan::failure::Failure;
use crate::plan::machine::drain::PodInfo;
use crate::plan::machine::{Requeue, VcenterTrouble};
use crate::reconcile::machines::{SweepInput, key, machine_server, sweep};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "machine";
/// A machine with nothing pending is looked at again this often (vCenter drifts: a VM deleted
/// by hand must turn its Machine `Failed`).
pub const IDLE_REQUEUE: Duration = Duration::from_secs(600);

/// What the last sweep decided for one machine.
#[derive(Clone, Debug)]
struct Decision {
    /// The machine's [`fingerprint`] when decided: our own status writes do not change it.
    fingerprint: u64,
    requeue: Requeue,
    decided: Instant,
}

impl Decision {
    /// Still valid for a machine with this fingerprint: nothing but its status changed and it
    /// is not due.
    fn covers(&self, fp: u64) -> bool {
        if self.fingerprint != fp {
            return false;
        }
        match self.requeue {
            Requeue::Idle => self.decided.elapsed() < IDLE_REQUEUE,
            Requeue::After(d) => self.decided.elapsed() < d,
            Requeue::Backoff => false,
        }
    }
}

/// A server's gate: held while its sweep runs; the decisions of its last sweeps by machine.
type Gate = Arc<tokio::sync::Mutex<BTreeMap<String, Decision>>>;

/// One gate per vCenter: sweeps of a server never overlap, and their decisions are shared.
#[derive(Default)]
pub struct Sweeps {
    servers: Mutex<HashMap<String, Gate>>,
}

impl Sweeps {
    fn gate(&self, server: &str) -> Gate {
        self.servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(server.to_string())
            .or_default()
            .clone()
    }
}

fn action(ctx: &Context, k: &str, r: Requeue) -> Result<Action, Error> {
    Ok(match r {
        Requeue::Idle => Action::requeue(IDLE_REQUEUE),
        Requeue::After(d) => Action::requeue(d),
        Requeue::Backoff => Action::requeue(ctx.backoff.next(&format!("{CONTROLLER}/{k}"))),
    })
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
    let zones = ctx.stores.zones_by_name();
    let server = machine_server(&machine, &zones).unwrap_or_default();
    let gate = ctx.machine_sweeps.gate(&server);
    let mut decisions = gate.lock().await;
    if let Some(d) = decisions.get(&k)
        && d.covers(fingerprint(&machine.metadata))
    {
        return action(&ctx, &k, d.requeue);
    }
    let result = sweep_server(&ctx, &server, &zones).await;
    let result = result.map(|(outcome, versions)| {
        for (mk, r) in outcome.requeues {
            decisions.insert(
                mk.clone(),
                Decision {
                    fingerprint: versions.get(&mk).copied().unwrap_or_default(),
                    requeue: r,
                    decided: Instant::now(),
                },
            );
        }
        decisions
            .get(&k)
            .map(|d| d.requeue)
            .unwrap_or(Requeue::Idle)
    });
    drop(decisions);
    let result = result.and_then(|r| action(&ctx, &k, r));
    ctx.record(CONTROLLER, &format!("{CONTROLLER}/{k}"), started, &result);
    result
}

/// Machine key → its fingerprint when the sweep read it.
type Versions = BTreeMap<String, u64>;

/// One sweep over every machine of `server`, through the API server.
async fn sweep_server(
    ctx: &Context,
    server: &str,
    zones: &BTreeMap<String, crate::api::VSphereDeploymentZone>,
) -> Result<(crate::reconcile::machines::SweepOutcome, Versions), Error> {
    let all: Vec<Machine> = ctx.stores.machines.valid();
    let machines: Vec<Machine> = all
        .iter()
        .filter(|m| m.vsphere_provider_spec().is_some())
        .filter(|m| machine_server(m, zones).unwrap_or_default() == server)
        .cloned()
        .collect();
    let versions: Versions = machines
        .iter()
        .map(|m| (key(m), fingerprint(&m.metadata)))
        .collect();
    let fds = ctx.stores.failure_domains_by_name();
    let nodes: Vec<Node> = ctx.stores.nodes.valid();
    let pods = pods_for_drains(ctx, &machines).await?;
    let client = if server.is_empty() {
        Err(Failure::config(
            "spec.providerSpec.value.workspace.server: no vCenter named",
        ))
    } else {
        ctx.vcenter_client(server).await
    };
    let kube = ApiServer {
        client: ctx.client.clone(),
        recorder: ctx.recorder.clone(),
    };
    let input = SweepInput {
        machines,
        all_machines: &all,
        zones,
        failure_domains: &fds,
        nodes: &nodes,
        pods: &pods,
        now: now(),
    };
    let client = client.as_ref().map_err(VcenterTrouble::from);
    let outcome = sweep(&ctx.views, client, &kube, input).await;
    for w in &outcome.vcenter_writes {
        tracing::info!(%server, change = %w, "vCenter change");
    }
    for f in &outcome.failed {
        tracing::warn!(%server, failure = %f, "machine reconcile failed");
    }
    Ok((outcome, versions))
}

/// Failures were recorded on the machines (conditions, events); Kubernetes errors back off.
pub fn error_policy(machine: Arc<Machine>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.next(&format!("{CONTROLLER}/{}", key(&machine)));
    tracing::warn!(error = %error, ?delay, "machine reconcile failed; retrying");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_covers_an_unchanged_machine_until_it_is_due() {
        let d = Decision {
            fingerprint: 7,
            requeue: Requeue::After(Duration::from_secs(10)),
            decided: Instant::now(),
        };
        assert!(d.covers(7));
        assert!(!d.covers(8), "a changed machine is swept again");
        let due = Decision {
            decided: Instant::now() - Duration::from_secs(11),
            ..d.clone()
        };
        assert!(!due.covers(7), "due");
        let failed = Decision {
            requeue: Requeue::Backoff,
            ..d
        };
        assert!(!failed.covers(7), "a failure is retried on its backoff");
    }

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
