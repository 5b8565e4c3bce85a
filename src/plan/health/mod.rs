//! The MachineHealthCheck planner, pure: given an MHC, the Machines of its namespace, the Nodes,
//! whether a ControlPlaneMachineSet replacement is under way and `now`, decide the MHC's status,
//! which machines to remediate and how, the events, and when to look again.
//!
//! Upstream order and semantics (MAO `machinehealthcheck_controller.go`), with its known bugs
//! fixed (each has a test below):
//! * short-circuited: requeue when a verdict can change, not every millisecond;
//! * the startup clock starts when the machine was provisioned, not at `status.lastUpdated`;
//! * a replacement that fails again right after its predecessor was remediated waits out an
//!   exponential backoff ([`remediation::Backoff`], kept in [`remediation::BACKOFF_ANNOTATION`] on
//!   the MHC) instead of a delete/create hot loop (openshift/enhancements#673);
//! * machines with an outstanding remediation request count as unhealthy, so `maxUnhealthy`
//!   bounds external remediation too (MAO #902).
//!
//! Beyond upstream, a control plane machine is remediated only when no other control plane
//! machine is unhealthy, deleting or being replaced, when the remaining voting members keep
//! quorum, and one at a time whatever `maxUnhealthy` says ([`remediation::control_plane_gate`]).
//!
//! * [`targets`] — selection and the health rules;
//! * [`max_unhealthy`] — the short-circuit;
//! * [`remediation`] — the way per machine, backoff, control plane gate;
//! * [`status`] — conditions, events, status.
//!
//! # For the shells
//! Gather a [`HealthInput`] (the MHC; every Machine of its namespace; the Nodes; whether the
//! CPMS is replacing a machine; the remediation template object and which machines have a
//! request, when the MHC names a template; `now`) and call [`plan_health`]. Then, unless
//! [`HealthPlan::paused`]:
//! 1. write [`HealthPlan::status`] when it differs; set [`BACKOFF_ANNOTATION`] on the MHC to
//!    [`HealthPlan::backoff_annotation`] (remove it when `None`);
//! 2. carry out [`HealthPlan::remediations`] (delete the Machine through the normal deletion
//!    lifecycle / add the annotation / create the request) and record each one's `event` once
//!    it succeeded; a failure goes through [`remediation_failed`] (its event, and for a
//!    request the MHC condition of [`status::request_creation_failed`]);
//! 3. delete [`HealthPlan::delete_requests`];
//! 4. record [`HealthPlan::events`];
//! 5. requeue after [`HealthPlan::requeue`] if set (else wait for a watch event: MHC, Machine,
//!    Node, ControlPlaneMachineSet changes).
//!
//! [`HealthPlan::targets`] and [`HealthPlan::short_circuited`] feed the MHC table and metrics.
pub mod max_unhealthy;
pub mod remediation;
pub mod status;
pub mod targets;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use crate::api::conditions::{ConditionUpdate, severity};
use crate::api::control_plane_machine_set::ControlPlaneMachineSet;
use crate::api::health_values::parse_go_duration;
use crate::api::machine::{Machine, phase};
use crate::api::machine_health_check::{
    DEFAULT_NODE_STARTUP_TIMEOUT, MHC_PAUSED_ANNOTATION, MachineHealthCheck,
    MachineHealthCheckStatus,
};
use crate::plan::machine::drain::is_control_plane;

pub use remediation::{
    BACKOFF_ANNOTATION, Backoff, ControlPlaneMember, Held, RemediationAction, RequestRef,
};
pub use status::{EventObject, HealthEvent};
pub use targets::{Check, Rule, Target, Unhealthy};

use remediation::Way;
use status::{condition as cond, event as ev};
use targets::NodeState;

/// The shortest requeue: when nothing changes sooner, never look again within a second.
pub const MIN_REQUEUE: Duration = Duration::from_secs(1);
/// How soon to look again when the remediation template could not be read.
pub const TEMPLATE_RETRY: Duration = Duration::from_secs(60);

