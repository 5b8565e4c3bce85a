//! Local mode's machine rounds: the machine reconciler (`reconcile::machines`) run over the
//! persisted store, server by server, until nothing changes and no vCenter task is in flight,
//! with simulated kubelets (`--simulate-nodes`) registering Nodes for powered-on VMs.
//!
//! A machine whose reconcile failed is not tried again in the same run (it says why in its
//! status and events), so a run never loops on an error; the next run tries again.
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::capi::capi_pass;
use super::cluster::LocalCluster;
use super::cpms::cpms_pass;
use super::driver::{Options, acts_as_manager, client_for, connect_to};
use super::health::health_pass;
use super::ipam::bind_claims;
use crate::api::machine::Machine;
use crate::api::machine_status::VSphereMachineProviderStatus;
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::capi_machine::actuated::machine_for;
use crate::plan::cpms::domains::servers;
use crate::plan::credentials::{Principal, principal};
use crate::plan::machine::VcenterTrouble;
use crate::plan::machine::drain::is_control_plane;
use crate::reconcile::machines::{IpamObjects, SweepInput, key, machine_server, sweep};
use crate::reconcile::views::ServerViews;
use crate::vcenter::Endpoint;
use crate::vcenter::Inventory;
use crate::vcenter::session::SessionCache;
use crate::vcenter::stats::Snapshot;

/// Rounds before a run gives up converging (a create takes about four).
pub const MAX_ROUNDS: usize = 60;

/// What the machine rounds did.
#[derive(Debug, Default)]
pub struct MachineReport {
    pub vcenter_writes: Vec<String>,
    /// `--dry-run`: what one round would do (vCenter steps, machines a set would create or
    /// delete, remediations), nothing of it done.
    pub would: Vec<String>,
    /// Failures of the machine set and health check passes.
    pub failed: Vec<String>,
    /// Machines that failed this run, each with what failed (the read, the server, the
    /// error); they were left for the next run.
    pub machine_failures: BTreeMap<String, String>,
    /// Nodes registered by the simulated kubelets.
    pub nodes_registered: Vec<String>,
    pub rounds: usize,
    /// MachineHealthChecks short-circuited in the last pass.
    pub short_circuited: BTreeSet<String>,
    /// Machine key → its VM's inventory path (as last read); a VSphereVM's under
    /// `VSphereVM namespace/name`.
    pub vm_paths: BTreeMap<String, String>,
    /// What the Cluster API pass did (or would do), one line each.
    pub capi_done: Vec<String>,
    /// Cluster API object → why it waits, as the last pass saw it (`super::capi`).
    pub capi_waits: BTreeMap<String, String>,
    pub round_trips: Snapshot,
}

fn in_flight(m: &Machine) -> bool {
    !VSphereMachineProviderStatus::from_value(
        m.status.as_ref().and_then(|s| s.provider_status.as_ref()),
    )
    .task_ref
    .is_empty()
}

