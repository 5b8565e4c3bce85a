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

fn workspace(m: &Machine) -> serde_json::Value {
    m.spec
        .provider_spec
        .as_ref()
        .unwrap()
        .value
        .as_ref()
        .unwrap()["workspace"]
        .clone()
}

/// The set's three machines, once they exist.
async fn three_machines(api: &FakeApiServer) -> Vec<Machine> {
    api.wait_for("three machines", Duration::from_secs(60), |api| {
        let ms: Vec<Machine> = api
            .list::<Machine>()
            .into_iter()
            .filter(|m| m.metadata.namespace.as_deref() == Some(NS))
            .collect();
        (ms.len() == 3).then_some(ms)
    })
    .await
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

    let machines = three_machines(&api).await;
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
        let ws = &workspace(m);
        assert!(
            ws["resourcePool"]
                .as_str()
                .unwrap()
                .starts_with("/DC0/host/DC0_C"),
            "{ws}"
        );
    }
    // Each creation is preceded by its own direct list of the namespace's machines (not the
    // cache): a list strictly between consecutive creates, so one list before three creates —
    // the OCPBUGS-4297 regression, a second replacement decided on a stale read — fails here.
    let requests = api.requests();
    let is_create = |r: &apiserver::Recorded| {
        r.method == "POST" && r.path.ends_with(&format!("/namespaces/{NS}/machines"))
    };
    let is_fresh_list = |r: &apiserver::Recorded| {
        r.method == "GET"
            && r.path.ends_with(&format!("/namespaces/{NS}/machines"))
            && !r.query.contains("watch=true")
    };
    let creates: Vec<usize> = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| is_create(r))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(creates.len(), 3);
    let mut from = 0;
    for i in creates {
        assert!(
            requests[from..i].iter().any(is_fresh_list),
            "no uncached list between request {from} and the create at {i}"
        );
        from = i + 1;
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

/// A set whose domains are OpenShift's: no deployment zone, the `Infrastructure` `cluster` read
/// from the API server (as an OpenShift cluster has it), machines placed from its domains with
/// their region/zone labels; the set's metrics on `/metrics`.
#[tokio::test]
async fn a_set_over_infrastructure_domains_reads_the_infrastructure_and_reports_metrics() {
    let sim = Vcsim::builder().clusters(3).hosts(1).start().await;
    let (user, password) = sim.credentials();
    let api = FakeApiServer::new();
    let domains: Vec<_> = (0..3)
        .map(|i| {
            json!({
                "name": format!("us-east-{}", i + 1),
                "region": "us-east",
                "zone": format!("us-east-1{}", ["a", "b", "c"][i]),
                "server": sim.url(),
                "topology": {
                    "datacenter": "DC0",
                    "computeCluster": format!("/DC0/host/DC0_C{i}"),
                    "datastore": "/DC0/datastore/LocalDS_0",
                    "networks": ["VM Network"],
                    "template": "/DC0/vm/DC0_H0_VM0"
                }
            })
        })
        .collect();
    api.put_at(
        "config.openshift.io/v1/infrastructures",
        json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "Infrastructure",
            "metadata": {"name": "cluster"},
            "spec": {"platformSpec": {"type": "VSphere", "vsphere": {"failureDomains": domains}}}
        }),
    );
    let running = Running::start(shared(&api, Some(manager(user, password))));
    let mut set = cpms();
    set.spec
        .template
        .machines_v1beta1_machine_openshift_io
        .as_mut()
        .unwrap()
        .failure_domains = serde_json::from_value(json!({
        "platform": "VSphere",
        "vsphere": [{"name": "us-east-1"}, {"name": "us-east-2"}, {"name": "us-east-3"}]
    }))
    .unwrap();
    api.put(&set);

    let machines = three_machines(&api).await;
    let mut zones = Vec::new();
    for m in &machines {
        let labels = m.metadata.labels.as_ref().unwrap();
        assert!(!labels.contains_key("vsphere-provider.io/deployment-zone"));
        assert_eq!(labels["machine.openshift.io/region"], "us-east");
        let zone = labels["machine.openshift.io/zone"].clone();
        let ws = &workspace(m);
        let c = ["us-east-1a", "us-east-1b", "us-east-1c"]
            .iter()
            .position(|z| *z == zone)
            .unwrap();
        assert_eq!(ws["resourcePool"], format!("/DC0/host/DC0_C{c}/Resources"));
        assert_eq!(ws["server"], sim.url());
        zones.push(zone);
    }
    zones.sort();
    assert_eq!(zones, ["us-east-1a", "us-east-1b", "us-east-1c"]);
    assert!(
        api.count(
            "GET",
            "/apis/config.openshift.io/v1/infrastructures/cluster"
        ) > 0,
        "the Infrastructure is read from the API server"
    );
    // The set's metrics: desired 3, current 3 once the status counts them; 3 created.
    api.wait_for("status", Duration::from_secs(30), |api| {
        api.get::<ControlPlaneMachineSet>(Some(NS), "cluster")
            .filter(|c| c.status.as_ref().and_then(|s| s.replicas) == Some(3))
    })
    .await;
    let series = |r: &str| {
        format!(r#"vsphere_provider_cpms_replicas{{cpms="{NS}/cluster",replicas="{r}"}}"#)
    };
    assert_eq!(running.metric(&series("desired")), 3.0);
    assert_eq!(
        running.metric(&format!(
            r#"vsphere_provider_cpms_machines_total{{cpms="{NS}/cluster",action="created"}}"#
        )),
        3.0
    );
    running.stop().await;
}