/// Everything one MHC's decision depends on.
#[derive(Clone, Debug)]
pub struct HealthInput<'a> {
    pub mhc: &'a MachineHealthCheck,
    /// The Machines of the MHC's namespace (others are ignored). Control plane machines the
    /// selector does not pick still count for the control plane gate.
    pub machines: &'a [Machine],
    pub nodes: &'a [Node],
    /// The ControlPlaneMachineSet is replacing a machine (it has more machines than replicas,
    /// or one needs replacement): no control plane remediation meanwhile.
    pub cpms_replacement_in_progress: bool,
    /// The object `spec.remediationTemplate` names, as read (`None`: not found, or no template).
    pub remediation_template: Option<&'a Value>,
    /// Names of the machines for which a remediation request (the template's Kind minus
    /// `Template`, named after the machine) exists.
    pub remediation_requests: &'a BTreeSet<String>,
    pub now: Time,
}

/// What happens to one target this pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Healthy, or not (yet) in need of remediation.
    Nothing,
    Remediate(RemediationAction),
    /// Remediation is already under way (deleting, annotated, request exists).
    Underway,
    /// Needs remediation but the MHC is short-circuited.
    ShortCircuited,
    /// Needs remediation but no controller owns it.
    SkippedNoController,
    /// A control plane remediation held back.
    Held(Held),
    /// A replacement failing again: remediation waits this long.
    BackingOff(Duration),
    /// The remediation template could not be used.
    TemplateUnavailable(String),
}

/// One target's verdict and fate, for tables and metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetReport {
    pub machine: String,
    pub control_plane: bool,
    /// Counted in `currentHealthy`.
    pub healthy: bool,
    pub check: Check,
    pub outcome: Outcome,
}

/// One remediation to carry out; record `event` once it succeeded.
#[derive(Clone, Debug, PartialEq)]
pub struct Remediation {
    pub machine: String,
    pub why: Unhealthy,
    pub action: RemediationAction,
    pub event: HealthEvent,
}

/// The MHC's plan for this pass.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthPlan {
    /// `cluster.x-k8s.io/paused`: nothing else is set, nothing is done.
    pub paused: bool,
    /// The status to write (`None` when paused: leave it).
    pub status: Option<MachineHealthCheckStatus>,
    /// The value [`BACKOFF_ANNOTATION`] should have on the MHC (`None`: absent).
    pub backoff_annotation: Option<String>,
    pub remediations: Vec<Remediation>,
    /// Remediation requests of machines healthy again, to delete (MAO `cleanEMR`).
    pub delete_requests: Vec<RequestRef>,
    pub events: Vec<HealthEvent>,
    pub targets: Vec<TargetReport>,
    /// Remediation is not allowed (too many unhealthy, or an invalid spec).
    pub short_circuited: bool,
    /// Look again after this long, when a verdict can change with nothing else happening
    /// (never under [`MIN_REQUEUE`]); `None`: only when something changes.
    pub requeue: Option<Duration>,
}

impl HealthPlan {
    /// Paused: nothing changes (the backoff annotation stays as it is).
    fn paused(mhc: &MachineHealthCheck) -> Self {
        HealthPlan {
            paused: true,
            status: None,
            backoff_annotation: mhc
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(BACKOFF_ANNOTATION))
                .cloned(),
            remediations: Vec::new(),
            delete_requests: Vec::new(),
            events: Vec::new(),
            targets: Vec::new(),
            short_circuited: false,
            requeue: None,
        }
    }

    /// Machines unhealthy or not started (`expected − healthy`).
    pub fn unhealthy(&self) -> u64 {
        self.targets.iter().filter(|t| !t.healthy).count() as u64
    }
}

/// What to report when a remediation could not be carried out: the event (on the machine),
/// and for a request the MHC's `ExternalRemediationRequestAvailable=False` in `plan.status`.
/// A remediation that did not happen starts no backoff: the owner's entry in
/// `plan.backoff_annotation` goes back to what `mhc` had, so the retry is not held as if a
/// replacement had failed again.
pub fn remediation_failed(
    plan: &mut HealthPlan,
    r: &Remediation,
    message: &str,
    mhc: &MachineHealthCheck,
    machine: Option<&Machine>,
    now: &Time,
) -> HealthEvent {
    if let Some(owner) = machine.and_then(remediation::owner_key) {
        let mut backoff: Backoff = plan
            .backoff_annotation
            .as_deref()
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default();
        match Backoff::from_mhc(mhc).0.remove(&owner) {
            Some(before) => backoff.0.insert(owner, before),
            None => backoff.0.remove(&owner),
        };
        plan.backoff_annotation = backoff.to_annotation();
    }
    let text = format!("remediation ({}) failed: {message}", r.action.describe());
    let reason = match &r.action {
        RemediationAction::DeleteMachine => ev::MACHINE_DELETION_FAILED,
        RemediationAction::AnnotateExternal => ev::EXTERNAL_ANNOTATION_FAILED,
        RemediationAction::CreateRequest(_) => {
            if let Some(st) = plan.status.as_mut() {
                status::request_creation_failed(st, &text, now);
            }
            ev::REQUEST_CREATION_FAILED
        }
    };
    HealthEvent {
        object: EventObject::Machine(r.machine.clone()),
        warning: true,
        reason,
        action: ev::ACTION_REMEDIATE,
        message: text,
    }
}

