//! One VSphereMachine pass, pure: given the machine, its owner Machine, Cluster, VSphereCluster,
//! the zones and failure domains, the bootstrap Secret and the VSphereVM it already has, what
//! to do — create this VSphereVM, delete the VSphereVM, the VSphereMachine to write, and when to
//! look again. The in-cluster controller (`controllers::capi_machine`) and local mode
//! (`local::capi`) both carry it out, so a Cluster API machine is decided once.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::actuated::{VM_GROUP_ANNOTATION, not_provisioned, observed};
use super::resolve::{self, Desired, Wait, reason};
use super::status::{VM_PROVISIONED, mirror_conditions, plan_deleted, plan_status};
use crate::api::capi_core::{CapiCluster, CapiMachine};
use crate::api::conditions::{ConditionUpdate, set_capi_condition, severity};
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::api::infrastructure::v1beta2::common::DeprecatedFailureStatus;
use crate::api::vsphere_cluster::VSphereCluster;
use crate::api::vsphere_machine::VSphereMachine;
use crate::api::vsphere_vm::VSphereVM;

/// Everything one pass reads. On deletion only `vsphere_machine` and `existing_vm` matter.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub vsphere_machine: &'a VSphereMachine,
    /// The owner Machine (`None`: CAPI has not set the owner reference yet, or it is gone).
    pub machine: Option<&'a CapiMachine>,
    pub cluster: Option<&'a CapiCluster>,
    pub vsphere_cluster: Option<&'a VSphereCluster>,
    pub zones: &'a BTreeMap<String, VSphereDeploymentZone>,
    pub failure_domains: &'a BTreeMap<String, VSphereFailureDomain>,
    /// The Secret [`bootstrap_secret_to_read`] named, if it was read and found.
    pub bootstrap_secret: Option<&'a Secret>,
    /// The VSphereVM the machine controls, if there is one.
    pub existing_vm: Option<&'a VSphereVM>,
    /// The VSphereMachine's held v1beta1 `spec.failureDomain` ([`resolve::Input`]).
    pub legacy_failure_domain: Option<&'a str>,
    pub now: &'a Time,
}

/// What to do to the machine's VSphereVM.
#[derive(Clone, Debug, PartialEq)]
pub enum VmAction {
    None,
    /// Create it (none exists yet); the VM group is on it as [`VM_GROUP_ANNOTATION`].
    Create(Box<VSphereVM>),
    /// Delete it (named): the machine is being deleted and its VSphereVM is not yet.
    Delete(String),
}

/// When the machine wants another look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Only a change wakes it (no owner yet, deletion done).
    AwaitChange,
    /// Paused (its Cluster, or itself): nothing is done. The resume is a change of the
    /// Cluster or of the VSphereMachine, both watched; the shell still looks again now and then.
    Paused,
    /// It waits on something not watched (CAPI's objects, the zone) or on its VM: poll.
    Poll,
    /// Ready: the periodic look.
    Idle,
}

/// One pass's decision.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub vm: VmAction,
    /// The VSphereMachine after this pass (`None`: nothing to write).
    pub after: Option<VSphereMachine>,
    pub next: Next,
    /// Why it waits (the resolution's reason and message), when it does.
    pub wait: Option<Wait>,
    /// Fields of the VSphereMachine stored but not acted on (an event says so on create).
    pub ignored: Vec<&'static str>,
}

/// The bootstrap data Secret a pass needs read, if any: only a machine that may make its
/// VSphereVM now (not being deleted, none yet, its Machine naming the Secret). Once the
/// VSphereVM exists it carries the Secret's name and the clone reads it, so steady-state passes
/// read nothing: the Secret is fetched by name when needed, never watched (a watch of Secrets
/// would hold every Secret of the cluster in memory and need the right to list them all).
pub fn bootstrap_secret_to_read<'a>(
    vsphere_machine: &VSphereMachine,
    machine: Option<&'a CapiMachine>,
    existing_vm: Option<&VSphereVM>,
) -> Option<&'a str> {
    if vsphere_machine.metadata.deletion_timestamp.is_some() || existing_vm.is_some() {
        return None;
    }
    machine?
        .spec
        .bootstrap
        .data_secret_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

/// What a pass reads of its Cluster: pause, infrastructure ready, control plane initialized,
/// the VSphereCluster it names. A change of anything else (CAPI rewrites the Cluster's
/// conditions often) changes no plan, so it need not wake the Cluster's machines.
pub fn cluster_read(cluster: &CapiCluster) -> (bool, bool, bool, Option<&serde_json::Value>) {
    (
        cluster.paused(),
        cluster.infrastructure_ready(),
        cluster.control_plane_initialized(),
        cluster.spec.get("infrastructureRef"),
    )
}

