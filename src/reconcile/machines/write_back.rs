//! After a machine's vCenter step: carry out its Kubernetes steps (cordon, evict, delete the
//! Node, create or release IP address claims), fold their results into the plan (`plan::machine::outcome::after_kube`), record the
//! events and write the Machine (a VSphereVM's stand-in: the VSphereVM), all through
//! [`KubeOps`].
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::data::{SweepOutcome, key};
use crate::api::machine::Machine;
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::capi_machine::actuated::{is_actuated, vm_after, vm_ref};
use crate::plan::machine::drain::eviction_refused;
use crate::plan::machine::ipam::claim_object;
use crate::plan::machine::outcome::{KubeResult, after_kube};
use crate::plan::machine::{KubeStep, MachinePlan, Requeue};
use crate::reconcile::kube_ops::{Eviction, KubeOps, machine_ref};

/// Execute the Kubernetes steps, write the machine, record events.
pub async fn write_back<K: KubeOps>(
    kube: &K,
    before: &Machine,
    vsphere_vms: &BTreeMap<String, VSphereVM>,
    mut plan: MachinePlan,
    now: &Time,
) -> WrittenBack {
    let k = key(before);
    let mut kube_writes = 0;
    let mut results = Vec::new();
    for step in std::mem::take(&mut plan.kube) {
        let result = match &step {
            KubeStep::Cordon(node) => kube.cordon(node).await.map(|()| KubeResult::Done),
            KubeStep::Evict(pod) => kube.evict(pod).await.map(|e| match e {
                Eviction::Evicted => KubeResult::Done,
                Eviction::Refused(why) => KubeResult::Refused(eviction_refused(pod, &why)),
            }),
            KubeStep::DeleteNode(node) => kube.delete_node(node).await.map(|()| KubeResult::Done),
            KubeStep::CreateClaim(c) => kube
                .create_ip_address_claim(&claim_object(c))
                .await
                .map(|()| KubeResult::Done),
            KubeStep::ReleaseClaim { namespace, name } => kube
                .release_ip_address_claim(namespace, name)
                .await
                .map(|()| KubeResult::Done),
        };
        results.push((
            step,
            result.unwrap_or_else(|e| KubeResult::Failed(e.to_string())),
        ));
    }
    kube_writes += after_kube(&mut plan, &results, now);
    // A VSphereVM's stand-in is written back onto the VSphereVM; the Machine is never stored.
    let vm = is_actuated(before).then(|| vsphere_vms.get(&k)).flatten();
    let regarding = vm.map_or_else(|| machine_ref(before), vm_ref);
    for e in &plan.events {
        kube.record(regarding.clone(), e.warning, e.reason, &e.message)
            .await;
    }
    let mut requeue = plan.requeue.clone();
    let result = match vm {
        Some(vm) => {
            let after = vm_after(vm, &plan.machine, now);
            match after != *vm {
                true => Some(kube.update_vsphere_vm(vm, &after).await),
                false => None,
            }
        }
        None if !is_actuated(before) && plan.machine != *before => {
            Some(kube.update_machine(before, &plan.machine).await)
        }
        None => None,
    };
    match result {
        Some(Ok(())) => kube_writes += 1,
        // Written on a stale read (another writer came first, e.g. CAPI labelling the object):
        // the next sweep reads it again soon; nothing failed.
        Some(Err(e)) if e.stale() => requeue = Requeue::After(std::time::Duration::from_secs(1)),
        Some(Err(e)) => requeue = Requeue::Backoff(e.to_string()),
        None => {}
    }
    WrittenBack {
        key: k,
        kube_writes,
        requeue,
    }
}

/// What writing one machine's plan back came to.
pub struct WrittenBack {
    pub key: String,
    /// Kubernetes changes made (the machine written, nodes cordoned or deleted, pods evicted).
    pub kube_writes: usize,
    /// When the machine wants another look; a failure is `Backoff` with what failed.
    pub requeue: Requeue,
}

impl WrittenBack {
    pub fn add_to(self, out: &mut SweepOutcome) {
        out.kube_writes += self.kube_writes;
        out.requeues.insert(self.key, self.requeue);
    }
}
