//! A health check's plan applied through [`KubeOps`], once for both shells (the in-cluster
//! controller and local mode): remediations, the MHC's status and backoff annotation, the
//! requests of machines healthy again, and the events. Failures are reported the way the
//! planner says ([`remediation_failed`]): a failed request marks the MHC's
//! `ExternalRemediationRequestAvailable` condition, and no failure is ever called a deletion
//! failure unless a deletion failed.
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;

use super::kube_ops::{KubeError, KubeOps, machine_ref};
use crate::api::Machine;
use crate::api::machine_health_check::MachineHealthCheck;
use crate::plan::health::remediation::{BACKOFF_ANNOTATION, RemediationAction};
use crate::plan::health::status::EventObject;
use crate::plan::health::targets::EXTERNAL_REMEDIATION_ANNOTATION;
use crate::plan::health::{HealthPlan, remediation_failed};

/// What applying one health check's plan did.
#[derive(Debug, Default)]
pub struct Applied {
    /// `namespace/name` of the machines remediated.
    pub remediated: Vec<String>,
    /// Anything written (status, annotation, machines, requests).
    pub changed: bool,
    /// Each failed write, typed.
    pub failed: Vec<KubeError>,
}

/// The namespace of a check, as the stores key it.
pub fn namespace(mhc: &MachineHealthCheck) -> String {
    mhc.metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into())
}

/// Apply `plan`, made for `mhc` over `machines` (every Machine the planner saw), at `now`.
pub async fn apply<K: KubeOps>(
    kube: &K,
    mhc: &MachineHealthCheck,
    machines: &[Machine],
    plan: &HealthPlan,
    now: &Time,
) -> Applied {
    let mut out = Applied::default();
    if plan.paused {
        return out;
    }
    let ns = namespace(mhc);
    let regarding = |o: &EventObject| -> ObjectReference {
        match o {
            EventObject::Mhc => mhc.object_ref(&()),
            EventObject::Machine(name) => find(machines, &ns, name)
                .map(machine_ref)
                .unwrap_or_else(|| mhc.object_ref(&())),
        }
    };
    // Remediations first: a failed request changes the status written below.
    let mut plan = plan.clone();
    let mut events = Vec::new();
    for r in plan.remediations.clone() {
        let done = match &r.action {
            RemediationAction::DeleteMachine => kube.delete_machine(&ns, &r.machine).await,
            RemediationAction::AnnotateExternal => annotate(kube, machines, &ns, &r.machine).await,
            RemediationAction::CreateRequest(obj) => {
                kube.create_remediation_request(&ns, obj).await
            }
        };
        match done {
            Ok(()) => {
                out.remediated.push(format!("{ns}/{}", r.machine));
                out.changed = true;
                events.push(r.event.clone());
            }
            Err(e) => {
                tracing::warn!(machine = %r.machine, error = %e, "remediation failed");
                let machine = find(machines, &ns, &r.machine);
                events.push(remediation_failed(
                    &mut plan,
                    &r,
                    &e.to_string(),
                    mhc,
                    machine,
                    now,
                ));
                out.failed.push(e);
            }
        }
    }
    let mut after = mhc.clone();
    if let Some(status) = &plan.status {
        after.status = Some(status.clone());
    }
    let annotations = after
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    match &plan.backoff_annotation {
        Some(v) => annotations.insert(BACKOFF_ANNOTATION.to_string(), v.clone()),
        None => annotations.remove(BACKOFF_ANNOTATION),
    };
    if annotations.is_empty() && mhc.metadata.annotations.is_none() {
        after.metadata.annotations = None;
    }
    if after.status != mhc.status || after.metadata.annotations != mhc.metadata.annotations {
        match kube.update_health_check(mhc, &after).await {
            Ok(()) => out.changed = true,
            Err(e) => out.failed.push(e),
        }
    }
    for req in &plan.delete_requests {
        match kube.delete_remediation_request(&ns, req).await {
            Ok(()) => out.changed = true,
            Err(e) => out.failed.push(e),
        }
    }
    for e in events.iter().chain(&plan.events) {
        kube.record(regarding(&e.object), e.warning, e.reason, &e.message)
            .await;
    }
    out
}

/// The machine `ns/name` among `machines`.
fn find<'m>(machines: &'m [Machine], ns: &str, name: &str) -> Option<&'m Machine> {
    machines.iter().find(|m| {
        m.metadata.namespace.as_deref().unwrap_or("default") == ns
            && m.metadata.name.as_deref() == Some(name)
    })
}

/// Add the external remediation annotation to a machine, through the one machine write.
async fn annotate<K: KubeOps>(
    kube: &K,
    machines: &[Machine],
    ns: &str,
    name: &str,
) -> Result<(), KubeError> {
    let Some(before) = find(machines, ns, name) else {
        return Err(KubeError::new(
            format!("annotate Machine {ns}/{name}"),
            super::kube_ops::KubeErrorKind::NotFound,
            "not found",
        ));
    };
    let mut after = before.clone();
    after
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(EXTERNAL_REMEDIATION_ANNOTATION.to_string(), String::new());
    kube.update_machine(before, &after).await
}
