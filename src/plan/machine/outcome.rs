//! What a machine's plan comes to once the shell has carried out its steps: the vCenter step's
//! result and the Kubernetes steps' results folded into the Machine, its events and its
//! requeue. Pure, so the shells only execute and report; before this lived here, the sweep
//! re-decided failures after executing (which event, whether to back off, putting the finalizer
//! back when the Node could not be deleted).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::create::fail_invalid_configuration;
use super::deletion::mark_drain_error;
use super::{KubeStep, MachinePlan, Requeue, VmStep, provider_status, set_provider_status};
use crate::api::machine::MACHINE_FINALIZER;
use crate::api::machine_status::event;
use crate::plan::capi_machine::actuated::GUEST_SHUTDOWN;
use crate::plan::failure::Failure;
use crate::vcenter::model::moref::MoRef;

/// What became of a machine's vCenter step.
#[derive(Clone, Debug)]
pub enum StepResult {
    /// The task started (what it does, for the log): its reference is recorded on the
    /// Machine and read by the next sweep.
    Started { task: MoRef, what: String },
    /// Done at once, no task (REST calls: tags attached); the next sweep confirms it.
    Done { what: String },
    /// vCenter refused, or could not be asked; the failure says whether a retry may help.
    Refused(Failure),
    /// The step asks for something impossible (a device the template lacks, a disk that would
    /// shrink): the machine fails with `InvalidConfiguration`.
    Invalid(String),
}

/// Fold the vCenter step's result (`None`: the plan had no step) into the plan.
pub fn after_vcenter(plan: &mut MachinePlan, deleting: bool, result: Option<&StepResult>) {
    // The step is spent: what is written back is its result, never the step itself.
    let step = plan.vm.take();
    if let (Some(VmStep::ShutdownGuest(_)), Some(StepResult::Refused(f))) = (&step, result) {
        // The guest could not be asked (no VMware Tools): trySoft powers off hard next.
        let mut ps = provider_status(&plan.machine);
        if let Some(c) = ps.conditions.iter_mut().find(|c| c.type_ == GUEST_SHUTDOWN) {
            c.status = "False".into();
            c.reason = "GuestShutdownRefused".into();
            c.message = f.to_string();
        }
        set_provider_status(&mut plan.machine, &ps);
    }
    match result {
        None | Some(StepResult::Done { .. }) => {}
        Some(StepResult::Started { task, .. }) => {
            let mut ps = provider_status(&plan.machine);
            ps.task_ref = task.value.clone();
            set_provider_status(&mut plan.machine, &ps);
        }
        Some(StepResult::Refused(f)) => {
            let reason = if deleting {
                event::FAILED_DELETE
            } else {
                event::FAILED_CREATE
            };
            plan.event(true, reason, f.to_string());
            plan.requeue = Requeue::Backoff(f.to_string());
        }
        Some(StepResult::Invalid(message)) => fail_invalid_configuration(plan, message),
    }
}

/// What became of one Kubernetes step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KubeResult {
    Done,
    /// Refused for now, not an error (an eviction a PodDisruptionBudget does not allow).
    Refused(String),
    /// The call failed (the typed error, as text: plan sees no Kubernetes client).
    Failed(String),
}

