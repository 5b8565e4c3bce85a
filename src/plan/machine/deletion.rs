//! Deleting a machine, in seed 000's order (machine-api-operator's machine and drain
//! controllers): phase `Deleting` → while preDrain hooks exist, `Drainable=False` and nothing
//! else → drain (cordon, evict) → `Drained=True` → while preTerminate hooks exist,
//! `Terminable=False` → power off → destroy → the VM confirmed gone by a fresh read → delete the
//! Node, release the IP address claims → release the finalizer.
//!
//! Each pass takes the first unfinished rung and stops, so a hook added before the rung is
//! reached always holds it (the etcd operator's quorum guard relies on that).
use crate::api::conditions::{STATUS_FALSE, STATUS_TRUE};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::drain::{PodRef, control_plane_drain_hold, is_cordoned, to_evict};
use super::node_link::{may_drain_and_delete, vcenter_provider_id};
use super::{
    CONTROL_PLANE_DRAIN_WAIT, KubeStep, MachineInput, MachinePlan, Requeue, Settled, TASK_POLL,
    VmObs, VmStep, linked_node, provider_status, set_condition, set_provider_status, settle_task,
    vcenter_trouble,
};
use crate::api::conditions::{
    ConditionUpdate, find_capi, is_capi_true, set_meta_condition, severity,
};
use crate::api::infrastructure::v1beta2::clone_spec::PowerOffMode;
use crate::api::machine::{
    EXCLUDE_NODE_DRAINING_ANNOTATION, LifecycleHook, MACHINE_FINALIZER, Machine, phase as ph,
};
use crate::api::machine_status::{condition as cond, event};
use crate::plan::capi_machine::actuated::{GUEST_SHUTDOWN, power_off_mode};

/// Interval between drain passes while pods terminate.
pub const DRAIN_POLL: std::time::Duration = std::time::Duration::from_secs(5);

fn condition_true(m: &Machine, t: &str) -> bool {
    m.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|c| is_capi_true(c, t))
}