/// Run the machine reconciler to a fixed point.
pub async fn run_machines(
    cluster: &LocalCluster,
    opts: &Options,
    sessions: &SessionCache,
    progress: &mut dyn FnMut(&str),
) -> MachineReport {
    let before = sessions.stats().snapshot();
    let mut report = MachineReport::default();
    {
        let s = cluster.lock();
        if s.machines.is_empty()
            && s.machine_sets.is_empty()
            && s.health_checks.is_empty()
            && s.capi_machines.is_empty()
            && s.machine_deployments.is_empty()
            && s.vsphere_machines.is_empty()
            && s.vsphere_vms.is_empty()
        {
            return report;
        }
    }
    let mut wait = Duration::from_millis(200);
    // The servers' write locks (every read fresh: TTL zero), as the zones' drives have theirs.
    let views = ServerViews::new(Duration::ZERO);
    // The inventory of each server, as last read (by a sweep, or for the machine sets).
    let mut inventories: BTreeMap<String, Inventory> = BTreeMap::new();
    for round in 0..MAX_ROUNDS {
        report.rounds = round + 1;
        let mut changed = false;
        if !cluster.lock().machine_sets.is_empty() {
            read_missing_inventories(cluster, opts, sessions, &mut inventories).await;
            let pass = cpms_pass(cluster, &named_inventories(cluster, opts, &inventories)).await;
            if opts.dry_run {
                report.would.extend(
                    pass.created
                        .iter()
                        .map(|c| format!("{c}: create Machine (control plane machine set)")),
                );
                report.would.extend(
                    pass.deleted
                        .iter()
                        .map(|d| format!("{d}: delete Machine (control plane machine set)")),
                );
            }
            let (create, delete) = if opts.dry_run {
                ("would create", "would delete")
            } else {
                ("created", "deleting")
            };
            for c in &pass.created {
                progress(&format!("control plane machine set: {create} {c}"));
            }
            for d in &pass.deleted {
                progress(&format!("control plane machine set: {delete} {d}"));
            }
            changed |= pass.changed;
            report
                .failed
                .extend(pass.failed.iter().map(ToString::to_string));
        }
        // Kubelets register before the sweep, so the sweep links their nodes in the same round
        // (a control plane node seen unlinked would count as unmanaged).
        if opts.simulate_nodes {
            let registered = simulate_nodes(cluster);
            changed |= !registered.is_empty();
            report.nodes_registered.extend(registered);
        }
        if !cluster.lock().health_checks.is_empty() {
            let (pass, plans) = health_pass(cluster).await;
            if opts.dry_run {
                report.would.extend(
                    pass.remediated
                        .iter()
                        .map(|r| format!("{r}: remediate (machine health check)")),
                );
            }
            let remediate = if opts.dry_run {
                "would remediate"
            } else {
                "remediating"
            };
            for r in &pass.remediated {
                progress(&format!("machine health check: {remediate} {r}"));
            }
            changed |= pass.changed;
            report
                .failed
                .extend(pass.failed.iter().map(ToString::to_string));
            report.short_circuited = plans
                .iter()
                .filter(|(_, p)| p.short_circuited)
                .map(|(k, _)| k.clone())
                .collect();
        }
        // Cluster API: what CAPI must play, then each VSphereMachine's VSphereVM, before the
        // sweep makes the VMs.
        let capi = capi_pass(cluster).await;
        changed |= capi.changed;
        if opts.dry_run {
            // Said as done (`created …`), so only in the `would:` list, never as progress.
            report.would.extend(capi.done);
        } else {
            for d in &capi.done {
                progress(&format!("cluster api: {d}"));
            }
            report.capi_done.extend(capi.done);
        }
        report.capi_waits = capi.waits;
        // Local mode is the IPAM provider: claims made last round are bound before the sweep.
        if !opts.dry_run {
            changed |= bind_claims(cluster);
        }
        let snapshot = cluster.lock().clone();
        let ipam = IpamObjects {
            claims: snapshot.ip_claims.clone(),
            addresses: snapshot.ip_addresses.clone(),
            unreadable: BTreeMap::new(),
        };
        let all: Vec<Machine> = snapshot.machines.values().cloned().collect();
        // Cluster API machines join as their VSphereVMs' stand-ins: one sweep (one bulk read)
        // per server for both kinds.
        let vsphere_vms: BTreeMap<String, VSphereVM> = snapshot
            .vsphere_vms
            .values()
            .map(|vm| (key(&machine_for(vm)), vm.clone()))
            .collect();
        let standins: Vec<(String, Machine)> = snapshot
            .vsphere_vms
            .values()
            .map(|vm| {
                let m = machine_for(vm);
                (key(&m), m)
            })
            .collect();
        let secrets: BTreeMap<String, Secret> = snapshot
            .secrets
            .iter()
            .map(|s| {
                let ns = s.metadata.namespace.as_deref().unwrap_or("default");
                let name = s.metadata.name.as_deref().unwrap_or_default();
                (format!("{ns}/{name}"), s.clone())
            })
            .collect();
        // Group by the endpoint to connect to and who the machines act as there.
        let clusters: Vec<_> = snapshot.clusters.values().cloned().collect();
        let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
        let openshift = snapshot
            .machines
            .iter()
            .map(|(k, m)| (k.clone(), m.clone()));
        for (k, m) in openshift.chain(standins) {
            let (k, m) = (&k, &m);
            if report.machine_failures.contains_key(k) {
                continue;
            }
            let server = machine_server(m, &snapshot.zones)
                .or_else(|| opts.server.as_ref().map(|s| s.to_string()));
            let named = server.clone().unwrap_or_default();
            let ep = match server {
                Some(s) => connect_to(&s, opts),
                None => Err(
                    "spec.providerSpec.value.workspace.server: no vCenter named (nor --server)"
                        .to_string(),
                ),
            };
            let label = match &ep {
                Ok(e) => e.to_string(),
                Err(e) => format!("error: {e}"),
            };
            let ns = m.metadata.namespace.as_deref().unwrap_or("default");
            let acting_as = match vsphere_vms.get(k) {
                Some(vm) => principal::for_capi_machine(
                    ns,
                    vm.metadata.name.as_deref().unwrap_or_default(),
                    vm.metadata.labels.as_ref(),
                    &clusters,
                ),
                None => Ok(principal::for_openshift_spec(ns, &m.spec)),
            };
            let acting_as = match (acting_as, &ep) {
                (Ok(p), Ok(_)) if acts_as_manager(&named, &p, &snapshot, opts) => {
                    Ok(Principal::Manager)
                }
                (p, _) => p,
            };
            let who = match &acting_as {
                Ok(p) => p.key(),
                Err(e) => format!("unresolved: {e}"),
            };
            groups
                .entry((label, who))
                .or_insert_with(|| (ep, named, acting_as, Vec::new()))
                .3
                .push(m.clone());
        }
        for ((label, _), (ep, named, acting_as, machines)) in groups {
            if round == 0 {
                progress(&format!(
                    "reconciling {} machine(s) on {label}",
                    machines.len()
                ));
            }
            let client = ep.and_then(|ep| {
                let acting_as = acting_as?;
                client_for(
                    &named,
                    &ep.to_string(),
                    &acting_as,
                    &snapshot,
                    opts,
                    sessions,
                )
            });
            let client_ref = client.as_ref().map_err(|msg| VcenterTrouble {
                message: msg.clone(),
                permanent: true,
            });
            let input = SweepInput {
                machines,
                all_machines: &all,
                vsphere_vms: &vsphere_vms,
                zones: &snapshot.zones,
                failure_domains: &snapshot.failure_domains,
                nodes: &snapshot.nodes.values().cloned().collect::<Vec<_>>(),
                pods: &BTreeMap::new(),
                secrets: &secrets,
                ipam: &ipam,
                now: opts.now.clone(),
                dry_run: opts.dry_run,
            };
            let out = sweep(&views, client_ref, cluster, input).await;
            // The latest read replaces the earlier one: a set that finds an index empty must
            // not take the name of a VM destroyed since (it was "adopting" a VM that was gone,
            // found when all control plane machines were deleted at once, issue #27).
            if let Some(inv) = &out.inventory {
                inventories.insert(label.clone(), inv.clone());
            }
            changed |= out.changed();
            report.machine_failures.extend(
                out.failures()
                    .map(|(k, why)| (k.to_string(), why.to_string())),
            );
            report.vcenter_writes.extend(out.vcenter_writes);
            report.would.extend(out.would);
            report.vm_paths.extend(out.vm_paths);
        }
        if opts.dry_run {
            // One round: what it would do is known; nothing it decided was done, so the next
            // round would only decide the same again.
            break;
        }
        if cluster
            .persist_error
            .lock()
            .map(|e| e.is_some())
            .unwrap_or(true)
        {
            break;
        }
        let pending = {
            let s = cluster.lock();
            let standins = s.vsphere_vms.values().map(machine_for);
            s.machines
                .values()
                .cloned()
                .chain(standins)
                .any(|m| in_flight(&m) && !report.machine_failures.contains_key(&key(&m)))
        };
        if !changed && !pending {
            break;
        }
        if !changed {
            // Tasks still running on a real vCenter: look again, gently.
            progress("waiting for vCenter tasks");
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
        } else {
            wait = Duration::from_millis(200);
        }
    }
    // The caller writes the state file once more and reports a failure (local::run).
    report.round_trips = sessions.stats().snapshot().since(&before);
    report
}

