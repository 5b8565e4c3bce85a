//! What a VSphereMachine says about itself (the InfraMachine contract, v1beta2): the finalizer
//! first, then `spec.providerID` (`vsphere://<BIOS UUID>`), `status.initialization.provisioned`
//! (v1beta1's `status.ready`), `status.addresses` and the `VirtualMachineProvisioned` / `Ready`
//! / `Paused` conditions (the first two also in the v1beta1 shape under
//! `status.deprecated.v1beta1`, for v1beta1 readers), from the resolution
//! ([`super::resolve`]) and the VM the machine sweep observed. Pure: the controller writes the
//! object it returns.
//!
//! Ready means what CAPV means: the VM exists, has a BIOS UUID, is powered on and reports an IP
//! address; CAPI then copies providerID and addresses to the Machine. Once ready, a machine is
//! not made un-ready by a transient read (the contract never resets readiness).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::resolve::{Desired, Wait, provisioned};
use crate::api::conditions::{ConditionUpdate, set_capi_condition, set_meta_condition, severity};
use crate::api::infrastructure::v1beta2::common::{DeprecatedFailureStatus, Initialization};
use crate::api::vsphere_machine::{MACHINE_FINALIZER, VSphereMachine, VSphereMachineStatus};
use crate::plan::machine::VmObs;

/// The condition CAPV reports the VM's provisioning in.
pub const VM_PROVISIONED: &str = "VirtualMachineProvisioned";
/// The summary condition.
pub const READY: &str = "Ready";
/// Reasons while the VM exists but is not ready yet (CAPV's).
pub const POWERING_ON: &str = "PoweringOn";
/// The VM runs but reports no address yet.
pub const WAITING_FOR_NETWORK_ADDRESS: &str = "WaitingForNetworkAddress";
/// Cloning in progress.
pub const WAITING_FOR_CLONE: &str = "WaitingForClone";

/// The VSphereMachine after this pass (finalizer, providerID, status).
pub fn plan_status(
    vsm: &VSphereMachine,
    resolved: &Result<Desired, Wait>,
    vm: Option<&VmObs>,
    now: &Time,
) -> VSphereMachine {
    let mut out = vsm.clone();
    if out.metadata.deletion_timestamp.is_none() {
        let f = out.metadata.finalizers.get_or_insert_with(Vec::new);
        if !f.iter().any(|f| f == MACHINE_FINALIZER) {
            f.push(MACHINE_FINALIZER.to_string());
        }
    }
    let was_ready = vsm
        .status
        .as_ref()
        .is_some_and(VSphereMachineStatus::provisioned);
    let st = out.status.get_or_insert_with(Default::default);
    let mut addresses = None;
    let mut provider_id = None;
    let conditions = DeprecatedFailureStatus::v1beta1_mut(&mut st.deprecated)
        .conditions
        .get_or_insert_with(Vec::new);
    let not_yet = |conditions: &mut Vec<_>, reason: &str, sev: &str, msg: &str| {
        for t in [VM_PROVISIONED, READY] {
            set_capi_condition(
                conditions,
                &ConditionUpdate::false_(t, reason, sev, msg),
                now,
            );
        }
    };
    match (resolved, vm) {
        (Err(w), None) => not_yet(conditions, w.reason, severity::INFO, &w.message),
        (Ok(_), None) => not_yet(
            conditions,
            WAITING_FOR_CLONE,
            severity::INFO,
            "the VM is being cloned",
        ),
        (_, Some(obs)) => {
            let name = resolved
                .as_ref()
                .ok()
                .and_then(|d| d.vm.metadata.name.clone())
                .or_else(|| vsm.metadata.name.clone())
                .unwrap_or_default();
            let bios = obs.bios_uuid.clone().filter(|b| !b.is_empty());
            let ip = obs.ip_address.clone().filter(|i| !i.is_empty());
            // As CAPV: the providerID as soon as the BIOS UUID is known (CAPI reads it once
            // the machine is ready).
            if let Some(b) = &bios {
                provider_id = Some(crate::plan::machine::create::provider_id(b));
            }
            match (bios, obs.powered_on(), ip) {
                (Some(bios), true, Some(ip)) => {
                    let (id, found) = provisioned(&name, &bios, &[ip]);
                    for t in [VM_PROVISIONED, READY] {
                        set_capi_condition(conditions, &ConditionUpdate::true_(t), now);
                    }
                    addresses = Some(found);
                    provider_id = provider_id.or(Some(id));
                }
                (_, false, _) if !was_ready => not_yet(
                    conditions,
                    POWERING_ON,
                    severity::INFO,
                    &format!("VM {} is not powered on yet", obs.path),
                ),
                _ if !was_ready => not_yet(
                    conditions,
                    WAITING_FOR_NETWORK_ADDRESS,
                    severity::INFO,
                    &format!("VM {} reports no IP address yet", obs.path),
                ),
                _ => {}
            }
        }
    }
    if let Some(found) = addresses {
        st.addresses = Some(found);
        st.initialization = Some(Initialization {
            provisioned: Some(true),
        });
    }
    if let Some(id) = provider_id.filter(|_| out.spec.provider_id.is_empty()) {
        out.spec.provider_id = id;
    }
    let paused = matches!(resolved, Err(w) if w.reason == super::resolve::reason::PAUSED);
    mirror_conditions(&mut out, paused, now);
    out
}