/// The hooks as machine-api-operator prints them (Go's `%+v` of the list):
/// `[{Name:EtcdQuorumOperator Owner:clusteroperator/etcd}]` — each hook with the owner who
/// removes it, in the exact form OpenShift's tooling and tests look for.
pub fn hook_list(hooks: &[LifecycleHook]) -> String {
    format!(
        "[{}]",
        hooks
            .iter()
            .map(|h| format!("{{Name:{} Owner:{}}}", h.name, h.owner))
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Record that the drain failed (an eviction refused by a PodDisruptionBudget, an API error):
/// `Drained=False` with `DrainError`; the shell backs off before the next try.
pub fn mark_drain_error(m: &mut Machine, message: &str, now: &Time) {
    set_condition(
        m,
        ConditionUpdate::false_(cond::DRAINED, cond::DRAIN_ERROR, severity::WARNING, message),
        now,
    );
}

/// While `hooks` exist the operation is held: `<type>=False` (`HookPresent`, naming them) and
/// one event when that changes; without hooks `<type>=True`. Returns whether it is held.
fn hold(
    plan: &mut MachinePlan,
    hooks: &[LifecycleHook],
    type_: &str,
    reason: &'static str,
    operation: &str,
    now: &Time,
) -> bool {
    if hooks.is_empty() {
        set_condition(&mut plan.machine, ConditionUpdate::true_(type_), now);
        return false;
    }
    let msg = format!(
        "{operation} operation currently blocked by: {}",
        hook_list(hooks)
    );
    if set_condition(
        &mut plan.machine,
        ConditionUpdate::false_(type_, cond::HOOK_PRESENT, severity::WARNING, &msg),
        now,
    ) {
        plan.event(true, reason, msg);
    }
    true
}

/// Decide for a machine with a deletion timestamp.
/// The step taking a running VM down, if one is due: a hard power-off, unless the machine asks
/// for its guest to be shut down (a Cluster API `powerOffMode` of soft or trySoft): then the
/// guest is asked once (`ShutdownGuest`, through VMware Tools) and waited for — for ever when
/// soft; trySoft powers off hard once `guestSoftPowerOffTimeout` has passed, or at once when
/// the guest could not be asked (no VMware Tools), as CAPV does.
fn power_off(
    plan: &mut MachinePlan,
    ps: &mut crate::api::machine_status::VSphereMachineProviderStatus,
    vm: &VmObs,
    now: &Time,
) -> Option<VmStep> {
    let (mode, timeout) = power_off_mode(&plan.machine);
    let hard = |plan: &mut MachinePlan| {
        plan.event(false, event::DELETE, format!("Powering off VM {}", vm.path));
        Some(VmStep::PowerOff(vm.moref()))
    };
    if mode == PowerOffMode::Hard {
        return hard(plan);
    }
    let asked = ps
        .conditions
        .iter()
        .find(|c| c.type_ == GUEST_SHUTDOWN)
        .map(|c| (c.status == STATUS_TRUE, c.last_transition_time.0));
    match asked {
        None => {
            set_meta_condition(
                &mut ps.conditions,
                &ConditionUpdate::true_reason(
                    GUEST_SHUTDOWN,
                    GUEST_SHUTDOWN,
                    "the guest was asked to shut down",
                ),
                None,
                now,
            );
            set_provider_status(&mut plan.machine, ps);
            plan.event(
                false,
                event::DELETE,
                format!("Shutting down the guest of VM {}", vm.path),
            );
            Some(VmStep::ShutdownGuest(vm.moref()))
        }
        Some((false, _)) if mode == PowerOffMode::TrySoft => hard(plan),
        Some((true, since))
            if mode == PowerOffMode::TrySoft
                && now.0.as_second() - since.as_second() >= timeout.as_secs() as i64 =>
        {
            hard(plan)
        }
        // Soft and refused: ask again (on the backoff the refusal set).
        Some((false, _)) => {
            crate::api::conditions::remove_meta_condition(&mut ps.conditions, GUEST_SHUTDOWN);
            set_provider_status(&mut plan.machine, ps);
            None
        }
        Some((true, _)) => None,
    }
}

pub fn plan_delete(input: &MachineInput<'_>) -> MachinePlan {
    let m = input.machine;
    let now = &input.now;
    let mut plan = MachinePlan::new(m);
    if !m
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == MACHINE_FINALIZER))
    {
        // Not ours to hold (never reconciled, or already released).
        return plan;
    }
    plan.machine
        .status
        .get_or_insert_with(Default::default)
        .phase = Some(ph::DELETING.into());

    let (pre_drain, pre_terminate) = m.hooks();
    if hold(
        &mut plan,
        pre_drain,
        cond::DRAINABLE,
        event::DRAIN_BLOCKED,
        "Drain",
        now,
    ) {
        return plan;
    }

    if !condition_true(m, cond::DRAINED) {
        let linked = linked_node(m, input.nodes);
        let pid = vcenter_provider_id(m, input.vm.as_ref());
        let refused = linked.and_then(|n| may_drain_and_delete(n, pid.as_deref()).err());
        let node = linked
            .filter(|_| refused.is_none())
            .and_then(|n| n.metadata.name.clone());
        let excluded = m
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(EXCLUDE_NODE_DRAINING_ANNOTATION));
        match node {
            Some(node) if !excluded => {
                if let Some(why) = control_plane_drain_hold(m, input.machines, input.nodes) {
                    // Upstream records a drain that may not start as a drain error (`DrainError`,
                    // "drain not permitted"); the message names the machine it waits for.
                    if set_condition(
                        &mut plan.machine,
                        ConditionUpdate::false_(
                            cond::DRAINED,
                            cond::DRAIN_ERROR,
                            severity::WARNING,
                            &why,
                        ),
                        now,
                    ) {
                        plan.event(false, event::DRAIN_REQUEUED, why);
                    }
                    plan.requeue = Requeue::After(CONTROL_PLANE_DRAIN_WAIT);
                    return plan;
                }
                let cordoned = is_cordoned(input.nodes, &node);
                let (evict, terminating) = to_evict(input.pods);
                if cordoned && evict.is_empty() && terminating == 0 {
                    set_condition(
                        &mut plan.machine,
                        ConditionUpdate::true_reason(
                            cond::DRAINED,
                            "",
                            cond::DRAIN_FINISHED_MESSAGE,
                        ),
                        now,
                    );
                    plan.event(
                        false,
                        event::DRAIN_SUCCEEDED,
                        format!("Node {node} drained"),
                    );
                } else {
                    if !cordoned {
                        plan.kube.push(KubeStep::Cordon(node.clone()));
                        plan.event(
                            false,
                            event::DRAIN_PROCEEDING,
                            format!(
                                "Node drain proceeds: cordoning {node}, evicting {} pod(s)",
                                evict.len()
                            ),
                        );
                    }
                    if cordoned && evict.is_empty() {
                        // Only evicted pods still terminating: say which, as upstream's drain
                        // does once its wait times out (`DrainError`).
                        let going: Vec<String> = input
                            .pods
                            .iter()
                            .filter(|p| p.terminating && !p.daemon_set && !p.mirror && !p.finished)
                            .map(|p| format!("{}/{}", p.namespace, p.name))
                            .collect();
                        set_condition(
                            &mut plan.machine,
                            ConditionUpdate::false_(
                                cond::DRAINED,
                                cond::DRAIN_ERROR,
                                severity::INFO,
                                &format!(
                                    "Node {node} is cordoned; waiting for {} evicted pod(s) to terminate: {}",
                                    going.len(),
                                    going.join(", ")
                                ),
                            ),
                            now,
                        );
                    }
                    plan.kube
                        .extend(evict.into_iter().map(|p: PodRef| KubeStep::Evict(p)));
                    plan.requeue = Requeue::After(DRAIN_POLL);
                    return plan;
                }
            }
            _ => {
                let message = refused.as_deref().unwrap_or(cond::DRAIN_SKIPPED_MESSAGE);
                set_condition(
                    &mut plan.machine,
                    ConditionUpdate::true_reason(cond::DRAINED, "", message),
                    now,
                );
                if let Some(why) = &refused {
                    plan.event(true, event::NODE_NOT_OWNED, why.clone());
                }
            }
        }
    }

    if hold(
        &mut plan,
        pre_terminate,
        cond::TERMINABLE,
        event::TERMINATE_BLOCKED,
        "Terminate",
        now,
    ) {
        return plan;
    }

    if let Some(t) = &input.vcenter_error {
        vcenter_trouble(&mut plan, t, now);
        return plan;
    }
    let mut ps = provider_status(m);
    let settled = settle_task(&input.task, &mut ps);
    if ps != provider_status(m) {
        set_provider_status(&mut plan.machine, &ps);
    }
    match settled {
        Settled::Wait => {
            plan.requeue = Requeue::After(TASK_POLL);
            return plan;
        }
        Settled::Failed(msg) => {
            plan.event(true, event::FAILED_DELETE, msg.clone());
            plan.requeue = Requeue::Backoff(msg);
            return plan;
        }
        Settled::Go => {}
    }
    if let Some(vm) = &input.vm {
        let step = if vm.power_state.as_deref() == Some("poweredOff") {
            plan.event(false, event::DELETE, format!("Destroying VM {}", vm.path));
            Some(VmStep::Destroy(vm.moref()))
        } else {
            power_off(&mut plan, &mut ps, vm, now)
        };
        plan.vm = step;
        plan.requeue = Requeue::After(TASK_POLL);
        return plan;
    }
    // The VM is gone (a fresh read says so): the Node goes, then the finalizer.
    if find_capi(
        plan.machine
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or(&[]),
        cond::INSTANCE_EXISTS,
    )
    .is_some()
    {
        set_condition(
            &mut plan.machine,
            ConditionUpdate::false_(
                cond::INSTANCE_EXISTS,
                cond::INSTANCE_MISSING,
                severity::INFO,
                "Instance deleted",
            ),
            now,
        );
    }
    // Its addresses go back to their pools only now that no VM can be using them; claims that
    // cannot be read keep the finalizer (they would never be released otherwise).
    let held = match &input.claims_held {
        Ok(held) => held,
        Err(why) => {
            plan.event(true, event::FAILED_DELETE, why.clone());
            plan.requeue = Requeue::Backoff(why.clone());
            return plan;
        }
    };
    if let Some(node) = linked_node(m, input.nodes) {
        match may_drain_and_delete(node, vcenter_provider_id(m, input.vm.as_ref()).as_deref()) {
            Ok(()) => plan.kube.push(KubeStep::DeleteNode(
                node.metadata.name.clone().unwrap_or_default(),
            )),
            Err(why) => plan.event(true, event::NODE_NOT_OWNED, why),
        }
    }
    let namespace = m
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    plan.kube
        .extend(held.iter().map(|name| KubeStep::ReleaseClaim {
            namespace: namespace.clone(),
            name: name.clone(),
        }));
    if let Some(f) = plan.machine.metadata.finalizers.as_mut() {
        f.retain(|f| f != MACHINE_FINALIZER);
    }
    plan
}

