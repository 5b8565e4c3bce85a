//! Local mode's Cluster API pass, run each round before the machine sweep: what CAPI must do
//! for this provider to act ([`crate::plan::capi_machine::capi_play`]: Cluster readiness,
//! MachineDeployment → Machines + VSphereMachines, Machine ↔ VSphereMachine), then the
//! VSphereMachine controller's own decision ([`crate::plan::capi_machine::machine::plan`], the
//! same as in the cluster) carried out on the store: VSphereVMs created (their UID, the VM's
//! instance UUID, fixed and persisted before any clone) or deleted. The VSphereVMs then join
//! the OpenShift Machines of their server in one sweep (`super::machines`).
//!
//! Deletion follows CAPI's order: a Machine being deleted deletes its VSphereMachine, which
//! deletes its VSphereVM; the sweep destroys the VM and releases the VSphereVM; then the
//! VSphereMachine and the Machine go (and a deleted MachineDeployment once its Machines are
//! gone).
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::cluster::LocalCluster;
use super::store::{Store, born};
use serde_json::{Value, json};

use crate::api::capi_core::CapiObject;
use crate::api::vsphere_machine::VSphereMachine;
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::capi_machine::actuated::{vm_key, vm_ref};
use crate::plan::capi_machine::capi_play::{
    self, DEPLOYMENT_FINALIZER, DEPLOYMENT_NAME_LABEL, ns_name,
};
use crate::plan::capi_machine::machine::{self, VmAction};
use crate::reconcile::kube_ops::{EventRecord, KubeOps};

/// What one pass did.
#[derive(Debug, Default)]
pub struct CapiPass {
    pub changed: bool,
    /// What was done (or, on a dry run, would be), one line each.
    pub done: Vec<String>,
    /// Object (`machinedeployment ns/name`, `machine ns/name`, `cluster ns/name`) → why it
    /// waits, naming the field or object.
    pub waits: BTreeMap<String, String>,
}

/// Run the pass over the store and persist it (once, before anything is cloned).
pub async fn capi_pass(cluster: &LocalCluster) -> CapiPass {
    let mut pass = CapiPass::default();
    let mut events = Vec::new();
    {
        let mut s = cluster.lock();
        if s.capi_machines.is_empty()
            && s.machine_deployments.is_empty()
            && s.vsphere_machines.is_empty()
            && s.capi_clusters.is_empty()
        {
            return pass;
        }
        let now = cluster.now.clone();
        clusters(&mut s, &mut pass);
        deployments(&mut s, &mut pass, &now);
        machines(&mut s, &mut pass, &now);
        vsphere_machines(&mut s, &mut pass, &mut events, &now);
        // CAPI copies what the VSphereMachines now say onto their Machines.
        machine_statuses(&mut s, &mut pass);
    }
    for e in events {
        cluster.event(e).await;
    }
    if pass.changed {
        // A failure is kept in `persist_error`, which ends the run with it.
        let _ = cluster.persist();
    }
    pass
}

/// CAPI's Cluster controller adopting each Cluster's VSphereCluster (an owner reference), so the
/// cluster pass treats it as owned. Run before the zones and clusters are reconciled; new
/// objects have their UIDs by then. True when something changed.
pub fn own_infra_clusters(s: &mut Store) -> bool {
    let mut changed = false;
    for c in s.capi_clusters.values() {
        let Ok(k) = capi_play::infrastructure_ref(c) else {
            continue;
        };
        let Some(vc) = s.clusters.get_mut(&k) else {
            continue;
        };
        let refs = vc.metadata.owner_references.get_or_insert_with(Vec::new);
        if !refs
            .iter()
            .any(|o| o.kind == "Cluster" && o.api_version.starts_with("cluster.x-k8s.io/"))
        {
            refs.push(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: c.api_version.clone(),
                    kind: "Cluster".into(),
                    name: c.metadata.name.clone().unwrap_or_default(),
                    uid: c.metadata.uid.clone().unwrap_or_default(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                },
            );
            changed = true;
        }
    }
    changed
}

fn clusters(s: &mut Store, pass: &mut CapiPass) {
    for (k, c) in s.capi_clusters.iter_mut() {
        if let Err(why) = capi_play::infrastructure_ref(c) {
            pass.waits.insert(format!("cluster {k}"), why);
        }
        let status = cluster_status(c, &capi_play::cluster_infra(c, &s.clusters));
        if status != c.status {
            c.status = status;
            pass.changed = true;
        }
    }
}