/// Whether a control plane machine set of `namespace` is replacing a machine (it has more
/// machines than replicas: a replacement was created and its predecessor not yet removed): no
/// control plane remediation meanwhile. (Fewer ready replicas than wanted is not a replacement:
/// an unhealthy machine is exactly that, and must stay remediable.)
pub fn replacement_in_progress<'a>(
    sets: impl IntoIterator<Item = &'a ControlPlaneMachineSet>,
    namespace: &str,
) -> bool {
    sets.into_iter().any(|c| {
        c.metadata.namespace.as_deref() == Some(namespace)
            && c.status.as_ref().and_then(|s| s.replicas).unwrap_or(0)
                > c.spec.replicas_or_default()
    })
}

/// Whether the MHC carries the pause annotation.
pub fn is_paused(mhc: &MachineHealthCheck) -> bool {
    mhc.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MHC_PAUSED_ANNOTATION))
}

/// A control plane machine: labelled so, or owned by a ControlPlaneMachineSet.
pub fn is_control_plane_machine(m: &Machine) -> bool {
    is_control_plane(m) || remediation::cpms_owned(m)
}

/// The spec's durations, parsed; what could not be read is listed.
struct Spec {
    startup: Duration,
    rules: Vec<Rule>,
    errors: Vec<String>,
}

fn parse_spec(mhc: &MachineHealthCheck) -> Spec {
    let mut errors = Vec::new();
    let startup_text = mhc
        .spec
        .node_startup_timeout
        .as_deref()
        .unwrap_or(DEFAULT_NODE_STARTUP_TIMEOUT);
    let startup = match parse_go_duration(startup_text) {
        Ok(ns) => nanos(ns),
        Err(e) => {
            errors.push(format!("nodeStartupTimeout: {e}"));
            nanos(parse_go_duration(DEFAULT_NODE_STARTUP_TIMEOUT).unwrap_or_default())
        }
    };
    let mut rules = Vec::new();
    for (i, c) in mhc.spec.unhealthy_conditions.iter().flatten().enumerate() {
        match parse_go_duration(&c.timeout) {
            Ok(ns) => rules.push(Rule {
                type_: c.type_.clone(),
                status: c.status.clone(),
                timeout: nanos(ns),
            }),
            Err(e) => errors.push(format!("unhealthyConditions[{i}].timeout: {e}")),
        }
    }
    if let Err(e) = crate::api::health_values::parse_max_unhealthy(mhc.spec.max_unhealthy.as_ref())
    {
        errors.push(format!("maxUnhealthy: {e}"));
    }
    Spec {
        startup,
        rules,
        errors,
    }
}

