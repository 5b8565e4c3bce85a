//! Local mode's control plane machine set pass: the pure planner (`plan::cpms`) run over the
//! store, its decisions applied through [`KubeOps`] like any other reconciler's: status, owner
//! references of adopted machines, deletions, and creations — each creation confirmed first
//! against a fresh read of the store (the planner's stale-cache contract).
use k8s_openapi::api::core::v1::ObjectReference;

use super::kube::LocalCluster;
use crate::api::Machine;
use crate::api::control_plane_machine_set::ControlPlaneMachineSet;
use crate::api::infrastructure::CLUSTER;
use crate::api::machine::{REGION_LABEL, ZONE_LABEL};
use crate::plan::cpms::domains::{domain_states, node_states};
use crate::plan::cpms::{CpmsInput, confirm_create, owner_ref, plan};
use crate::plan::placement::DEPLOYMENT_ZONE_LABEL;
use crate::reconcile::kube::{EventRecord, KubeOps};
use crate::vcenter::Inventory;

/// What one pass over every CPMS did.
#[derive(Debug, Default)]
pub struct CpmsPass {
    pub created: Vec<String>,
    pub deleted: Vec<String>,
    /// Anything written (status, owner references, machines).
    pub changed: bool,
    pub failed: Vec<String>,
}

fn cpms_ref(c: &ControlPlaneMachineSet) -> ObjectReference {
    ObjectReference {
        api_version: Some("machine.openshift.io/v1".into()),
        kind: Some("ControlPlaneMachineSet".into()),
        name: c.metadata.name.clone(),
        namespace: c.metadata.namespace.clone(),
        uid: c.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// One pass over every ControlPlaneMachineSet in the store. `inventory` is the vCenter of a
/// server, when it could be read.
pub async fn cpms_pass(
    cluster: &LocalCluster,
    inventory: &dyn Fn(&str) -> Option<Inventory>,
) -> CpmsPass {
    let mut pass = CpmsPass::default();
    let snapshot = cluster.lock().clone();
    let machines: Vec<Machine> = snapshot.machines.values().cloned().collect();
    let nodes = node_states(&snapshot.nodes);
    for (k, cpms) in &snapshot.machine_sets {
        if cpms.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let doms = domain_states(
            cpms,
            &snapshot.zones,
            &snapshot.failure_domains,
            snapshot.infrastructures.get(CLUSTER),
            inventory,
        );
        let domains = &doms.states;
        let input = CpmsInput {
            cpms,
            machines: &machines,
            domains,
            nodes: &nodes,
            now: &cluster.now,
            seed: uuid::Uuid::new_v4().as_u128() as u64,
        };
        let p = plan(&input);
        let regarding = cpms_ref(cpms);
        let ns = cpms
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        // Status and adoption.
        {
            let mut s = cluster.lock();
            if let Some(stored) = s.machine_sets.get_mut(k)
                && stored.status.as_ref() != Some(&p.status)
            {
                stored.status = Some(p.status.clone());
                pass.changed = true;
            }
            for name in &p.adopt {
                if let Some(m) = s.machines.get_mut(&format!("{ns}/{name}")) {
                    let refs = m.metadata.owner_references.get_or_insert_with(Vec::new);
                    if !refs.iter().any(|r| r.controller == Some(true)) {
                        refs.push(owner_ref(cpms));
                        pass.changed = true;
                    }
                }
            }
        }
        for d in &p.delete {
            match cluster.delete_machine(&ns, &d.name).await {
                Ok(()) => {
                    pass.deleted.push(format!("{ns}/{}", d.name));
                    pass.changed = true;
                }
                Err(e) => pass.failed.push(e.to_string()),
            }
        }
        for c in &p.create {
            // The stale-cache guard: the index must still need a machine in a fresh read.
            let fresh: Vec<Machine> = cluster.lock().machines.values().cloned().collect();
            if !confirm_create(&input, &fresh, c) {
                continue;
            }
            let mut m = c.machine.clone();
            if let Some(domain) = &c.domain {
                let labels = m.metadata.labels.get_or_insert_with(Default::default);
                if doms.infra.contains(domain) {
                    // No deployment zone to name: the provider spec carries the whole workspace;
                    // the region and zone labels come from the Infrastructure domain.
                    if let Some(f) = domains.get(domain).and_then(|d| d.fill.as_ref()) {
                        for (k, v) in [(REGION_LABEL, &f.region), (ZONE_LABEL, &f.zone)] {
                            if !v.is_empty() {
                                labels.insert(k.to_string(), v.clone());
                            }
                        }
                    }
                    if let Some(note) = doms.notes.get(domain) {
                        cluster
                            .event(EventRecord::new(
                                regarding.clone(),
                                false,
                                "FailureDomainDefaulted",
                                note,
                            ))
                            .await;
                    }
                } else {
                    labels.insert(DEPLOYMENT_ZONE_LABEL.to_string(), domain.clone());
                }
            }
            match cluster.create_machine(&m).await {
                Ok(created) => {
                    pass.created.push(format!(
                        "{ns}/{}",
                        created.metadata.name.unwrap_or_default()
                    ));
                    pass.changed = true;
                }
                Err(e) => pass.failed.push(e.to_string()),
            }
        }
        for problem in doms.problems.values() {
            cluster
                .event(EventRecord::new(
                    regarding.clone(),
                    true,
                    "FailureDomainUnresolved",
                    problem,
                ))
                .await;
        }
        for e in &p.events {
            cluster
                .event(EventRecord::new(
                    regarding.clone(),
                    e.warning,
                    e.reason,
                    &e.message,
                ))
                .await;
        }
    }
    if pass.changed {
        let _ = cluster.persist();
    }
    pass
}