/// The Cluster's status with `infra` written as CAPI's Cluster controller writes it at the
/// Cluster's own version: v1beta2's `initialization.infrastructureProvisioned` and the
/// failure-domain list; v1beta1's `infrastructureReady` and a map by name.
fn cluster_status(cluster: &CapiObject, infra: &capi_play::ClusterInfra) -> Value {
    let mut status = match &cluster.status {
        Value::Object(_) => cluster.status.clone(),
        _ => json!({}),
    };
    let v1beta1 = cluster.api_version.ends_with("/v1beta1");
    if v1beta1 {
        status["infrastructureReady"] = infra.provisioned.into();
    } else {
        status["initialization"]["infrastructureProvisioned"] = infra.provisioned.into();
    }
    match &infra.failure_domains {
        Some(fds) if v1beta1 => {
            status["failureDomains"] = fds
                .iter()
                .map(|f| {
                    let mut v = json!(f);
                    v.as_object_mut().map(|o| o.remove("name"));
                    (f.name.clone(), v)
                })
                .collect::<serde_json::Map<_, _>>()
                .into()
        }
        Some(fds) => status["failureDomains"] = json!(fds),
        None => {
            if let Some(o) = status.as_object_mut() {
                o.remove("failureDomains");
            }
        }
    }
    status
}

fn deployments(s: &mut Store, pass: &mut CapiPass, now: &Time) {
    let keys: Vec<String> = s.machine_deployments.keys().cloned().collect();
    for k in keys {
        let md = s.machine_deployments[&k].clone();
        let ns = md.metadata.namespace.clone().unwrap_or_default();
        let name = md.metadata.name.clone().unwrap_or_default();
        let owned: Vec<CapiObject> = s
            .capi_machines
            .values()
            .filter(|m| {
                m.metadata.namespace.as_deref() == Some(&ns)
                    && m.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(DEPLOYMENT_NAME_LABEL))
                        == Some(&name)
            })
            .cloned()
            .collect();
        if md.metadata.deletion_timestamp.is_some() && owned.is_empty() {
            s.machine_deployments.remove(&k);
            pass.done.push(format!("MachineDeployment {k}: deleted"));
            pass.changed = true;
            continue;
        }
        if md.metadata.deletion_timestamp.is_none()
            && let Some(stored) = s.machine_deployments.get_mut(&k)
        {
            let f = stored.metadata.finalizers.get_or_insert_with(Vec::new);
            if !f.iter().any(|f| f == DEPLOYMENT_FINALIZER) {
                f.push(DEPLOYMENT_FINALIZER.into());
                pass.changed = true;
            }
        }
        let refs: Vec<&CapiObject> = owned.iter().collect();
        let plan = capi_play::deployment(&md, &refs, &s.machine_templates);
        if let Some(why) = plan.wait {
            pass.waits.insert(format!("machinedeployment {k}"), why);
        }
        for (mut m, mut v) in plan.create {
            let mk = ns_name(&m.metadata);
            if s.capi_machines.contains_key(&mk) {
                pass.waits.insert(
                    format!("machinedeployment {k}"),
                    format!("Machine {mk} exists already and is not this MachineDeployment's"),
                );
                continue;
            }
            born(&mut m.metadata, now);
            pass.done.push(format!(
                "Machine {mk}: created for MachineDeployment {k}, with its VSphereMachine"
            ));
            s.capi_machines.insert(mk.clone(), m);
            // A VSphereMachine of that name already there (given in the manifests) is the
            // Machine's.
            s.vsphere_machines.entry(mk).or_insert_with(|| {
                born(&mut v.metadata, now);
                v
            });
            pass.changed = true;
        }
        for d in plan.delete {
            if let Some(m) = s.capi_machines.get_mut(&d) {
                m.metadata
                    .deletion_timestamp
                    .get_or_insert_with(|| now.clone());
                pass.done.push(format!(
                    "Machine {d}: deleting (MachineDeployment {k} scaled down)"
                ));
                pass.changed = true;
            }
        }
        if md.metadata.deletion_timestamp.is_some() {
            for m in &owned {
                let mk = ns_name(&m.metadata);
                if let Some(m) = s.capi_machines.get_mut(&mk)
                    && m.metadata.deletion_timestamp.is_none()
                {
                    m.metadata.deletion_timestamp = Some(now.clone());
                    pass.done.push(format!(
                        "Machine {mk}: deleting (MachineDeployment {k} deleted)"
                    ));
                    pass.changed = true;
                }
            }
        }
    }
}

