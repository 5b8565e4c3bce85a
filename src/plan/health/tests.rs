//! Tables (MAO's, ported with their upstream names), the upstream bugs we fix, the control
//! plane gate, and properties.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proptest::prelude::*;
use serde_json::json;

use super::remediation::{BackoffEntry, backoff_delay};
use super::status::{condition as cond, event as ev};
use super::targets::{NodeState, health_check_targets, needs_remediation};
use super::*;
use crate::api::conditions::{CapiCondition, STATUS_TRUE, find_capi};
use crate::api::machine::MachineStatus;
use crate::api::machine_health_check::{
    MachineHealthCheckSpec, REMEDIATION_STRATEGY_ANNOTATION, UnhealthyCondition,
};

const NS: &str = "openshift-machine-api";
const T0: i64 = 1_800_000_000;
const MIN10: Duration = Duration::from_secs(600);

fn at(secs: i64) -> Time {
    Time(jiff::Timestamp::from_second(secs).unwrap())
}
fn now() -> Time {
    at(T0)
}
/// `now − secs`.
fn ago(secs: i64) -> Time {
    at(T0 - secs)
}

fn ready_rules() -> Vec<UnhealthyCondition> {
    ["Unknown", "False"]
        .iter()
        .map(|s| UnhealthyCondition {
            type_: "Ready".into(),
            status: s.to_string(),
            timeout: "300s".into(),
        })
        .collect()
}

fn mhc(selector: &[(&str, &str)]) -> MachineHealthCheck {
    let mut m = MachineHealthCheck::new(
        "test",
        MachineHealthCheckSpec {
            selector: Some(LabelSelector {
                match_labels: Some(
                    selector
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..LabelSelector::default()
            }),
            unhealthy_conditions: Some(ready_rules()),
            ..MachineHealthCheckSpec::default()
        },
    );
    m.metadata.namespace = Some(NS.into());
    m
}

fn owner(kind: &str, name: &str) -> OwnerReference {
    OwnerReference {
        api_version: "machine.openshift.io/v1beta1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// A machine labelled `foo: bar`, owned by a MachineSet, running on node `node-<name>`,
/// provisioned an hour ago.
fn machine(name: &str) -> Machine {
    let mut m = Machine::new(name, Default::default());
    m.metadata.namespace = Some(NS.into());
    m.metadata.labels = Some(BTreeMap::from([("foo".to_string(), "bar".to_string())]));
    m.metadata.owner_references = Some(vec![owner("MachineSet", "workers")]);
    m.metadata.creation_timestamp = Some(ago(3600));
    m.status = Some(MachineStatus {
        node_ref: Some(ObjectReference {
            kind: Some("Node".into()),
            name: Some(format!("node-{name}")),
            ..ObjectReference::default()
        }),
        phase: Some(phase::RUNNING.into()),
        conditions: Some(vec![instance_exists(ago(3600))]),
        ..MachineStatus::default()
    });
    m
}

fn instance_exists(t: Time) -> CapiCondition {
    CapiCondition {
        type_: "InstanceExists".into(),
        status: STATUS_TRUE.into(),
        severity: None,
        last_transition_time: t,
        reason: None,
        message: None,
    }
}

fn no_node(mut m: Machine) -> Machine {
    let st = m.status.as_mut().unwrap();
    st.node_ref = None;
    st.phase = Some(phase::PROVISIONED.into());
    m
}

fn control_plane(name: &str) -> Machine {
    let mut m = machine(name);
    m.metadata.labels = Some(BTreeMap::from([(
        "machine.openshift.io/cluster-api-machine-role".to_string(),
        "master".to_string(),
    )]));
    m.metadata.owner_references = Some(vec![owner("ControlPlaneMachineSet", "cluster")]);
    m
}

fn node(name: &str, ready: &str, since: Time) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: ready.into(),
                last_transition_time: Some(since),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

fn rules(m: &MachineHealthCheck) -> Vec<Rule> {
    m.spec
        .unhealthy_conditions
        .iter()
        .flatten()
        .map(|c| Rule {
            type_: c.type_.clone(),
            status: c.status.clone(),
            timeout: Duration::from_nanos(
                crate::api::health_values::parse_go_duration(&c.timeout).unwrap() as u64,
            ),
        })
        .collect()
}

fn no_requests() -> &'static BTreeSet<String> {
    static EMPTY: BTreeSet<String> = BTreeSet::new();
    &EMPTY
}

fn plan(m: &MachineHealthCheck, machines: &[Machine], nodes: &[Node]) -> HealthPlan {
    plan_at(m, machines, nodes, false, now())
}

fn plan_at(
    m: &MachineHealthCheck,
    machines: &[Machine],
    nodes: &[Node],
    replacing: bool,
    now: Time,
) -> HealthPlan {
    plan_health(&HealthInput {
        mhc: m,
        machines,
        nodes,
        cpms_replacement_in_progress: replacing,
        remediation_template: None,
        remediation_requests: no_requests(),
        now,
    })
}

fn plan_with(
    m: &MachineHealthCheck,
    machines: &[Machine],
    nodes: &[Node],
    template: &serde_json::Value,
    requests: &BTreeSet<String>,
) -> HealthPlan {
    plan_health(&HealthInput {
        mhc: m,
        machines,
        nodes,
        cpms_replacement_in_progress: false,
        remediation_template: Some(template),
        remediation_requests: requests,
        now: now(),
    })
}

fn deleted(p: &HealthPlan) -> Vec<&str> {
    p.remediations
        .iter()
        .filter(|r| r.action == RemediationAction::DeleteMachine)
        .map(|r| r.machine.as_str())
        .collect()
}

fn condition<'a>(p: &'a HealthPlan, type_: &str) -> Option<&'a CapiCondition> {
    find_capi(
        p.status.as_ref()?.conditions.as_deref().unwrap_or_default(),
        type_,
    )
}

fn reasons(p: &HealthPlan) -> Vec<&'static str> {
    p.events.iter().map(|e| e.reason).collect()
}

