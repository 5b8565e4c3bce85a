//! The MachineHealthCheck controller (`run`) against the fake API server: an unhealthy machine
//! owned by a controller is deleted, status and metrics say what was seen; past maxUnhealthy
//! nothing is deleted and the check reports it is short-circuited.
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "controller_support/harness.rs"]
mod harness;

use std::time::Duration;

use apiserver::FakeApiServer;
use harness::*;
use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use vsphere_provider::api::Machine;
use vsphere_provider::api::machine_health_check::MachineHealthCheck;

const NS: &str = "openshift-machine-api";

fn mhc() -> MachineHealthCheck {
    serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineHealthCheck",
        "metadata": {"name": "workers", "namespace": NS},
        "spec": {
            "selector": {"matchLabels": {"role": "worker"}},
            "unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "300s"}],
            "maxUnhealthy": 1
        }
    }))
    .unwrap()
}

/// A worker machine owned by a MachineSet, linked to node `name`; not a vSphere machine, so
/// only the health check acts on it.
fn machine(name: &str) -> Machine {
    serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {
            "name": name, "namespace": NS, "labels": {"role": "worker"},
            "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                                 "name": "workers", "uid": "ms-1", "controller": true}]
        },
        "spec": {},
        "status": {"phase": "Running", "nodeRef": {"kind": "Node", "name": name}}
    }))
    .unwrap()
}

fn node(name: &str, ready: bool) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                                   "lastTransitionTime": "2020-01-01T00:00:00Z"}]}
    }))
    .unwrap()
}

fn workers(api: &FakeApiServer) -> Vec<String> {
    api.list::<Machine>()
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect()
}

