//! The Machine controller (`run`) against the fake API server and a live vcsim: finalizer,
//! clone into the zone, power on, providerID and status through the status subresource, node
//! link, the deletion lifecycle (hook, cordon, power off, destroy, Node, finalizer), events, and
//! one vCenter sweep for machines woken together.
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "controller_support/harness.rs"]
mod harness;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::time::Duration;

use apiserver::FakeApiServer;
use harness::*;
use k8s_openapi::api::core::v1::Node;
use secrecy::SecretString;
use serde_json::json;
use vcsim::Vcsim;
use vsphere_provider::api::Machine;
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials};

const NS: &str = "openshift-machine-api";

fn machine(name: &str, zone: &str, hooks: serde_json::Value) -> Machine {
    serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": format!("4c3b2a10-0000-4000-8000-{:012}", name.len() * 1000 + name.bytes().map(u64::from).sum::<u64>() as usize),
            "labels": {
                "vsphere-provider.io/deployment-zone": zone,
                "machine.openshift.io/cluster-api-machine-role": "master",
                "machine.openshift.io/cluster-api-machine-type": "master"
            }
        },
        "spec": {
            "lifecycleHooks": hooks,
            "providerSpec": {"value": {
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "VSphereMachineProviderSpec",
                "template": "DC0_H0_VM0",
                "network": {"devices": []}
            }}
        }
    }))
    .unwrap()
}

fn node(name: &str, provider_id: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"providerID": provider_id},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