// ----------------------------------------------------------------------------------------------
// MAO `TestNeedsRemediation`. Upstream's startup cases set `status.lastUpdated`; ours read the
// provisioning time (the bug fix), so those cases set `InstanceExists` at that time instead.

#[test]
fn test_needs_remediation() {
    let m = mhc(&[("foo", "bar")]);
    let r = rules(&m);
    let ready_node = node("node-test", "True", ago(100_000));
    let missing = machine("test");
    let mut nodeless_late = no_node(machine("machine"));
    nodeless_late.metadata.creation_timestamp = None;
    nodeless_late.status.as_mut().unwrap().conditions = Some(vec![instance_exists(ago(600 + 1))]);
    let failed = {
        let mut f = no_node(machine("machine"));
        f.status.as_mut().unwrap().phase = Some(phase::FAILED.into());
        f
    };
    let unready_400 = node("node-machine", "False", ago(400));
    let unready_200 = node("node-machine", "False", ago(200));
    let with_node = machine("machine");

    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, Target<'_>, Duration, bool, Option<Duration>)> = vec![
        (
            "healthy: does not met conditions criteria",
            Target {
                machine: &missing,
                node: NodeState::Found(&ready_node),
            },
            MIN10,
            false,
            None,
        ),
        (
            "unhealthy: node does not exist",
            Target {
                machine: &missing,
                node: NodeState::Missing,
            },
            MIN10,
            true,
            None,
        ),
        (
            "unhealthy: nodeRef nil longer than timeout",
            Target {
                machine: &nodeless_late,
                node: NodeState::NoRef,
            },
            MIN10,
            true,
            None,
        ),
        (
            "unhealthy: nodeRef nil, timeout disabled",
            Target {
                machine: &nodeless_late,
                node: NodeState::NoRef,
            },
            Duration::ZERO,
            false,
            None,
        ),
        (
            "unhealthy: meet conditions criteria",
            Target {
                machine: &with_node,
                node: NodeState::Found(&unready_400),
            },
            MIN10,
            true,
            None,
        ),
        (
            "unhealthy: machine phase failed",
            Target {
                machine: &failed,
                node: NodeState::NoRef,
            },
            MIN10,
            true,
            None,
        ),
        (
            // 300 s − 200 s: upstream checks "at least 1 min"; ours is exact.
            "healthy: meet conditions criteria but timeout",
            Target {
                machine: &with_node,
                node: NodeState::Found(&unready_200),
            },
            MIN10,
            false,
            Some(Duration::from_secs(100)),
        ),
    ];
    for (name, target, startup, want, next) in cases {
        let got = needs_remediation(&target, &r, startup, &now());
        assert_eq!(got.unhealthy.is_some(), want, "{name}: {got:?}");
        assert_eq!(got.next_check, next, "{name}");
    }
}

// MAO `TestHealthCheckTargets` (the next checks).
#[test]
fn test_health_check_targets() {
    let m = mhc(&[("foo", "bar")]);
    let r = rules(&m);
    let none = |_: &Machine| false;

    // "one healthy, one unhealthy"
    let a = machine("machine");
    let ready = node("node", "True", Time(jiff::Timestamp::UNIX_EPOCH));
    let unready = node("node", "False", ago(400));
    let targets = [
        Target {
            machine: &a,
            node: NodeState::Found(&ready),
        },
        Target {
            machine: &a,
            node: NodeState::Found(&unready),
        },
    ];
    let h = health_check_targets(&targets, &r, MIN10, &none, &now());
    assert_eq!(h.healthy, vec![0], "one healthy, one unhealthy");
    assert_eq!(h.need_remediation, vec![1], "one healthy, one unhealthy");
    assert!(h.next_checks.is_empty(), "one healthy, one unhealthy");

    // "two checkTimes": no node 9 min after provisioning; Ready=False for 200 s of 300 s.
    let mut b = no_node(machine("machine"));
    b.metadata.creation_timestamp = None;
    b.status.as_mut().unwrap().conditions = Some(vec![instance_exists(ago(600 - 60))]);
    let c = machine("machine");
    let unready = node("node", "False", ago(200));
    let targets = [
        Target {
            machine: &b,
            node: NodeState::NoRef,
        },
        Target {
            machine: &c,
            node: NodeState::Found(&unready),
        },
    ];
    let h = health_check_targets(&targets, &r, MIN10, &none, &now());
    assert!(h.healthy.is_empty(), "two checkTimes");
    assert!(h.need_remediation.is_empty(), "two checkTimes");
    assert_eq!(
        h.next_checks,
        vec![Duration::from_secs(60), Duration::from_secs(100)],
        "two checkTimes"
    );
}

// ----------------------------------------------------------------------------------------------
// The planner end to end.

#[test]
fn one_unhealthy_worker_is_deleted_and_status_counts() {
    let m = mhc(&[("foo", "bar")]);
    let machines = [machine("a"), machine("b"), machine("c")];
    let nodes = [
        node("node-a", "True", ago(5000)),
        node("node-b", "False", ago(400)),
        node("node-c", "True", ago(5000)),
    ];
    let p = plan(&m, &machines, &nodes);
    assert_eq!(deleted(&p), vec!["b"]);
    let st = p.status.as_ref().unwrap();
    assert_eq!(st.expected_machines, Some(3));
    assert_eq!(st.current_healthy, Some(2));
    // Default maxUnhealthy 100%: 3 − 1 unhealthy.
    assert_eq!(st.remediations_allowed, Some(2));
    assert_eq!(
        condition(&p, cond::REMEDIATION_ALLOWED).unwrap().status,
        STATUS_TRUE
    );
    assert_eq!(p.remediations[0].event.reason, ev::MACHINE_REMEDIATED);
    assert!(!p.short_circuited);
    assert_eq!(p.requeue, None);
    // Workers only: no control plane condition.
    assert!(condition(&p, cond::CONTROL_PLANE_REMEDIATION_ALLOWED).is_none());
}