/// A sweep's machines: where to connect, the server's name in the manifests, who they act as.
type Group = (
    Result<Endpoint, String>,
    String,
    Result<Principal, String>,
    Vec<Machine>,
);

/// Every server the machine sets' domains name, as the manifests name it.
fn set_servers(cluster: &LocalCluster) -> BTreeSet<String> {
    let s = cluster.lock();
    let infra = s
        .infrastructures
        .get(crate::api::openshift_config::v1::infrastructure::CLUSTER);
    s.machine_sets
        .values()
        .flat_map(|c| servers(c, &s.zones, infra))
        .collect()
}

/// The inventories read (keyed by the endpoint connected to), keyed by the server names the
/// manifests use (`--connect-to` and `--server` resolve one to the other).
fn named_inventories(
    cluster: &LocalCluster,
    opts: &Options,
    read: &BTreeMap<String, Inventory>,
) -> BTreeMap<String, Inventory> {
    set_servers(cluster)
        .into_iter()
        .filter_map(|name| {
            let ep = connect_to(&name, opts).ok()?;
            Some((name, read.get(&ep.to_string())?.clone()))
        })
        .collect()
}

/// Read the inventory of every server a machine set's domains name that no sweep has read yet.
async fn read_missing_inventories(
    cluster: &LocalCluster,
    opts: &Options,
    sessions: &SessionCache,
    inventories: &mut BTreeMap<String, Inventory>,
) {
    let snapshot = cluster.lock().clone();
    // Read as the sets' machines act: the template's credentialsSecret, else the command line's.
    let acting_as = snapshot
        .machine_sets
        .values()
        .find_map(|c| {
            let t = c
                .spec
                .template
                .machines_v1beta1_machine_openshift_io
                .as_ref()?;
            let ns = c.metadata.namespace.as_deref().unwrap_or("default");
            Some(principal::for_openshift_spec(ns, &t.spec))
        })
        .unwrap_or(Principal::Manager);
    for server in set_servers(cluster) {
        let Ok(ep) = connect_to(&server, opts) else {
            continue;
        };
        let key = ep.to_string();
        if inventories.contains_key(&key) {
            continue;
        }
        // The machine sets are OpenShift's: read as the manager (the operator's credentials).
        let Ok(client) = client_for(&server, &key, &acting_as, &snapshot, opts, sessions) else {
            continue;
        };
        if let Ok(inv) = client.inventory().await {
            inventories.insert(key, inv);
        }
    }
}