fn phase(m: &Machine) -> Option<&str> {
    m.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn admin(sim: &Vcsim) -> Client {
    let (u, p) = sim.credentials();
    Client::new(
        sim.url(),
        Credentials::new(u, SecretString::from(p.to_string())),
        ClientOptions::default(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_machine_is_created_linked_and_deleted_through_its_lifecycle() {
    let sim = Vcsim::builder().clusters(2).hosts(1).pools(1).start().await;
    let (user, password) = sim.credentials();
    let api = FakeApiServer::new();
    api.put(&failure_domain("fd-a", "DC0_C1", true));
    api.put(&zone("a", sim.url(), "fd-a", &[]));
    let hooks =
        json!({"preDrain": [{"name": "EtcdQuorumOperator", "owner": "clusteroperator/etcd"}]});
    api.put(&machine("m-0", "a", hooks));
    api.put(&machine("m-1", "a", json!({})));
    let running = Running::start(shared(&api, Some(manager(user, password))));

    // Created in the zone's cluster, powered on, providerID recorded, finalizer on.
    let m = api
        .wait_for("m-0 provisioned", Duration::from_secs(60), |api| {
            api.get::<Machine>(Some(NS), "m-0")
                .filter(|m| phase(m) == Some("Provisioned") && m.spec.provider_id.is_some())
        })
        .await;
    assert!(
        m.metadata
            .finalizers
            .as_ref()
            .unwrap()
            .contains(&"machine.machine.openshift.io".to_string())
    );
    let uid = m.metadata.uid.clone().unwrap();
    let inv = admin(&sim).inventory().await.unwrap();
    let vm = inv
        .vm_by_instance_uuid(&uid)
        .expect("a VM with the machine's UID");
    let pool = vm.vm.as_ref().unwrap().resource_pool.clone().unwrap();
    assert_eq!(inv.path(&pool), Some("/DC0/host/DC0_C1/Resources"));
    assert_eq!(
        vm.vm.as_ref().unwrap().power_state.as_deref(),
        Some("poweredOn")
    );
    api.wait_for("m-1 provisioned", Duration::from_secs(30), |api| {
        api.get::<Machine>(Some(NS), "m-1")
            .filter(|m| phase(m) == Some("Provisioned"))
    })
    .await;

    // The kubelet registers: the machine runs.
    let pid = m.spec.provider_id.clone().unwrap();
    api.put(&node("node-0", &pid));
    let m = api
        .wait_for("m-0 running", Duration::from_secs(30), |api| {
            api.get::<Machine>(Some(NS), "m-0")
                .filter(|m| phase(m) == Some("Running"))
        })
        .await;
    assert_eq!(
        m.status
            .as_ref()
            .unwrap()
            .node_ref
            .as_ref()
            .unwrap()
            .name
            .as_deref(),
        Some("node-0")
    );

    // Deleted: the preDrain hook holds everything.
    api.delete::<Machine>(Some(NS), "m-0");
    let m = api
        .wait_for("Drainable=False", Duration::from_secs(30), |api| {
            api.get::<Machine>(Some(NS), "m-0").filter(|m| {
                m.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c.type_ == "Drainable" && c.status == "False")
                    })
            })
        })
        .await;
    assert_eq!(phase(&m), Some("Deleting"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_ne!(
        api.get::<Node>(None, "node-0")
            .unwrap()
            .spec
            .unwrap()
            .unschedulable,
        Some(true),
        "not cordoned while the hook exists"
    );
    assert!(
        admin(&sim)
            .inventory()
            .await
            .unwrap()
            .vm_by_instance_uuid(&uid)
            .is_some()
    );

    // The hook is removed: cordon, power off, destroy, Node, finalizer.
    let mut value = api.get_json::<Machine>(Some(NS), "m-0").unwrap();
    value["spec"]["lifecycleHooks"] = json!({});
    api.put_json::<Machine>(value);
    api.wait_for("m-0 gone", Duration::from_secs(60), |api| {
        api.get::<Machine>(Some(NS), "m-0").is_none().then_some(())
    })
    .await;
    assert!(
        api.get::<Node>(None, "node-0").is_none(),
        "the Node is deleted"
    );
    assert!(
        admin(&sim)
            .inventory()
            .await
            .unwrap()
            .vm_by_instance_uuid(&uid)
            .is_none(),
        "the VM is destroyed"
    );
    // The order of the lifecycle on the wire: the cordon (a node PATCH setting
    // spec.unschedulable), then the VM's power off and destroy (recorded on the Machine as
    // vCenter tasks), then the Node's deletion, then the finalizer's release.
    let requests = api.requests();
    let first = |what: &str, f: &dyn Fn(&apiserver::Recorded) -> bool| {
        requests
            .iter()
            .position(f)
            .unwrap_or_else(|| panic!("no {what} among the requests"))
    };
    let cordon = first("cordon", &|r| {
        r.method == "PATCH"
            && r.path.ends_with("/nodes/node-0")
            && r.body["spec"]["unschedulable"] == json!(true)
    });
    let node_deleted = first("Node deletion", &|r| {
        r.method == "DELETE" && r.path.ends_with("/nodes/node-0")
    });
    let released = first("finalizer release", &|r| {
        r.method == "PATCH"
            && r.path.ends_with("/machines/m-0")
            && r.body["metadata"]["finalizers"] == json!([])
    });
    // The first vCenter task the machine records after the cordon: the power off.
    let destroy_recorded = requests
        .iter()
        .enumerate()
        .skip(cordon + 1)
        .find(|(_, r)| {
            r.method == "PATCH"
                && r.path.ends_with("/machines/m-0/status")
                && r.body["status"]["providerStatus"]["taskRef"]
                    .as_str()
                    .is_some_and(|t| !t.is_empty())
        })
        .map(|(i, _)| i)
        .expect("a vCenter task recorded after the cordon");
    assert!(
        cordon < destroy_recorded && destroy_recorded < node_deleted && node_deleted < released,
        "cordon {cordon} < vCenter task {destroy_recorded} < Node deleted {node_deleted} < released {released}"
    );
    let events: Vec<String> = api
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.contains("/events"))
        .filter_map(|r| {
            r.body
                .get("reason")
                .and_then(|v| v.as_str())
                .map(str::to_string)
        })
        .collect();
    assert!(events.iter().any(|e| e == "DrainBlocked"), "{events:?}");
    // m-1 is untouched by m-0's deletion.
    assert!(api.get::<Machine>(Some(NS), "m-1").is_some());
    running.stop().await;
}

/// A machine of a vCenter nobody has credentials for (`127.0.0.1:1`): every sweep fails it.
fn unreachable_machine(name: &str) -> Machine {
    let mut m = machine(name, "", json!({}));
    m.metadata.labels = None;
    m.spec.provider_spec = Some(
        serde_json::from_value(json!({"value": {
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "VSphereMachineProviderSpec",
            "template": "t",
            "workspace": {"server": "127.0.0.1:1", "datacenter": "DC0"},
            "network": {"devices": []}
        }}))
        .unwrap(),
    );
    m
}

/// One pass as kube-runtime runs it: the reconcile, and on an error the error policy.
async fn pass(
    m: &Machine,
    ctx: &std::sync::Arc<vsphere_provider::controllers::Context>,
) -> kube::runtime::controller::Action {
    use vsphere_provider::controllers::machine;
    let m = std::sync::Arc::new(m.clone());
    match machine::reconcile(m.clone(), ctx.clone()).await {
        Ok(a) => a,
        Err(e) => machine::error_policy(m, &e, ctx.clone()),
    }
}

/// A machine that cannot be reconciled (here: no credentials for its vCenter) backs off, and
/// the backoff grows: 5 s, then 10 s, then 20 s — each retry is a full sweep of its server,
/// so a fixed 5 s would sweep every 5 s for as long as the machine fails.
#[tokio::test]
async fn a_failing_machine_backs_off_longer_each_time() {
    use kube::runtime::controller::Action;
    let api = FakeApiServer::new();
    let m = unreachable_machine("m-0");
    api.put(&m);
    let ctx = context_with(&api, vec![], vec![], vec![], vec![m.clone()]);
    let delays: Vec<Action> = vec![
        pass(&m, &ctx).await,
        pass(&m, &ctx).await,
        pass(&m, &ctx).await,
    ];
    assert_eq!(
        delays,
        [5, 10, 20].map(|s| Action::requeue(Duration::from_secs(s))),
        "the delay grows"
    );
    assert_eq!(ctx.backoff.tracked(), 1);
    // Why it failed is the reconcile's error: counted, and named in the machine's status.
    let stored = api.get::<Machine>(Some(NS), "m-0").unwrap();
    let exists = stored
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "InstanceExists")
        .expect("InstanceExists condition");
    assert_eq!(exists.status, "Unknown");
    assert!(exists.message.unwrap_or_default().contains("127.0.0.1:1"));
    assert_eq!(
        metric(
            &ctx.metrics.encode(),
            r#"vsphere_provider_reconcile_errors_total{controller="machine",category="machine"}"#
        ),
        3.0
    );
}

/// Machines failing on one vCenter cost one sweep per backoff round, not one per machine: a
/// sweep decides for every machine of the server, and a failure it found answers the other
/// machines' reconciles; each machine's next retry finds its failure answered and sweeps again
/// only if no other machine's retry did so first. (Each sweep re-reads and re-decides all N
/// machines: with one sweep per machine, 300 failing machines meant 90,000 decisions and as many
/// warnings per round — found with 100 zones and 300 machines on the real API server.)
#[tokio::test]
async fn machines_failing_on_one_server_share_one_sweep_per_round() {
    let api = FakeApiServer::new();
    let machines: Vec<Machine> = (0..5)
        .map(|i| {
            let m = unreachable_machine(&format!("m-{i}"));
            api.put(&m);
            m
        })
        .collect();
    let ctx = context_with(&api, vec![], vec![], vec![], machines.clone());
    let sweeps = |ctx: &std::sync::Arc<vsphere_provider::controllers::Context>| {
        metric(
            &ctx.metrics.encode(),
            "vsphere_provider_machine_sweeps_total",
        )
    };
    for round in 1..=2 {
        for m in &machines {
            let action = pass(m, &ctx).await;
            assert_ne!(
                action,
                kube::runtime::controller::Action::await_change(),
                "{round}"
            );
        }
        assert_eq!(sweeps(&ctx), round as f64, "one sweep in round {round}");
    }
    // Every machine was still told it failed, each time (counted as a machine error).
    assert_eq!(
        metric(
            &ctx.metrics.encode(),
            r#"vsphere_provider_reconcile_errors_total{controller="machine",category="machine"}"#
        ),
        10.0
    );
}

/// Every Kubernetes call the reconcilers make has a timeout: an API server that stops
/// answering a write fails it (typed, a timeout) instead of holding the server's sweep gate,
/// and every worker waiting on it, forever.
#[tokio::test]
async fn a_write_the_api_server_never_answers_times_out() {
    use vsphere_provider::controllers::api_server::ApiServer;
    use vsphere_provider::reconcile::kube_ops::{KubeErrorKind, KubeOps};
    let api = FakeApiServer::new();
    let m = machine("m-0", "z", json!({}));
    api.put(&m);
    let stored = api.get::<Machine>(Some(NS), "m-0").unwrap();
    let mut after = stored.clone();
    after.metadata.finalizers = Some(vec!["machine.machine.openshift.io".into()]);
    api.hold("PATCH", "/machines/m-0");
    let client = api.client();
    let reporter = kube::runtime::events::Reporter {
        controller: "test".into(),
        instance: None,
    };
    let mut kube = ApiServer::new(
        client.clone(),
        kube::runtime::events::Recorder::new(client, reporter),
    );
    kube.timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let err = kube.update_machine(&stored, &after).await.unwrap_err();
    assert_eq!(err.kind, KubeErrorKind::Timeout, "{err}");
    assert!(
        err.to_string()
            .contains("patch Machine openshift-machine-api/m-0"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    api.release_holds();
}