/// What a deleting machine waits for now, in one line, from what its last pass recorded: the
/// hook, the drain rule or the PodDisruptionBudget that holds it (its `Drainable`, `Drained` or
/// `Terminable` condition, in the order deletion meets them), else the vCenter task in flight,
/// vCenter not answering, the guest asked to shut down, or the step under way. Never empty and
/// never a bare "in progress": a held deletion says what holds it (issue #27). The shells print
/// it (local mode's summary); the conditions stay upstream's.
pub fn held_by(m: &Machine) -> String {
    let conditions = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[]);
    let (pre_drain, pre_terminate) = m.hooks();
    let false_ = |t: &str| find_capi(conditions, t).filter(|c| c.status == STATUS_FALSE);
    let said = |c: &crate::api::conditions::CapiCondition| {
        format!(
            "{}: {}",
            c.reason.as_deref().unwrap_or_default(),
            c.message.as_deref().unwrap_or_default()
        )
    };
    // A hook removed since the last pass no longer holds, whatever the condition still says.
    if !pre_drain.is_empty() {
        return format!(
            "{}; {}",
            false_(cond::DRAINABLE).map_or_else(
                || format!(
                    "Drain operation currently blocked by: {}",
                    hook_list(pre_drain)
                ),
                said
            ),
            hook_advice(pre_drain)
        );
    }
    if let Some(c) = false_(cond::DRAINED) {
        return said(c);
    }
    if !pre_terminate.is_empty() {
        return format!(
            "{}; {}",
            false_(cond::TERMINABLE).map_or_else(
                || format!(
                    "Terminate operation currently blocked by: {}",
                    hook_list(pre_terminate)
                ),
                said
            ),
            hook_advice(pre_terminate)
        );
    }
    if let Some(c) = find_capi(conditions, cond::INSTANCE_EXISTS).filter(|c| c.status == "Unknown")
    {
        return format!("vCenter cannot be asked: {}", said(c));
    }
    let ps = provider_status(m);
    if !ps.task_ref.is_empty() {
        return format!(
            "waiting for vCenter task {} (power off or destroy of its VM)",
            ps.task_ref
        );
    }
    if ps
        .conditions
        .iter()
        .any(|c| c.type_ == GUEST_SHUTDOWN && c.status == STATUS_TRUE)
    {
        return "waiting for the guest of its VM to shut down (powerOffMode)".into();
    }
    if !condition_true(m, cond::DRAINED) {
        return "its node is being drained".into();
    }
    if find_capi(conditions, cond::INSTANCE_EXISTS).is_some_and(|c| c.status == STATUS_FALSE) {
        return "its VM is gone: its Node and IP address claims are being released".into();
    }
    "its VM is being powered off and destroyed".into()
}

