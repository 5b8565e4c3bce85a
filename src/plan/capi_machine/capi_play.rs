//! What local mode plays of Cluster API, pure — only what CAPI must do for this provider to
//! act, and nothing more (local mode runs no CAPI controllers, no bootstrap provider and has no
//! workload cluster):
//!
//! * a `Cluster` is infrastructure-ready when the VSphereCluster its `spec.infrastructureRef`
//!   names is ready, and gets that cluster's failure domains ([`cluster_infra`]);
//! * a `MachineDeployment` of `replicas` N becomes N Machines, each with a VSphereMachine from
//!   its VSphereMachineTemplate, named `<deployment>-<index>` so that re-runs find them again
//!   (CAPI goes through a MachineSet with random suffixes; local mode skips the MachineSet).
//!   Lower replicas delete the highest indices. Template changes are not rolled out
//!   ([`deployment`]);
//! * a Machine owns the VSphereMachine its `spec.infrastructureRef` names ([`link`]), and gets
//!   back `spec.providerID`, `status.addresses` and its phase from it, as CAPI copies them
//!   ([`machine_status`]). With no node to find, `Provisioned` is as far as it goes;
//! * bootstrap data is the user's: `spec.bootstrap.dataSecretName` must name a Secret given in
//!   the manifests; a Machine without one waits, saying why (the VSphereMachine's condition).
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};

use crate::api::capi_core::{CLUSTER_NAME_LABEL, CapiObject};
use crate::api::vsphere_cluster::{FailureDomain, VSphereCluster};
use crate::api::vsphere_machine::{VSphereMachine, VSphereMachineTemplate};

/// The finalizer CAPI puts on a Machine: local mode removes it once the VSphereMachine is gone.
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";
/// The finalizer on a MachineDeployment: it goes once its Machines are gone.
pub const DEPLOYMENT_FINALIZER: &str = "machinedeployment.cluster.x-k8s.io";
/// The label naming a Machine's MachineDeployment (CAPI's).
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
/// The infrastructure API group and version of the kinds this provider serves.
const INFRA_API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta1";

/// CAPI's machine phases local mode reaches.
pub mod phase {
    pub const PENDING: &str = "Pending";
    pub const PROVISIONING: &str = "Provisioning";
    pub const PROVISIONED: &str = "Provisioned";
    pub const DELETING: &str = "Deleting";
    pub const FAILED: &str = "Failed";
}

/// `namespace/name`.
pub fn ns_name(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// `spec.<ref>` as (kind, namespace/name), the namespace defaulting to the object's.
fn reference(obj: &CapiObject, pointer: &str) -> Option<(String, String)> {
    let r = obj.spec.pointer(pointer)?;
    let kind = r.get("kind")?.as_str()?.to_string();
    let name = r.get("name")?.as_str().filter(|n| !n.is_empty())?;
    let ns = r
        .get("namespace")
        .and_then(Value::as_str)
        .or(obj.metadata.namespace.as_deref())
        .unwrap_or("default");
    Some((kind, format!("{ns}/{name}")))
}

/// The VSphereCluster a Cluster's `spec.infrastructureRef` names, or why there is none.
pub fn infrastructure_ref(cluster: &CapiObject) -> Result<String, String> {
    let at = ns_name(&cluster.metadata);
    match reference(cluster, "/infrastructureRef") {
        Some((kind, k)) if kind == "VSphereCluster" => Ok(k),
        Some((kind, _)) => Err(format!(
            "Cluster {at}: spec.infrastructureRef.kind is {kind:?}; local mode plays Cluster API for VSphereCluster only"
        )),
        None => Err(format!(
            "Cluster {at}: spec.infrastructureRef (kind VSphereCluster, name) is not set"
        )),
    }
}

/// What CAPI's Cluster controller copies from the VSphereCluster a Cluster names: whether its
/// infrastructure is provisioned, and its failure domains (as published, sorted by name). How
/// that is written into the Cluster's status depends on the Cluster's version, which is the
/// edge's business (`local::capi`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterInfra {
    pub provisioned: bool,
    pub failure_domains: Option<Vec<FailureDomain>>,
}