/// Decide one pass.
pub fn plan(input: &Input<'_>) -> Plan {
    let vsm = input.vsphere_machine;
    let existing = input.existing_vm;
    if vsm.metadata.deletion_timestamp.is_some() {
        // The VSphereVM goes first (the sweep destroys the VM, then releases it); the finalizer
        // goes once it is gone, never before.
        return match existing {
            Some(vm) => Plan {
                vm: match vm.metadata.deletion_timestamp {
                    None => VmAction::Delete(vm.metadata.name.clone().unwrap_or_default()),
                    Some(_) => VmAction::None,
                },
                after: Some(plan_deleted(vsm, true, input.now)),
                next: Next::Poll,
                wait: None,
                ignored: Vec::new(),
            },
            None => Plan {
                vm: VmAction::None,
                after: Some(plan_deleted(vsm, false, input.now)),
                next: Next::AwaitChange,
                wait: None,
                ignored: Vec::new(),
            },
        };
    }
    let Some(machine) = input.machine else {
        // CAPI's Machine controller sets the owner reference; that change wakes it.
        return Plan {
            vm: VmAction::None,
            after: None,
            next: Next::AwaitChange,
            wait: None,
            ignored: Vec::new(),
        };
    };
    let resolved = resolve::resolve(&resolve::Input {
        machine,
        cluster: input.cluster,
        vsphere_machine: vsm,
        vsphere_cluster: input.vsphere_cluster,
        zones: input.zones,
        failure_domains: input.failure_domains,
        bootstrap_secret: input.bootstrap_secret,
        existing_vm: existing,
        legacy_failure_domain: input.legacy_failure_domain,
    });
    let created = match (&resolved, existing) {
        (Ok(desired), None) => Some(vm_to_create(desired)),
        _ => None,
    };
    let vm = existing.or(created.as_ref());
    let mut after = plan_status(vsm, &resolved, vm.and_then(observed).as_ref(), input.now);
    let mut edited = false;
    if let Some(c) = vm.and_then(not_provisioned) {
        // The VM's own reason (a failed clone, a zone or claim waited for) is the machine's.
        let st = after.status.get_or_insert_with(Default::default);
        let conditions = DeprecatedFailureStatus::v1beta1_mut(&mut st.deprecated)
            .conditions
            .get_or_insert_with(Vec::new);
        if let Some(mine) = conditions.iter_mut().find(|m| m.type_ == VM_PROVISIONED) {
            mine.clone_from(c);
            edited = true;
        }
    }
    if let Some(vst) = vm.and_then(|v| v.status.as_ref()?.deprecated.as_ref()?.v1beta1.as_ref())
        && vst.failure_reason.is_some()
    {
        // The VM cannot be made as asked (a terminal configuration error): the machine says
        // so, as CAPV copies its VSphereVM's failure, instead of waiting for a clone.
        let st = after.status.get_or_insert_with(Default::default);
        let v1beta1 = DeprecatedFailureStatus::v1beta1_mut(&mut st.deprecated);
        v1beta1.failure_reason.clone_from(&vst.failure_reason);
        v1beta1.failure_message.clone_from(&vst.failure_message);
        let reason = vst.failure_reason.clone().unwrap_or_default();
        let message = vst.failure_message.clone().unwrap_or_default();
        let conditions = v1beta1.conditions.get_or_insert_with(Vec::new);
        set_capi_condition(
            conditions,
            &ConditionUpdate::false_(VM_PROVISIONED, &reason, severity::ERROR, &message),
            input.now,
        );
        edited = true;
    }
    if edited {
        // The metav1 conditions say what the v1beta1 ones now say.
        let paused = matches!(&resolved, Err(w) if w.reason == reason::PAUSED);
        mirror_conditions(&mut after, paused, input.now);
    }
    let ready = after.status.as_ref().is_some_and(|s| s.provisioned());
    let next = match &resolved {
        Err(w) if w.reason == reason::PAUSED => Next::Paused,
        Err(_) => Next::Poll,
        Ok(_) if ready => Next::Idle,
        // The VSphereVM's status changes wake it; this is the fallback.
        Ok(_) => Next::Poll,
    };
    let (wait, ignored) = match resolved {
        Ok(d) => (None, d.ignored),
        Err(w) => (Some(w), Vec::new()),
    };
    Plan {
        vm: created.map_or(VmAction::None, |v| VmAction::Create(Box::new(v))),
        after: (after != *vsm).then_some(after),
        next,
        wait,
        ignored,
    }
}

