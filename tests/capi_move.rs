//! `clusterctl move` of a running cluster to a second management cluster, then `clusterctl
//! delete` of this provider, with Cluster API v1.14.2's clusterctl and controllers and ours on
//! two real API servers (tests/support/capi_world.rs, `World::second_management`).
//!
//! The cluster is CAPV v1.17's default template, unchanged but for the failure-domain edits
//! ([`capi_world::zonal`]): one control plane machine and a worker per zone, booted by the
//! workload-cluster simulator (hack/workload-sim), since `clusterctl move` refuses to start
//! while a Machine has no Node. What must hold:
//! * every object of the cluster arrives on the target and its machines run there again;
//! * **no VM is cloned again or lost**: `clusterctl move` creates the objects on the target
//!   without their status, so our provider there must find each machine's VM by what the spec
//!   carries (the VSphereVM's `biosUUID`), not clone a new one; and the source's provider,
//!   whose objects clusterctl pauses and then deletes after stripping their finalizers, must
//!   not touch the VMs either;
//! * the target's provider carries on: a deletion of the Cluster there destroys every VM;
//! * `clusterctl delete --infrastructure vsphere-provider` on the source removes this provider (its CRDs and
//!   namespace with `--include-crd --include-namespace`), leaving Cluster API's.
//!
//! The zones are cluster-scoped and not part of a cluster's move hierarchy (as with CAPV): the
//! admin creates them on the target first, as the test does. A VSphereClusterIdentity is: its
//! CRD is labelled `clusterctl.cluster.x-k8s.io/move-hierarchy` and it owns its Secret (in the
//! provider's namespace), so both must arrive on the target, where the provider owns the Secret
//! for the target's identity (a new UID) and reports it available. clusterctl copies a global
//! hierarchy and deletes nothing of it from the source, whose identity is deleted (releasing its
//! Secret) before `clusterctl delete`.
//!
//! Gated on `CAPI_BIN_DIR` and `WORKLOAD_SIM_BIN` (hack/test.sh sets both).
#[path = "support/admin_setup.rs"]
mod admin_setup;
#[path = "support/capi.rs"]
mod capi;
#[path = "support/capi_world.rs"]
mod capi_world;
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/vcsim.rs"]
mod vcsim;
#[path = "support/workload_sim.rs"]
mod workload_sim;

use std::collections::BTreeMap;

use base64::Engine;
use std::time::{Duration, Instant};

use capi::{apply_retrying, capi_bin_dir, clusterctl, free_port, get, text};
use capi_world::{
    ADMIN, CLUSTERS, MACHINES, World, ZONES, generate, list, readback, until_or, world_with, zonal,
};
use realapi::{ControlPlane, SA_NAMESPACE};
use serde_json::{Value, json};
use workload_sim::WorkloadSim;

const CLUSTER: &str = "mv";
/// The moved VSphereClusterIdentity and its Secret (in the provider's namespace).
const IDENTITY: &str = "mv-identity";

/// An object as JSON, `None` when absent.
fn get_opt(cp: &ControlPlane, args: &[&str]) -> Option<Value> {
    let kind = realapi::at_v1beta1(args[0]);
    let mut all = vec!["get", kind.as_str()];
    all.extend_from_slice(&args[1..]);
    all.extend(["-o", "json", "--ignore-not-found"]);
    let text = cp.kubectl(ADMIN, &all).ok().stdout;
    (!text.trim().is_empty()).then(|| serde_json::from_str(&text).unwrap())
}