/// CAPI's Machine controller: the VSphereMachine owned and labelled; on deletion, the
/// VSphereMachine deleted, and the Machine gone once it is.
fn machines(s: &mut Store, pass: &mut CapiPass, now: &Time) {
    let keys: Vec<String> = s.capi_machines.keys().cloned().collect();
    for k in keys {
        let m = s.capi_machines[&k].clone();
        let infra = capi_play::infra_machine_ref(&m);
        let deleting = m.metadata.deletion_timestamp.is_some();
        let vk = match infra {
            Ok(vk) => vk,
            Err(why) => {
                if deleting {
                    s.capi_machines.remove(&k);
                    pass.changed = true;
                } else {
                    pass.waits.insert(format!("machine {k}"), why);
                }
                continue;
            }
        };
        match (deleting, s.vsphere_machines.get_mut(&vk)) {
            (true, None) => {
                s.capi_machines.remove(&k);
                pass.done.push(format!("Machine {k}: deleted"));
                pass.changed = true;
            }
            (true, Some(v)) => {
                if v.metadata.deletion_timestamp.is_none() {
                    delete(&mut s.vsphere_machines, &vk, |v| &mut v.metadata, now);
                    pass.done.push(format!("VSphereMachine {vk}: deleting"));
                    pass.changed = true;
                }
            }
            (false, None) => {
                pass.waits.insert(
                    format!("machine {k}"),
                    format!("Machine {k}: spec.infrastructureRef: VSphereMachine {vk} not found"),
                );
            }
            (false, Some(v)) => {
                if let Some(linked) = capi_play::link(&m, v) {
                    *v = linked;
                    pass.changed = true;
                }
            }
        }
    }
}

/// The VSphereMachine controller's decision for each, carried out on the store.
fn vsphere_machines(s: &mut Store, pass: &mut CapiPass, events: &mut Vec<EventRecord>, now: &Time) {
    let secrets: BTreeMap<String, Secret> = s
        .secrets
        .iter()
        .map(|x| (ns_name(&x.metadata), x.clone()))
        .collect();
    let keys: Vec<String> = s.vsphere_machines.keys().cloned().collect();
    for k in keys {
        let vsm = s.vsphere_machines[&k].clone();
        let ns = vsm.metadata.namespace.clone().unwrap_or_default();
        let owner = vsm
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "Machine" && o.controller == Some(true))
            .and_then(|o| {
                s.capi_machines
                    .get(&format!("{ns}/{}", o.name))
                    .filter(|m| m.metadata.uid.as_deref() == Some(o.uid.as_str()))
            })
            .map(CapiObject::as_machine);
        let cluster = owner.as_ref().and_then(|m| {
            s.capi_clusters
                .get(&format!("{ns}/{}", m.spec.cluster_name))
                .map(CapiObject::as_cluster)
        });
        let vsphere_cluster = cluster.as_ref().and_then(|c| {
            let obj = s.capi_clusters.get(&ns_name(&c.metadata))?;
            s.clusters.get(&capi_play::infrastructure_ref(obj).ok()?)
        });
        let secret = owner
            .as_ref()
            .and_then(|m| m.spec.bootstrap.data_secret_name.as_deref())
            .and_then(|n| secrets.get(&format!("{ns}/{n}")));
        let uid = vsm.metadata.uid.clone().unwrap_or_default();
        let existing = s
            .vsphere_vms
            .values()
            .find(|vm| {
                vm.metadata.namespace == vsm.metadata.namespace
                    && vm
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == uid && o.controller == Some(true))
            })
            .cloned();
        let legacy_failure_domain = crate::api::conversion::legacy_failure_domain(&vsm);
        let plan = machine::plan(&machine::Input {
            vsphere_machine: &vsm,
            machine: owner.as_ref(),
            cluster: cluster.as_ref(),
            vsphere_cluster,
            zones: &s.zones,
            failure_domains: &s.failure_domains,
            bootstrap_secret: secret,
            existing_vm: existing.as_ref(),
            legacy_failure_domain: legacy_failure_domain.as_deref(),
            now,
        });
        let machine_key = owner
            .as_ref()
            .map_or_else(|| k.clone(), |m| capi_play::ns_name(&m.metadata));
        if let Some(w) = &plan.wait {
            let mut why = format!("{}: {}", w.reason, w.message);
            let no_data = owner.as_ref().is_some_and(|m| {
                m.spec
                    .bootstrap
                    .data_secret_name
                    .as_deref()
                    .is_none_or(str::is_empty)
            });
            if no_data {
                why.push_str(
                    "; local mode runs no bootstrap provider: set spec.bootstrap.dataSecretName (a MachineDeployment's spec.template.spec.bootstrap.dataSecretName) to a Secret given in the manifests",
                );
            }
            pass.waits.insert(format!("machine {machine_key}"), why);
        }
        match plan.vm {
            VmAction::None => {}
            VmAction::Create(vm) => {
                let mut vm: VSphereVM = *vm;
                let vk = vm_key(&vm);
                if let std::collections::btree_map::Entry::Vacant(slot) =
                    s.vsphere_vms.entry(vk.clone())
                {
                    born(&mut vm.metadata, now);
                    events.push(EventRecord {
                        regarding: vm_ref(&vm),
                        type_: "Normal".into(),
                        reason: "Created".into(),
                        message: format!("VSphereVM {vk} for VSphereMachine {k}"),
                    });
                    pass.done
                        .push(format!("VSphereVM {vk}: created for VSphereMachine {k}"));
                    slot.insert(vm);
                    pass.changed = true;
                } else {
                    pass.waits.insert(
                        format!("machine {machine_key}"),
                        format!("VSphereVM {vk} exists already and is not VSphereMachine {k}'s"),
                    );
                }
            }
            VmAction::Delete(name) => {
                let vk = format!("{ns}/{name}");
                if delete(&mut s.vsphere_vms, &vk, |v| &mut v.metadata, now) {
                    pass.done.push(format!("VSphereVM {vk}: deleting"));
                    pass.changed = true;
                }
            }
        }
        if let Some(after) = plan.after {
            let released = after.metadata.deletion_timestamp.is_some()
                && after.metadata.finalizers.as_ref().is_none_or(Vec::is_empty);
            if released {
                s.vsphere_machines.remove(&k);
                pass.done.push(format!("VSphereMachine {k}: deleted"));
            } else {
                s.vsphere_machines.insert(k, after);
            }
            pass.changed = true;
        }
    }
}

