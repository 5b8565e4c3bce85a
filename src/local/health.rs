//! Local mode's machine health check pass: the pure planner (`plan::health`) evaluated at
//! `--now` over the store, its plan applied by the one applier (`reconcile::health`) through
//! [`KubeOps`]: a deleted Machine goes through the whole deletion lifecycle and, when a control
//! plane machine set owns it, is replaced in its domain by the next machine set pass.
//! Remediation templates are not read here (no external remediation controller runs in local
//! mode): a check naming one plans with the template unavailable, and says so.
use std::collections::BTreeSet;

use super::cluster::LocalCluster;
use crate::api::Machine;
use crate::plan::health::{HealthInput, HealthPlan, plan_health, replacement_in_progress};
use crate::reconcile::health::{apply, namespace};

/// What one pass over every MachineHealthCheck did.
#[derive(Debug, Default)]
pub struct HealthPass {
    pub remediated: Vec<String>,
    pub changed: bool,
    pub failed: Vec<String>,
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
        let input = HealthInput {
            mhc,
            machines: &machines,
            nodes: &nodes,
            cpms_replacement_in_progress: replacement_in_progress(
                snapshot.machine_sets.values(),
                &namespace(mhc),
            ),
            remediation_template: None,
            remediation_requests: &none,
            now: cluster.now.clone(),
        };
        let plan = plan_health(&input);
        let done = apply(cluster, mhc, &machines, &plan, &cluster.now).await;
        pass.remediated.extend(done.remediated);
        pass.changed |= done.changed;
        pass.failed
            .extend(done.failed.iter().map(|e| format!("{k}: {e}")));
        plans.push((k.clone(), plan));
    }
    (pass, plans)
}