#[test]
fn machines_of_other_namespaces_and_selectors_are_ignored() {
    let m = mhc(&[("foo", "bar")]);
    let mut other_ns = machine("x");
    other_ns.metadata.namespace = Some("elsewhere".into());
    let mut other_label = machine("y");
    other_label.metadata.labels = None;
    let p = plan(&m, &[other_ns, other_label], &[]);
    assert_eq!(p.status.as_ref().unwrap().expected_machines, Some(0));
    assert!(p.remediations.is_empty());
}

#[test]
fn empty_selector_selects_every_machine_of_the_namespace() {
    let mut m = mhc(&[]);
    m.spec.selector = None;
    let mut unlabelled = machine("a");
    unlabelled.metadata.labels = None;
    let p = plan(&m, &[unlabelled], &[node("node-a", "True", ago(9))]);
    assert_eq!(p.status.as_ref().unwrap().expected_machines, Some(1));
    assert_eq!(p.status.as_ref().unwrap().current_healthy, Some(1));
}

#[test]
fn an_mhc_selecting_nothing_reports_zero_and_does_nothing() {
    let m = mhc(&[("role", "nothing-has-this")]);
    let machines = [machine("a"), no_node(machine("b"))];
    let p = plan(&m, &machines, &[]);
    let st = p.status.as_ref().unwrap();
    assert_eq!(
        (
            st.expected_machines,
            st.current_healthy,
            st.remediations_allowed
        ),
        (Some(0), Some(0), Some(0))
    );
    assert!(p.remediations.is_empty() && p.delete_requests.is_empty());
    assert!(p.events.is_empty());
    assert_eq!(p.requeue, None);
    assert!(!p.short_circuited);
}

#[test]
fn paused_mhc_does_nothing() {
    let mut m = mhc(&[("foo", "bar")]);
    m.metadata.annotations = Some(BTreeMap::from([(
        "cluster.x-k8s.io/paused".to_string(),
        String::new(),
    )]));
    with_backoff(&mut m, "MachineSet/workers", 1, ago(99_999));
    let p = plan(&m, &[machine("a")], &[node("node-a", "False", ago(4000))]);
    assert!(p.paused);
    assert_eq!(
        p.backoff_annotation.as_ref(),
        m.metadata
            .annotations
            .as_ref()
            .unwrap()
            .get(BACKOFF_ANNOTATION)
    );
    assert!(p.status.is_none() && p.remediations.is_empty() && p.events.is_empty());
    assert_eq!(p.requeue, None);
}

#[test]
fn no_unhealthy_conditions_judges_by_phase_and_startup_only() {
    let mut m = mhc(&[("foo", "bar")]);
    m.spec.unhealthy_conditions = None;
    let mut failed = machine("f");
    failed.status.as_mut().unwrap().phase = Some(phase::FAILED.into());
    let machines = [machine("a"), failed, no_node(machine("late"))];
    // Node a has been NotReady for hours: no condition rule, so it stays healthy.
    let nodes = [node("node-a", "False", ago(9000))];
    let p = plan(&m, &machines, &nodes);
    assert_eq!(deleted(&p), vec!["f", "late"]);
    assert_eq!(p.status.as_ref().unwrap().current_healthy, Some(1));
}

#[test]
fn no_controller_owner_is_skipped_with_an_event() {
    let m = mhc(&[("foo", "bar")]);
    let mut a = machine("a");
    a.metadata.owner_references = Some(vec![OwnerReference {
        controller: None,
        ..owner("MachineSet", "w")
    }]);
    let p = plan(&m, &[a], &[node("node-a", "False", ago(400))]);
    assert!(p.remediations.is_empty());
    assert_eq!(reasons(&p), vec![ev::SKIPPED_NO_CONTROLLER]);
    assert_eq!(p.targets[0].outcome, Outcome::SkippedNoController);
}

#[test]
fn deleting_machine_is_not_deleted_again() {
    let m = mhc(&[("foo", "bar")]);
    let mut a = machine("a");
    a.metadata.deletion_timestamp = Some(ago(10));
    let p = plan(&m, &[a], &[node("node-a", "False", ago(400))]);
    assert!(p.remediations.is_empty());
    assert_eq!(p.targets[0].outcome, Outcome::Underway);
    assert!(!p.targets[0].healthy);
}

#[test]
fn external_baremetal_strategy_annotates_unless_failed() {
    let mut m = mhc(&[("foo", "bar")]);
    m.metadata.annotations = Some(BTreeMap::from([(
        REMEDIATION_STRATEGY_ANNOTATION.to_string(),
        "external-baremetal".to_string(),
    )]));
    let mut failed = machine("f");
    failed.status.as_mut().unwrap().phase = Some(phase::FAILED.into());
    let mut done = machine("d");
    done.metadata.annotations = Some(BTreeMap::from([(
        targets::EXTERNAL_REMEDIATION_ANNOTATION.to_string(),
        String::new(),
    )]));
    let machines = [machine("a"), done, failed];
    let nodes = [
        node("node-a", "False", ago(400)),
        node("node-d", "False", ago(400)),
        node("node-f", "True", ago(400)),
    ];
    let p = plan(&m, &machines, &nodes);
    let got: Vec<_> = p
        .remediations
        .iter()
        .map(|r| (r.machine.as_str(), r.action.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a", RemediationAction::AnnotateExternal),
            ("f", RemediationAction::DeleteMachine)
        ]
    );
    assert_eq!(p.targets[1].outcome, Outcome::Underway);
}

fn template_mhc() -> MachineHealthCheck {
    let mut m = mhc(&[("foo", "bar")]);
    m.spec.remediation_template = Some(ObjectReference {
        api_version: Some("remediation.medik8s.io/v1alpha1".into()),
        kind: Some("SelfNodeRemediationTemplate".into()),
        name: Some("snr".into()),
        namespace: Some(NS.into()),
        ..ObjectReference::default()
    });
    m
}