/// Who removes the hooks: the etcd operator removes its quorum guard once this machine's etcd
/// member has moved to a replacement control plane machine (seed 000).
fn hook_advice(hooks: &[LifecycleHook]) -> String {
    hooks
        .iter()
        .map(|h| {
            let when = if h.name == ETCD_QUORUM_HOOK {
                " once a replacement control plane machine's etcd member has joined"
            } else {
                ""
            };
            format!("{} removes {}{when}", h.owner, h.name)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The preDrain hook the etcd operator puts on control plane machines to keep quorum.
pub const ETCD_QUORUM_HOOK: &str = "EtcdQuorumOperator";

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::tests::{input, machine, node};
    use super::super::{VmObs, drain::PodInfo, plan_machine};
    use super::*;
    use crate::api::machine::{LifecycleHook, LifecycleHooks};
    use crate::vcenter::model::moref::MoRef;

    const PID: &str = "vsphere://4211-0000-m-0";

    fn drained(m: &Machine) -> crate::api::conditions::CapiCondition {
        find_capi(
            m.status.as_ref().unwrap().conditions.as_deref().unwrap(),
            "Drained",
        )
        .unwrap()
        .clone()
    }

    fn deleting(pre_drain: bool, pre_terminate: bool) -> Machine {
        let mut m = machine("m-0");
        m.spec.provider_id = Some(PID.into());
        recorded_bios(&mut m, PID);
        m.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        m.metadata.finalizers = Some(vec![MACHINE_FINALIZER.into()]);
        let hook = |n: &str| LifecycleHook {
            name: n.into(),
            owner: "clusteroperator/etcd".into(),
        };
        m.spec.lifecycle_hooks = Some(LifecycleHooks {
            pre_drain: pre_drain.then(|| vec![hook("EtcdQuorumOperator")]),
            pre_terminate: pre_terminate.then(|| vec![hook("kcp-cleanup")]),
        });
        let st = m.status.get_or_insert_with(Default::default);
        st.node_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
            name: Some("m-0".into()),
            ..Default::default()
        });
        m
    }

    /// The BIOS UUID the machine's status recorded when its VM was read (what `pid` carries).
    fn recorded_bios(m: &mut Machine, pid: &str) {
        let mut ps = provider_status(m);
        ps.instance_id = Some(pid.trim_start_matches("vsphere://").to_string());
        set_provider_status(m, &ps);
    }

    /// Its VM, powered on, with the BIOS UUID its status recorded.
    fn vm_of(m: &Machine) -> VmObs {
        VmObs {
            bios_uuid: provider_status(m).instance_id,
            ..vm("poweredOn")
        }
    }

    fn vm(power: &str) -> VmObs {
        VmObs {
            moref: Some(MoRef::new("VirtualMachine", "vm-9")),
            bios_uuid: Some(PID.trim_start_matches("vsphere://").to_string()),
            power_state: Some(power.into()),
            path: "/DC0/vm/m-0".into(),
            ..VmObs::default()
        }
    }

    #[test]
    fn a_pre_drain_hook_holds_everything_and_says_so_once() {
        let m = deleting(true, false);
        let nodes = [node("m-0", Some(PID), None)];
        let mut i = input(&m);
        i.vm = Some(vm("poweredOn"));
        i.nodes = &nodes;
        let p = plan_machine(&i);
        assert!(p.vm.is_none() && p.kube.is_empty());
        let c = find_capi(
            p.machine
                .status
                .as_ref()
                .unwrap()
                .conditions
                .as_deref()
                .unwrap(),
            "Drainable",
        )
        .unwrap();
        assert_eq!(c.status, "False");
        assert_eq!(c.reason.as_deref(), Some("HookPresent"));
        assert_eq!(
            c.message.as_deref(),
            Some(
                "Drain operation currently blocked by: [{Name:EtcdQuorumOperator Owner:clusteroperator/etcd}]"
            )
        );
        assert_eq!(p.events[0].reason, "DrainBlocked");
        let mut again = input(&p.machine);
        again.vm = Some(vm("poweredOn"));
        again.nodes = &nodes;
        let p2 = plan_machine(&again);
        assert!(
            p2.events.is_empty(),
            "the event is recorded once, not every pass"
        );
        assert!(p2.is_noop(&p.machine));
    }

    /// A Cluster API machine's `powerOffMode`: soft asks the guest once and waits for ever;
    /// trySoft powers off hard after its timeout, or at once when the guest could not be
    /// asked; hard (and every OpenShift Machine) powers off at once.
    #[test]
    fn power_off_modes_ask_the_guest_and_try_soft_gives_up_after_its_timeout() {
        use crate::plan::capi_machine::actuated::machine_for;
        use crate::plan::machine::outcome::{StepResult, after_vcenter};
        let vm_moref = MoRef::new("VirtualMachine", "vm-9");
        let stand_in = |mode: &str| {
            let vm: crate::api::VSphereVM = serde_json::from_value(serde_json::json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereVM",
                "metadata": {"name": "m-0", "namespace": "ns", "uid": "u-1",
                    "deletionTimestamp": "2023-11-14T22:00:00Z",
                    "finalizers": ["vspherevm.infrastructure.cluster.x-k8s.io"]},
                "spec": {"server": "vc", "template": "t", "powerOffMode": mode,
                    "guestSoftPowerOffTimeoutSeconds": 120}
            }))
            .unwrap();
            machine_for(&vm)
        };
        let at = |m: &Machine, secs: i64| {
            let mut i = input(m);
            i.vm = Some(vm("poweredOn"));
            i.now = Time(jiff::Timestamp::from_second(1_700_000_000 + secs).unwrap());
            plan_machine(&i)
        };
        assert_eq!(
            at(&stand_in("hard"), 0).vm,
            Some(VmStep::PowerOff(vm_moref.clone()))
        );

        // trySoft: the guest is asked, then waited for until the timeout, then powered off.
        let p = at(&stand_in("trySoft"), 0);
        assert_eq!(p.vm, Some(VmStep::ShutdownGuest(vm_moref.clone())));
        let asked = p.machine;
        assert_eq!(at(&asked, 60).vm, None, "within the 2m timeout it waits");
        assert_eq!(at(&asked, 120).vm, Some(VmStep::PowerOff(vm_moref.clone())));

        // soft: waits for the guest however long it takes.
        let p = at(&stand_in("soft"), 0);
        assert_eq!(p.vm, Some(VmStep::ShutdownGuest(vm_moref.clone())));
        assert_eq!(at(&p.machine, 86_400).vm, None);

        // trySoft with no VMware Tools: the refusal makes the next pass power off hard.
        let mut p = at(&stand_in("trySoft"), 0);
        let refused = StepResult::Refused(crate::plan::failure::Failure::busy("ToolsUnavailable"));
        after_vcenter(&mut p, true, Some(&refused));
        assert_eq!(at(&p.machine, 1).vm, Some(VmStep::PowerOff(vm_moref)));
    }

    #[test]
    fn the_whole_order_once_the_hooks_are_gone() {
        let mut m = deleting(false, true);
        let mut nodes = vec![node("m-0", Some(PID), None)];
        let pods = vec![PodInfo {
            namespace: "app".into(),
            name: "web".into(),
            ..Default::default()
        }];
        // 1. cordon and evict.
        let mut i = input(&m);
        i.vm = Some(vm("poweredOn"));
        i.nodes = &nodes;
        i.pods = &pods;
        let p = plan_machine(&i);
        assert_eq!(p.kube.len(), 2, "{:?}", p.kube);
        assert!(matches!(&p.kube[0], KubeStep::Cordon(n) if n == "m-0"));
        assert!(p.vm.is_none());
        m = p.machine;
        nodes[0]
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        // 2. drained; the preTerminate hook holds the VM.
        let mut i = input(&m);
        i.vm = Some(vm("poweredOn"));
        i.nodes = &nodes;
        let p = plan_machine(&i);
        assert!(p.vm.is_none(), "held by the preTerminate hook");
        assert_eq!(p.events.last().unwrap().reason, "TerminateBlocked");
        m = p.machine;
        m.spec.lifecycle_hooks = None;
        // 3. power off, 4. destroy, 5. node, finalizer.
        let mut i = input(&m);
        i.vm = Some(vm("poweredOn"));
        i.nodes = &nodes;
        let p = plan_machine(&i);
        assert_eq!(
            p.vm,
            Some(VmStep::PowerOff(MoRef::new("VirtualMachine", "vm-9")))
        );
        let mut i = input(&p.machine);
        i.vm = Some(vm("poweredOff"));
        i.nodes = &nodes;
        let p = plan_machine(&i);
        assert_eq!(
            p.vm,
            Some(VmStep::Destroy(MoRef::new("VirtualMachine", "vm-9")))
        );
        assert!(
            p.machine
                .metadata
                .finalizers
                .as_ref()
                .unwrap()
                .contains(&MACHINE_FINALIZER.to_string())
        );
        let mut i = input(&p.machine);
        i.nodes = &nodes;
        // The IP address claims go with the finalizer, once the VM is gone (not before).
        i.claims_held = Err("the IP address claims of openshift-machine-api cannot be read".into());
        let held = plan_machine(&i);
        assert!(held.kube.is_empty(), "nothing released, nothing deleted");
        assert!(held.requeue.failure().unwrap().contains("cannot be read"));
        assert!(
            held.machine
                .metadata
                .finalizers
                .as_ref()
                .unwrap()
                .contains(&MACHINE_FINALIZER.to_string())
        );
        i.claims_held = Ok(vec!["m-0-claim-0-0".into()]);
        let p = plan_machine(&i);
        assert_eq!(
            p.kube,
            [
                KubeStep::DeleteNode("m-0".into()),
                KubeStep::ReleaseClaim {
                    namespace: "openshift-machine-api".into(),
                    name: "m-0-claim-0-0".into()
                }
            ]
        );
        assert!(p.machine.metadata.finalizers.as_ref().unwrap().is_empty());
    }

    #[test]
    fn a_control_plane_drain_waits_for_another_cordoned_control_plane_node() {
        let mut m = deleting(false, false);
        m.metadata.labels = Some(
            [(
                crate::api::machine::MACHINE_ROLE_LABEL.to_string(),
                "master".to_string(),
            )]
            .into(),
        );
        let mut other = m.clone();
        other.metadata.uid = Some("uid-other".into());
        other.metadata.deletion_timestamp = None;
        other
            .status
            .as_mut()
            .unwrap()
            .node_ref
            .as_mut()
            .unwrap()
            .name = Some("cp-1".into());
        let mut cp1 = node("cp-1", None, None);
        cp1.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
        let nodes = [node("m-0", Some(PID), None), cp1];
        let machines = [m.clone(), other];
        let mut i = input(&m);
        i.nodes = &nodes;
        i.machines = &machines;
        let p = plan_machine(&i);
        assert!(p.kube.is_empty());
        assert_eq!(p.requeue, Requeue::After(CONTROL_PLANE_DRAIN_WAIT));
        assert!(p.events[0].message.contains("cp-1"), "{:?}", p.events);
    }

    #[test]
    fn no_node_or_the_exclude_annotation_skips_the_drain() {
        let mut m = deleting(false, false);
        m.metadata.annotations =
            Some([(EXCLUDE_NODE_DRAINING_ANNOTATION.to_string(), String::new())].into());
        let nodes = [node("m-0", Some(PID), None)];
        let mut i = input(&m);
        i.nodes = &nodes;
        i.vm = Some(vm("poweredOn"));
        let p = plan_machine(&i);
        assert!(p.kube.is_empty());
        let c = drained(&p.machine);
        assert_eq!(
            (c.status.as_str(), c.message.as_deref()),
            ("True", Some("Node drain skipped"))
        );
        assert!(matches!(p.vm, Some(VmStep::PowerOff(_))));
    }

    proptest! {
        /// Control plane machines planned on one snapshot, in any state: a new cordon only when
        /// no control plane node is cordoned, then exactly one when any machine is ready to
        /// drain (never two etcd members drained at once, never all waiting on each other).
        #[test]
        fn one_control_plane_drain_starts_at_a_time_and_one_always_can(
            states in proptest::collection::vec((any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()), 2..5),
        ) {
            let now = Time(jiff::Timestamp::UNIX_EPOCH);
            let mut machines = Vec::new();
            let mut nodes = Vec::new();
            for (i, (deleting, hook, cordoned, drained)) in states.iter().enumerate() {
                let name = format!("cp-{i}");
                let mut m = cp_deleting(&name);
                if !deleting {
                    m.metadata.deletion_timestamp = None;
                }
                if *hook {
                    m.spec.lifecycle_hooks = Some(LifecycleHooks {
                        pre_drain: Some(vec![LifecycleHook { name: "EtcdQuorumOperator".into(), owner: "clusteroperator/etcd".into() }]),
                        pre_terminate: None,
                    });
                }
                if *drained {
                    set_condition(&mut m, ConditionUpdate::true_(cond::DRAINED), &now);
                }
                machines.push(m);
                nodes.push(cp_node(&name, *cordoned));
            }
            let cordons = machines
                .iter()
                .filter(|m| {
                    let mut i = input(m);
                    i.nodes = &nodes;
                    i.machines = &machines;
                    i.vm = Some(vm_of(m));
                    plan_machine(&i).kube.iter().any(|k| matches!(k, KubeStep::Cordon(_)))
                })
                .count();
            let any_cordoned = states.iter().any(|s| s.2);
            let ready = states.iter().any(|(d, h, c, dr)| *d && !*h && !*c && !*dr);
            if any_cordoned {
                prop_assert_eq!(cordons, 0);
            } else {
                prop_assert_eq!(cordons, usize::from(ready));
            }
        }

        /// Seed 000's guarantees, over any state a deleting machine can be seen in.
        #[test]
        fn deletion_never_skips_a_rung(
            pre_drain in any::<bool>(),
            pre_terminate in any::<bool>(),
            drained in any::<bool>(),
            has_node in any::<bool>(),
            cordoned in any::<bool>(),
            pods in 0usize..3,
            vm_state in prop_oneof![Just(None), Just(Some("poweredOn")), Just(Some("poweredOff"))],
        ) {
            let mut m = deleting(pre_drain, pre_terminate);
            if drained {
                set_condition(&mut m, ConditionUpdate::true_(cond::DRAINED), &Time(jiff::Timestamp::UNIX_EPOCH));
            }
            let mut nodes = Vec::new();
            if has_node {
                let mut n = node("m-0", Some(PID), None);
                n.spec.get_or_insert_with(Default::default).unschedulable = Some(cordoned);
                nodes.push(n);
            }
            let pods: Vec<PodInfo> = (0..pods).map(|i| PodInfo { namespace: "a".into(), name: format!("p{i}"), ..Default::default() }).collect();
            let mut i = input(&m);
            i.vm = vm_state.map(vm);
            i.nodes = &nodes;
            i.pods = &pods;
            let p = plan_machine(&i);
            let drains = p.kube.iter().any(|k| matches!(k, KubeStep::Cordon(_) | KubeStep::Evict(_)));
            let touches_vm = matches!(p.vm, Some(VmStep::PowerOff(_) | VmStep::Destroy(_)));
            let deletes_node = p.kube.iter().any(|k| matches!(k, KubeStep::DeleteNode(_)));
            let released = !p.machine.metadata.finalizers.as_ref().unwrap().contains(&MACHINE_FINALIZER.to_string());
            let now_drained = condition_true(&p.machine, cond::DRAINED);
            prop_assert!(!(pre_drain && (drains || touches_vm || deletes_node || released)));
            prop_assert!(!(touches_vm && (!now_drained || pre_terminate)));
            prop_assert!(!(deletes_node && i.vm.is_some()));
            prop_assert!(!(released && (i.vm.is_some() || pre_terminate || pre_drain)));
            prop_assert!(!deletes_node || released, "the node goes in the pass that releases");
        }
    }

    /// A linked Node whose providerID is not the machine's (another VM's, or still empty: linked
    /// by the IP the guest reports) is never cordoned, evicted from or deleted; the machine says
    /// why in its Drained condition and a warning event, and its own deletion goes on.
    #[test]
    fn a_node_without_the_machines_provider_id_is_never_drained_or_deleted() {
        for node_pid in [Some("vsphere://4211-victim"), None] {
            let nodes = vec![node("m-0", node_pid, Some("10.0.0.5"))];
            let pods = vec![PodInfo {
                namespace: "kube-system".into(),
                name: "etcd".into(),
                ..Default::default()
            }];
            let m = deleting(false, false);
            let mut i = input(&m);
            i.vm = Some(vm("poweredOn"));
            i.nodes = &nodes;
            i.pods = &pods;
            let p = plan_machine(&i);
            assert!(p.kube.is_empty(), "{node_pid:?}: {:?}", p.kube);
            let c = drained(&p.machine);
            assert_eq!(c.status, "True");
            assert!(
                c.message
                    .as_deref()
                    .unwrap()
                    .starts_with("Node m-0 is not drained or deleted"),
                "{c:?}"
            );
            assert!(
                p.events
                    .iter()
                    .any(|e| e.warning && e.reason == event::NODE_NOT_OWNED)
            );
            assert!(
                matches!(p.vm, Some(VmStep::PowerOff(_))),
                "the VM still goes"
            );

            // Once the VM is gone the finalizer is released, the Node left alone.
            let mut i = input(&p.machine);
            i.nodes = &nodes;
            i.claims_held = Ok(Vec::new());
            let p = plan_machine(&i);
            assert!(
                !p.kube.iter().any(|k| matches!(k, KubeStep::DeleteNode(_))),
                "{:?}",
                p.kube
            );
            assert!(p.events.iter().any(|e| e.reason == event::NODE_NOT_OWNED));
            assert!(p.machine.metadata.finalizers.as_ref().unwrap().is_empty());
        }
    }

    /// N2: a Machine whose `spec.providerID` was changed to a control plane Node's is judged
    /// by its VM's providerID (vCenter's BIOS UUID): that Node is neither drained nor deleted,
    /// during the deletion or after the VM is gone.
    #[test]
    fn a_provider_id_pointed_at_another_node_drains_and_deletes_nothing() {
        let victim = "vsphere://4211-control-plane-0";
        let nodes = vec![node("master-0", Some(victim), Some("10.0.0.9"))];
        let pods = vec![PodInfo {
            namespace: "openshift-etcd".into(),
            name: "etcd-master-0".into(),
            ..Default::default()
        }];
        let mut m = deleting(false, false);
        m.spec.provider_id = Some(victim.into());
        m.status.as_mut().unwrap().node_ref.as_mut().unwrap().name = Some("master-0".into());
        let mut i = input(&m);
        i.vm = Some(vm("poweredOn"));
        i.nodes = &nodes;
        i.pods = &pods;
        let p = plan_machine(&i);
        assert!(p.kube.is_empty(), "{:?}", p.kube);
        assert!(p.events.iter().any(|e| e.reason == event::NODE_NOT_OWNED));
        // The VM gone (its BIOS UUID as the status recorded it), the Node is still not deleted.
        let mut i = input(&p.machine);
        i.nodes = &nodes;
        i.claims_held = Ok(Vec::new());
        let p = plan_machine(&i);
        assert!(
            !p.kube.iter().any(|k| matches!(
                k,
                KubeStep::DeleteNode(_) | KubeStep::Evict(_) | KubeStep::Cordon(_)
            )),
            "{:?}",
            p.kube
        );
    }

    fn conditions(m: &Machine) -> &[crate::api::conditions::CapiCondition] {
        m.status.as_ref().unwrap().conditions.as_deref().unwrap()
    }

    /// A control plane machine `name` (node of the same name, provider ID its own), deleting.
    fn cp_deleting(name: &str) -> Machine {
        let mut m = deleting(false, false);
        m.metadata.name = Some(name.into());
        m.metadata.uid = Some(format!("uid-{name}"));
        m.spec.provider_id = Some(format!("vsphere://{name}"));
        recorded_bios(&mut m, name);
        m.spec.lifecycle_hooks = None;
        m.metadata.labels = Some(
            [(
                crate::api::machine::MACHINE_ROLE_LABEL.to_string(),
                "master".to_string(),
            )]
            .into(),
        );
        m.status.as_mut().unwrap().node_ref.as_mut().unwrap().name = Some(name.into());
        m
    }

    fn cp_node(name: &str, cordoned: bool) -> k8s_openapi::api::core::v1::Node {
        let mut n = node(name, Some(&format!("vsphere://{name}")), None);
        n.spec.get_or_insert_with(Default::default).unschedulable = Some(cordoned);
        n
    }

    /// Issue #27: three control plane machines deleted at once, planned on one snapshot. Before,
    /// all three cordoned in the same pass, then each saw the others cordoned and waited for
    /// ever with no condition. Now the first (by deletion time, then name) starts, the others
    /// say whom they wait for; and a machine whose node is already cordoned goes on draining
    /// (upstream's `isDrainAllowed`), so a state left by the old deadlock drains too.
    #[test]
    fn control_plane_machines_deleted_at_once_drain_one_at_a_time_and_say_whom_they_wait_for() {
        let machines = [
            cp_deleting("cp-a"),
            cp_deleting("cp-b"),
            cp_deleting("cp-c"),
        ];
        let nodes = [
            cp_node("cp-a", false),
            cp_node("cp-b", false),
            cp_node("cp-c", false),
        ];
        let plans: Vec<MachinePlan> = machines
            .iter()
            .map(|m| {
                let mut i = input(m);
                i.nodes = &nodes;
                i.machines = &machines;
                i.vm = Some(vm_of(m));
                plan_machine(&i)
            })
            .collect();
        assert_eq!(plans[0].kube, [KubeStep::Cordon("cp-a".into())]);
        for p in &plans[1..] {
            assert!(p.kube.is_empty(), "{:?}", p.kube);
            assert_eq!(p.requeue, Requeue::After(CONTROL_PLANE_DRAIN_WAIT));
            let c = drained(&p.machine);
            assert_eq!(
                (c.status.as_str(), c.reason.as_deref()),
                ("False", Some("DrainError"))
            );
            assert!(
                c.message
                    .as_deref()
                    .unwrap()
                    .contains("control plane machine cp-a is drained first"),
                "{c:?}"
            );
            assert!(
                held_by(&p.machine).contains("cp-a"),
                "{}",
                held_by(&p.machine)
            );
        }

        // cp-a cordoned: the others wait for its Node to be removed, naming it and its machine.
        let nodes = [
            cp_node("cp-a", true),
            cp_node("cp-b", false),
            cp_node("cp-c", false),
        ];
        let mut i = input(&machines[1]);
        i.nodes = &nodes;
        i.machines = &machines;
        let p = plan_machine(&i);
        assert!(p.kube.is_empty());
        let msg = drained(&p.machine).message.unwrap();
        assert!(
            msg.contains("control plane Node cp-a is already cordoned")
                && msg.contains("its machine cp-a is being deleted"),
            "{msg}"
        );

        // The old deadlock: every control plane node cordoned. Each goes on with its drain.
        let nodes = [
            cp_node("cp-a", true),
            cp_node("cp-b", true),
            cp_node("cp-c", true),
        ];
        for m in &machines {
            let mut i = input(m);
            i.nodes = &nodes;
            i.machines = &machines;
            i.vm = Some(vm_of(m));
            let p = plan_machine(&i);
            assert!(
                matches!(p.vm, Some(VmStep::PowerOff(_))),
                "{:?} drains and goes on: {:?}",
                m.metadata.name,
                p.vm
            );
            assert_eq!(drained(&p.machine).status, "True");
        }
    }

    /// A control plane node cordoned by hand (its machine is not being deleted) holds the
    /// drain; the message says to uncordon it.
    #[test]
    fn a_control_plane_node_cordoned_by_hand_is_named_with_what_to_do() {
        let me = cp_deleting("cp-a");
        let mut other = cp_deleting("cp-b");
        other.metadata.deletion_timestamp = None;
        let machines = [me.clone(), other];
        let nodes = [cp_node("cp-a", false), cp_node("cp-b", true)];
        let mut i = input(&me);
        i.nodes = &nodes;
        i.machines = &machines;
        let p = plan_machine(&i);
        let msg = drained(&p.machine).message.unwrap();
        assert!(
            msg.contains("its machine cp-b is not being deleted: uncordon Node cp-b"),
            "{msg}"
        );
        // A worker is never held by the control plane rule.
        let mut worker = deleting(false, false);
        worker.metadata.labels = None;
        let nodes = [node("m-0", Some(PID), None), cp_node("cp-b", true)];
        let mut i = input(&worker);
        i.nodes = &nodes;
        i.machines = &machines;
        assert_eq!(plan_machine(&i).kube, [KubeStep::Cordon("m-0".into())]);
    }

    /// Hooks are named with their owners, in machine-api-operator's exact form, on Drainable
    /// and Terminable; the one-line summary adds who removes them and when.
    #[test]
    fn hooks_are_named_with_their_owners_on_drainable_and_terminable() {
        let mut m = deleting(true, false);
        m.spec.lifecycle_hooks.as_mut().unwrap().pre_drain = Some(vec![
            LifecycleHook {
                name: "EtcdQuorumOperator".into(),
                owner: "clusteroperator/etcd".into(),
            },
            LifecycleHook {
                name: "backup".into(),
                owner: "velero".into(),
            },
        ]);
        let p = plan_machine(&input(&m));
        let c = find_capi(conditions(&p.machine), "Drainable").unwrap();
        assert_eq!(
            c.message.as_deref(),
            Some(
                "Drain operation currently blocked by: [{Name:EtcdQuorumOperator Owner:clusteroperator/etcd} {Name:backup Owner:velero}]"
            )
        );
        let line = held_by(&p.machine);
        assert!(
            line.starts_with("HookPresent: Drain operation currently blocked by: [{Name:EtcdQuorumOperator")
                && line.contains("clusteroperator/etcd removes EtcdQuorumOperator once a replacement control plane machine's etcd member has joined")
                && line.contains("velero removes backup"),
            "{line}"
        );

        let m = deleting(false, true);
        let mut i = input(&m);
        i.vm = Some(vm("poweredOn"));
        let p = plan_machine(&i);
        let c = find_capi(conditions(&p.machine), "Terminable").unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
            (
                "False",
                Some("HookPresent"),
                Some(
                    "Terminate operation currently blocked by: [{Name:kcp-cleanup Owner:clusteroperator/etcd}]"
                )
            )
        );
        assert!(held_by(&p.machine).contains("clusteroperator/etcd removes kcp-cleanup"));
    }

    /// An eviction a PodDisruptionBudget refuses: `Drained=False` (`DrainError`) names the pod
    /// and the budget, from the API server's answer.
    #[test]
    fn a_pod_disruption_budget_refusal_names_the_budget_and_the_pod() {
        use crate::plan::machine::drain::eviction_refused;
        use crate::plan::machine::outcome::{KubeResult, after_kube};
        let pod = PodRef {
            namespace: "app".into(),
            name: "web-0".into(),
        };
        let why = "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 2 healthy pods and has 2 currently";
        let said = eviction_refused(&pod, why);
        assert!(
            said.starts_with("eviction of pod app/web-0 refused by PodDisruptionBudget app/web: "),
            "{said}"
        );
        // Without the causes the budget cannot be named, and is not guessed.
        assert_eq!(
            eviction_refused(
                &pod,
                "Cannot evict pod as it would violate the pod's disruption budget."
            ),
            "eviction of pod app/web-0 refused: Cannot evict pod as it would violate the pod's disruption budget."
        );
        let mut p = MachinePlan::new(&deleting(false, false));
        after_kube(
            &mut p,
            &[
                (KubeStep::Cordon("m-0".into()), KubeResult::Done),
                (KubeStep::Evict(pod), KubeResult::Refused(said.clone())),
            ],
            &Time(jiff::Timestamp::UNIX_EPOCH),
        );
        let c = drained(&p.machine);
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
            ("False", Some("DrainError"), Some(said.as_str()))
        );
        assert!(held_by(&p.machine).contains("PodDisruptionBudget app/web"));
    }

    /// Evicted pods still terminating: `Drained=False` names them.
    #[test]
    fn pods_still_terminating_are_named() {
        let m = deleting(false, false);
        let mut n = node("m-0", Some(PID), None);
        n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
        let nodes = [n];
        let pods = [PodInfo {
            namespace: "app".into(),
            name: "slow".into(),
            terminating: true,
            ..Default::default()
        }];
        let mut i = input(&m);
        i.nodes = &nodes;
        i.pods = &pods;
        let p = plan_machine(&i);
        assert_eq!(p.requeue, Requeue::After(DRAIN_POLL));
        assert!(
            drained(&p.machine)
                .message
                .unwrap()
                .contains("waiting for 1 evicted pod(s) to terminate: app/slow")
        );
    }

    /// What waits after the drain is said too: a vCenter task, vCenter not answering, the
    /// guest shutting down, the VM going; never a bare "in progress".
    #[test]
    fn held_by_names_the_task_vcenter_and_the_step_under_way() {
        let now = Time(jiff::Timestamp::UNIX_EPOCH);
        let mut m = deleting(false, false);
        set_condition(&mut m, ConditionUpdate::true_(cond::DRAINED), &now);
        assert_eq!(held_by(&m), "its VM is being powered off and destroyed");
        let mut ps = provider_status(&m);
        ps.task_ref = "task-42".into();
        set_provider_status(&mut m, &ps);
        assert!(
            held_by(&m).contains("vCenter task task-42"),
            "{}",
            held_by(&m)
        );
        let mut i = input(&m);
        i.vcenter_error = Some(super::super::VcenterTrouble {
            message: "connection refused".into(),
            permanent: false,
        });
        let p = plan_machine(&i);
        assert!(
            held_by(&p.machine)
                .starts_with("vCenter cannot be asked: ErrorCheckingProvider: connection refused"),
            "{}",
            held_by(&p.machine)
        );
        for line in [held_by(&m), held_by(&deleting(false, false))] {
            assert!(!line.contains("in progress"), "{line}");
        }
    }
}