#[tokio::test]
async fn an_unhealthy_worker_is_deleted_and_too_many_short_circuit() {
    let api = FakeApiServer::new();
    for (n, ready) in [("w-0", false), ("w-1", true), ("w-2", true)] {
        api.put(&machine(n));
        api.put(&node(n, ready));
    }
    api.put(&mhc());
    let running = Running::start(shared(&api, None));
    api.wait_for("w-0 remediated", Duration::from_secs(30), |api| {
        (!workers(api).contains(&"w-0".to_string())).then_some(())
    })
    .await;
    assert_eq!(workers(&api).len(), 2, "only the unhealthy one");
    let h = api
        .wait_for("status", Duration::from_secs(30), |api| {
            api.get::<MachineHealthCheck>(Some(NS), "workers")
                .filter(|h| h.status.as_ref().and_then(|s| s.expected_machines) == Some(2))
        })
        .await;
    assert_eq!(h.status.unwrap().current_healthy, Some(2));

    // Both remaining go NotReady: past maxUnhealthy 1, nothing is deleted.
    api.put(&node("w-1", false));
    api.put(&node("w-2", false));
    api.wait_for("short-circuited", Duration::from_secs(30), |_| {
        (running
            .metric(r#"vsphere_provider_mhc_short_circuited{mhc="openshift-machine-api/workers"}"#)
            == 1.0)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        workers(&api).len(),
        2,
        "nothing deleted while short-circuited"
    );
    assert_eq!(
        running.metric(
            r#"vsphere_provider_mhc_unhealthy_machines{mhc="openshift-machine-api/workers"}"#
        ),
        2.0
    );
    running.stop().await;
}

/// Events the controller posted, as (reason, regarding name).
fn events(api: &FakeApiServer) -> Vec<(String, String)> {
    api.requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.contains("/events"))
        .map(|r| {
            (
                r.body["reason"].as_str().unwrap_or_default().to_string(),
                r.body["regarding"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// A deletion the API server refuses (500) is reported as a deletion failure on the machine,
/// never as a remediation done, and retried on the check's backoff until it goes through.
#[tokio::test]
async fn a_failed_remediation_says_what_failed_and_is_retried() {
    let api = FakeApiServer::new();
    for (n, ready) in [("w-0", false), ("w-1", true), ("w-2", true)] {
        api.put(&machine(n));
        api.put(&node(n, ready));
    }
    api.inject("DELETE", "/machines/w-0", 500, 1);
    api.put(&mhc());
    let running = Running::start(shared(&api, None));
    let failed = api
        .wait_for("deletion failure event", Duration::from_secs(30), |api| {
            events(api)
                .into_iter()
                .find(|(reason, _)| reason == "MachineDeletionFailed")
        })
        .await;
    assert_eq!(failed.1, "w-0", "on the machine");
    assert!(
        !events(&api).iter().any(|(r, _)| r == "MachineRemediated"),
        "nothing remediated yet: {:?}",
        events(&api)
    );
    // The refusal is the reconcile's error, typed, and its retry deletes the machine.
    api.wait_for("w-0 remediated", Duration::from_secs(30), |api| {
        (!workers(api).contains(&"w-0".to_string())).then_some(())
    })
    .await;
    assert!(
        running.metric(r#"vsphere_provider_reconcile_errors_total{controller="machinehealthcheck",category="kubernetes_unavailable"}"#) >= 1.0
    );
    assert!(
        events(&api)
            .iter()
            .any(|(r, m)| r == "MachineRemediated" && m == "w-0")
    );
    running.stop().await;
}

/// A remediation request the API server refuses marks the check's
/// `ExternalRemediationRequestAvailable` False with the cause and is reported as a request
/// failure (not a deletion failure); the retry creates it.
#[tokio::test]
async fn a_request_that_cannot_be_created_is_reported_on_the_check() {
    let api = FakeApiServer::new();
    for (n, ready) in [("w-0", false), ("w-1", true), ("w-2", true)] {
        api.put(&machine(n));
        api.put(&node(n, ready));
    }
    api.put_at(
        "infrastructure.cluster.x-k8s.io/v1beta1/metal3remediationtemplates",
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "Metal3RemediationTemplate",
            "metadata": {"name": "reboot", "namespace": NS},
            "spec": {"template": {"spec": {"strategy": {"type": "Reboot"}}}}
        }),
    );
    let mut check = mhc();
    check.spec.remediation_template = Some(k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("infrastructure.cluster.x-k8s.io/v1beta1".into()),
        kind: Some("Metal3RemediationTemplate".into()),
        name: Some("reboot".into()),
        namespace: Some(NS.into()),
        ..Default::default()
    });
    api.inject("POST", "/metal3remediations", 500, 1);
    api.put(&check);
    let running = Running::start(shared(&api, None));
    let cond = api
        .wait_for("request condition", Duration::from_secs(30), |api| {
            let h = api.get::<MachineHealthCheck>(Some(NS), "workers")?;
            h.status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "ExternalRemediationRequestAvailable" && c.status == "False")
        })
        .await;
    assert_eq!(
        cond.reason.as_deref(),
        Some("ExternalRemediationRequestCreationFailed")
    );
    assert!(
        cond.message.unwrap_or_default().contains("500"),
        "the cause is named"
    );
    let reasons: Vec<String> = events(&api).into_iter().map(|(r, _)| r).collect();
    assert!(
        reasons.contains(&"ExternalRemediationRequestCreationFailed".to_string()),
        "{reasons:?}"
    );
    assert!(
        !reasons.contains(&"MachineDeletionFailed".to_string()),
        "{reasons:?}"
    );
    api.wait_for("request created", Duration::from_secs(30), |api| {
        api.requests()
            .iter()
            .any(|r| r.method == "POST" && r.path.contains("/metal3remediations") && r.status < 300)
            .then_some(())
    })
    .await;
    assert!(
        workers(&api).contains(&"w-0".to_string()),
        "external: not deleted"
    );
    running.stop().await;
}

/// A deleted check's gauges go with it (they would keep an alert firing otherwise).
#[tokio::test]
async fn a_deleted_check_stops_reporting() {
    let api = FakeApiServer::new();
    for (n, ready) in [("w-0", false), ("w-1", false), ("w-2", true)] {
        api.put(&machine(n));
        api.put(&node(n, ready));
    }
    api.put(&mhc());
    let running = Running::start(shared(&api, None));
    let series = r#"vsphere_provider_mhc_short_circuited{mhc="openshift-machine-api/workers"}"#;
    api.wait_for("short-circuited", Duration::from_secs(30), |_| {
        (running.metric(series) == 1.0).then_some(())
    })
    .await;
    api.delete::<MachineHealthCheck>(Some(NS), "workers");
    api.wait_for("series gone", Duration::from_secs(30), |_| {
        (!running
            .metrics_text()
            .contains("mhc=\"openshift-machine-api/workers\""))
        .then_some(())
    })
    .await;
    running.stop().await;
}
