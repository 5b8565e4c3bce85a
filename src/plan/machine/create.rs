//! Provisioning → Provisioned → Running, one step per pass.
//!
//! The VM is found by its instance UUID (the Machine's UID, set in the clone spec), so a crash
//! anywhere between the clone and the status write is recovered by finding the VM, never by a
//! second clone. A VM found powered off is powered on whatever the phase (upstream does so only
//! while `Provisioning`), after it has joined its VM group so DRS never places it outside the
//! zone's hosts.
use crate::api::conditions::STATUS_TRUE;
use k8s_openapi::api::core::v1::{NodeAddress, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::ipam::{Network, NewClaim, Unbound, wanted_claims};
use super::node_link::find_node;
use super::user_data::UserData;
use super::{
    KubeStep, MachineInput, MachinePlan, NameHolder, Requeue, Settled, TAGS_ATTACHED, TASK_POLL,
    VmStep, instance_uuid, linked_node, machine_identity, phase, provider_status, set_condition,
    set_provider_status, settle_task, tags_message, vcenter_trouble, wanted_tags,
};
use crate::api::conditions::{ConditionUpdate, set_meta_condition, severity};
use crate::api::machine::{
    INSTANCE_STATE_ANNOTATION, MACHINE_FINALIZER, Machine, REGION_LABEL, ZONE_LABEL, phase as ph,
};
use crate::api::machine_status::{
    VSphereMachineProviderStatus, condition as cond, error_reason, event,
};
use crate::plan::capi_machine::actuated::{is_actuated, needs_guest_metadata};

/// `vsphere://<BIOS UUID>`, what the cloud provider and the kubelet report.
pub fn provider_id(bios_uuid: &str) -> String {
    format!("vsphere://{bios_uuid}")
}

fn set_phase(m: &mut Machine, p: &str) {
    m.status.get_or_insert_with(Default::default).phase = Some(p.to_string());
}

/// Terminal: `Failed` with upstream's error reason and our message (naming the field).
fn fail(plan: &mut MachinePlan, reason: &str, message: &str) {
    let m = &mut plan.machine;
    let st = m.status.get_or_insert_with(Default::default);
    st.phase = Some(ph::FAILED.into());
    st.error_reason = Some(reason.into());
    st.error_message = Some(message.into());
    plan.event(true, event::FAILED_CREATE, message.to_string());
    plan.requeue = Requeue::Idle;
}

/// A configuration found invalid while acting on the plan (a disk that would shrink): the
/// machine goes `Failed` with `InvalidConfiguration`, nothing is created.
pub fn fail_invalid_configuration(plan: &mut MachinePlan, message: &str) {
    plan.vm = None;
    fail(plan, error_reason::INVALID_CONFIGURATION, message);
}

/// A VM under the machine's name is already in its folder and the machine has none of its own:
/// one carrying this machine's identity is adopted (the machine now tracks its instance UUID);
/// any other is left alone — nothing cloned over it, nothing done to it — and the machine says
/// whose it is and waits (backing off) for someone to rename or remove it.
fn name_taken(
    mut plan: MachinePlan,
    mut ps: VSphereMachineProviderStatus,
    holder: &NameHolder,
    now: &Time,
) -> MachinePlan {
    let me = machine_identity(&plan.machine);
    if holder.identity.as_deref() == Some(me.as_str())
        && let Some(uuid) = holder.instance_uuid.clone().filter(|u| !u.is_empty())
    {
        ps.instance_uuid = Some(uuid.clone());
        set_provider_status(&mut plan.machine, &ps);
        plan.event(
            false,
            event::ADOPTED,
            format!(
                "VM {} carries this machine's identity ({me}); adopted (instance UUID {uuid}) instead of cloning a second one",
                holder.path
            ),
        );
        plan.requeue = Requeue::After(std::time::Duration::from_secs(1));
        return plan;
    }
    let whose = match &holder.identity {
        Some(other) => format!("it is Machine {other}'s"),
        None => "it carries no Machine identity (not cloned by vsphere-provider, or by a version that did not mark its VMs)".to_string(),
    };
    let msg = format!(
        "a VM named like this machine already exists at {}, and {whose}; nothing is cloned over it and nothing is done to it: rename or remove it, or give the machine another name",
        holder.path
    );
    let reason = (cond::VM_NAME_IN_USE, event::VM_NAME_IN_USE);
    hold_creation(plan, ps, reason, severity::ERROR, msg, now)
}

/// Nothing is cloned until someone acts: `MachineCreation=False` with `reason`, a warning event,
/// and the machine backs off saying why.
fn hold_creation(
    mut plan: MachinePlan,
    mut ps: VSphereMachineProviderStatus,
    (reason, event_reason): (&'static str, &'static str),
    severity: &str,
    msg: String,
    now: &Time,
) -> MachinePlan {
    set_meta_condition(
        &mut ps.conditions,
        &ConditionUpdate::false_(cond::MACHINE_CREATION, reason, severity, &msg),
        None,
        now,
    );
    set_provider_status(&mut plan.machine, &ps);
    plan.event(true, event_reason, msg.clone());
    plan.requeue = Requeue::Backoff(msg);
    plan
}

/// Claims to create or not yet bound: nothing is cloned. The machine creates the missing
/// claims, says which claims it waits for (and why, when the IPAM provider says:
/// an exhausted or unknown pool) in `IPAddressClaimed` and `MachineCreation`, and looks again
/// soon — or backs off when the provider reported a failure someone must fix.
fn wait_for_addresses(
    mut plan: MachinePlan,
    mut ps: VSphereMachineProviderStatus,
    create: &[NewClaim],
    unbound: &[Unbound],
    now: &Time,
) -> MachinePlan {
    for c in create {
        plan.kube.push(KubeStep::CreateClaim(c.clone()));
    }
    if !create.is_empty() {
        let names: Vec<String> = create
            .iter()
            .map(|c| format!("{}/{}", c.namespace, c.name))
            .collect();
        plan.event(
            false,
            event::IP_ADDRESS_CLAIMED,
            format!("Created IP address claim(s) {}", names.join(", ")),
        );
    }
    let waiting: Vec<String> = create
        .iter()
        .map(|c| format!("{}/{}", c.namespace, c.name))
        .chain(unbound.iter().map(|u| match &u.why {
            Some(why) => format!("{} ({why})", u.claim),
            None => u.claim.clone(),
        }))
        .collect();
    let msg = format!(
        "Waiting on {} IP address claim(s) to be bound: {}",
        waiting.len(),
        waiting.join(", ")
    );
    for type_ in [cond::IP_ADDRESS_CLAIMED, cond::MACHINE_CREATION] {
        set_meta_condition(
            &mut ps.conditions,
            &ConditionUpdate::false_(type_, cond::WAITING_FOR_IP_ADDRESS, severity::WARNING, &msg),
            None,
            now,
        );
    }
    set_provider_status(&mut plan.machine, &ps);
    if unbound.iter().any(|u| u.why.is_some()) {
        plan.event(true, event::FAILED_CREATE, msg.clone());
        plan.requeue = Requeue::Backoff(msg);
    } else {
        plan.requeue = Requeue::After(TASK_POLL);
    }
    plan
}

/// Decide for a machine that is not being deleted.
pub fn plan_create(input: &MachineInput<'_>) -> MachinePlan {
    let m = input.machine;
    let mut plan = MachinePlan::new(m);
    let now = &input.now;
    // The finalizer comes first, before anything exists in vCenter.
    let finalizers = plan
        .machine
        .metadata
        .finalizers
        .get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == MACHINE_FINALIZER) {
        finalizers.push(MACHINE_FINALIZER.to_string());
    }
    if phase(m) == Some(ph::FAILED) {
        // Terminal: only deletion is acted on (as upstream).
        return plan;
    }
    if let Some(t) = &input.vcenter_error {
        vcenter_trouble(&mut plan, t, now);
        return plan;
    }
    let Some(uuid) = instance_uuid(m) else {
        // A Machine without a UID was never stored: nothing can be identified yet.
        plan.requeue = Requeue::After(TASK_POLL);
        return plan;
    };
    let mut ps = provider_status(m);
    // A task in flight: look again later; nothing else changes meanwhile.
    match settle_task(&input.task, &mut ps) {
        Settled::Wait => {
            plan.requeue = Requeue::After(TASK_POLL);
            return plan;
        }
        Settled::Failed(msg) => {
            set_meta_condition(
                &mut ps.conditions,
                &ConditionUpdate::false_(
                    cond::MACHINE_CREATION,
                    cond::MACHINE_CREATION_FAILED,
                    "",
                    &msg,
                ),
                None,
                now,
            );
            set_provider_status(&mut plan.machine, &ps);
            plan.event(true, event::FAILED_CREATE, msg.clone());
            plan.requeue = Requeue::Backoff(msg);
            return plan;
        }
        Settled::Go => {}
    }
    let provisioned_before = ps.instance_id.is_some() || m.spec.provider_id.is_some();
    let Some(vm) = &input.vm else {
        // Objects recreated elsewhere (`clusterctl move`, a restore) have new UIDs and no
        // status: the VM is found under the machine's name, carrying its identity, and adopted
        // rather than declared lost.
        let me = machine_identity(m);
        if provisioned_before
            && let Some(holder) = input
                .name_holder
                .as_ref()
                .filter(|h| h.identity.as_deref() == Some(me.as_str()))
        {
            return name_taken(plan, ps, holder, now);
        }
        if provisioned_before {
            let msg = format!(
                "the VM of this machine (instance UUID {uuid}) no longer exists in vCenter"
            );
            set_condition(
                &mut plan.machine,
                ConditionUpdate::false_(
                    cond::INSTANCE_EXISTS,
                    cond::INSTANCE_MISSING,
                    severity::ERROR,
                    &msg,
                ),
                now,
            );
            set_provider_status(&mut plan.machine, &ps);
            fail(&mut plan, error_reason::INSTANCE_MISSING, &msg);
            return plan;
        }
        if let Some(what) = &input.placement_pending {
            // Not a configuration error: the zone may come (applied together with the machine,
            // or not yet in the cache). Nothing is created meanwhile; the machine says what it
            // waits for and looks again on its backoff.
            set_phase(&mut plan.machine, ph::PROVISIONING);
            let msg = format!("waiting for the machine's placement: {what}");
            let reason = (cond::WAITING_FOR_PLACEMENT, event::FAILED_CREATE);
            return hold_creation(plan, ps, reason, severity::WARNING, msg, now);
        }
        let placement = match &input.placement {
            Some(Ok(p)) => p.clone(),
            Some(Err(e)) => {
                set_provider_status(&mut plan.machine, &ps);
                fail(
                    &mut plan,
                    error_reason::INVALID_CONFIGURATION,
                    &e.to_string(),
                );
                return plan;
            }
            None => {
                set_provider_status(&mut plan.machine, &ps);
                fail(
                    &mut plan,
                    error_reason::INVALID_CONFIGURATION,
                    "spec.providerSpec.value: not a VSphereMachineProviderSpec",
                );
                return plan;
            }
        };
        set_phase(&mut plan.machine, ph::PROVISIONING);
        if let Some(holder) = &input.name_holder {
            return name_taken(plan, ps, holder, now);
        }
        if let UserData::Missing(why) = &input.user_data {
            // Nothing is cloned without its user data: the VM could not become a node.
            let msg = format!("waiting for the user data: {why}");
            let reason = (cond::USER_DATA_UNAVAILABLE, event::FAILED_CREATE);
            return hold_creation(plan, ps, reason, severity::WARNING, msg, now);
        }
        let network_kargs = match &input.network {
            Network::Dhcp => None,
            Network::Invalid(msg) => {
                set_provider_status(&mut plan.machine, &ps);
                fail(&mut plan, error_reason::INVALID_CONFIGURATION, msg);
                return plan;
            }
            Network::Waiting { create, unbound } => {
                return wait_for_addresses(plan, ps, create, unbound, now);
            }
            Network::Ready(kargs) => {
                if !wanted_claims(m).is_empty() {
                    set_meta_condition(
                        &mut ps.conditions,
                        &ConditionUpdate::true_reason(
                            cond::IP_ADDRESS_CLAIMED,
                            cond::IP_ADDRESSES_CLAIMED,
                            "All IP address claims are bound",
                        ),
                        None,
                        now,
                    );
                }
                // Upstream writes the key only when there is something to say; a Cluster API
                // machine's addresses go into its cloud-init metadata instead.
                (!kargs.is_empty() && !is_actuated(m)).then(|| kargs.clone())
            }
        };
        set_condition(
            &mut plan.machine,
            ConditionUpdate::false_(
                cond::INSTANCE_EXISTS,
                cond::INSTANCE_NOT_CREATED,
                severity::WARNING,
                "Instance has not been created",
            ),
            now,
        );
        set_provider_status(&mut plan.machine, &ps);
        let name = m.metadata.name.clone().unwrap_or_default();
        plan.event(
            false,
            event::CREATE,
            format!("Cloning VM {name} from {}", placement.template),
        );
        plan.vm = Some(VmStep::Clone {
            name,
            instance_uuid: uuid,
            identity: machine_identity(m),
            user_data: input.user_data.clone(),
            network_kargs,
            placement: Box::new(placement),
        });
        plan.requeue = Requeue::After(TASK_POLL);
        return plan;
    };

    // The VM exists: record what it is.
    let bios = vm.bios_uuid.clone().unwrap_or_default();
    ps.instance_id = (!bios.is_empty()).then(|| bios.clone());
    ps.instance_state = vm.power_state.clone();
    set_meta_condition(
        &mut ps.conditions,
        &ConditionUpdate::true_reason(
            cond::MACHINE_CREATION,
            cond::MACHINE_CREATION_SUCCEEDED,
            "Machine successfully created",
        ),
        None,
        now,
    );
    set_provider_status(&mut plan.machine, &ps);
    set_condition(
        &mut plan.machine,
        ConditionUpdate::true_(cond::INSTANCE_EXISTS),
        now,
    );
    if !bios.is_empty()
        && plan
            .machine
            .spec
            .provider_id
            .as_deref()
            .is_none_or(str::is_empty)
    {
        plan.machine.spec.provider_id = Some(provider_id(&bios));
    }
    let annotations = plan
        .machine
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    if let Some(state) = &vm.power_state {
        annotations.insert(INSTANCE_STATE_ANNOTATION.to_string(), state.clone());
    }
    if let Some((region, zone)) = &input.zone_labels {
        let labels = plan
            .machine
            .metadata
            .labels
            .get_or_insert_with(Default::default);
        labels
            .entry(REGION_LABEL.to_string())
            .or_insert_with(|| region.clone());
        labels
            .entry(ZONE_LABEL.to_string())
            .or_insert_with(|| zone.clone());
    }
    let name = m.metadata.name.clone().unwrap_or_default();
    let mut addresses = vec![NodeAddress {
        type_: "InternalDNS".into(),
        address: name.clone(),
    }];
    if let Some(ip) = vm.ip_address.as_ref().filter(|ip| !ip.is_empty()) {
        addresses.insert(
            0,
            NodeAddress {
                type_: "InternalIP".into(),
                address: ip.clone(),
            },
        );
    }
    plan.machine
        .status
        .get_or_insert_with(Default::default)
        .addresses = Some(addresses);

    // A Cluster API machine's metadata names its interfaces by the clone's MACs: written once
    // they exist, before anything can boot.
    if needs_guest_metadata(m, vm) {
        plan.vm = Some(VmStep::WriteMetadata(vm.moref()));
        set_phase(&mut plan.machine, ph::PROVISIONED);
        plan.requeue = Requeue::After(TASK_POLL);
        return plan;
    }
    // Seen running, now off: powered off outside this provider (an operator, vSphere HA, a
    // guest shutdown). Left off and said so: powering it on again would fight the operator
    // (CAPV #369) and hide the failure from health checks, whose remediation replaces the
    // machine. Powered on again by hand, it carries on.
    if !vm.powered_on() && powered_off_outside(m) {
        let message = format!(
            "VM {} was powered off outside vsphere-provider; it is left off: power it on, or let a MachineHealthCheck replace this machine",
            vm.path
        );
        let first = !has_true(m, POWERED_OFF_OUTSIDE);
        set_meta_condition(
            &mut ps.conditions,
            &ConditionUpdate::true_reason(POWERED_OFF_OUTSIDE, POWERED_OFF_OUTSIDE, &message),
            None,
            now,
        );
        set_provider_status(&mut plan.machine, &ps);
        if first {
            plan.event(true, event::UPDATE, message);
        }
        plan.requeue = Requeue::After(TASK_POLL);
        return plan;
    }
    if vm.powered_on() && has_true(m, POWERED_OFF_OUTSIDE) {
        ps.conditions.retain(|c| c.type_ != POWERED_OFF_OUTSIDE);
        set_provider_status(&mut plan.machine, &ps);
    }
    // Group first, then power: DRS must never place it outside the zone's hosts.
    if !vm.powered_on() {
        if input.in_vm_group == Some(false)
            && let Some(Ok(p)) = &input.placement
            && let (Some(cluster), Some(group)) = (&p.cluster, &p.vm_group)
        {
            plan.vm = Some(VmStep::JoinGroup {
                cluster: cluster.clone(),
                group: group.clone(),
                vm: vm.moref(),
            });
        } else {
            plan.vm = Some(VmStep::PowerOn(vm.moref()));
        }
        set_phase(&mut plan.machine, ph::PROVISIONED);
        plan.requeue = Requeue::After(TASK_POLL);
        return plan;
    }

    // Tags once it runs: attach what is missing, then record that all are on.
    if let Some(attached) = &input.attached_tags {
        let wanted = wanted_tags(m);
        let missing: Vec<String> = wanted
            .iter()
            .filter(|t| !attached.contains(t))
            .cloned()
            .collect();
        if missing.is_empty() {
            set_meta_condition(
                &mut ps.conditions,
                &ConditionUpdate::true_reason(TAGS_ATTACHED, TAGS_ATTACHED, &tags_message(&wanted)),
                None,
                now,
            );
            set_provider_status(&mut plan.machine, &ps);
        } else {
            plan.vm = Some(VmStep::AttachTags {
                vm: vm.moref(),
                tags: missing,
            });
            plan.requeue = Requeue::After(std::time::Duration::from_secs(1));
        }
    }

    // Linked by the VM's own providerID, not `spec.providerID` (which its writer may have set
    // to another Node's).
    let provider_id = (!bios.is_empty()).then(|| provider_id(&bios));
    let addresses = plan
        .machine
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default();
    // A link once made stays while its Node exists (a Node given by hand may lack the
    // provider ID); else by provider ID, then internal IP.
    let linked = linked_node(m, input.nodes);
    match linked.or_else(|| find_node(provider_id.as_deref(), &addresses, input.nodes)) {
        Some(node) => {
            let node_name = node.metadata.name.clone().unwrap_or_default();
            let st = plan.machine.status.get_or_insert_with(Default::default);
            if st.node_ref.as_ref().and_then(|r| r.name.as_deref()) != Some(node_name.as_str()) {
                st.node_ref = Some(ObjectReference {
                    kind: Some("Node".into()),
                    name: Some(node_name),
                    uid: node.metadata.uid.clone(),
                    ..ObjectReference::default()
                });
            }
            set_phase(&mut plan.machine, ph::RUNNING);
        }
        None => {
            set_phase(&mut plan.machine, ph::PROVISIONED);
            // Waiting for the kubelet to register; the MHC judges the timeout.
            plan.requeue = Requeue::NodeJoin;
        }
    }
    if plan.machine.status != m.status {
        plan.machine
            .status
            .get_or_insert_with(Default::default)
            .last_updated = Some(now.clone());
    }
    plan
}

