//! A control plane machine set's plan applied through [`KubeOps`], once for both shells: status,
//! adoption, deletions, creations (each confirmed first on a fresh read, never a cache — a
//! stale cache must not make a second replacement, OCPBUGS-4297), and the events; and the
//! release of its machines when the set is deleted.
use kube::Resource;

use super::kube_ops::{KubeError, KubeOps};
use crate::api::Machine;
use crate::api::control_plane_machine_set::ControlPlaneMachineSet;
use crate::api::machine::{REGION_LABEL, ZONE_LABEL};
use crate::plan::cpms::domains::Domains;
use crate::plan::cpms::{CpmsInput, CpmsPlan, confirm_create, owner_ref};
use crate::plan::placement::DEPLOYMENT_ZONE_LABEL;

/// What applying one plan did.
#[derive(Debug, Default)]
pub struct Applied {
    /// `namespace/name` of the machines created and deleted.
    pub created: Vec<String>,
    pub deleted: Vec<String>,
    /// Anything written (status, owner references, machines).
    pub changed: bool,
    pub failed: Vec<KubeError>,
}

fn namespace(c: &ControlPlaneMachineSet) -> String {
    c.metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into())
}

/// Apply `p`, planned from `input` over `doms`.
pub async fn apply<K: KubeOps>(
    kube: &K,
    input: &CpmsInput<'_>,
    p: &CpmsPlan,
    doms: &Domains,
) -> Applied {
    let cpms = input.cpms;
    let ns = namespace(cpms);
    let regarding = cpms.object_ref(&());
    let mut out = Applied::default();
    if cpms.status.as_ref() != Some(&p.status) {
        match kube.set_machine_set_status(cpms, &p.status).await {
            Ok(()) => out.changed = true,
            Err(e) => out.failed.push(e),
        }
    }
    for name in &p.adopt {
        let Some(before) = input
            .machines
            .iter()
            .find(|m| m.metadata.name.as_deref() == Some(name.as_str()))
        else {
            continue;
        };
        let mut after = before.clone();
        let refs = after.metadata.owner_references.get_or_insert_with(Vec::new);
        if refs.iter().any(|r| r.controller == Some(true)) {
            continue;
        }
        refs.push(owner_ref(cpms));
        match kube.update_machine(before, &after).await {
            Ok(()) => out.changed = true,
            Err(e) => out.failed.push(e),
        }
    }
    for d in &p.delete {
        match kube.delete_machine(&ns, &d.name).await {
            Ok(()) => {
                out.deleted.push(format!("{ns}/{}", d.name));
                out.changed = true;
            }
            Err(e) => out.failed.push(e),
        }
    }
    for c in &p.create {
        let fresh = match kube.list_machines(&ns).await {
            Ok(f) => f,
            Err(e) => {
                out.failed.push(e);
                break;
            }
        };
        if !confirm_create(input, &fresh, c) {
            tracing::info!(
                index = c.index,
                "index already has a machine in a fresh read; not creating"
            );
            continue;
        }
        let mut m = c.machine.clone();
        if let Some(domain) = &c.domain {
            label_domain(&mut m, domain, doms);
            if let Some(note) = doms.notes.get(domain) {
                kube.record(regarding.clone(), false, "FailureDomainDefaulted", note)
                    .await;
            }
        }
        match kube.create_machine(&m).await {
            Ok(created) => {
                out.created.push(format!(
                    "{ns}/{}",
                    created.metadata.name.unwrap_or_default()
                ));
                out.changed = true;
            }
            Err(e) => out.failed.push(e),
        }
    }
    for problem in doms.problems.values() {
        kube.record(regarding.clone(), true, "FailureDomainUnresolved", problem)
            .await;
    }
    for e in &p.events {
        kube.record(regarding.clone(), e.warning, e.reason, &e.message)
            .await;
    }
    out
}

/// A deployment zone is named by its label; an Infrastructure domain has no zone to name, so
/// the provider spec carries its whole workspace and the machine gets the domain's region and
/// zone labels.
fn label_domain(m: &mut Machine, domain: &str, doms: &Domains) {
    let labels = m.metadata.labels.get_or_insert_with(Default::default);
    if !doms.infra.contains(domain) {
        labels.insert(DEPLOYMENT_ZONE_LABEL.to_string(), domain.to_string());
        return;
    }
    if let Some(f) = doms.states.get(domain).and_then(|d| d.fill.as_ref()) {
        for (k, v) in [(REGION_LABEL, &f.region), (ZONE_LABEL, &f.zone)] {
            if !v.is_empty() {
                labels.insert(k.to_string(), v.clone());
            }
        }
    }
}

/// Deleting the set releases its machines (strips its owner references) and deletes nothing
/// (upstream: the generator then recreates an Inactive set).
pub async fn release<K: KubeOps>(
    kube: &K,
    cpms: &ControlPlaneMachineSet,
    machines: &[Machine],
) -> Applied {
    let ns = namespace(cpms);
    let uid = cpms.metadata.uid.clone().unwrap_or_default();
    let mut out = Applied::default();
    for before in machines {
        if before.metadata.namespace.as_deref() != Some(ns.as_str()) {
            continue;
        }
        let refs = before.metadata.owner_references.as_deref().unwrap_or(&[]);
        if !refs.iter().any(|r| r.uid == uid) {
            continue;
        }
        let mut after = before.clone();
        after.metadata.owner_references =
            Some(refs.iter().filter(|r| r.uid != uid).cloned().collect());
        match kube.update_machine(before, &after).await {
            Ok(()) => out.changed = true,
            Err(e) => out.failed.push(e),
        }
    }
    out
}