#[test]
fn remediation_template_creates_the_request_as_upstream() {
    let m = template_mhc();
    let template = json!({
        "apiVersion": "remediation.medik8s.io/v1alpha1",
        "kind": "SelfNodeRemediationTemplate",
        "metadata": {"name": "snr", "namespace": NS, "uid": "t-uid"},
        "spec": {"template": {"spec": {"remediationStrategy": "Automatic"}}}
    });
    let mut a = machine("a");
    a.metadata.uid = Some("machine-uid".into());
    let machines = [a, machine("b")];
    let nodes = [
        node("node-a", "False", ago(400)),
        node("node-b", "True", ago(400)),
    ];
    let requests = BTreeSet::from(["b".to_string()]);
    let p = plan_with(&m, &machines, &nodes, &template, &requests);
    let RemediationAction::CreateRequest(obj) = &p.remediations[0].action else {
        panic!("{:?}", p.remediations)
    };
    assert_eq!(
        obj,
        &json!({
            "apiVersion": "remediation.medik8s.io/v1alpha1",
            "kind": "SelfNodeRemediation",
            "metadata": {
                "name": "a",
                "namespace": NS,
                "annotations": {
                    "machine.openshift.io/cloned-from-name": "snr",
                    "machine.openshift.io/cloned-from-groupkind": "SelfNodeRemediationTemplate.remediation.medik8s.io"
                },
                "ownerReferences": [{
                    "apiVersion": "machine.openshift.io/v1beta1",
                    "kind": "Machine",
                    "name": "a",
                    "uid": "machine-uid"
                }]
            },
            "spec": {"remediationStrategy": "Automatic"}
        })
    );
    // b passes, but its request still exists: it is not counted healthy yet (MAO #902's gap
    // closed) and the request is deleted (MAO `cleanEMR`).
    assert_eq!(p.status.as_ref().unwrap().current_healthy, Some(0));
    assert_eq!(
        p.delete_requests,
        vec![RequestRef {
            api_version: "remediation.medik8s.io/v1alpha1".into(),
            kind: "SelfNodeRemediation".into(),
            name: "b".into()
        }]
    );
    assert_eq!(
        condition(&p, cond::EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE)
            .unwrap()
            .status,
        STATUS_TRUE
    );
}

/// A template MHC with `maxUnhealthy: 1` and a minimal template object.
fn template_mhc_max_one() -> (MachineHealthCheck, serde_json::Value) {
    let mut m = template_mhc();
    m.spec.max_unhealthy = Some(IntOrString::Int(1));
    let template = json!({"kind": "SelfNodeRemediationTemplate", "spec": {"template": {}}});
    (m, template)
}

#[test]
fn requests_are_cleaned_up_even_when_short_circuited() {
    // Upstream skips the cleanup when short-circuited; as outstanding requests count as
    // unhealthy, that would never recover. a and b passed again, c is unhealthy.
    let (m, template) = template_mhc_max_one();
    let machines = [machine("a"), machine("b"), machine("c")];
    let nodes = [
        node("node-a", "True", ago(10)),
        node("node-b", "True", ago(10)),
        node("node-c", "False", ago(400)),
    ];
    let requests = BTreeSet::from(["a".to_string(), "b".to_string()]);
    let input = HealthInput {
        mhc: &m,
        machines: &machines,
        nodes: &nodes,
        cpms_replacement_in_progress: false,
        remediation_template: Some(&template),
        remediation_requests: &requests,
        now: now(),
    };
    let p = plan_health(&input);
    assert!(p.short_circuited);
    let names: Vec<_> = p.delete_requests.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, vec!["a", "b"]);
    // Next pass, with the requests gone: c is remediated.
    let none = BTreeSet::new();
    let p = plan_health(&HealthInput {
        remediation_requests: &none,
        ..input
    });
    assert!(!p.short_circuited);
    assert_eq!(p.remediations.len(), 1);
}

#[test]
fn missing_template_says_so_and_retries() {
    let m = template_mhc();
    let p = plan(&m, &[machine("a")], &[node("node-a", "False", ago(400))]);
    assert!(p.remediations.is_empty());
    let c = condition(&p, cond::EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE).unwrap();
    assert_eq!(
        c.reason.as_deref(),
        Some(cond::EXTERNAL_REMEDIATION_TEMPLATE_NOT_FOUND)
    );
    assert_eq!(p.requeue, Some(TEMPLATE_RETRY));
}

#[test]
fn invalid_spec_values_block_remediation_with_a_reason() {
    let mut m = mhc(&[("foo", "bar")]);
    m.spec.max_unhealthy = Some(IntOrString::String("foo%50".into()));
    let p = plan(&m, &[machine("a")], &[node("node-a", "False", ago(400))]);
    assert!(p.short_circuited && p.remediations.is_empty());
    let c = condition(&p, cond::REMEDIATION_ALLOWED).unwrap();
    assert_eq!(c.reason.as_deref(), Some(cond::INVALID_CONFIGURATION));
    assert_eq!(p.status.as_ref().unwrap().remediations_allowed, Some(0));

    let mut m = mhc(&[("foo", "bar")]);
    m.spec.node_startup_timeout = Some("ten minutes".into());
    let p = plan(&m, &[machine("a")], &[node("node-a", "False", ago(400))]);
    assert!(p.short_circuited && p.remediations.is_empty());
    assert!(
        condition(&p, cond::REMEDIATION_ALLOWED)
            .unwrap()
            .message
            .as_deref()
            .unwrap()
            .contains("nodeStartupTimeout")
    );
}

// ----------------------------------------------------------------------------------------------
// Upstream bugs, fixed.

