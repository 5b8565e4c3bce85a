//! Local mode's control plane machine set pass: the pure planner (`plan::cpms`) run over the
//! store, its plan applied through `KubeOps` by the same code as in the cluster
//! (`reconcile::cpms`). A set carries the same finalizer as in the cluster, so `--delete
//! controlplanemachineset/NAME` releases its machines (strips the owner references) and deletes
//! none of them.
//!
//! A run that does not know the set's Machines (`--no-state`, a lost state file, manifests run
//! from elsewhere) finds them by the identity their VMs carry and recreates each under its own
//! name, so the machine controller adopts the VM: never a second control plane.
use std::collections::BTreeMap;

use super::cluster::LocalCluster;
use super::store::key;
use crate::api::Machine;
use crate::api::control_plane_machine_set::CPMS_FINALIZER;
use crate::api::openshift_config::v1::infrastructure::CLUSTER;
use crate::plan::cpms::domains::{domain_states, node_states};
use crate::plan::cpms::naming::recovered_names;
use crate::plan::cpms::{CpmsInput, plan};
use crate::reconcile::cpms::{Applied, apply, release};
use crate::vcenter::Inventory;

/// One pass over every ControlPlaneMachineSet in the store. `inventories` holds the vCenter of
/// each server as the manifests name it, when it could be read.
pub async fn cpms_pass(
    cluster: &LocalCluster,
    inventories: &BTreeMap<String, Inventory>,
) -> Applied {
    let mut pass = Applied::default();
    let snapshot = cluster.lock().clone();
    let machines: Vec<Machine> = snapshot.machines.values().cloned().collect();
    let nodes = node_states(&snapshot.nodes);
    for cpms in snapshot.machine_sets.values() {
        let k = key(
            cpms.metadata.namespace.as_deref(),
            cpms.metadata.name.as_deref().unwrap_or_default(),
        );
        if cpms.metadata.deletion_timestamp.is_some() {
            // Deleted: release the machines (they stay), then let the set go.
            let done = release(cluster, cpms, &machines).await;
            pass.failed.extend(done.failed.iter().cloned());
            if done.failed.is_empty() {
                cluster.lock().machine_sets.remove(&k);
            }
            pass.changed = true;
            continue;
        }
        // The finalizer, as in the cluster: a deleted set releases its machines first.
        {
            let mut s = cluster.lock();
            if let Some(stored) = s.machine_sets.get_mut(&k) {
                let f = stored.metadata.finalizers.get_or_insert_with(Vec::new);
                if !f.iter().any(|x| x == CPMS_FINALIZER) {
                    f.push(CPMS_FINALIZER.to_string());
                    pass.changed = true;
                }
            }
        }
        let doms = domain_states(
            cpms,
            &snapshot.zones,
            &snapshot.failure_domains,
            snapshot.infrastructures.get(CLUSTER),
            inventories,
        );
        // Machines of the set whose Machine this run does not know (`--no-state`, a lost state
        // file) but whose VMs are there: recreated under their names, so they are adopted.
        let ns = cpms.metadata.namespace.as_deref().unwrap_or("default");
        let identities = inventories
            .values()
            .flat_map(|inv| inv.iter())
            .filter_map(|e| e.vm.as_ref()?.machine.as_deref());
        let recovered = recovered_names(&cpms.spec, ns, identities);
        let input = CpmsInput {
            cpms,
            machines: &machines,
            domains: &doms.states,
            nodes: &nodes,
            now: &cluster.now,
            seed: uuid::Uuid::new_v4().as_u128() as u64,
            recovered: &recovered,
        };
        let p = plan(&input);
        let done = apply(cluster, &input, &p, &doms).await;
        pass.created.extend(done.created);
        pass.deleted.extend(done.deleted);
        pass.failed.extend(done.failed);
        pass.changed |= done.changed;
    }
    if pass.changed {
        // A failure is kept in `persist_error`, which ends the run with it.
        let _ = cluster.persist();
    }
    pass
}
