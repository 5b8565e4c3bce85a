//! Which machines a MachineHealthCheck watches, and whether each is healthy: MAO's health rules
//! in its order (Failed phase; no node after `nodeStartupTimeout`; node gone; unhealthy node
//! conditions past their timeout), with time as an input.
//!
//! Two departures from upstream, both bug fixes:
//! * the startup clock starts when the machine was provisioned (the later of its creation and
//!   `InstanceExists` turning True), not at `status.lastUpdated`, which every status write moves
//!   (so a machine whose status keeps changing was never judged; cluster-api#3026, PR #10718);
//! * a deadline is reached *at* `start + timeout` (upstream: strictly after, then it requeues
//!   `+1s` to get past it), so the requeue lands exactly on the moment the verdict changes.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions::{STATUS_TRUE, find_capi};
use crate::api::machine::{Machine, phase};
use crate::api::machine_health_check::MachineHealthCheck;
use crate::api::machine_status::condition as cond;
use crate::plan::selector;

/// Machine annotation the external bare-metal remediation strategy sets (and watches).
pub const EXTERNAL_REMEDIATION_ANNOTATION: &str = "host.metal3.io/external-remediation";

/// A machine and its node, as the health rules see them.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub machine: &'a Machine,
    pub node: NodeState<'a>,
}

/// The machine's node.
#[derive(Clone, Copy, Debug)]
pub enum NodeState<'a> {
    /// `status.nodeRef` is not set (yet).
    NoRef,
    /// `status.nodeRef` names a Node that does not exist.
    Missing,
    Found(&'a Node),
}

/// One unhealthy node condition with its timeout parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub type_: String,
    pub status: String,
    pub timeout: Duration,
}

/// Why a target needs remediation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unhealthy {
    /// Phase `Failed`.
    Failed,
    /// No node `timeout` after the machine was provisioned.
    NodeStartupTimeout(Duration),
    /// `nodeRef` names a Node that is gone.
    NodeDeleted(String),
    /// A node condition matched an unhealthy condition for its whole timeout.
    Condition(Rule),
}

impl Unhealthy {
    pub fn describe(&self) -> String {
        match self {
            Unhealthy::Failed => "machine phase is Failed".into(),
            Unhealthy::NodeStartupTimeout(t) => {
                format!("machine has no node after {}", fmt_duration(*t))
            }
            Unhealthy::NodeDeleted(n) => format!("node {n} not found"),
            Unhealthy::Condition(r) => format!(
                "condition {} in state {} longer than {}",
                r.type_,
                r.status,
                fmt_duration(r.timeout)
            ),
        }
    }
}

/// One health check: unhealthy now, or (when not) how long until a verdict can change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub unhealthy: Option<Unhealthy>,
    /// When a rule will be met if nothing else changes (a node condition or the startup timeout
    /// running out). `None` when unhealthy or when no deadline is running.
    pub next_check: Option<Duration>,
}

impl Check {
    fn unhealthy(u: Unhealthy) -> Self {
        Check {
            unhealthy: Some(u),
            next_check: None,
        }
    }
    fn fine(next_check: Option<Duration>) -> Self {
        Check {
            unhealthy: None,
            next_check,
        }
    }
}

/// The machines of the MHC's namespace its selector picks (an absent or empty selector picks
/// all), sorted by name, each with its node looked up by `status.nodeRef.name`.
pub fn select_targets<'a>(
    mhc: &MachineHealthCheck,
    machines: &'a [Machine],
    nodes: &'a [Node],
) -> Vec<Target<'a>> {
    let ns = mhc.metadata.namespace.as_deref();
    let mut out: Vec<Target<'a>> = machines
        .iter()
        .filter(|m| ns.is_none() || m.metadata.namespace.as_deref() == ns)
        .filter(|m| selects(mhc, m))
        .map(|m| Target {
            machine: m,
            node: node_of(m, nodes),
        })
        .collect();
    out.sort_by(|a, b| a.machine.metadata.name.cmp(&b.machine.metadata.name));
    out
}

/// Whether the MHC's selector picks this machine (an absent selector picks all).
pub fn selects(mhc: &MachineHealthCheck, m: &Machine) -> bool {
    let labels = m.metadata.labels.clone().unwrap_or_default();
    mhc.spec
        .selector
        .as_ref()
        .is_none_or(|s| selector::matches(s, &labels))
}

/// The machine's node, by `status.nodeRef.name`.
pub fn node_of<'a>(m: &Machine, nodes: &'a [Node]) -> NodeState<'a> {
    let Some(name) = node_ref_name(m) else {
        return NodeState::NoRef;
    };
    nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name))
        .map_or(NodeState::Missing, NodeState::Found)
}

pub(crate) fn node_ref_name(m: &Machine) -> Option<&str> {
    m.status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .and_then(|r| r.name.as_deref())
        .filter(|n| !n.is_empty())
}

/// When the startup clock started: the later of the machine's creation and `InstanceExists`
/// turning True (the VM exists: provisioned). `None` when neither is known.
pub fn startup_clock(m: &Machine) -> Option<Time> {
    let created = m.metadata.creation_timestamp.clone();
    let provisioned = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| find_capi(c, cond::INSTANCE_EXISTS))
        .filter(|c| c.status == STATUS_TRUE)
        .map(|c| c.last_transition_time.clone());
    match (created, provisioned) {
        (Some(c), Some(p)) => Some(if p.0 > c.0 { p } else { c }),
        (c, p) => c.or(p),
    }
}