/// Upstream requeues after 1 ms while short-circuited, a hot loop. Ours looks again when a
/// verdict can change (here: b's condition reaches its timeout in 100 s), else waits for events.
#[test]
fn short_circuit_requeues_when_something_can_change_not_every_millisecond() {
    let mut m = mhc(&[("foo", "bar")]);
    m.spec.max_unhealthy = Some(IntOrString::Int(1));
    let machines = [machine("a"), machine("b"), machine("c")];
    let nodes = [
        node("node-a", "False", ago(400)),
        node("node-b", "False", ago(200)),
        node("node-c", "False", ago(500)),
    ];
    let p = plan(&m, &machines, &nodes);
    assert!(p.short_circuited);
    assert!(p.remediations.is_empty());
    assert_eq!(p.requeue, Some(Duration::from_secs(100)));
    let c = condition(&p, cond::REMEDIATION_ALLOWED).unwrap();
    assert_eq!(c.reason.as_deref(), Some(cond::TOO_MANY_UNHEALTHY));
    assert_eq!(c.severity.as_deref(), Some("Warning"));
    assert_eq!(
        c.message.as_deref(),
        Some(
            "Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy (total: 3, unhealthy: 3, maxUnhealthy: 1)"
        )
    );
    assert!(reasons(&p).contains(&ev::REMEDIATION_RESTRICTED));
    assert_eq!(p.status.as_ref().unwrap().remediations_allowed, Some(0));

    // Nothing pending at all: no timed requeue (watches bring it back).
    let nodes = [
        node("node-a", "False", ago(400)),
        node("node-b", "False", ago(400)),
        node("node-c", "False", ago(500)),
    ];
    assert_eq!(plan(&m, &machines, &nodes).requeue, None);
}

/// Upstream starts the startup clock at `status.lastUpdated`, which every status write moves:
/// a machine whose status keeps changing never times out. Ours starts at provisioning.
#[test]
fn startup_clock_starts_at_provisioning_not_last_update() {
    let m = mhc(&[("foo", "bar")]);
    let mut a = no_node(machine("a"));
    a.metadata.creation_timestamp = Some(ago(3600));
    a.status.as_mut().unwrap().conditions = Some(vec![instance_exists(ago(700))]);
    a.status.as_mut().unwrap().last_updated = Some(ago(5)); // a fresh status write
    let p = plan(&m, &[a.clone()], &[]);
    assert_eq!(deleted(&p), vec!["a"]);
    assert_eq!(p.remediations[0].why, Unhealthy::NodeStartupTimeout(MIN10));

    // Provisioned 500 s ago: 100 s to go, exactly, whatever lastUpdated says.
    a.status.as_mut().unwrap().conditions = Some(vec![instance_exists(ago(500))]);
    let p = plan(&m, &[a.clone()], &[]);
    assert!(p.remediations.is_empty());
    assert_eq!(p.requeue, Some(Duration::from_secs(100)));

    // Not provisioned yet: the clock runs from creation.
    a.status.as_mut().unwrap().conditions = None;
    a.metadata.creation_timestamp = Some(ago(120));
    assert_eq!(
        plan(&m, &[a.clone()], &[]).requeue,
        Some(Duration::from_secs(480))
    );

    // "0" disables the startup check: never remediated, never requeued, not healthy.
    let mut off = mhc(&[("foo", "bar")]);
    off.spec.node_startup_timeout = Some("0".into());
    a.metadata.creation_timestamp = Some(ago(90_000));
    let p = plan(&off, &[a], &[]);
    assert!(p.remediations.is_empty());
    assert_eq!(p.requeue, None);
    assert_eq!(p.status.as_ref().unwrap().current_healthy, Some(0));
}

fn with_backoff(m: &mut MachineHealthCheck, key: &str, count: u32, last: Time) {
    let b = Backoff(BTreeMap::from([(
        key.to_string(),
        BackoffEntry { count, last },
    )]));
    m.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(BACKOFF_ANNOTATION.into(), b.to_annotation().unwrap());
}

/// enhancements#673: a replacement that fails right away is not deleted at once (upstream: a
/// delete/create hot loop); the wait doubles with each remediation in a row.
#[test]
fn failing_replacement_backs_off_exponentially() {
    let m = mhc(&[("foo", "bar")]);
    let failed = |name: &str, created: Time| {
        let mut f = no_node(machine(name));
        f.metadata.creation_timestamp = Some(created);
        f.status.as_mut().unwrap().phase = Some(phase::FAILED.into());
        f
    };

    // First failure: deleted at once, and recorded.
    let p = plan(&m, &[failed("w-1", ago(30))], &[]);
    assert_eq!(deleted(&p), vec!["w-1"]);
    let b: Backoff = serde_json::from_str(p.backoff_annotation.as_deref().unwrap()).unwrap();
    assert_eq!(b.0["MachineSet/workers"].count, 1);
    assert_eq!(b.0["MachineSet/workers"].last, now());

    // Its replacement fails 10 s later: it waits the rest of 1 min.
    let mut m1 = m.clone();
    with_backoff(&mut m1, "MachineSet/workers", 1, ago(10));
    let p = plan(&m1, &[failed("w-2", ago(5))], &[]);
    assert!(p.remediations.is_empty());
    assert_eq!(
        p.targets[0].outcome,
        Outcome::BackingOff(Duration::from_secs(50))
    );
    assert_eq!(p.requeue, Some(Duration::from_secs(50)));
    assert!(reasons(&p).contains(&ev::REMEDIATION_BACKOFF));
    // The state is kept as it was.
    assert_eq!(
        p.backoff_annotation,
        m1.metadata
            .annotations
            .as_ref()
            .unwrap()
            .get(BACKOFF_ANNOTATION)
            .cloned()
    );

    // Once the minute is over it is deleted and the next wait doubles.
    let p = plan_at(&m1, &[failed("w-2", ago(5))], &[], false, at(T0 + 50));
    assert_eq!(deleted(&p), vec!["w-2"]);
    let b: Backoff = serde_json::from_str(p.backoff_annotation.as_deref().unwrap()).unwrap();
    assert_eq!(b.0["MachineSet/workers"].count, 2);
    assert_eq!(backoff_delay(2), Duration::from_secs(120));
    assert_eq!(backoff_delay(3), Duration::from_secs(240));
    assert_eq!(backoff_delay(30), Duration::from_secs(3600));

    // A machine that existed before the last remediation is no replacement: no wait.
    let p = plan(&m1, &[failed("old", ago(5000))], &[]);
    assert_eq!(deleted(&p), vec!["old"]);

    // Long after, the record is forgotten: the annotation goes away.
    let p = plan_at(
        &m1,
        &[machine("w-3")],
        &[node("node-w-3", "True", ago(1))],
        false,
        at(T0 + 3 * 3600),
    );
    assert_eq!(p.backoff_annotation, None);
}