/// `kubectl delete` on the store: an object with finalizers gets its deletion timestamp (its
/// controller finishes), one without goes at once. False when there is no such object.
fn delete<T>(
    map: &mut BTreeMap<String, T>,
    k: &str,
    meta: impl Fn(&mut T) -> &mut ObjectMeta,
    now: &Time,
) -> bool {
    let Some(obj) = map.get_mut(k) else {
        return false;
    };
    let m = meta(obj);
    if m.finalizers.as_ref().is_none_or(Vec::is_empty) {
        map.remove(k);
    } else {
        m.deletion_timestamp.get_or_insert_with(|| now.clone());
    }
    true
}

fn machine_statuses(s: &mut Store, pass: &mut CapiPass) {
    let vsms: &BTreeMap<String, VSphereMachine> = &s.vsphere_machines;
    for m in s.capi_machines.values_mut() {
        let vsm = capi_play::infra_machine_ref(m)
            .ok()
            .and_then(|k| vsms.get(&k));
        let after = capi_play::machine_status(m, vsm);
        if after != *m {
            *m = after;
            pass.changed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vsphere_cluster::FailureDomain;

    /// A Cluster's status gets the VSphereCluster's provisioning and failure domains in the
    /// Cluster's own version's shape.
    #[test]
    fn the_cluster_status_follows_the_clusters_version() {
        let cluster = |api_version: &str| -> CapiObject {
            serde_json::from_value(json!({"apiVersion": api_version, "kind": "Cluster",
                "metadata": {"name": "c", "namespace": "ns"}, "spec": {}}))
            .unwrap()
        };
        let infra = capi_play::ClusterInfra {
            provisioned: true,
            failure_domains: Some(vec![FailureDomain {
                name: "a".into(),
                control_plane: Some(true),
                attributes: None,
            }]),
        };
        let v1 = cluster_status(&cluster("cluster.x-k8s.io/v1beta1"), &infra);
        assert_eq!(v1["infrastructureReady"], true);
        assert_eq!(v1["failureDomains"], json!({"a": {"controlPlane": true}}));
        let v2 = cluster_status(&cluster("cluster.x-k8s.io/v1beta2"), &infra);
        assert_eq!(v2["initialization"]["infrastructureProvisioned"], true);
        assert_eq!(
            v2["failureDomains"],
            json!([{"name": "a", "controlPlane": true}])
        );
        assert!(v2.get("infrastructureReady").is_none(), "{v2}");
        let none = cluster_status(
            &cluster("cluster.x-k8s.io/v1beta2"),
            &capi_play::ClusterInfra::default(),
        );
        assert_eq!(none["initialization"]["infrastructureProvisioned"], false);
        assert!(none.get("failureDomains").is_none(), "{none}");
    }
}
