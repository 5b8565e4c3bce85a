//! Local mode's machine health check pass: the pure planner (`plan::health`) evaluated at
//! `--now` over the store, its remediations carried out through [`KubeOps`]: a deleted Machine
//! goes through the whole deletion lifecycle and, when a control plane machine set owns it, is
//! replaced in its domain by the next machine set pass.
use std::collections::BTreeSet;

use kube::Resource;

use super::kube::LocalCluster;
use crate::api::Machine;
use crate::plan::health::remediation::{BACKOFF_ANNOTATION, RemediationAction};
use crate::plan::health::status::EventObject;
use crate::plan::health::targets::EXTERNAL_REMEDIATION_ANNOTATION;
use crate::plan::health::{HealthInput, HealthPlan, plan_health};
use crate::reconcile::kube::{KubeOps, machine_ref};

/// What one pass over every MachineHealthCheck did.
#[derive(Debug, Default)]
pub struct HealthPass {
    pub remediated: Vec<String>,
    pub changed: bool,
    pub failed: Vec<String>,
}

/// Whether a control plane machine set of `ns` is replacing a machine (it has more machines
/// than replicas: a replacement was created and its predecessor not yet removed): no control
/// plane remediation meanwhile. (Fewer ready replicas than wanted is not a replacement: an
/// unhealthy machine is exactly that, and must stay remediable.)
fn replacement_in_progress(cluster: &LocalCluster, ns: &str) -> bool {
    cluster.lock().machine_sets.values().any(|c| {
        c.metadata.namespace.as_deref() == Some(ns)
            && c.status.as_ref().and_then(|s| s.replicas).unwrap_or(0)
                > c.spec.replicas_or_default()
    })
}

/// The last plan of each MHC (for the table).
pub type Plans = Vec<(String, HealthPlan)>;

/// One pass over every MachineHealthCheck in the store.
pub async fn health_pass(cluster: &LocalCluster) -> (HealthPass, Plans) {
    let mut pass = HealthPass::default();
    let mut plans = Vec::new();
    let snapshot = cluster.lock().clone();
    let machines: Vec<Machine> = snapshot.machines.values().cloned().collect();
    let nodes: Vec<_> = snapshot.nodes.values().cloned().collect();
    let none = BTreeSet::new();
    for (k, mhc) in &snapshot.health_checks {
        let ns = mhc
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let input = HealthInput {
            mhc,
            machines: &machines,
            nodes: &nodes,
            cpms_replacement_in_progress: replacement_in_progress(cluster, &ns),
            remediation_template: None,
            remediation_requests: &none,
            now: cluster.now.clone(),
        };
        let plan = plan_health(&input);
        if plan.paused {
            plans.push((k.clone(), plan));
            continue;
        }
        {
            let mut s = cluster.lock();
            if let Some(stored) = s.health_checks.get_mut(k) {
                if plan.status.is_some() && stored.status != plan.status {
                    stored.status = plan.status.clone();
                    pass.changed = true;
                }
                let current = stored
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(BACKOFF_ANNOTATION))
                    .cloned();
                if current != plan.backoff_annotation {
                    let a = stored
                        .metadata
                        .annotations
                        .get_or_insert_with(Default::default);
                    match &plan.backoff_annotation {
                        Some(v) => a.insert(BACKOFF_ANNOTATION.to_string(), v.clone()),
                        None => a.remove(BACKOFF_ANNOTATION),
                    };
                    pass.changed = true;
                }
            }
        }
        let regarding = |o: &EventObject| match o {
            EventObject::Mhc => mhc.object_ref(&()),
            EventObject::Machine(name) => snapshot
                .machines
                .get(&format!("{ns}/{name}"))
                .map(machine_ref)
                .unwrap_or_else(|| mhc.object_ref(&())),
        };
        for r in &plan.remediations {
            let done = match &r.action {
                RemediationAction::DeleteMachine => cluster
                    .delete_machine(&ns, &r.machine)
                    .await
                    .map_err(|e| e.to_string()),
                RemediationAction::AnnotateExternal => {
                    let mut s = cluster.lock();
                    match s.machines.get_mut(&format!("{ns}/{}", r.machine)) {
                        Some(m) => {
                            m.metadata
                                .annotations
                                .get_or_insert_with(Default::default)
                                .insert(EXTERNAL_REMEDIATION_ANNOTATION.to_string(), String::new());
                            Ok(())
                        }
                        None => Err(format!("machine {ns}/{} is gone", r.machine)),
                    }
                }
                RemediationAction::CreateRequest(_) => Err(
                    "remediation templates are not evaluated in local mode (no external remediation controller runs here)"
                        .to_string(),
                ),
            };
            match done {
                Ok(()) => {
                    pass.remediated.push(format!("{ns}/{}", r.machine));
                    pass.changed = true;
                    cluster
                        .record(
                            regarding(&r.event.object),
                            r.event.warning,
                            r.event.reason,
                            &r.event.message,
                        )
                        .await;
                }
                Err(e) => pass
                    .failed
                    .push(format!("{k}: remediate {}: {e}", r.machine)),
            }
        }
        for e in &plan.events {
            cluster
                .record(regarding(&e.object), e.warning, e.reason, &e.message)
                .await;
        }
        plans.push((k.clone(), plan));
    }
    if pass.changed {
        let _ = cluster.persist();
    }
    (pass, plans)
}