/// MAO #902: machines under external remediation count as unhealthy, so `maxUnhealthy` bounds
/// external remediation too (upstream counted template-requested machines healthy).
#[test]
fn max_unhealthy_bounds_external_remediation() {
    let (m, template) = template_mhc_max_one();
    // a is under remediation (request exists, node Ready again meanwhile), b goes unhealthy.
    let machines = [machine("a"), machine("b"), machine("c")];
    let nodes = [
        node("node-a", "True", ago(10)),
        node("node-b", "False", ago(400)),
        node("node-c", "True", ago(4000)),
    ];
    let requests = BTreeSet::from(["a".to_string()]);
    let p = plan_with(&m, &machines, &nodes, &template, &requests);
    assert!(p.short_circuited);
    assert!(p.remediations.is_empty());

    // The annotation path: an annotated machine counts unhealthy as well.
    let mut m = mhc(&[("foo", "bar")]);
    m.spec.max_unhealthy = Some(IntOrString::Int(1));
    m.metadata.annotations = Some(BTreeMap::from([(
        REMEDIATION_STRATEGY_ANNOTATION.to_string(),
        "external-baremetal".to_string(),
    )]));
    let mut a = machine("a");
    a.metadata.annotations = Some(BTreeMap::from([(
        targets::EXTERNAL_REMEDIATION_ANNOTATION.to_string(),
        String::new(),
    )]));
    let p = plan(&m, &[a, machine("b"), machine("c")], &nodes);
    assert!(p.short_circuited);
    assert!(p.remediations.is_empty());
}

// ----------------------------------------------------------------------------------------------
// Control plane gate.

fn cp_mhc() -> MachineHealthCheck {
    let mut m = mhc(&[("machine.openshift.io/cluster-api-machine-role", "master")]);
    m.spec.max_unhealthy = Some(IntOrString::Int(1));
    m
}

fn cp_nodes(unready: &[&str]) -> Vec<Node> {
    ["m-0", "m-1", "m-2"]
        .iter()
        .map(|n| {
            let status = if unready.contains(n) { "False" } else { "True" };
            node(&format!("node-{n}"), status, ago(400))
        })
        .collect()
}

fn cps() -> Vec<Machine> {
    ["m-0", "m-1", "m-2"]
        .iter()
        .map(|n| control_plane(n))
        .collect()
}

#[test]
fn one_unhealthy_control_plane_machine_is_remediated() {
    let p = plan(&cp_mhc(), &cps(), &cp_nodes(&["m-1"]));
    assert_eq!(deleted(&p), vec!["m-1"]);
    assert_eq!(
        condition(&p, cond::CONTROL_PLANE_REMEDIATION_ALLOWED)
            .unwrap()
            .status,
        STATUS_TRUE
    );
}

#[test]
fn two_unhealthy_control_plane_machines_hold_both_and_say_why() {
    // maxUnhealthy 100% would allow both: the gate still holds them.
    let mut m = cp_mhc();
    m.spec.max_unhealthy = None;
    let p = plan(&m, &cps(), &cp_nodes(&["m-0", "m-2"]));
    assert!(p.remediations.is_empty());
    let c = condition(&p, cond::CONTROL_PLANE_REMEDIATION_ALLOWED).unwrap();
    assert_eq!(
        c.reason.as_deref(),
        Some(cond::CONTROL_PLANE_MACHINE_UNHEALTHY)
    );
    assert_eq!(
        c.message.as_deref(),
        Some(
            "Remediation of control plane machine m-0 held back: other control plane machines are not healthy: m-2"
        )
    );
    assert_eq!(
        reasons(&p)
            .iter()
            .filter(|r| **r == ev::CONTROL_PLANE_REMEDIATION_HELD)
            .count(),
        2
    );
    // With maxUnhealthy 1 (the documented setting) it short-circuits first.
    let p = plan(&cp_mhc(), &cps(), &cp_nodes(&["m-0", "m-2"]));
    assert!(p.short_circuited && p.remediations.is_empty());
}

#[test]
fn control_plane_remediation_waits_for_a_replacement_or_a_deleting_machine() {
    let p = plan_at(&cp_mhc(), &cps(), &cp_nodes(&["m-1"]), true, now());
    assert!(p.remediations.is_empty());
    assert_eq!(
        p.targets[1].outcome,
        Outcome::Held(Held::ReplacementInProgress)
    );

    // m-0 being deleted (an earlier remediation), its replacement m-3 joining: m-1 waits. The
    // MHC here selects m-1 only, the gate still sees every control plane machine.
    let mut m = cp_mhc();
    m.spec.max_unhealthy = None;
    m.spec.selector = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([("x".to_string(), "y".to_string())])),
        ..LabelSelector::default()
    });
    let mut machines = cps();
    machines[0].metadata.deletion_timestamp = Some(ago(60));
    machines[1]
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("x".into(), "y".into());
    let p = plan(&m, &machines, &cp_nodes(&["m-1"]));
    assert!(p.remediations.is_empty());
    assert_eq!(
        p.targets[0].outcome,
        Outcome::Held(Held::Deleting("m-0".into()))
    );
}

