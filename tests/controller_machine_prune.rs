//! What the machine controller keeps per vCenter goes with the last machine of that vCenter
//! (issue 42, N3): server names come from objects tenants write, so a sweep gate kept for every
//! server name ever seen would grow the manager's memory without bound. The long polls go the
//! same way (`controllers::machine::long_poll` tests: the watcher stops and its client is let go).
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "controller_support/harness.rs"]
mod harness;

use apiserver::FakeApiServer;
use harness::*;
use serde_json::json;
use vsphere_provider::api::Machine;
use vsphere_provider::controllers::machine;

const NS: &str = "openshift-machine-api";

/// A machine on `server`, where nothing answers: each sweep fails it, which is enough here.
fn machine_on(name: &str, server: &str) -> Machine {
    serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}")},
        "spec": {"providerSpec": {"value": {
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "VSphereMachineProviderSpec",
            "template": "t",
            "workspace": {"server": server, "datacenter": "DC0"},
            "network": {"devices": []}
        }}}
    }))
    .unwrap()
}

/// A machine of server B is reconciled, then gone (it is not in the cache any more); the next
/// sweep, of server A's machine, drops B's gate. A's own gate stays.
#[tokio::test]
async fn the_gate_of_a_server_whose_last_machine_went_is_dropped_at_the_next_sweep() {
    let api = FakeApiServer::new();
    let a = machine_on("m-a", "127.0.0.1:1");
    let gone = machine_on("m-gone", "127.0.0.2:1");
    api.put(&a);
    api.put(&gone);
    // The cache holds only m-a: m-gone's reconcile ran just before its deletion reached it.
    let ctx = context_with(&api, vec![], vec![], vec![], vec![a.clone()]);
    let _ = machine::reconcile(std::sync::Arc::new(gone), ctx.clone()).await;
    assert_eq!(
        ctx.machine_sweeps.len(),
        1,
        "m-gone's gate: its own sweep held it"
    );
    let _ = machine::reconcile(std::sync::Arc::new(a), ctx.clone()).await;
    assert_eq!(ctx.machine_sweeps.len(), 1, "only m-a's server is left");
    assert_eq!(ctx.long_polls.len(), 0);
}