/// The identity [`IDENTITY`]'s uid once its Secret carries its owner reference (that uid) and
/// CAPV's Secret finalizer, and the identity is `Available`.
fn identity_owns_its_secret(cp: &ControlPlane) -> Result<String, String> {
    let identity = get_opt(cp, &["vsphereclusteridentity", IDENTITY]).ok_or("no identity")?;
    let uid = identity["metadata"]["uid"].as_str().unwrap_or_default();
    let secret = get_opt(cp, &["secret", IDENTITY, "-n", SA_NAMESPACE]).ok_or("no Secret")?;
    let owned = secret["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["kind"] == "VSphereClusterIdentity" && r["name"] == IDENTITY && r["uid"] == uid);
    let finalized = secret["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| {
            f.iter()
                .any(|f| f == "vspherecluster/infrastructure.cluster.x-k8s.io")
        });
    let available = identity["status"]["v1beta2"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Available" && c["status"] == "True");
    (owned && finalized && available)
        .then(|| uid.to_string())
        .ok_or(format!(
            "identity {} / Secret {}",
            identity["status"], secret["metadata"]
        ))
}

/// The Machines of `ns` on `cp`, Running with a Node: `name → providerID`, once all `n` are.
fn running(cp: &ControlPlane, ns: &str, n: usize) -> Result<BTreeMap<String, String>, String> {
    let ms = get(cp, &[MACHINES, "-n", ns]);
    let items = ms["items"].as_array().cloned().unwrap_or_default();
    let up: BTreeMap<String, String> = items
        .iter()
        .filter(|m| m["status"]["phase"] == "Running" && m["status"]["nodeRef"]["name"].is_string())
        .map(|m| {
            (
                m["metadata"]["name"].as_str().unwrap().to_string(),
                m["spec"]["providerID"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    if items.len() == n && up.len() == n {
        Ok(up)
    } else {
        let phases: Vec<String> = items
            .iter()
            .map(|m| format!("{} {}", m["metadata"]["name"], m["status"]["phase"]))
            .collect();
        Err(format!("{phases:?}"))
    }
}

/// This cluster's VMs in vcsim (raw SOAP): `name → (BIOS UUID, power state)`.
async fn vms(w: &World) -> BTreeMap<String, (String, String)> {
    readback(&w.sim)
        .vm_details()
        .await
        .into_iter()
        .filter(|v| v.name.starts_with(&format!("{CLUSTER}-")))
        .map(|v| (v.name, (v.bios_uuid, v.power_state)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_cluster_moves_to_another_management_cluster_without_a_new_vm() {
    let (Some(capi), Some(sim_bin)) = (capi_bin_dir(), workload_sim::bin()) else {
        eprintln!(
            "skipped: CAPI_BIN_DIR and WORKLOAD_SIM_BIN are not both set (hack/test.sh sets them)"
        );
        return;
    };
    let started = Instant::now();
    let w = world_with(capi, true).await;
    let port = free_port();
    let (user, password) = w.sim.credentials();
    let sim = WorkloadSim::start(
        &sim_bin,
        w.home.path(),
        w.sim.url(),
        user,
        password,
        &port.to_string(),
    );
    w.three_ready_zones().await;
    let ns = w.cp.namespace(CLUSTER);
    let docs = generate(&w, "cluster-template.yaml", CLUSTER, &ns, port, 1, 1, &[]);
    apply_retrying(w.cp, &list(zonal(docs, CLUSTER)));
    let machines = 1 + ZONES;
    let logs = || {
        format!(
            "{}\n--- workload-sim:\n{}",
            w.logs(),
            sim.events().join("\n")
        )
    };
    let before = until_or(
        "the cluster's machines Running on the source",
        Duration::from_secs(420),
        logs,
        async || running(w.cp, &ns, machines),
    )
    .await;
    let vms_before = vms(&w).await;
    assert_eq!(vms_before.len(), machines, "{vms_before:?}");
    eprintln!(
        "capi_move: cluster up at {:.0} s",
        started.elapsed().as_secs_f64()
    );
    // The admin's identity and its Secret, owned on the source.
    apply_retrying(
        w.cp,
        &list(vec![
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": IDENTITY, "namespace": SA_NAMESPACE},
                "type": "Opaque",
                "stringData": {"username": "moved-user", "password": "placeholder"}
            }),
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "VSphereClusterIdentity",
                "metadata": {"name": IDENTITY},
                "spec": {"secretName": IDENTITY, "allowedNamespaces": {"selector": {}}}
            }),
        ]),
    );
    let source_uid = until_or(
        "the identity owning its Secret on the source",
        Duration::from_secs(60),
        logs,
        async || identity_owns_its_secret(w.cp),
    )
    .await;

    // The target: its own API server, `clusterctl init`, the managers, and the zones an admin
    // creates there (they are not part of the move).
    let target = w.second_management();
    let both_logs = || format!("{}\n{}", logs(), target.logs());
    w.three_ready_zones_on(target.cp, both_logs).await;
    // The admin opens the cluster's namespace to the target's manager first (config/rbac binds
    // Secrets per namespace; `clusterctl move` would create the namespace without it).
    target.cp.kubectl(ADMIN, &["create", "namespace", &ns]).ok();
    target.cp.bind_secrets(&ns);
    let to = target.cp.admin_kubeconfig.to_str().unwrap().to_string();
    let o = clusterctl(
        &w.capi,
        w.cp,
        w.home.path(),
        &["move", "-n", &ns, "--to-kubeconfig", &to],
        &[],
    );
    assert!(
        o.status.success(),
        "clusterctl move:\n{}\n{}",
        text(&o),
        both_logs()
    );
    eprintln!(
        "capi_move: moved at {:.0} s",
        started.elapsed().as_secs_f64()
    );

    // Everything arrived; nothing is left on the source.
    for kind in [
        "clusters.cluster.x-k8s.io",
        "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
        "machinedeployments.cluster.x-k8s.io",
        "machines.cluster.x-k8s.io",
        "vsphereclusters.infrastructure.cluster.x-k8s.io",
        "vspheremachines.infrastructure.cluster.x-k8s.io",
        "vspherevms.infrastructure.cluster.x-k8s.io",
        "vspheremachinetemplates.infrastructure.cluster.x-k8s.io",
    ] {
        let on = |cp: &ControlPlane| {
            get(cp, &[kind, "-n", &ns])["items"]
                .as_array()
                .map(Vec::len)
                .unwrap_or(0)
        };
        assert_eq!(on(w.cp), 0, "{kind} left on the source");
        assert!(on(target.cp) > 0, "no {kind} on the target");
    }

    // The identity and its Secret arrived; the target's provider owns the Secret for the
    // target's identity, and the Secret's credentials are the ones moved.
    let target_uid = until_or(
        "the identity owning its Secret on the target",
        Duration::from_secs(120),
        both_logs,
        async || identity_owns_its_secret(target.cp),
    )
    .await;
    assert_ne!(
        target_uid, source_uid,
        "the target's identity is its own object"
    );
    let moved = get(target.cp, &["secret", IDENTITY, "-n", SA_NAMESPACE]);
    assert_eq!(
        moved["data"]["username"],
        base64::engine::general_purpose::STANDARD.encode("moved-user"),
        "the moved Secret's data"
    );
    // A global hierarchy is copied, not moved: the source keeps its identity and Secret, still
    // the source identity's (released when it is deleted below).
    assert_eq!(
        identity_owns_its_secret(w.cp),
        Ok(source_uid),
        "the source's identity and Secret"
    );

    // The target runs the same machines on the same VMs.
    let infra = || {
        let show = |kind: &str| {
            get(target.cp, &[kind, "-n", &ns])["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| format!("{kind} {}: {}", o["metadata"]["name"], o["status"]))
                .collect::<Vec<_>>()
                .join("\n")
        };
        format!(
            "{}\n--- target objects:\n{}\n{}",
            both_logs(),
            show("vspheremachine"),
            show("vspherevm")
        )
    };
    let after = until_or(
        "the machines Running again on the target",
        Duration::from_secs(300),
        infra,
        async || running(target.cp, &ns, machines),
    )
    .await;
    assert_eq!(after, before, "the same Machines with the same providerIDs");
    let vsphere_cluster = get(target.cp, &["vspherecluster", CLUSTER, "-n", &ns]);
    assert_eq!(
        vsphere_cluster["status"]["ready"], true,
        "{}",
        vsphere_cluster["status"]
    );
    // Let both providers run a while longer: neither may clone, destroy or power off a VM.
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(
        vms(&w).await,
        vms_before,
        "no VM cloned again, lost or powered off across the move\n{}",
        both_logs()
    );
    eprintln!(
        "capi_move: settled on the target at {:.0} s",
        started.elapsed().as_secs_f64()
    );

    // The source's provider goes. Its zones first, as clusterctl asks (it refuses to delete
    // CRDs that still hold objects): their deletion touches nothing in vCenter, which the
    // target's zones share. Then `clusterctl delete` takes the CRDs and the namespace, and
    // leaves Cluster API's.
    for kind in [
        "vspheredeploymentzones",
        "vspherefailuredomains",
        "vsphereclusteridentities",
    ] {
        w.cp.kubectl(ADMIN, &["delete", kind, "--all", "--wait=false"])
            .ok();
    }
    until_or(
        "the source's zones and identity gone",
        Duration::from_secs(60),
        both_logs,
        async || {
            let left = get(w.cp, &["vspheredeploymentzone"])["items"]
                .as_array()
                .map(Vec::len)
                .unwrap_or(0)
                + get(w.cp, &["vspherefailuredomain"])["items"]
                    .as_array()
                    .map(Vec::len)
                    .unwrap_or(0)
                + get(w.cp, &["vsphereclusteridentity"])["items"]
                    .as_array()
                    .map(Vec::len)
                    .unwrap_or(0);
            (left == 0).then_some(()).ok_or(format!("{left} left"))
        },
    )
    .await;
    let o = clusterctl(
        &w.capi,
        w.cp,
        w.home.path(),
        &[
            "delete",
            "--infrastructure",
            "vsphere-provider",
            "--include-crd",
            "--include-namespace",
        ],
        &[],
    );
    assert!(o.status.success(), "clusterctl delete:\n{}", text(&o));
    // CRDs go asynchronously (the API server empties each first).
    let crds = until_or(
        "our CRDs gone from the source",
        Duration::from_secs(120),
        both_logs,
        async || {
            let crds =
                w.cp.kubectl(ADMIN, &["get", "crd", "-o", "name"])
                    .ok()
                    .stdout;
            (!crds.contains("infrastructure.cluster.x-k8s.io"))
                .then(|| crds.clone())
                .ok_or(crds)
        },
    )
    .await;
    assert!(crds.contains("clusters.cluster.x-k8s.io"), "{crds}");

    // The target's provider carries on: deleting the Cluster there destroys every VM.
    target
        .cp
        .kubectl(
            ADMIN,
            &["delete", CLUSTERS, CLUSTER, "-n", &ns, "--wait=false"],
        )
        .ok();
    until_or(
        "the moved cluster's VMs destroyed by the target's provider",
        Duration::from_secs(300),
        both_logs,
        async || {
            let left = vms(&w).await;
            left.is_empty()
                .then_some(())
                .ok_or_else(|| format!("{:?}", left.keys()))
        },
    )
    .await;
    eprintln!(
        "capi_move: whole test {:.0} s",
        started.elapsed().as_secs_f64()
    );
    for log in [w.ours.log(), target.ours.log()] {
        assert!(!log.contains(password), "a manager logged the password");
    }
}