fn nanos(ns: u128) -> Duration {
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

fn max_unhealthy_text(v: Option<&IntOrString>) -> String {
    match v {
        None => "100%".into(),
        Some(IntOrString::Int(i)) => i.to_string(),
        Some(IntOrString::String(s)) => s.clone(),
    }
}

/// The decision for one MachineHealthCheck.
pub fn plan_health(input: &HealthInput<'_>) -> HealthPlan {
    let mhc = input.mhc;
    if is_paused(mhc) {
        return HealthPlan::paused(mhc);
    }
    let spec = parse_spec(mhc);
    let template_ref = mhc.spec.remediation_template.as_ref();
    let has_request = |m: &Machine| has_request(input, m);

    let targets = targets::select_targets(mhc, input.machines, input.nodes);
    let health = targets::health_check_targets(
        &targets,
        &spec.rules,
        spec.startup,
        &has_request,
        &input.now,
    );
    let expected = targets.len() as u64;
    let healthy = health.healthy.len() as u64;
    let max = mhc.spec.max_unhealthy.as_ref();
    let valid = spec.errors.is_empty();
    let allowed = valid && max_unhealthy::is_allowed_remediation(max, expected, healthy);
    let counts = status::Counts {
        expected,
        healthy,
        remediations_allowed: if valid {
            max_unhealthy::remediations_allowed(max, expected, healthy)
        } else {
            0
        },
    };
    let mut backoff = Backoff::from_mhc(mhc);
    backoff.prune(&input.now);
    let mut pass = Pass {
        input,
        status: status::with_counts(mhc.status.as_ref(), counts),
        events: Vec::new(),
        waits: health.next_checks.clone(),
        backoff,
        remediations: Vec::new(),
    };

    let mut reports: Vec<TargetReport> = targets
        .iter()
        .zip(&health.checks)
        .enumerate()
        .map(|(i, (t, check))| TargetReport {
            machine: name(t.machine),
            control_plane: is_control_plane_machine(t.machine),
            healthy: health.healthy.contains(&i),
            check: check.clone(),
            outcome: Outcome::Nothing,
        })
        .collect();
    for (t, r) in targets.iter().zip(&reports) {
        if let Some(next) = r.check.next_check {
            pass.detected_unhealthy(t, next);
        }
    }

    if allowed {
        pass.set(&ConditionUpdate::true_(cond::REMEDIATION_ALLOWED));
        let members = control_plane_members(input, &spec);
        let mut first_cp: Option<String> = None;
        let mut held_cp: Option<(Held, String)> = None;
        let mut template_trouble: Option<String> = None;
        for &i in &health.need_remediation {
            // `need_remediation` indexes `targets`, `checks` and `reports` alike (built from
            // the same list above); an index outside them is skipped, never a panic.
            let (Some(target), Some(report), Some(why)) = (
                targets.get(i),
                reports.get(i),
                health.checks.get(i).and_then(|c| c.unhealthy.clone()),
            ) else {
                continue;
            };
            let (control_plane, machine) = (report.control_plane, report.machine.clone());
            let gate = if control_plane {
                remediation::control_plane_gate(
                    &machine,
                    &members,
                    input.cpms_replacement_in_progress,
                    first_cp.as_deref(),
                )
            } else {
                Ok(())
            };
            let outcome = pass.remediate(target.machine, why, gate);
            match &outcome {
                Outcome::Remediate(_) if control_plane => {
                    first_cp.get_or_insert(machine.clone());
                }
                Outcome::Held(h) => {
                    held_cp.get_or_insert((h.clone(), h.message(&machine)));
                }
                Outcome::TemplateUnavailable(e) => {
                    template_trouble.get_or_insert(e.clone());
                }
                _ => {}
            }
            if let Some(r) = reports.get_mut(i) {
                r.outcome = outcome;
            }
        }
        if reports.iter().any(|r| r.control_plane) {
            pass.control_plane_condition(held_cp);
        }
        if template_ref.is_some() {
            pass.template_condition(template_trouble);
        }
    } else {
        pass.restrict(&spec, expected, healthy);
        for &i in &health.need_remediation {
            if let Some(r) = reports.get_mut(i) {
                r.outcome = Outcome::ShortCircuited;
            }
        }
    }

    // Requests of machines passing again are deleted even when short-circuited (upstream skips
    // that, and since outstanding requests count as unhealthy, it could never recover).
    let delete_requests = template_ref
        .map(|tref| {
            health
                .passing
                .iter()
                .filter_map(|&i| targets.get(i).map(|t| t.machine))
                .filter(|m| has_request(m))
                .map(|m| remediation::request_ref(tref, &name(m)))
                .collect()
        })
        .unwrap_or_default();
    if !reports.iter().any(|r| r.control_plane) {
        status::remove(&mut pass.status, cond::CONTROL_PLANE_REMEDIATION_ALLOWED);
    }
    if template_ref.is_none() {
        status::remove(
            &mut pass.status,
            cond::EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE,
        );
        status::remove(
            &mut pass.status,
            cond::EXTERNAL_REMEDIATION_REQUEST_AVAILABLE,
        );
    }

    HealthPlan {
        paused: false,
        status: Some(pass.status),
        backoff_annotation: pass.backoff.to_annotation(),
        remediations: pass.remediations,
        delete_requests,
        events: pass.events,
        targets: reports,
        short_circuited: !allowed,
        requeue: pass.waits.into_iter().min().map(|d| d.max(MIN_REQUEUE)),
    }
}

/// A remediation request exists for the machine (only when the MHC names a template).
fn has_request(input: &HealthInput<'_>, m: &Machine) -> bool {
    input.mhc.spec.remediation_template.is_some()
        && m.metadata
            .name
            .as_ref()
            .is_some_and(|n| input.remediation_requests.contains(n))
}

/// What one pass accumulates.
struct Pass<'i, 'a> {
    input: &'i HealthInput<'a>,
    status: MachineHealthCheckStatus,
    events: Vec<HealthEvent>,
    /// Candidate requeues.
    waits: Vec<Duration>,
    backoff: Backoff,
    remediations: Vec<Remediation>,
}

impl Pass<'_, '_> {
    fn set(&mut self, update: &ConditionUpdate<'_>) {
        status::set(&mut self.status, update, &self.input.now);
    }

    fn event(&mut self, object: EventObject, warning: bool, reason: &'static str, message: String) {
        self.events.push(HealthEvent {
            object,
            warning,
            reason,
            action: ev::ACTION_REMEDIATE,
            message,
        });
    }

    /// `namespace/mhc/machine`, as MAO's `target.string()` without the node.
    fn target(&self, machine: &str) -> String {
        let mhc = &self.input.mhc.metadata;
        format!(
            "{}/{}/{machine}",
            mhc.namespace.as_deref().unwrap_or_default(),
            mhc.name.as_deref().unwrap_or_default()
        )
    }

    /// MAO's `DetectedUnhealthy`: a target will be unhealthy in `next` unless it recovers.
    fn detected_unhealthy(&mut self, t: &Target<'_>, next: Duration) {
        let machine = name(t.machine);
        let node = targets::node_ref_name(t.machine).unwrap_or_default();
        let message = if node.is_empty() {
            format!(
                "Machine {} has no node yet; unhealthy in {} unless it joins",
                self.target(&machine),
                targets::fmt_wait(next)
            )
        } else {
            format!(
                "Machine {} has unhealthy node {node}; remediation in {} unless it recovers",
                self.target(&machine),
                targets::fmt_wait(next)
            )
        };
        self.events.push(HealthEvent {
            object: EventObject::Machine(machine),
            warning: false,
            reason: ev::DETECTED_UNHEALTHY,
            action: ev::ACTION_HEALTH_CHECK,
            message,
        });
    }

    /// Short-circuited (too many unhealthy) or the spec cannot be read.
    fn restrict(&mut self, spec: &Spec, expected: u64, healthy: u64) {
        let unhealthy = max_unhealthy::unhealthy_count(expected, healthy);
        let max = max_unhealthy_text(self.input.mhc.spec.max_unhealthy.as_ref());
        let counts = format!("(total: {expected}, unhealthy: {unhealthy}, maxUnhealthy: {max})");
        let (reason, message, event) = if spec.errors.is_empty() {
            (
                cond::TOO_MANY_UNHEALTHY,
                format!(
                    "Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy {counts}"
                ),
                format!(
                    "Remediation restricted due to exceeded number of unhealthy machines {counts}"
                ),
            )
        } else {
            let m = format!(
                "Remediation is not allowed, the spec cannot be read: {}",
                spec.errors.join("; ")
            );
            (cond::INVALID_CONFIGURATION, m.clone(), m)
        };
        self.set(&ConditionUpdate::false_(
            cond::REMEDIATION_ALLOWED,
            reason,
            severity::WARNING,
            &message,
        ));
        self.event(EventObject::Mhc, true, ev::REMEDIATION_RESTRICTED, event);
    }

    /// One target that needs remediation, remediation being allowed: its way, then the backoff
    /// (deletions only), then the control plane `gate`.
    fn remediate(&mut self, m: &Machine, why: Unhealthy, gate: Result<(), Held>) -> Outcome {
        let input = self.input;
        let machine = name(m);
        let way = remediation::choose_way(
            input.mhc,
            m,
            input.remediation_template,
            has_request(input, m),
        );
        let action = match way {
            Way::Underway => return Outcome::Underway,
            Way::TemplateUnavailable(e) => return Outcome::TemplateUnavailable(e),
            Way::NoController => {
                let message = format!(
                    "Machine {} has no controller owner, skipping remediation",
                    self.target(&machine)
                );
                self.event(
                    EventObject::Machine(machine),
                    false,
                    ev::SKIPPED_NO_CONTROLLER,
                    message,
                );
                return Outcome::SkippedNoController;
            }
            Way::Act(action) => action,
        };
        let deletes = matches!(action, RemediationAction::DeleteMachine);
        if let Some((left, count)) = deletes.then(|| self.backoff.hold(m, &input.now)).flatten() {
            self.waits.push(left);
            let message = format!(
                "Machine {} is unhealthy ({}) but replaces a machine remediated {count} time(s) in a row; remediation waits {} more",
                self.target(&machine),
                why.describe(),
                targets::fmt_wait(left)
            );
            self.event(
                EventObject::Machine(machine),
                true,
                ev::REMEDIATION_BACKOFF,
                message,
            );
            return Outcome::BackingOff(left);
        }
        if let Err(held) = gate {
            let message = held.message(&machine);
            self.event(
                EventObject::Machine(machine),
                true,
                ev::CONTROL_PLANE_REMEDIATION_HELD,
                message,
            );
            return Outcome::Held(held);
        }
        if deletes {
            self.backoff.record(m, &input.now);
        }
        let message = format!(
            "Machine {} has been remediated by {} ({})",
            self.target(&machine),
            action.describe(),
            why.describe()
        );
        self.remediations.push(Remediation {
            machine: machine.clone(),
            why,
            action: action.clone(),
            event: HealthEvent {
                object: EventObject::Machine(machine),
                warning: false,
                reason: ev::MACHINE_REMEDIATED,
                action: ev::ACTION_REMEDIATE,
                message,
            },
        });
        Outcome::Remediate(action)
    }

    /// Ours: whether a control plane remediation was held back, and why (the first one).
    fn control_plane_condition(&mut self, held: Option<(Held, String)>) {
        match held {
            Some((held, message)) => self.set(&ConditionUpdate::false_(
                cond::CONTROL_PLANE_REMEDIATION_ALLOWED,
                held.reason(),
                severity::WARNING,
                &message,
            )),
            None => self.set(&ConditionUpdate::true_(
                cond::CONTROL_PLANE_REMEDIATION_ALLOWED,
            )),
        }
    }

    /// `ExternalRemediationTemplateAvailable`: False when the template could not be used (and
    /// look again later: no watch sees it appear), True once it was read.
    fn template_condition(&mut self, trouble: Option<String>) {
        match (trouble, self.input.remediation_template) {
            (Some(e), _) => {
                self.waits.push(TEMPLATE_RETRY);
                self.set(&ConditionUpdate::false_(
                    cond::EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE,
                    cond::EXTERNAL_REMEDIATION_TEMPLATE_NOT_FOUND,
                    severity::ERROR,
                    &e,
                ));
            }
            (None, Some(_)) => self.set(&ConditionUpdate::true_(
                cond::EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE,
            )),
            (None, None) => {}
        }
    }
}

/// Every control plane machine of the namespace, judged by this MHC's rules (whether or not the
/// selector picks it) plus a Ready node.
fn control_plane_members(input: &HealthInput<'_>, spec: &Spec) -> Vec<ControlPlaneMember> {
    let ns = input.mhc.metadata.namespace.as_deref();
    input
        .machines
        .iter()
        .filter(|m| ns.is_none() || m.metadata.namespace.as_deref() == ns)
        .filter(|m| is_control_plane_machine(m))
        .map(|m| {
            let node = targets::node_of(m, input.nodes);
            let t = Target { machine: m, node };
            let check = targets::needs_remediation(&t, &spec.rules, spec.startup, &input.now);
            let deleting = targets::is_deleting(m);
            let healthy = !deleting
                && targets::phase_of(m) != Some(phase::FAILED)
                && matches!(node, NodeState::Found(n) if targets::node_ready(n))
                && check.unhealthy.is_none()
                && check.next_check.is_none();
            ControlPlaneMember {
                name: name(m),
                deleting,
                healthy,
            }
        })
        .collect()
}

fn name(m: &Machine) -> String {
    m.metadata.name.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests;