/// Ours: the provider status condition that the machine's VM, once seen running, was powered
/// off outside this provider (and is therefore left off).
pub const POWERED_OFF_OUTSIDE: &str = "PoweredOffOutsideProvider";

/// Whether the machine's VM was seen running (the instance state recorded at the last pass)
/// or is already known to be off by someone else's hand.
fn powered_off_outside(m: &Machine) -> bool {
    let ps = provider_status(m);
    ps.instance_state.as_deref() == Some("poweredOn") || has_true(m, POWERED_OFF_OUTSIDE)
}

fn has_true(m: &Machine, type_: &str) -> bool {
    provider_status(m)
        .conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == STATUS_TRUE)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{input, machine, placement};
    use super::*;
    use crate::plan::machine::{TaskObs, VcenterTrouble, VmObs, plan_machine};
    use crate::plan::placement::ConfigError;
    use crate::vcenter::model::fault::Fault;
    use crate::vcenter::model::moref::MoRef;
    use crate::vcenter::model::task::TaskState;

    fn vm(power: &str) -> VmObs {
        VmObs {
            moref: Some(MoRef::new("VirtualMachine", "vm-9")),
            bios_uuid: Some("4211-bios".into()),
            power_state: Some(power.into()),
            ip_address: Some("10.0.0.9".into()),
            path: "/DC0/vm/m-0".into(),
            guest_metadata: None,
            ..VmObs::default()
        }
    }

    #[test]
    fn a_new_machine_gets_its_finalizer_and_a_clone_with_its_uid_as_instance_uuid() {
        let m = machine("m-0");
        let mut i = input(&m);
        i.placement = Some(Ok(placement(None)));
        let p = plan_machine(&i);
        assert!(
            p.machine
                .metadata
                .finalizers
                .as_ref()
                .unwrap()
                .contains(&MACHINE_FINALIZER.to_string())
        );
        match &p.vm {
            Some(VmStep::Clone {
                name,
                instance_uuid,
                ..
            }) => {
                assert_eq!(name, "m-0");
                assert_eq!(instance_uuid, "uid-m-0");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(phase(&p.machine), Some(ph::PROVISIONING));
        assert_eq!(p.events[0].reason, event::CREATE);
    }

    #[test]
    fn invalid_configuration_fails_naming_the_field_and_creates_nothing() {
        let m = machine("m-0");
        let mut i = input(&m);
        i.placement = Some(Err(ConfigError {
            field: "spec.providerSpec.value.template".into(),
            message: "virtual machine \"nope\" not found in /DC0".into(),
        }));
        let p = plan_machine(&i);
        assert!(p.vm.is_none());
        let st = p.machine.status.as_ref().unwrap();
        assert_eq!(st.phase.as_deref(), Some(ph::FAILED));
        assert_eq!(st.error_reason.as_deref(), Some("InvalidConfiguration"));
        assert!(
            st.error_message
                .as_deref()
                .unwrap()
                .starts_with("spec.providerSpec.value.template: ")
        );
        // Failed is terminal: the next pass changes nothing.
        let again = plan_machine(&input(&p.machine));
        assert!(again.is_noop(&p.machine));
    }

    /// A zone not (yet) there is no configuration error: the machine waits, naming it, and
    /// creates nothing; once the zone is seen it goes on (it never went `Failed`).
    #[test]
    fn a_machine_whose_zone_is_not_there_yet_waits_and_creates_nothing() {
        let m = machine("m-0");
        let mut i = input(&m);
        i.placement_pending = Some("VSphereDeploymentZone \"dz-a\" not found".into());
        let p = plan_machine(&i);
        assert!(p.vm.is_none());
        assert!(matches!(p.requeue, Requeue::Backoff(_)), "{:?}", p.requeue);
        let st = p.machine.status.as_ref().unwrap();
        assert_eq!(st.phase.as_deref(), Some(ph::PROVISIONING));
        assert_eq!(st.error_reason, None);
        let ps = st.provider_status.as_ref().unwrap().to_string();
        assert!(ps.contains(cond::WAITING_FOR_PLACEMENT), "{ps}");
        assert!(ps.contains("dz-a"), "{ps}");
        let mut later = input(&p.machine);
        later.placement = Some(Ok(placement(None)));
        let created = plan_machine(&later);
        assert!(created.vm.is_some(), "cloned once the zone is there");
    }

    #[test]
    fn an_unreachable_vcenter_is_retried_never_failed() {
        let m = machine("m-0");
        let mut i = input(&m);
        i.vcenter_error = Some(VcenterTrouble {
            message: "cannot connect to vCenter vc: connection refused".into(),
            permanent: false,
        });
        let p = plan_machine(&i);
        assert!(p.vm.is_none());
        assert!(matches!(p.requeue, Requeue::Backoff(_)), "{:?}", p.requeue);
        assert_ne!(phase(&p.machine), Some(ph::FAILED));
        let c = &p
            .machine
            .status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str()),
            ("InstanceExists", "Unknown")
        );
        assert_eq!(c.reason.as_deref(), Some("ErrorCheckingProvider"));
    }

    #[test]
    fn a_running_task_is_not_waited_on_and_nothing_else_happens() {
        let m = machine("m-0");
        let mut i = input(&m);
        i.task = TaskObs::State(TaskState::Running { progress: Some(40) });
        let p = plan_machine(&i);
        assert!(p.vm.is_none());
        assert_eq!(p.requeue, Requeue::After(TASK_POLL));
    }

    #[test]
    fn a_powered_off_vm_joins_its_group_before_power_on() {
        let m = machine("m-0");
        let mut i = input(&m);
        i.placement = Some(Ok(placement(Some("vms-a"))));
        i.vm = Some(vm("poweredOff"));
        i.in_vm_group = Some(false);
        let p = plan_machine(&i);
        assert!(matches!(&p.vm, Some(VmStep::JoinGroup { group, .. }) if group == "vms-a"));
        i.in_vm_group = Some(true);
        let p = plan_machine(&i);
        assert_eq!(
            p.vm,
            Some(VmStep::PowerOn(MoRef::new("VirtualMachine", "vm-9")))
        );
        assert_eq!(
            p.machine.spec.provider_id.as_deref(),
            Some("vsphere://4211-bios")
        );
        assert_eq!(phase(&p.machine), Some(ph::PROVISIONED));
    }

    #[test]
    fn a_vm_powered_off_by_hand_after_running_is_left_off_and_said_so_once() {
        // Seen running: the last pass recorded poweredOn.
        let mut running = machine("m-0");
        for _ in 0..2 {
            let mut i = input(&running);
            i.placement = Some(Ok(placement(Some("vms-a"))));
            i.in_vm_group = Some(true);
            i.vm = Some(vm("poweredOn"));
            running = plan_machine(&i).machine;
        }
        assert_eq!(
            provider_status(&running).instance_state.as_deref(),
            Some("poweredOn")
        );

        // Now off: no power-on, a warning event naming the VM, the condition.
        let mut i = input(&running);
        i.placement = Some(Ok(placement(Some("vms-a"))));
        i.in_vm_group = Some(true);
        i.vm = Some(vm("poweredOff"));
        let p = plan_machine(&i);
        assert_eq!(p.vm, None, "{:?}", p.vm);
        assert!(p.events[0].warning && p.events[0].message.contains("/DC0/vm/m-0"));
        assert!(has_true(&p.machine, POWERED_OFF_OUTSIDE));

        // The next pass (the VM still off, the state now recorded poweredOff) still leaves it
        // off, without a second event.
        let mut i = input(&p.machine);
        i.placement = Some(Ok(placement(Some("vms-a"))));
        i.in_vm_group = Some(true);
        i.vm = Some(vm("poweredOff"));
        let p = plan_machine(&i);
        assert_eq!(p.vm, None);
        assert!(p.events.is_empty(), "{:?}", p.events);

        // Powered on by hand: the condition goes.
        let mut i = input(&p.machine);
        i.placement = Some(Ok(placement(Some("vms-a"))));
        i.in_vm_group = Some(true);
        i.vm = Some(vm("poweredOn"));
        let p = plan_machine(&i);
        assert!(!has_true(&p.machine, POWERED_OFF_OUTSIDE));
    }

    #[test]
    fn a_vm_that_vanished_after_provisioning_fails_with_instance_missing() {
        let mut m = machine("m-0");
        m.spec.provider_id = Some("vsphere://4211-bios".into());
        let p = plan_machine(&input(&m));
        let st = p.machine.status.as_ref().unwrap();
        assert_eq!(st.phase.as_deref(), Some(ph::FAILED));
        assert_eq!(st.error_reason.as_deref(), Some("InstanceMissing"));
        assert!(p.vm.is_none(), "never re-cloned");
    }

    #[test]
    fn the_node_links_by_provider_id_and_the_machine_runs() {
        let m = machine("m-0");
        let mut i = input(&m);
        i.vm = Some(vm("poweredOn"));
        let nodes = [super::super::tests::node(
            "n-0",
            Some("vsphere://4211-bios"),
            None,
        )];
        i.nodes = &nodes;
        let p = plan_machine(&i);
        let st = p.machine.status.as_ref().unwrap();
        assert_eq!(st.phase.as_deref(), Some(ph::RUNNING));
        assert_eq!(st.node_ref.as_ref().unwrap().name.as_deref(), Some("n-0"));
        assert!(p.vm.is_none());
        // Steady state: the next pass over the result changes nothing.
        let mut i2 = input(&p.machine);
        i2.vm = Some(vm("poweredOn"));
        i2.nodes = &nodes;
        assert!(plan_machine(&i2).is_noop(&p.machine));
    }

    #[test]
    fn a_failed_task_is_reported_and_backed_off() {
        let m = machine("m-0");
        let mut i = input(&m);
        i.task = TaskObs::State(TaskState::Error(Fault::untyped("insufficient disk space")));
        let p = plan_machine(&i);
        assert!(p.vm.is_none());
        assert!(matches!(p.requeue, Requeue::Backoff(_)), "{:?}", p.requeue);
        assert!(p.events[0].warning);
        assert!(
            p.events[0].message.contains("insufficient disk space"),
            "{:?}",
            p.events
        );
    }

    fn holder(identity: Option<&str>) -> NameHolder {
        NameHolder {
            path: "/DC0/vm/m-0".into(),
            instance_uuid: Some("old-uid".into()),
            identity: identity.map(str::to_string),
        }
    }

    /// A VM under the machine's name that carries its identity (its UID was lost with a
    /// state file) is adopted: no second clone; the machine now tracks that VM's UUID.
    #[test]
    fn a_vm_carrying_this_machines_identity_is_adopted_not_cloned_again() {
        let m = machine("m-0");
        let mut i = input(&m);
        i.placement = Some(Ok(placement(None)));
        i.name_holder = Some(holder(Some(&machine_identity(&m))));
        let p = plan_machine(&i);
        assert!(p.vm.is_none(), "no clone: {:?}", p.vm);
        assert_eq!(
            provider_status(&p.machine).instance_uuid.as_deref(),
            Some("old-uid")
        );
        assert_eq!(
            super::super::vm_instance_uuid(&p.machine).as_deref(),
            Some("old-uid")
        );
        assert_eq!(p.events[0].reason, event::ADOPTED);
        assert!(p.events[0].message.contains("/DC0/vm/m-0"));
    }

    /// A provisioned machine recreated with a new UID and no status (`clusterctl move` of a
    /// Cluster API machine's VSphereVM, a restore from backup) finds its VM by name and
    /// identity and adopts it: not `InstanceMissing`, not a second clone.
    #[test]
    fn a_moved_machine_adopts_its_vm_instead_of_declaring_it_lost() {
        let mut m = machine("m-0");
        m.spec.provider_id = Some("vsphere://4210a2b1-0000-0000-0000-000000000001".into());
        let mut i = input(&m);
        i.placement = Some(Ok(placement(None)));
        i.name_holder = Some(holder(Some(&machine_identity(&m))));
        let p = plan_machine(&i);
        assert!(p.vm.is_none(), "no clone: {:?}", p.vm);
        let st = p.machine.status.clone().unwrap_or_default();
        assert_eq!(st.error_reason, None, "not failed: {st:?}");
        assert_eq!(
            provider_status(&p.machine).instance_uuid.as_deref(),
            Some("old-uid")
        );
        assert_eq!(p.events[0].reason, event::ADOPTED);
        // Without its identity on the VM, the VM is still lost: nothing is adopted by name.
        i.name_holder = Some(holder(Some("other-ns/m-0")));
        let p = plan_machine(&i);
        assert_eq!(
            p.machine.status.and_then(|s| s.error_reason).as_deref(),
            Some("InstanceMissing")
        );
    }

    /// Another machine's VM, or a VM nobody marked, is never cloned over and never touched:
    /// the machine says whose it is and backs off.
    #[test]
    fn a_vm_of_another_or_of_nobody_is_left_alone_and_named() {
        let m = machine("m-0");
        for (identity, whose) in [
            (Some("other-ns/m-0"), "Machine other-ns/m-0's"),
            (None, "no Machine identity"),
        ] {
            let mut i = input(&m);
            i.placement = Some(Ok(placement(None)));
            i.name_holder = Some(holder(identity));
            let p = plan_machine(&i);
            assert!(p.vm.is_none(), "nothing cloned over it");
            assert!(
                provider_status(&p.machine).instance_uuid.is_none(),
                "not adopted"
            );
            let why = p.requeue.failure().expect("backs off").to_string();
            assert!(why.contains("/DC0/vm/m-0") && why.contains(whose), "{why}");
            assert_eq!(p.events[0].reason, event::VM_NAME_IN_USE);
            let c = provider_status(&p.machine)
                .conditions
                .into_iter()
                .find(|c| c.type_ == cond::MACHINE_CREATION)
                .unwrap();
            assert_eq!(
                (c.status.as_str(), c.reason.as_str()),
                ("False", cond::VM_NAME_IN_USE)
            );
        }
    }

    /// Static IPs: while a claim is to be created or unbound nothing is cloned and the
    /// machine names the claims (with the IPAM provider's reason, then backing off); once all
    /// are bound the clone carries the kargs.
    #[test]
    fn nothing_is_cloned_until_every_claim_is_bound_then_the_kargs_go_with_the_clone() {
        use crate::plan::machine::ipam::{NewClaim, Unbound};
        let m = machine("m-0");
        let mut i = input(&m);
        i.placement = Some(Ok(placement(None)));
        let new = NewClaim {
            namespace: "openshift-machine-api".into(),
            name: "m-0-claim-0-0".into(),
            pool: Default::default(),
            machine: "m-0".into(),
            machine_uid: "uid-m-0".into(),
            owner: ("machine.openshift.io/v1beta1", "Machine"),
        };
        i.network = Network::Waiting {
            create: vec![new.clone()],
            unbound: vec![],
        };
        let p = plan_machine(&i);
        assert!(p.vm.is_none(), "nothing cloned");
        assert_eq!(p.kube, [KubeStep::CreateClaim(new)]);
        assert_eq!(p.requeue, Requeue::After(TASK_POLL));
        let ps = provider_status(&p.machine);
        let c = ps
            .conditions
            .iter()
            .find(|c| c.type_ == cond::IP_ADDRESS_CLAIMED)
            .unwrap();
        assert_eq!(c.reason, cond::WAITING_FOR_IP_ADDRESS);
        assert!(
            c.message.contains("openshift-machine-api/m-0-claim-0-0"),
            "{}",
            c.message
        );

        i.network = Network::Waiting {
            create: vec![],
            unbound: vec![Unbound {
                claim: "openshift-machine-api/m-0-claim-0-0".into(),
                why: Some("InClusterIPPool openshift-machine-api/w has no free address".into()),
            }],
        };
        let p = plan_machine(&i);
        assert!(p.vm.is_none() && p.kube.is_empty());
        assert!(
            p.requeue
                .failure()
                .unwrap()
                .contains("InClusterIPPool openshift-machine-api/w has no free address"),
            "{:?}",
            p.requeue
        );

        i.network = Network::Ready("ip=10.0.0.5::10.0.0.1:255.255.255.0:::none ".into());
        match plan_machine(&i).vm {
            Some(VmStep::Clone { network_kargs, .. }) => assert_eq!(
                network_kargs.as_deref(),
                Some("ip=10.0.0.5::10.0.0.1:255.255.255.0:::none ")
            ),
            other => panic!("a clone: {other:?}"),
        }
        i.network =
            Network::Invalid("spec.providerSpec.value.network.devices[0].ipAddrs[0]: bad".into());
        let p = plan_machine(&i);
        assert!(p.vm.is_none());
        assert_eq!(phase(&p.machine), Some(ph::FAILED));
    }

    /// The clone carries the identity that adoption looks for.
    #[test]
    fn a_clone_carries_the_machines_identity() {
        let mut m = machine("m-0");
        m.metadata.labels = Some(
            [(
                crate::api::machine::CLUSTER_ID_LABEL.to_string(),
                "ocp-1".to_string(),
            )]
            .into(),
        );
        let mut i = input(&m);
        i.placement = Some(Ok(placement(None)));
        let p = plan_machine(&i);
        match p.vm {
            Some(VmStep::Clone { identity, .. }) => {
                assert_eq!(identity, "openshift-machine-api/m-0 cluster=ocp-1")
            }
            other => panic!("a clone: {other:?}"),
        }
    }

    /// `tagIDs` are checked only until they are recorded as attached; what is missing is
    /// attached, and once all are on the condition records them (a changed list checks again).
    #[test]
    fn tags_are_attached_once_and_then_not_read_again() {
        use crate::plan::machine::{TAGS_ATTACHED, tags_to_check};
        let mut m = machine("m-0");
        m.spec.provider_spec = Some(crate::api::machine::ProviderSpec {
            value: Some(serde_json::json!({
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "VSphereMachineProviderSpec",
                "template": "t",
                "tagIDs": ["urn:t1", "urn:t2"]
            })),
        });
        let on = vm("poweredOn");
        assert!(tags_to_check(&m, Some(&on)));
        assert!(
            !tags_to_check(&m, Some(&vm("poweredOff"))),
            "after power-on only"
        );
        let mut i = input(&m);
        i.vm = Some(on.clone());
        i.attached_tags = Some(vec!["urn:t1".into()]);
        let p = plan_machine(&i);
        assert_eq!(
            p.vm,
            Some(VmStep::AttachTags {
                vm: MoRef::new("VirtualMachine", "vm-9"),
                tags: vec!["urn:t2".into()]
            })
        );
        let mut i = input(&p.machine);
        i.vm = Some(on.clone());
        i.attached_tags = Some(vec!["urn:t1".into(), "urn:t2".into()]);
        let p = plan_machine(&i);
        assert!(p.vm.is_none());
        assert!(
            provider_status(&p.machine)
                .conditions
                .iter()
                .any(|c| c.type_ == TAGS_ATTACHED && c.status == STATUS_TRUE)
        );
        assert!(
            !tags_to_check(&p.machine, Some(&on)),
            "recorded: not read again"
        );
    }
}