/// Fold the Kubernetes steps' results into the plan; returns how many changed something. The
/// planner releases the finalizer in the same plan as it deletes the Node and releases the IP
/// address claims: a Node or claim that could not be deleted keeps the finalizer, so the
/// machine is not gone while they are not. A claim that could not be created backs off.
pub fn after_kube(plan: &mut MachinePlan, results: &[(KubeStep, KubeResult)], now: &Time) -> usize {
    let mut done = 0;
    let mut drain_errors = Vec::new();
    for (step, result) in results {
        match (step, result) {
            (_, KubeResult::Done) => done += 1,
            (
                KubeStep::DeleteNode(_) | KubeStep::ReleaseClaim { .. },
                KubeResult::Failed(e) | KubeResult::Refused(e),
            ) => {
                let f = plan
                    .machine
                    .metadata
                    .finalizers
                    .get_or_insert_with(Vec::new);
                if !f.iter().any(|x| x == MACHINE_FINALIZER) {
                    f.push(MACHINE_FINALIZER.into());
                }
                plan.event(true, event::FAILED_DELETE, e.clone());
                plan.requeue = Requeue::Backoff(e.clone());
            }
            (KubeStep::CreateClaim(_), KubeResult::Failed(e) | KubeResult::Refused(e)) => {
                plan.event(true, event::FAILED_CREATE, e.clone());
                plan.requeue = Requeue::Backoff(e.clone());
            }
            (_, KubeResult::Refused(e) | KubeResult::Failed(e)) => drain_errors.push(e.clone()),
        }
    }
    if !drain_errors.is_empty() {
        let msg = drain_errors.join("; ");
        mark_drain_error(&mut plan.machine, &msg, now);
        plan.event(true, event::DRAIN_REQUEUED, msg.clone());
        plan.requeue = Requeue::Backoff(format!("drain: {msg}"));
    }
    done
}

#[cfg(test)]
mod tests {
    use super::super::tests::machine;
    use super::*;
    use crate::plan::machine::drain::PodRef;

    fn plan_releasing(name: &str) -> MachinePlan {
        let mut m = machine(name);
        m.metadata.finalizers = Some(vec![]);
        MachinePlan::new(&m)
    }

    #[test]
    fn a_node_that_cannot_be_deleted_keeps_the_finalizer_and_backs_off() {
        let mut p = plan_releasing("m");
        let n = after_kube(
            &mut p,
            &[(
                KubeStep::DeleteNode("n".into()),
                KubeResult::Failed("delete Node n: 500".into()),
            )],
            &Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert_eq!(n, 0);
        assert_eq!(
            p.machine.metadata.finalizers,
            Some(vec![MACHINE_FINALIZER.to_string()])
        );
        assert_eq!(p.requeue, Requeue::Backoff("delete Node n: 500".into()));
        assert_eq!(p.events[0].reason, event::FAILED_DELETE);
    }

    #[test]
    fn a_refused_eviction_is_a_drain_error_not_a_deletion_failure() {
        let mut p = plan_releasing("m");
        let pod = PodRef {
            namespace: "ns".into(),
            name: "p".into(),
        };
        let n = after_kube(
            &mut p,
            &[
                (KubeStep::Cordon("n".into()), KubeResult::Done),
                (
                    KubeStep::Evict(pod),
                    KubeResult::Refused("pdb says no".into()),
                ),
            ],
            &Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert_eq!(n, 1, "the cordon counts");
        assert_eq!(p.events[0].reason, event::DRAIN_REQUEUED);
        assert_eq!(p.requeue, Requeue::Backoff("drain: pdb says no".into()));
        assert_eq!(p.machine.metadata.finalizers, Some(vec![]), "untouched");
    }

    #[test]
    fn a_started_task_is_recorded_and_a_refusal_backs_off_with_its_reason() {
        let mut p = plan_releasing("m");
        p.vm = Some(super::super::VmStep::PowerOn(MoRef::new(
            "VirtualMachine",
            "vm-1",
        )));
        after_vcenter(
            &mut p,
            false,
            Some(&StepResult::Started {
                task: MoRef::new("Task", "task-7"),
                what: "power on".into(),
            }),
        );
        assert!(p.vm.is_none());
        assert_eq!(provider_status(&p.machine).task_ref, "task-7");
        assert_eq!(p.requeue, Requeue::Idle);

        let mut p = plan_releasing("m");
        after_vcenter(
            &mut p,
            true,
            Some(&StepResult::Refused(Failure::busy("vm-1 is busy"))),
        );
        assert_eq!(p.events[0].reason, event::FAILED_DELETE);
        assert_eq!(p.requeue, Requeue::Backoff("vm-1 is busy".into()));
    }
}