#[test]
fn control_plane_gate_keeps_quorum() {
    use remediation::control_plane_gate;
    let member = |name: &str, healthy: bool| ControlPlaneMember {
        name: name.into(),
        deleting: false,
        healthy,
    };
    // A single control plane machine is never remediated.
    assert_eq!(
        control_plane_gate("m-0", &[member("m-0", false)], false, None),
        Err(Held::Quorum {
            healthy: 0,
            members: 1
        })
    );
    // Three members, the others healthy: fine; only one per pass.
    let three = [
        member("m-0", false),
        member("m-1", true),
        member("m-2", true),
    ];
    assert_eq!(control_plane_gate("m-0", &three, false, None), Ok(()));
    assert_eq!(
        control_plane_gate("m-0", &three, false, Some("m-9")),
        Err(Held::OneAtATime("m-9".into()))
    );
    // Five members, one other unhealthy: held (no other unhealthy), whatever quorum says.
    let five = [
        member("m-0", false),
        member("m-1", false),
        member("m-2", true),
        member("m-3", true),
        member("m-4", true),
    ];
    assert_eq!(
        control_plane_gate("m-0", &five, false, None),
        Err(Held::Unhealthy(vec!["m-1".into()]))
    );
}

#[test]
fn control_plane_machine_without_cpms_is_still_gated_but_skipped_without_owner() {
    let mut machines = cps();
    for m in &mut machines {
        m.metadata.owner_references = None;
    }
    let p = plan(&cp_mhc(), &machines, &cp_nodes(&["m-1"]));
    assert!(p.remediations.is_empty());
    assert_eq!(p.targets[1].outcome, Outcome::SkippedNoController);
}

// ----------------------------------------------------------------------------------------------
// Properties.

/// A generated namespace: machines with random health, some control plane, some deleting.
#[derive(Clone, Debug)]
struct World {
    machines: Vec<Machine>,
    nodes: Vec<Node>,
    max_unhealthy: Option<IntOrString>,
    replacing: bool,
    select_all: bool,
    external: bool,
}

fn world() -> impl Strategy<Value = World> {
    let one = (
        any::<bool>(),              // control plane
        0u8..6, // health: 0 ok, 1 NotReady past, 2 NotReady pending, 3 no node, 4 node gone, 5 failed
        0i64..2000, // seconds since transition / provisioning
        prop::bool::weighted(0.15), // deleting
        any::<bool>(), // labelled foo=bar
    );
    (
        prop::collection::vec(one, 0..9),
        prop_oneof![
            Just(None),
            (0i32..6).prop_map(|i| Some(IntOrString::Int(i))),
            (0u8..=100).prop_map(|p| Some(IntOrString::String(format!("{p}%")))),
        ],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(specs, max_unhealthy, replacing, select_all, external)| {
            let mut machines = Vec::new();
            let mut nodes = Vec::new();
            for (i, (cp, health, secs, deleting, labelled)) in specs.into_iter().enumerate() {
                let name = format!("m-{i}");
                let mut m = if cp {
                    control_plane(&name)
                } else {
                    machine(&name)
                };
                if labelled {
                    m.metadata
                        .labels
                        .get_or_insert_with(Default::default)
                        .insert("foo".into(), "bar".into());
                } else if !cp {
                    m.metadata.labels = None;
                }
                if deleting {
                    m.metadata.deletion_timestamp = Some(ago(5));
                }
                let node_name = format!("node-{name}");
                match health {
                    0 => nodes.push(node(&node_name, "True", ago(secs))),
                    1 => nodes.push(node(&node_name, "False", ago(300 + secs))),
                    2 => nodes.push(node(&node_name, "Unknown", ago(secs % 300))),
                    3 => {
                        m = no_node(m);
                        m.status.as_mut().unwrap().conditions =
                            Some(vec![instance_exists(ago(secs))]);
                    }
                    4 => {}
                    _ => m.status.as_mut().unwrap().phase = Some(phase::FAILED.into()),
                }
                machines.push(m);
            }
            World {
                machines,
                nodes,
                max_unhealthy,
                replacing,
                select_all,
                external,
            }
        })
}