/// The condition CAPI's v1beta2 contract recommends for pause (reasons Paused / NotPaused).
pub const PAUSED: &str = "Paused";
/// Ready's and VirtualMachineProvisioned's reason while the machine is being deleted (CAPV's).
pub const DELETING: &str = "Deleting";

/// The metav1 conditions (`status.conditions`): `VirtualMachineProvisioned` and the `Ready`
/// summary as the v1beta1 ones (`status.deprecated.v1beta1.conditions`) say, with a reason
/// always (metav1 requires one), and `Paused` — all set from the first pass, as the contract
/// asks. Run again after a pass edits the v1beta1 ones.
pub(super) fn mirror_conditions(out: &mut VSphereMachine, paused: bool, now: &Time) {
    let generation = out.metadata.generation;
    let st = out.status.get_or_insert_with(Default::default);
    let v1 = DeprecatedFailureStatus::v1beta1_conditions(&st.deprecated).to_vec();
    let v2 = st.conditions.get_or_insert_with(Vec::new);
    for t in [VM_PROVISIONED, READY] {
        let Some(c) = v1.iter().find(|c| c.type_ == t) else {
            continue;
        };
        let update = ConditionUpdate {
            type_: t,
            status: &c.status,
            reason: meta_reason(&c.status, c.reason.as_deref().unwrap_or_default()),
            message: c.message.as_deref().unwrap_or_default(),
            severity: "",
        };
        set_meta_condition(v2, &update, generation, now);
    }
    let pause = if paused {
        ConditionUpdate::true_reason(PAUSED, "Paused", "the Cluster or the machine is paused")
    } else {
        ConditionUpdate::false_(PAUSED, "NotPaused", "", "")
    };
    set_meta_condition(v2, &pause, generation, now);
}

/// A v1beta1 condition's reason as a metav1 condition's, which must have one: `Provisioned`
/// or `NotProvisioned` where the v1beta1 condition has none.
pub fn meta_reason<'a>(status: &str, reason: &'a str) -> &'a str {
    match (reason, status) {
        ("", "True") => "Provisioned",
        ("", _) => "NotProvisioned",
        (r, _) => r,
    }
}