/// What a kubelet would do for each powered-on machine VM: register a Ready Node named after
/// the machine, with its provider ID and addresses. Nodes the manifests give are left alone.
fn simulate_nodes(cluster: &LocalCluster) -> Vec<String> {
    let now = cluster.now.clone();
    let mut created = Vec::new();
    {
        let mut s = cluster.lock();
        let wanted: Vec<Node> = s
            .machines
            .values()
            .filter(|m| m.metadata.deletion_timestamp.is_none())
            .filter_map(|m| {
                let ps = VSphereMachineProviderStatus::from_value(
                    m.status.as_ref().and_then(|s| s.provider_status.as_ref()),
                );
                if ps.instance_state.as_deref() != Some("poweredOn") {
                    return None;
                }
                let name = m.metadata.name.clone()?;
                if s.nodes.contains_key(&name) {
                    return None;
                }
                let role = if is_control_plane(m) { "master" } else { "worker" };
                let mut labels: BTreeMap<String, String> = [
                    ("kubernetes.io/hostname".to_string(), name.clone()),
                    (format!("node-role.kubernetes.io/{role}"), String::new()),
                ]
                .into();
                if role == "master" {
                    labels.insert("node-role.kubernetes.io/control-plane".into(), String::new());
                }
                Some(Node {
                    metadata: ObjectMeta {
                        name: Some(name),
                        uid: Some(uuid::Uuid::new_v4().to_string()),
                        creation_timestamp: Some(now.clone()),
                        labels: Some(labels),
                        ..ObjectMeta::default()
                    },
                    spec: Some(NodeSpec {
                        provider_id: m.spec.provider_id.clone(),
                        ..NodeSpec::default()
                    }),
                    status: Some(NodeStatus {
                        addresses: m.status.as_ref().and_then(|s| s.addresses.clone()),
                        conditions: Some(vec![NodeCondition {
                            type_: "Ready".into(),
                            status: "True".into(),
                            reason: Some("KubeletReady".into()),
                            message: Some("kubelet is posting ready status (simulated by vsphere-provider --simulate-nodes)".into()),
                            last_heartbeat_time: Some(now.clone()),
                            last_transition_time: Some(now.clone()),
                        }]),
                        ..NodeStatus::default()
                    }),
                })
            })
            .collect();
        for n in wanted {
            let name = n.metadata.name.clone().unwrap_or_default();
            s.nodes.insert(name.clone(), n);
            created.push(name);
        }
    }
    if !created.is_empty() {
        // A failure is kept in `persist_error`, which ends the run with it.
        let _ = cluster.persist();
    }
    created
}