/// The VSphereVM to create for `desired`, with its VM group as an annotation (CAPV's spec has
/// no field for it).
fn vm_to_create(desired: &Desired) -> VSphereVM {
    let mut vm = desired.vm.clone();
    if let Some(group) = desired
        .provider_spec
        .workspace
        .as_ref()
        .and_then(|w| w.vm_group.clone())
    {
        vm.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(VM_GROUP_ANNOTATION.to_string(), group);
    }
    vm
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vsm(deleting: bool) -> VSphereMachine {
        let mut v: VSphereMachine = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachine",
            "metadata": {"name": "m-0", "namespace": "ns", "uid": "u-1",
                         "finalizers": ["vspheremachine.infrastructure.cluster.x-k8s.io"]},
            "spec": {"template": "t", "server": "vc.example"}
        }))
        .unwrap();
        if deleting {
            v.metadata.deletion_timestamp = Some(now());
        }
        v
    }

    fn machine(secret: Option<&str>) -> CapiMachine {
        serde_json::from_value(json!({
            "metadata": {"name": "m-0", "namespace": "ns"},
            "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": secret}}
        }))
        .unwrap()
    }

    fn cluster() -> CapiCluster {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "status": {"infrastructureReady": true}
        }))
        .unwrap()
    }

    fn secret() -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": "boot", "namespace": "ns"},
            "data": {"value": "I2Nsb3VkLWNvbmZpZw=="}
        }))
        .unwrap()
    }

    fn now() -> Time {
        Time(jiff::Timestamp::from_second(1_700_000_000).unwrap())
    }

    type Zones = (
        BTreeMap<String, VSphereDeploymentZone>,
        BTreeMap<String, VSphereFailureDomain>,
    );

    /// A machine that resolves: owner, ready cluster, bootstrap Secret.
    fn resolvable() -> (
        VSphereMachine,
        CapiMachine,
        CapiCluster,
        Secret,
        Zones,
        Time,
    ) {
        (
            vsm(false),
            machine(Some("boot")),
            cluster(),
            secret(),
            Default::default(),
            now(),
        )
    }

    fn input<'a>(
        vsm: &'a VSphereMachine,
        machine: Option<&'a CapiMachine>,
        cluster: &'a CapiCluster,
        secret: Option<&'a Secret>,
        vm: Option<&'a VSphereVM>,
        empty: &'a Zones,
        now: &'a Time,
    ) -> Input<'a> {
        Input {
            vsphere_machine: vsm,
            machine,
            cluster: Some(cluster),
            vsphere_cluster: None,
            zones: &empty.0,
            failure_domains: &empty.1,
            bootstrap_secret: secret,
            existing_vm: vm,
            legacy_failure_domain: None,
            now,
        }
    }

    #[test]
    fn a_resolved_machine_without_a_vm_creates_one_and_polls() {
        let (v, m, c, s, e, t) = resolvable();
        let p = plan(&input(&v, Some(&m), &c, Some(&s), None, &e, &t));
        let VmAction::Create(vm) = &p.vm else {
            panic!("{:?}", p.vm)
        };
        assert_eq!(vm.metadata.name.as_deref(), Some("m-0"));
        assert_eq!(p.next, Next::Poll);
        assert!(p.wait.is_none());
        // Once it exists, the same input creates nothing more.
        let again = plan(&input(&v, Some(&m), &c, Some(&s), Some(vm), &e, &t));
        assert_eq!(again.vm, VmAction::None);
    }

    #[test]
    fn a_failed_vsphere_vm_fails_the_machine_naming_why() {
        let (v, m, c, s, e, t) = resolvable();
        let mut vm = VSphereVM::new("m-0", Default::default());
        let failure = crate::api::infrastructure::v1beta2::common::DeprecatedV1Beta1FailureStatus {
            failure_reason: Some("InvalidConfiguration".into()),
            failure_message: Some("spec.resourcePool: required".into()),
            ..Default::default()
        };
        vm.status = Some(crate::api::vsphere_vm::VSphereVMStatus {
            deprecated: Some(
                crate::api::infrastructure::v1beta2::common::DeprecatedFailureStatus {
                    v1beta1: Some(failure),
                },
            ),
            ..Default::default()
        });
        let p = plan(&input(&v, Some(&m), &c, Some(&s), Some(&vm), &e, &t));
        let st = p.after.unwrap().status.unwrap();
        let v1beta1 = st.deprecated.as_ref().unwrap().v1beta1.as_ref().unwrap();
        assert_eq!(
            v1beta1.failure_reason.as_deref(),
            Some("InvalidConfiguration")
        );
        let cond = v1beta1
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == VM_PROVISIONED)
            .unwrap();
        assert_eq!(
            (cond.reason.as_deref(), cond.message.as_deref()),
            (
                Some("InvalidConfiguration"),
                Some("spec.resourcePool: required")
            )
        );
        // The metav1 condition says the same (it is written after the VM's failure is copied).
        let cond = st
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == VM_PROVISIONED)
            .unwrap();
        assert_eq!(
            (cond.reason.as_str(), cond.message.as_str()),
            ("InvalidConfiguration", "spec.resourcePool: required")
        );
    }

    #[test]
    fn no_bootstrap_data_waits_naming_the_field_and_creates_nothing() {
        let (v, m, c, e, t) = (
            vsm(false),
            machine(None),
            cluster(),
            Default::default(),
            now(),
        );
        let p = plan(&input(&v, Some(&m), &c, None, None, &e, &t));
        assert_eq!(p.vm, VmAction::None);
        let w = p.wait.unwrap();
        assert_eq!(w.reason, reason::WAITING_FOR_CONTROL_PLANE);
        assert_eq!(p.next, Next::Poll);
        assert!(p.after.is_some(), "the condition says why");
    }

    #[test]
    fn the_bootstrap_secret_is_read_only_before_the_vsphere_vm_exists() {
        let (v, m) = (vsm(false), machine(Some("boot")));
        assert_eq!(bootstrap_secret_to_read(&v, Some(&m), None), Some("boot"));
        let vm = VSphereVM::new("m-0", Default::default());
        assert_eq!(bootstrap_secret_to_read(&v, Some(&m), Some(&vm)), None);
        assert_eq!(bootstrap_secret_to_read(&vsm(true), Some(&m), None), None);
        assert_eq!(bootstrap_secret_to_read(&v, None, None), None);
        assert_eq!(
            bootstrap_secret_to_read(&v, Some(&machine(None)), None),
            None
        );
        assert_eq!(
            bootstrap_secret_to_read(&v, Some(&machine(Some(""))), None),
            None
        );
        // A provisioned machine without its Secret stays as it is.
        let (v, m, c, s, e, t) = resolvable();
        let first = plan(&input(&v, Some(&m), &c, Some(&s), None, &e, &t));
        let VmAction::Create(vm) = first.vm else {
            panic!()
        };
        let with = plan(&input(&v, Some(&m), &c, Some(&s), Some(&vm), &e, &t));
        let without = plan(&input(&v, Some(&m), &c, None, Some(&vm), &e, &t));
        assert_eq!(with, without);
        assert!(without.wait.is_none());
    }

    #[test]
    fn no_owner_yet_writes_nothing() {
        let (v, c, e, t) = (vsm(false), cluster(), Default::default(), now());
        let p = plan(&input(&v, None, &c, None, None, &e, &t));
        assert_eq!(
            (p.vm, p.after, p.next),
            (VmAction::None, None, Next::AwaitChange)
        );
    }

    #[test]
    fn deletion_deletes_the_vm_then_drops_the_finalizer_once_it_is_gone() {
        let (v, c, e, t) = (vsm(true), cluster(), Default::default(), now());
        let mut vm = VSphereVM::new("m-0", Default::default());
        let p = plan(&input(&v, None, &c, None, Some(&vm), &e, &t));
        assert_eq!(p.vm, VmAction::Delete("m-0".into()));
        let after = p.after.unwrap();
        assert_eq!(
            after.metadata.finalizers.as_deref(),
            v.metadata.finalizers.as_deref(),
            "the finalizer stays while the VM is there"
        );
        // Ready covers deletion too (v1beta2 contract), in both condition sets.
        let status = after.status.unwrap();
        let ready = |c: &[crate::api::conditions::MetaCondition]| {
            c.iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.reason.clone())
        };
        assert_eq!(
            ready(status.conditions.as_deref().unwrap_or_default()),
            Some("Deleting".to_string())
        );
        vm.metadata.deletion_timestamp = Some(now());
        let p = plan(&input(&v, None, &c, None, Some(&vm), &e, &t));
        assert_eq!((p.vm, p.next), (VmAction::None, Next::Poll));
        let p = plan(&input(&v, None, &c, None, None, &e, &t));
        let after = p.after.unwrap();
        assert!(after.metadata.finalizers.unwrap().is_empty());
    }
}