/// MAO's `needsRemediation`, in its order. `startup_timeout` zero disables the startup rule.
pub fn needs_remediation(
    t: &Target<'_>,
    rules: &[Rule],
    startup_timeout: Duration,
    now: &Time,
) -> Check {
    if phase_of(t.machine) == Some(phase::FAILED) {
        return Check::unhealthy(Unhealthy::Failed);
    }
    let node = match t.node {
        NodeState::NoRef => {
            if startup_timeout.is_zero() {
                return Check::fine(None);
            }
            let Some(start) = startup_clock(t.machine) else {
                // Nothing says when it started: give it a whole timeout from now (upstream).
                return Check::fine(Some(startup_timeout));
            };
            return match remaining(&start, startup_timeout, now) {
                None => Check::unhealthy(Unhealthy::NodeStartupTimeout(startup_timeout)),
                Some(left) => Check::fine(Some(left)),
            };
        }
        NodeState::Missing => {
            let name = node_ref_name(t.machine).unwrap_or_default().to_string();
            return Check::unhealthy(Unhealthy::NodeDeleted(name));
        }
        NodeState::Found(n) => n,
    };
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let mut next: Option<Duration> = None;
    for rule in rules {
        let Some(c) = conditions.iter().find(|c| c.type_ == rule.type_) else {
            continue;
        };
        if c.status != rule.status {
            continue;
        }
        let since = c
            .last_transition_time
            .clone()
            .unwrap_or(Time(jiff::Timestamp::UNIX_EPOCH));
        match remaining(&since, rule.timeout, now) {
            None => return Check::unhealthy(Unhealthy::Condition(rule.clone())),
            Some(left) => next = Some(next.map_or(left, |n| n.min(left))),
        }
    }
    Check::fine(next)
}

/// Time left until `since + timeout`; `None` once it is reached.
pub fn remaining(since: &Time, timeout: Duration, now: &Time) -> Option<Duration> {
    let deadline = since.0.as_nanosecond() + timeout.as_nanos() as i128;
    let left = deadline - now.0.as_nanosecond();
    (left > 0).then(|| Duration::from_nanos(u64::try_from(left).unwrap_or(u64::MAX)))
}

pub(crate) fn phase_of(m: &Machine) -> Option<&str> {
    m.status.as_ref().and_then(|s| s.phase.as_deref())
}

pub(crate) fn is_deleting(m: &Machine) -> bool {
    m.metadata.deletion_timestamp.is_some()
}

pub(crate) fn has_external_annotation(m: &Machine) -> bool {
    m.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(EXTERNAL_REMEDIATION_ANNOTATION))
}

/// Whether the node's `Ready` condition is True.
pub(crate) fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == STATUS_TRUE)
}

/// MAO's `healthCheckTargets`: which targets are healthy, which need remediation, and the
/// pending deadlines. Indexes into `targets`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetsHealth {
    pub checks: Vec<Check>,
    pub healthy: Vec<usize>,
    /// Healthy by the rules alone, external remediation aside (its request can be deleted).
    pub passing: Vec<usize>,
    pub need_remediation: Vec<usize>,
    pub next_checks: Vec<Duration>,
}

/// Checks every target. Healthy = not deleting, has a node, nothing pending, no external
/// remediation under way (the annotation, or — fixing MAO #902's gap for templates — an
/// outstanding remediation request): "not started" and "about to fail" machines count against
/// `maxUnhealthy`, as upstream.
pub fn health_check_targets(
    targets: &[Target<'_>],
    rules: &[Rule],
    startup_timeout: Duration,
    has_request: &dyn Fn(&Machine) -> bool,
    now: &Time,
) -> TargetsHealth {
    let mut out = TargetsHealth::default();
    for (i, t) in targets.iter().enumerate() {
        let check = needs_remediation(t, rules, startup_timeout, now);
        if check.unhealthy.is_some() {
            out.need_remediation.push(i);
        } else if let Some(next) = check.next_check {
            out.next_checks.push(next);
        } else if !is_deleting(t.machine) && !matches!(t.node, NodeState::NoRef) {
            out.passing.push(i);
            if !has_external_annotation(t.machine) && !has_request(t.machine) {
                out.healthy.push(i);
            }
        }
        out.checks.push(check);
    }
    out
}

/// A wait, rounded up to whole seconds, as Go prints it.
pub fn fmt_wait(d: Duration) -> String {
    fmt_duration(Duration::from_secs(
        d.as_secs() + u64::from(d.subsec_nanos() > 0),
    ))
}

/// A duration as Go prints the common cases (`5m0s`, `300ms`, `1h0m0s`).
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    if ns < 1_000_000_000 {
        return if ns.is_multiple_of(1_000_000) {
            format!("{}ms", ns / 1_000_000)
        } else {
            format!("{ns}ns")
        };
    }
    let secs = d.as_secs();
    let frac = d.subsec_nanos();
    let s = if frac == 0 {
        format!("{}s", secs % 60)
    } else {
        let f = format!("{:09}", frac);
        format!("{}.{}s", secs % 60, f.trim_end_matches('0'))
    };
    match (secs / 3600, (secs / 60) % 60) {
        (0, 0) => s,
        (0, m) => format!("{m}m{s}"),
        (h, m) => format!("{h}h{m}m{s}"),
    }
}
