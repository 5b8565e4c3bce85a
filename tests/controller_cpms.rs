//! The ControlPlaneMachineSet controller (`run`) against the fake API server and a live vcsim:
//! machines created one per zone with the set as controller owner, the uncached re-read before
//! each creation, status, and deletion releasing the machines without deleting them.
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "controller_support/harness.rs"]
mod harness;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::time::Duration;

use apiserver::FakeApiServer;
use harness::*;
use serde_json::json;
use vcsim::Vcsim;
use vsphere_provider::api::Machine;
use vsphere_provider::api::control_plane_machine_set::ControlPlaneMachineSet;

const NS: &str = "openshift-machine-api";

fn cpms() -> ControlPlaneMachineSet {
    serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1",
        "kind": "ControlPlaneMachineSet",
        "metadata": {"name": "cluster", "namespace": NS},
        "spec": {
            "replicas": 3,
            "state": "Active",
            "strategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": {
                "machine.openshift.io/cluster-api-machine-role": "master",
                "machine.openshift.io/cluster-api-machine-type": "master"
            }},
            "template": {
                "machineType": "machines_v1beta1_machine_openshift_io",
                "machines_v1beta1_machine_openshift_io": {
                    "failureDomains": {"platform": "VSphere", "vsphere": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
                    "metadata": {"labels": {
                        "machine.openshift.io/cluster-api-cluster": "demo",
                        "machine.openshift.io/cluster-api-machine-role": "master",
                        "machine.openshift.io/cluster-api-machine-type": "master"
                    }},
                    "spec": {"providerSpec": {"value": {
                        "apiVersion": "machine.openshift.io/v1beta1",
                        "kind": "VSphereMachineProviderSpec",
                        "template": "DC0_H0_VM0",
                        "numCPUs": 4,
                        "network": {"devices": []},
                        "workspace": {}
                    }}}
                }
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn a_set_creates_one_machine_per_zone_and_releases_them_when_deleted() {
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let (user, password) = sim.credentials();
    let api = FakeApiServer::new();
    for (z, c) in [("a", "DC0_C0"), ("b", "DC0_C1"), ("c", "DC0_C2")] {
        api.put(&failure_domain(&format!("fd-{z}"), c, true));
        api.put(&zone(z, sim.url(), &format!("fd-{z}"), &[]));
    }
    let running = Running::start(shared(&api, Some(manager(user, password))));
    // A fresh set creates every index at once when its zones are ready (with no ready machine
    // it would otherwise wait for one, as upstream's NoReadyMachines gate).
    for z in ["a", "b", "c"] {
        api.wait_for("zones ready", Duration::from_secs(60), |api| {
            api.get::<vsphere_provider::api::VSphereDeploymentZone>(None, z)
                .filter(|z| z.status.as_ref().and_then(|s| s.ready) == Some(true))
        })
        .await;
    }
    api.put(&cpms());

    let machines = api
        .wait_for("three machines", Duration::from_secs(60), |api| {
            let ms: Vec<Machine> = api
                .list::<Machine>()
                .into_iter()
                .filter(|m| m.metadata.namespace.as_deref() == Some(NS))
                .collect();
            (ms.len() == 3).then_some(ms)
        })
        .await;
    let mut zones: Vec<String> = machines
        .iter()
        .map(|m| m.metadata.labels.as_ref().unwrap()["vsphere-provider.io/deployment-zone"].clone())
        .collect();
    zones.sort();
    assert_eq!(zones, ["a", "b", "c"]);
    for m in &machines {
        let owner = &m.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("ControlPlaneMachineSet", Some(true))
        );
        let ws = &m
            .spec
            .provider_spec
            .as_ref()
            .unwrap()
            .value
            .as_ref()
            .unwrap()["workspace"];
        assert!(
            ws["resourcePool"]
                .as_str()
                .unwrap()
                .starts_with("/DC0/host/DC0_C"),
            "{ws}"
        );
    }
    // Each creation was preceded by a direct list of the namespace's machines (not the cache).
    let requests = api.requests();
    let creates: Vec<usize> = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.method == "POST" && r.path.ends_with(&format!("/namespaces/{NS}/machines"))
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(creates.len(), 3);
    for i in creates {
        assert!(
            requests[..i]
                .iter()
                .rev()
                .take(10)
                .any(|r| r.method == "GET"
                    && r.path.ends_with(&format!("/namespaces/{NS}/machines"))
                    && !r.query.contains("watch=true")),
            "an uncached list before the create"
        );
    }
    let set = api
        .wait_for("status", Duration::from_secs(30), |api| {
            api.get::<ControlPlaneMachineSet>(Some(NS), "cluster")
                .filter(|c| c.status.as_ref().and_then(|s| s.replicas) == Some(3))
        })
        .await;
    assert!(
        set.metadata
            .finalizers
            .as_ref()
            .unwrap()
            .contains(&"controlplanemachineset.machine.openshift.io".to_string())
    );

    // Deleting the set releases the machines and deletes none.
    api.delete::<ControlPlaneMachineSet>(Some(NS), "cluster");
    api.wait_for("the set gone", Duration::from_secs(30), |api| {
        api.get::<ControlPlaneMachineSet>(Some(NS), "cluster")
            .is_none()
            .then_some(())
    })
    .await;
    let left: Vec<Machine> = api
        .list::<Machine>()
        .into_iter()
        .filter(|m| m.metadata.namespace.as_deref() == Some(NS))
        .collect();
    assert_eq!(left.len(), 3, "no machine deleted");
    assert!(left.iter().all(|m| m.metadata.deletion_timestamp.is_none()));
    assert!(
        left.iter().all(|m| m
            .metadata
            .owner_references
            .as_ref()
            .is_none_or(|r| r.iter().all(|o| o.kind != "ControlPlaneMachineSet"))),
        "released"
    );
    running.stop().await;
}
