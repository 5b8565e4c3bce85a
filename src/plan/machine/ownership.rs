//! Whether the VM found for a machine is the machine's to touch.
//!
//! A machine finds its VM by instance UUID: its own UID (what every clone is given), or an
//! adopted VM's UUID recorded in its status. Whatever led to a VM, it is acted on (guestinfo,
//! group, power, tags, destroy) only when its identity marker (`vsphere-provider.machine`,
//! written at clone) names this machine. A VM without a marker is accepted only when found by
//! the machine's own UID: a VM cloned for this very object by another controller (CAPV,
//! machine-api-operator), whose UUID only the object's creator could know. Any other VM is
//! someone else's: the machine leaves it alone and says so.
use super::{
    MachineInput, MachinePlan, Requeue, VmObs, deletion::plan_delete, instance_uuid,
    machine_identity, provider_status, set_condition, set_provider_status,
};
use crate::api::conditions::{ConditionUpdate, set_meta_condition, severity};
use crate::api::machine::Machine;
use crate::api::machine_status::{condition as cond, event};

/// A VM found for a machine that is not the machine's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignVm {
    /// Its inventory path.
    pub path: String,
    /// The instance UUID it was found by.
    pub instance_uuid: Option<String>,
    /// The identity it carries, if any.
    pub whose: Option<String>,
}

impl std::fmt::Display for ForeignVm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let uuid = self.instance_uuid.as_deref().unwrap_or("?");
        match &self.whose {
            Some(whose) => write!(
                f,
                "the VM {} (instance UUID {uuid}) carries the identity of {whose}, not of this machine",
                self.path
            ),
            None => write!(
                f,
                "the VM {} (instance UUID {uuid}) carries no machine identity and is not this machine's own clone",
                self.path
            ),
        }
    }
}

/// `Some` when `vm` is not `m`'s to act on.
pub fn foreign(m: &Machine, vm: &VmObs) -> Option<ForeignVm> {
    let not_ours = |whose: Option<&String>| {
        Some(ForeignVm {
            path: vm.path.clone(),
            instance_uuid: vm.instance_uuid.clone(),
            whose: whose.cloned(),
        })
    };
    match &vm.identity {
        Some(id) if *id == machine_identity(m) => None,
        Some(id) => not_ours(Some(id)),
        None => match (&vm.instance_uuid, instance_uuid(m)) {
            (None, _) => None,
            (Some(found), Some(own)) if found.eq_ignore_ascii_case(&own) => None,
            _ => not_ours(None),
        },
    }
}

/// The plan of a machine whose VM, as found, is someone else's. Being deleted, the machine goes
/// on as one whose VM is gone (its own is not there to destroy; the other is left alone).
/// Otherwise nothing changes in vCenter: `InstanceExists=False` (`InstanceNotOwned`), a warning
/// event, and the backoff, until a person sorts out the machine's status or the VM.
pub fn plan_without(input: &MachineInput<'_>, vm: &ForeignVm) -> MachinePlan {
    let message = format!("{vm}; it is left untouched");
    let mut alone = input.clone();
    alone.vm = None;
    if input.machine.metadata.deletion_timestamp.is_some() {
        let mut plan = plan_delete(&alone);
        plan.event(true, event::INSTANCE_NOT_OWNED, message);
        return plan;
    }
    let mut plan = MachinePlan::new(input.machine);
    let refused = ConditionUpdate::false_(
        cond::INSTANCE_EXISTS,
        cond::INSTANCE_NOT_OWNED,
        severity::ERROR,
        &message,
    );
    set_condition(&mut plan.machine, refused.clone(), &input.now);
    // The provider status says it too: what a VSphereVM's `VirtualMachineProvisioned` reads.
    let mut ps = provider_status(input.machine);
    set_meta_condition(
        &mut ps.conditions,
        &ConditionUpdate {
            type_: cond::MACHINE_CREATION,
            ..refused
        },
        None,
        &input.now,
    );
    set_provider_status(&mut plan.machine, &ps);
    plan.event(true, event::INSTANCE_NOT_OWNED, message.clone());
    plan.requeue = Requeue::Backoff(message);
    plan
}

#[cfg(test)]
mod tests {
    use super::super::tests::{input, machine};
    use super::super::{VmStep, plan_machine};
    use super::*;
    use crate::vcenter::model::moref::MoRef;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn victim(identity: Option<&str>, uuid: &str) -> VmObs {
        VmObs {
            moref: Some(MoRef::new("VirtualMachine", "vm-victim")),
            bios_uuid: Some("bios-victim".into()),
            power_state: Some("poweredOff".into()),
            path: "/DC0/vm/victim".into(),
            instance_uuid: Some(uuid.into()),
            identity: identity.map(str::to_string),
            ..VmObs::default()
        }
    }

    #[test]
    fn a_vm_is_the_machines_by_its_marker_or_by_its_own_uid_only() {
        let m = machine("m-0");
        let me = machine_identity(&m);
        assert_eq!(foreign(&m, &victim(Some(&me), "adopted-uuid")), None);
        assert_eq!(
            foreign(&m, &victim(None, "UID-M-0")),
            None,
            "its own UID, any case"
        );
        let other = foreign(&m, &victim(Some("ns/other"), "uid-m-0")).unwrap();
        assert_eq!(other.whose.as_deref(), Some("ns/other"));
        assert!(other.to_string().contains("ns/other"), "{other}");
        assert!(foreign(&m, &victim(None, "recorded-uuid")).is_some());
    }

    /// Whatever the machine's status says led to the VM, another object's VM is never
    /// powered on, written or destroyed; the machine says why.
    #[test]
    fn another_objects_vm_is_never_touched_alive_or_deleting() {
        let m = machine("m-0");
        let mut i = input(&m);
        i.vm = Some(victim(Some("tenant-b/db-0"), "victim-uuid"));
        let plan = plan_machine(&i);
        assert_eq!(plan.vm, None, "{plan:#?}");
        assert!(matches!(plan.requeue, Requeue::Backoff(ref why) if why.contains("tenant-b/db-0")));
        let c = plan
            .machine
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == cond::INSTANCE_EXISTS))
            .unwrap();
        assert_eq!(c.reason.as_deref(), Some(cond::INSTANCE_NOT_OWNED));

        let mut deleting = machine("m-0");
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let mut i = input(&deleting);
        for identity in [Some("tenant-b/db-0"), None] {
            i.vm = Some(victim(identity, "victim-uuid"));
            let plan = plan_machine(&i);
            assert!(
                !matches!(
                    plan.vm,
                    Some(VmStep::PowerOff(_) | VmStep::ShutdownGuest(_) | VmStep::Destroy(_))
                ),
                "{plan:#?}"
            );
            assert!(
                plan.events
                    .iter()
                    .any(|e| e.reason == event::INSTANCE_NOT_OWNED),
                "{plan:#?}"
            );
        }
    }
}