/// The [`ClusterInfra`] of `cluster` from the VSphereCluster its `spec.infrastructureRef`
/// names (not provisioned, no failure domains, when it names none or one not found).
pub fn cluster_infra(
    cluster: &CapiObject,
    vsphere_clusters: &BTreeMap<String, VSphereCluster>,
) -> ClusterInfra {
    let status = infrastructure_ref(cluster)
        .ok()
        .and_then(|k| vsphere_clusters.get(&k))
        .and_then(|c| c.status.as_ref());
    ClusterInfra {
        provisioned: status.is_some_and(|s| s.provisioned()),
        failure_domains: status.and_then(|s| s.failure_domains.clone()),
    }
}

/// What a MachineDeployment wants done.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeploymentPlan {
    /// New Machines, each with its VSphereMachine (same name).
    pub create: Vec<(CapiObject, VSphereMachine)>,
    /// Machines (`namespace/name`) beyond `replicas`, to delete.
    pub delete: Vec<String>,
    /// Why it cannot make Machines (naming the field and object), when it cannot.
    pub wait: Option<String>,
}

/// The MachineDeployment's Machines: `<name>-<index>` for index below `replicas` (default 1).
/// `machines` are the Machines it has (labelled with its name), `templates` the
/// VSphereMachineTemplates by `namespace/name`.
pub fn deployment(
    md: &CapiObject,
    machines: &[&CapiObject],
    templates: &BTreeMap<String, VSphereMachineTemplate>,
) -> DeploymentPlan {
    let at = ns_name(&md.metadata);
    let name = md.metadata.name.clone().unwrap_or_default();
    let ns = md
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let mut plan = DeploymentPlan::default();
    let deleting = md.metadata.deletion_timestamp.is_some();
    let replicas = match md.spec.get("replicas") {
        _ if deleting => 0,
        None | Some(Value::Null) => 1,
        Some(v) => match v.as_u64() {
            Some(n) => n,
            None => {
                plan.wait = Some(format!(
                    "MachineDeployment {at}: spec.replicas {v} is not a non-negative integer"
                ));
                return plan;
            }
        },
    };
    let wanted: Vec<String> = (0..replicas).map(|i| format!("{name}-{i}")).collect();
    for m in machines {
        let n = m.metadata.name.clone().unwrap_or_default();
        if !wanted.contains(&n) && m.metadata.deletion_timestamp.is_none() {
            plan.delete.push(format!("{ns}/{n}"));
        }
    }
    let have: Vec<&str> = machines
        .iter()
        .filter_map(|m| m.metadata.name.as_deref())
        .collect();
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|w| !have.contains(&w.as_str()))
        .collect();
    if missing.is_empty() {
        return plan;
    }
    let spec = md
        .spec
        .pointer("/template/spec")
        .cloned()
        .unwrap_or_default();
    let cluster_name = md.spec["clusterName"].as_str().unwrap_or_default();
    if cluster_name.is_empty() {
        plan.wait = Some(format!(
            "MachineDeployment {at}: spec.clusterName is not set"
        ));
        return plan;
    }
    let template = match reference(md, "/template/spec/infrastructureRef") {
        Some((kind, k)) if kind == "VSphereMachineTemplate" => match templates.get(&k) {
            Some(t) => t,
            None => {
                plan.wait = Some(format!(
                    "MachineDeployment {at}: spec.template.spec.infrastructureRef: VSphereMachineTemplate {k} not found"
                ));
                return plan;
            }
        },
        Some((kind, _)) => {
            plan.wait = Some(format!(
                "MachineDeployment {at}: spec.template.spec.infrastructureRef.kind is {kind:?}, not VSphereMachineTemplate"
            ));
            return plan;
        }
        None => {
            plan.wait = Some(format!(
                "MachineDeployment {at}: spec.template.spec.infrastructureRef (kind VSphereMachineTemplate, name) is not set"
            ));
            return plan;
        }
    };
    let mut labels: BTreeMap<String, String> = md
        .spec
        .pointer("/template/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    labels.insert(CLUSTER_NAME_LABEL.into(), cluster_name.into());
    labels.insert(DEPLOYMENT_NAME_LABEL.into(), name.clone());
    for m in missing {
        let mut mspec = json!({
            "clusterName": cluster_name,
            "bootstrap": spec.get("bootstrap").cloned().unwrap_or_else(|| json!({})),
            "infrastructureRef": {
                "apiVersion": INFRA_API_VERSION, "kind": "VSphereMachine",
                "name": m, "namespace": ns,
            },
        });
        for k in ["failureDomain", "version"] {
            if let Some(v) = spec.get(k).filter(|v| !v.is_null()) {
                mspec[k] = v.clone();
            }
        }
        let machine = CapiObject {
            api_version: md.api_version.clone(),
            kind: "Machine".into(),
            metadata: ObjectMeta {
                name: Some(m.clone()),
                namespace: Some(ns.clone()),
                labels: Some(labels.clone()),
                owner_references: Some(vec![owner(
                    &md.api_version,
                    "MachineDeployment",
                    &md.metadata,
                )]),
                ..ObjectMeta::default()
            },
            spec: mspec,
            status: Value::Null,
        };
        let tmeta = template.spec.template.metadata.clone().unwrap_or_default();
        let mut vlabels = tmeta.labels.unwrap_or_default();
        vlabels.extend(labels.clone());
        let vsm = VSphereMachine {
            metadata: ObjectMeta {
                name: Some(m.clone()),
                namespace: Some(ns.clone()),
                labels: Some(vlabels),
                annotations: tmeta.annotations,
                ..ObjectMeta::default()
            },
            spec: template.spec.template.spec.clone().unwrap_or_default(),
            status: None,
        };
        plan.create.push((machine, vsm));
    }
    plan
}

