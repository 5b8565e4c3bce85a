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