/// On deletion: Ready and VirtualMachineProvisioned say Deleting (in both condition sets: Ready
/// covers the whole lifecycle); the finalizer goes once the VM is gone (`vm_exists` false),
/// never before.
pub fn plan_deleted(vsm: &VSphereMachine, vm_exists: bool, now: &Time) -> VSphereMachine {
    let mut out = vsm.clone();
    let st = out.status.get_or_insert_with(Default::default);
    let conditions = DeprecatedFailureStatus::v1beta1_mut(&mut st.deprecated)
        .conditions
        .get_or_insert_with(Vec::new);
    let message = if vm_exists {
        "the VM is being deleted"
    } else {
        "the VM is gone"
    };
    for t in [VM_PROVISIONED, READY] {
        set_capi_condition(
            conditions,
            &ConditionUpdate::false_(t, DELETING, severity::INFO, message),
            now,
        );
    }
    mirror_conditions(&mut out, false, now);
    if !vm_exists && let Some(f) = out.metadata.finalizers.as_mut() {
        f.retain(|f| f != MACHINE_FINALIZER);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::plan::capi_machine::resolve::reason;

    fn vsm() -> VSphereMachine {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachine",
            "metadata": {"name": "m-0", "namespace": "ns"}, "spec": {"template": "t"}
        }))
        .unwrap()
    }

    fn obs(bios: Option<&str>, power: &str, ip: Option<&str>) -> VmObs {
        VmObs {
            moref: None,
            bios_uuid: bios.map(Into::into),
            power_state: Some(power.into()),
            ip_address: ip.map(Into::into),
            path: "/DC0/vm/m-0".into(),
            guest_metadata: None,
            ..VmObs::default()
        }
    }

    fn now() -> Time {
        Time(jiff::Timestamp::from_second(1_700_000_000).unwrap())
    }

    /// A v1beta1 condition's (status, reason), kept under `status.deprecated.v1beta1`.
    fn reason_of(m: &VSphereMachine, t: &str) -> (String, Option<String>) {
        let c = DeprecatedFailureStatus::v1beta1_conditions(&m.status.as_ref().unwrap().deprecated)
            .iter()
            .find(|c| c.type_ == t)
            .unwrap();
        (c.status.clone(), c.reason.clone())
    }

    fn provisioned(m: &VSphereMachine) -> bool {
        m.status
            .as_ref()
            .is_some_and(VSphereMachineStatus::provisioned)
    }

    #[test]
    fn waiting_provisioning_and_ready() {
        let wait: Result<Desired, Wait> = Err(Wait {
            reason: reason::WAITING_FOR_FAILURE_DOMAIN,
            message: "VSphereDeploymentZone zone-a is not ready".into(),
        });
        let m = plan_status(&vsm(), &wait, None, &now());
        assert_eq!(
            m.metadata.finalizers.as_deref(),
            Some(&[MACHINE_FINALIZER.to_string()][..])
        );
        assert_eq!(
            reason_of(&m, VM_PROVISIONED),
            (
                "False".into(),
                Some(reason::WAITING_FOR_FAILURE_DOMAIN.into())
            )
        );
        assert!(!provisioned(&m));
        assert_eq!(m.spec.provider_id, "");

        for (o, want) in [
            (obs(Some("4230-1"), "poweredOff", None), POWERING_ON),
            (
                obs(Some("4230-1"), "poweredOn", None),
                WAITING_FOR_NETWORK_ADDRESS,
            ),
        ] {
            let m = plan_status(&vsm(), &wait, Some(&o), &now());
            assert_eq!(reason_of(&m, READY).1.as_deref(), Some(want));
            // CAPV's: the providerID once the BIOS UUID is known, ready or not.
            assert_eq!(m.spec.provider_id, "vsphere://4230-1");
            assert!(!provisioned(&m));
        }

        let ready = plan_status(
            &vsm(),
            &wait,
            Some(&obs(Some("4230-1"), "poweredOn", Some("10.0.0.5"))),
            &now(),
        );
        let st = ready.status.clone().unwrap();
        assert!(st.provisioned());
        assert_eq!(ready.spec.provider_id, "vsphere://4230-1");
        let addrs: Vec<&str> = st
            .addresses
            .iter()
            .flatten()
            .map(|a| a.address.as_str())
            .collect();
        assert_eq!(addrs, ["10.0.0.5", "m-0"]);
        assert_eq!(reason_of(&ready, READY).0, "True");
        // A later read without an IP does not make it un-ready.
        let again = plan_status(
            &ready,
            &wait,
            Some(&obs(Some("4230-1"), "poweredOn", None)),
            &now(),
        );
        assert_eq!(reason_of(&again, READY).0, "True");
        assert!(provisioned(&again), "provisioned is never reset");
    }

    /// The v1beta2 contract: Ready, VirtualMachineProvisioned and Paused are metav1 conditions
    /// (with a reason) from the first pass; Paused says whether the machine is paused.
    #[test]
    fn v1beta2_conditions_are_set_from_the_first_pass() {
        let v2 = |m: &VSphereMachine| -> Vec<(String, String, String)> {
            let mut c: Vec<_> = m
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.type_, c.status, c.reason))
                .collect();
            c.sort();
            c
        };
        let waiting = Err(Wait {
            reason: reason::WAITING_FOR_BOOTSTRAP_DATA,
            message: "no data".into(),
        });
        let m = plan_status(&vsm(), &waiting, None, &now());
        let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
        assert_eq!(
            v2(&m),
            [
                s("Paused", "False", "NotPaused"),
                s("Ready", "False", reason::WAITING_FOR_BOOTSTRAP_DATA),
                s(
                    "VirtualMachineProvisioned",
                    "False",
                    reason::WAITING_FOR_BOOTSTRAP_DATA
                ),
            ]
        );
        let vm = obs(Some("4230-aa"), "poweredOn", Some("10.0.0.5"));
        let ready = plan_status(&m, &waiting, Some(&vm), &now());
        assert!(
            v2(&ready).contains(&s("Ready", "True", "Provisioned")),
            "{:?}",
            v2(&ready)
        );
        let paused = Err(Wait {
            reason: reason::PAUSED,
            message: String::new(),
        });
        let m = plan_status(&vsm(), &paused, None, &now());
        assert!(
            v2(&m).contains(&s("Paused", "True", "Paused")),
            "{:?}",
            v2(&m)
        );
    }

    #[test]
    fn the_finalizer_stays_until_the_vm_is_gone() {
        let mut m = plan_status(
            &vsm(),
            &Err(Wait {
                reason: reason::PAUSED,
                message: String::new(),
            }),
            None,
            &now(),
        );
        m.metadata.deletion_timestamp = Some(now());
        assert!(
            plan_deleted(&m, true, &now())
                .metadata
                .finalizers
                .unwrap()
                .contains(&MACHINE_FINALIZER.to_string())
        );
        assert!(
            plan_deleted(&m, false, &now())
                .metadata
                .finalizers
                .unwrap()
                .is_empty()
        );
    }
}