fn owner(api_version: &str, kind: &str, meta: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The VSphereMachine (`namespace/name`) a Machine's `spec.infrastructureRef` names, or why
/// it names none this provider acts on.
pub fn infra_machine_ref(machine: &CapiObject) -> Result<String, String> {
    let at = ns_name(&machine.metadata);
    match reference(machine, "/infrastructureRef") {
        Some((kind, k)) if kind == "VSphereMachine" => Ok(k),
        Some((kind, _)) => Err(format!(
            "Machine {at}: spec.infrastructureRef.kind is {kind:?}, not VSphereMachine"
        )),
        None => Err(format!(
            "Machine {at}: spec.infrastructureRef (kind VSphereMachine, name) is not set"
        )),
    }
}

/// CAPI's Machine controller on the VSphereMachine: the Machine as its controller owner and the
/// cluster-name label. `None` when it has both already.
pub fn link(machine: &CapiObject, vsm: &VSphereMachine) -> Option<VSphereMachine> {
    let mut out = vsm.clone();
    let uid = machine.metadata.uid.clone().unwrap_or_default();
    let refs = out.metadata.owner_references.get_or_insert_with(Vec::new);
    if !refs.iter().any(|o| o.kind == "Machine" && o.uid == uid) {
        refs.retain(|o| !(o.kind == "Machine" && o.controller == Some(true)));
        refs.push(owner(&machine.api_version, "Machine", &machine.metadata));
    }
    if let Some(c) = machine.spec["clusterName"]
        .as_str()
        .filter(|c| !c.is_empty())
    {
        out.metadata
            .labels
            .get_or_insert_with(Default::default)
            .entry(CLUSTER_NAME_LABEL.into())
            .or_insert_with(|| c.into());
    }
    (out != *vsm).then_some(out)
}

/// The Machine after CAPI copied what its VSphereMachine reports: `spec.providerID`,
/// `status.addresses`, `infrastructureReady`, `bootstrapReady` and the phase (`Deleting`,
/// `Failed`, `Provisioned` once ready with a provider ID, `Provisioning` once it has bootstrap
/// data, else `Pending`), and CAPI's finalizer while it is not being deleted.
pub fn machine_status(machine: &CapiObject, vsm: Option<&VSphereMachine>) -> CapiObject {
    let mut out = machine.clone();
    if out.metadata.deletion_timestamp.is_none() {
        let f = out.metadata.finalizers.get_or_insert_with(Vec::new);
        if !f.iter().any(|f| f == MACHINE_FINALIZER) {
            f.push(MACHINE_FINALIZER.into());
        }
    }
    let vst = vsm.and_then(|v| v.status.as_ref());
    if let Some(pid) = vsm
        .map(|v| v.spec.provider_id.clone())
        .filter(|p| !p.is_empty())
        && out.spec.get("providerID").is_none_or(Value::is_null)
        && out.spec.is_object()
    {
        out.spec["providerID"] = pid.into();
    }
    let mut status = match &machine.status {
        Value::Object(_) => machine.status.clone(),
        _ => json!({}),
    };
    let infra_ready = vst.is_some_and(|s| s.provisioned());
    let bootstrap_ready = out
        .spec
        .pointer("/bootstrap/dataSecretName")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    status["infrastructureReady"] = infra_ready.into();
    status["bootstrapReady"] = bootstrap_ready.into();
    if let Some(a) = vst
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| serde_json::to_value(a).ok())
    {
        status["addresses"] = a;
    }
    let v1beta1 = vst.and_then(|s| s.deprecated.as_ref()?.v1beta1.as_ref());
    let failure = v1beta1.and_then(|s| s.failure_reason.clone());
    let has_pid = out
        .spec
        .get("providerID")
        .and_then(Value::as_str)
        .is_some_and(|p| !p.is_empty());
    let ph = if out.metadata.deletion_timestamp.is_some() {
        phase::DELETING
    } else if failure.is_some() {
        status["failureReason"] = failure.into();
        status["failureMessage"] = v1beta1
            .and_then(|s| s.failure_message.clone())
            .unwrap_or_default()
            .into();
        phase::FAILED
    } else if infra_ready && has_pid {
        phase::PROVISIONED
    } else if bootstrap_ready {
        phase::PROVISIONING
    } else {
        phase::PENDING
    };
    status["phase"] = ph.into();
    out.status = status;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::infrastructure::v1beta2::common::Initialization;
    use crate::api::vsphere_machine::VSphereMachineStatus;

    fn obj(v: Value) -> CapiObject {
        serde_json::from_value(v).unwrap()
    }

    fn md(replicas: Value, template: &str) -> CapiObject {
        obj(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
            "metadata": {"name": "w", "namespace": "ns", "uid": "md-uid"},
            "spec": {"clusterName": "c", "replicas": replicas, "template": {
                "metadata": {"labels": {"pool": "a"}},
                "spec": {"clusterName": "c", "failureDomain": "zone-a",
                         "bootstrap": {"dataSecretName": "boot"},
                         "infrastructureRef": {"kind": "VSphereMachineTemplate", "name": template}}}}
        }))
    }

    fn templates() -> BTreeMap<String, VSphereMachineTemplate> {
        let t: VSphereMachineTemplate = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachineTemplate",
            "metadata": {"name": "tpl", "namespace": "ns"},
            "spec": {"template": {"spec": {"template": "ubuntu", "numCPUs": 2}}}
        }))
        .unwrap();
        BTreeMap::from([("ns/tpl".to_string(), t)])
    }

    #[test]
    fn a_deployment_makes_stably_named_machines_and_trims_the_highest() {
        let p = deployment(&md(json!(2), "tpl"), &[], &templates());
        let names: Vec<_> = p
            .create
            .iter()
            .map(|(m, v)| {
                (
                    m.metadata.name.clone().unwrap(),
                    v.metadata.name.clone().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [("w-0".into(), "w-0".into()), ("w-1".into(), "w-1".into())]
        );
        let (m, v) = &p.create[0];
        assert_eq!(m.spec["failureDomain"], "zone-a");
        assert_eq!(m.spec["bootstrap"]["dataSecretName"], "boot");
        assert_eq!(m.spec["infrastructureRef"]["name"], "w-0");
        assert_eq!(
            m.metadata.owner_references.as_ref().unwrap()[0].uid,
            "md-uid"
        );
        assert_eq!(v.spec.clone.template, "ubuntu");
        assert_eq!(v.metadata.labels.as_ref().unwrap()["pool"], "a");
        // Both there: nothing to do; down to one: the highest index goes.
        let have: Vec<CapiObject> = p.create.iter().map(|(m, _)| m.clone()).collect();
        let refs: Vec<&CapiObject> = have.iter().collect();
        assert_eq!(
            deployment(&md(json!(2), "tpl"), &refs, &templates()),
            DeploymentPlan::default()
        );
        let down = deployment(&md(json!(1), "tpl"), &refs, &templates());
        assert_eq!(down.delete, ["ns/w-1"]);
        assert!(down.create.is_empty());
    }

    #[test]
    fn a_missing_template_or_bad_replicas_waits_naming_the_field() {
        let p = deployment(&md(json!(1), "nope"), &[], &templates());
        assert_eq!(
            p.wait.as_deref(),
            Some(
                "MachineDeployment ns/w: spec.template.spec.infrastructureRef: VSphereMachineTemplate ns/nope not found"
            )
        );
        assert!(p.create.is_empty());
        let p = deployment(&md(json!(-1), "tpl"), &[], &templates());
        assert!(p.wait.unwrap().contains("spec.replicas -1"));
    }

    #[test]
    fn the_machine_copies_provider_id_and_addresses_once_ready() {
        let m = obj(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "metadata": {"name": "w-0", "namespace": "ns", "uid": "m-uid"},
            "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "boot"},
                     "infrastructureRef": {"kind": "VSphereMachine", "name": "w-0"}}
        }));
        let mut v = VSphereMachine::new("w-0", Default::default());
        let linked = link(&m, &v).unwrap();
        assert_eq!(
            linked.metadata.owner_references.as_ref().unwrap()[0].uid,
            "m-uid"
        );
        assert!(link(&m, &linked).is_none(), "linked once");
        let out = machine_status(&m, Some(&v));
        assert_eq!(out.status["phase"], phase::PROVISIONING);
        assert_eq!(
            out.metadata.finalizers.as_ref().unwrap(),
            &[MACHINE_FINALIZER]
        );
        v.spec.provider_id = "vsphere://abc".into();
        v.status = Some(VSphereMachineStatus {
            initialization: Some(Initialization {
                provisioned: Some(true),
            }),
            addresses: serde_json::from_value(
                json!([{"type": "InternalIP", "address": "10.0.0.5"}]),
            )
            .unwrap(),
            ..Default::default()
        });
        let out = machine_status(&m, Some(&v));
        assert_eq!(out.spec["providerID"], "vsphere://abc");
        assert_eq!(out.status["phase"], phase::PROVISIONED);
        assert_eq!(out.status["addresses"][0]["address"], "10.0.0.5");
    }

    #[test]
    fn a_cluster_is_infrastructure_ready_with_its_vsphere_cluster() {
        let c = obj(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"infrastructureRef": {"kind": "VSphereCluster", "name": "vc"}}
        }));
        let mut vc: VSphereCluster = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereCluster",
            "metadata": {"name": "vc", "namespace": "ns"}, "spec": {"server": "vc.example"}
        }))
        .unwrap();
        let mut vcs = BTreeMap::from([("ns/vc".to_string(), vc.clone())]);
        assert_eq!(cluster_infra(&c, &vcs), ClusterInfra::default());
        vc.status = Some(
            serde_json::from_value(json!({
                "initialization": {"provisioned": true},
                "failureDomains": [{"name": "a", "controlPlane": true}]
            }))
            .unwrap(),
        );
        vcs.insert("ns/vc".into(), vc);
        let infra = cluster_infra(&c, &vcs);
        assert!(infra.provisioned);
        assert_eq!(infra.failure_domains.unwrap()[0].name, "a");
        let bad = obj(
            json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "c"}, "spec": {}}),
        );
        assert!(
            infrastructure_ref(&bad)
                .unwrap_err()
                .contains("spec.infrastructureRef")
        );
    }
}