fn world_mhc(w: &World) -> MachineHealthCheck {
    let mut m = mhc(&[("foo", "bar")]);
    if w.select_all {
        m.spec.selector = None;
    }
    m.spec.max_unhealthy = w.max_unhealthy.clone();
    if w.external {
        m.metadata.annotations = Some(BTreeMap::from([(
            REMEDIATION_STRATEGY_ANNOTATION.to_string(),
            "external-baremetal".to_string(),
        )]));
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn never_more_remediations_than_max_unhealthy_allows(w in world()) {
        let m = world_mhc(&w);
        let p = plan_at(&m, &w.machines, &w.nodes, w.replacing, now());
        let st = p.status.clone().unwrap();
        let expected = st.expected_machines.unwrap() as u64;
        let healthy = st.current_healthy.unwrap() as u64;
        let max = max_unhealthy::get_max_unhealthy(m.spec.max_unhealthy.as_ref(), expected).unwrap();
        prop_assert!(p.remediations.len() as u64 <= max);
        if expected - healthy > max {
            prop_assert!(p.remediations.is_empty());
            prop_assert!(p.short_circuited);
        }
        prop_assert!(st.remediations_allowed.unwrap() >= 0);
        prop_assert_eq!(
            st.remediations_allowed.unwrap() as u64,
            max.saturating_sub(expected - healthy)
        );
    }

    #[test]
    fn never_two_control_plane_remediations_nor_one_during_a_replacement(w in world()) {
        let m = world_mhc(&w);
        let p = plan_at(&m, &w.machines, &w.nodes, w.replacing, now());
        let cp: Vec<&Machine> = w.machines.iter().filter(|m| is_control_plane_machine(m)).collect();
        let remediated_cp: Vec<&str> = p
            .remediations
            .iter()
            .filter(|r| cp.iter().any(|m| m.metadata.name.as_deref() == Some(&r.machine)))
            .map(|r| r.machine.as_str())
            .collect();
        prop_assert!(remediated_cp.len() <= 1, "{:?}", remediated_cp);
        if let Some(r) = remediated_cp.first() {
            prop_assert!(!w.replacing);
            // No other control plane machine is deleting.
            prop_assert!(cp.iter().all(|m| m.metadata.name.as_deref() == Some(*r)
                || m.metadata.deletion_timestamp.is_none()));
        }
    }

    #[test]
    fn requeue_is_never_shorter_than_a_second(w in world(), offset_ms in 0i64..400_000) {
        let m = world_mhc(&w);
        let now = Time(jiff::Timestamp::from_millisecond(T0 * 1000 + offset_ms).unwrap());
        let p = plan_at(&m, &w.machines, &w.nodes, w.replacing, now.clone());
        if let Some(r) = p.requeue {
            prop_assert!(r >= MIN_REQUEUE);
        }
        // Re-planning at the requeue moment with nothing else changed reaches a verdict change
        // or a later requeue, never a loop on the same instant.
        if let Some(r) = p.requeue {
            let later = Time(jiff::Timestamp::from_nanosecond(
                p_now(&now) + r.as_nanos() as i128,
            ).unwrap());
            let q = plan_at(&m, &w.machines, &w.nodes, w.replacing, later);
            if let Some(r2) = q.requeue {
                prop_assert!(r2 >= MIN_REQUEUE);
            }
            // The requeue is there because a verdict changes by then.
            prop_assert_ne!(verdicts(&p), verdicts(&q));
        }
    }

    #[test]
    fn an_mhc_selecting_nothing_does_nothing(w in world()) {
        let m = mhc(&[("selects", "nothing")]);
        let p = plan_at(&m, &w.machines, &w.nodes, w.replacing, now());
        let st = p.status.unwrap();
        prop_assert_eq!(st.expected_machines, Some(0));
        prop_assert_eq!(st.current_healthy, Some(0));
        prop_assert!(p.remediations.is_empty());
        prop_assert!(p.events.is_empty());
        prop_assert_eq!(p.requeue, None);
    }
}

#[allow(clippy::type_complexity)]
fn verdicts(
    p: &HealthPlan,
) -> Vec<(
    String,
    bool,
    Option<Unhealthy>,
    std::mem::Discriminant<Outcome>,
)> {
    p.targets
        .iter()
        .map(|t| {
            (
                t.machine.clone(),
                t.healthy,
                t.check.unhealthy.clone(),
                std::mem::discriminant(&t.outcome),
            )
        })
        .collect()
}

fn p_now(t: &Time) -> i128 {
    t.0.as_nanosecond()
}

#[test]
fn durations_print_as_go_does() {
    use targets::{fmt_duration, fmt_wait};
    assert_eq!(fmt_duration(Duration::from_secs(300)), "5m0s");
    assert_eq!(fmt_duration(Duration::from_secs(3600)), "1h0m0s");
    assert_eq!(fmt_duration(Duration::from_millis(300)), "300ms");
    assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.5s");
    assert_eq!(fmt_duration(Duration::ZERO), "0s");
    assert_eq!(fmt_wait(Duration::from_millis(59_001)), "1m0s");
}

#[test]
fn detected_unhealthy_says_when() {
    let m = mhc(&[("foo", "bar")]);
    let p = plan(&m, &[machine("a")], &[node("node-a", "False", ago(200))]);
    assert_eq!(p.events.len(), 1);
    assert_eq!(p.events[0].reason, ev::DETECTED_UNHEALTHY);
    assert_eq!(
        p.events[0].message,
        "Machine openshift-machine-api/test/a has unhealthy node node-a; remediation in 1m40s unless it recovers"
    );
    assert_eq!(p.requeue, Some(Duration::from_secs(100)));
}

/// A template in another namespace, of a kind outside the remediation groups, or whose inner
/// template would make a request of another kind is ignored: nothing is created, and the
/// template condition says which field and why.
#[test]
fn a_template_elsewhere_or_of_another_kind_is_ignored_with_a_condition() {
    let template = json!({
        "apiVersion": "remediation.medik8s.io/v1alpha1",
        "kind": "SelfNodeRemediationTemplate",
        "metadata": {"name": "snr", "namespace": NS},
        "spec": {"template": {"spec": {}}}
    });
    let machines = [machine("a")];
    let nodes = [node("node-a", "False", ago(400))];
    let none = BTreeSet::new();
    let refused = |f: &dyn Fn(&mut ObjectReference), template: &serde_json::Value| {
        let mut m = template_mhc();
        f(m.spec.remediation_template.as_mut().unwrap());
        let p = plan_with(&m, &machines, &nodes, template, &none);
        assert!(p.remediations.is_empty(), "{:?}", p.remediations);
        let c = condition(&p, cond::EXTERNAL_REMEDIATION_TEMPLATE_AVAILABLE).unwrap();
        assert_eq!(c.status, "False");
        c.message.clone().unwrap_or_default()
    };
    let msg = refused(&|t| t.namespace = Some("kube-system".into()), &template);
    assert!(
        msg.contains("spec.remediationTemplate.namespace") && msg.contains("kube-system"),
        "{msg}"
    );
    let msg = refused(
        &|t| {
            t.api_version = Some("v1".into());
            t.kind = Some("Secret".into());
        },
        &template,
    );
    assert!(msg.contains("spec.remediationTemplate.apiVersion"), "{msg}");
    let msg = refused(&|t| t.kind = Some("MachineTemplate".into()), &template);
    assert!(msg.contains("spec.remediationTemplate.kind"), "{msg}");
    let sneaky = json!({
        "apiVersion": "remediation.medik8s.io/v1alpha1",
        "kind": "SelfNodeRemediationTemplate",
        "metadata": {"name": "snr", "namespace": NS},
        "spec": {"template": {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine"}}
    });
    let msg = refused(&|_| {}, &sneaky);
    assert!(msg.contains("spec.template.kind Machine"), "{msg}");
    // Unset namespace means the check's own, as upstream.
    let mut m = template_mhc();
    m.spec.remediation_template.as_mut().unwrap().namespace = None;
    let p = plan_with(&m, &machines, &nodes, &template, &none);
    assert_eq!(p.remediations.len(), 1);
}
