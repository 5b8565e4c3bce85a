//! The conversion annotation is the provider's own record, never a tenant's input (security
//! review 2026-11-28, N1), on the REAL API server (Kubernetes' own kube-apiserver and etcd,
//! tests/support/realapi.rs) with the conversion webhook (this test process serves `/convert`
//! from the library, as the manager does) and `vsphere-provider run` (the built binary) as the
//! controller's ServiceAccount against vcsim.
//!
//! A tenant's cluster has no identityRef, so its machines act as the manager's own account: the
//! review's worst case, where any VM the manager can see is in reach.
//! 1. A tenant VSphereVM written at v1beta2 whose annotation holds, "for v1beta1", an actuator
//!    state naming another VM's instance UUID (the victim, a VM of nobody's cluster). The
//!    VSphereVM gets a fresh clone of its own; the victim keeps its power state and extraConfig.
//! 2. An annotation-only merge patch at v1beta1 that would set the stored (v1beta2) spec's
//!    `customVMXKeys`: the VSphereVM reads back at v1beta2 without it.
//! 3. The VSphereVM is deleted: its own clone is destroyed, the victim is still there, powered
//!    on, untouched.
//!
//! Stand-ins, said here: Cluster API's `Cluster` CRD (v1.14.2) is installed unmodified but no
//! CAPI controller runs; the test writes the Cluster at v1beta2 and sets the VSphereCluster's
//! owner reference (what CAPI's cluster controller sets). No validating webhooks run, so what
//! admission would refuse (tests in src/webhook/admission.rs) reaches the controller here: this
//! tests that the controller and the conversion hold without them.
#[path = "support/capi_crds.rs"]
mod capi_crds;
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::time::Duration;

use process::{Manager, Readback, VmDetail, wait_for};
use realapi::{ControlPlane, Identity, SA_NAMESPACE, control_plane};
use serde_json::{Value, json};
use vcsim::Vcsim;

const ADMIN: &Identity = &Identity::Admin;
const USER: &str = "platform-manager@vsphere.local";
const WAIT: Duration = Duration::from_secs(120);
const V1: &str = "vspherevms.v1beta1.infrastructure.cluster.x-k8s.io";
const V2: &str = "vspherevms.v1beta2.infrastructure.cluster.x-k8s.io";

fn apply(cp: &ControlPlane, items: Vec<Value>) {
    cp.apply_text(
        ADMIN,
        &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
        None,
    )
    .ok();
}

fn get(cp: &ControlPlane, resource: &str, ns: &str, name: &str) -> Option<Value> {
    let out = cp
        .kubectl(
            ADMIN,
            &[
                "get",
                resource,
                name,
                "-n",
                ns,
                "-o",
                "json",
                "--ignore-not-found",
            ],
        )
        .ok();
    (!out.stdout.trim().is_empty()).then(|| out.json())
}

fn victim_of(vms: &[VmDetail], name: &str) -> VmDetail {
    vms.iter()
        .find(|v| v.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("the victim {name} is gone"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_conversion_annotation_never_reaches_another_vm_or_the_stored_spec() {
    let cp = control_plane();
    capi_crds::install(cp);
    let ns = cp.namespace("tenant");
    let password = format!("mgr-{}", uuid::Uuid::new_v4());
    let sim = Vcsim::builder()
        .clusters(1)
        .hosts(1)
        .pools(1)
        .credentials(USER, &password)
        .start()
        .await;
    let server = sim.url().to_string();
    let readback = Readback::new(sim.url(), sim.base_url(), USER, &password);
    let before = readback.vm_details().await;
    let victim = victim_of(&before, "DC0_H0_VM1");
    let victim_uuid = readback
        .vms()
        .await
        .into_iter()
        .find(|v| v.name == victim.name)
        .unwrap()
        .instance_uuid;
    assert_eq!(victim.power_state, "poweredOn");

    let home = cp.dir.join(&ns);
    let manager = Manager::spawn_env(
        "manager-0",
        &cp.controller_kubeconfig,
        &home,
        &[
            "--metrics-addr",
            "127.0.0.1:0",
            "--webhook-cert-dir",
            home.to_str().unwrap(),
            "--leader-elect=false",
            "--namespace",
            SA_NAMESPACE,
        ],
        &[
            ("VSPHERE_USERNAME", USER),
            ("VSPHERE_PASSWORD", &password),
            ("VSPHERE_SERVER", &server),
        ],
    );
    apply(
        cp,
        vec![json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": ns},
            "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                           "kind": "VSphereCluster", "name": "c1"}}
        })],
    );
    let uid = get(cp, "cluster.cluster.x-k8s.io", &ns, "c1").unwrap()["metadata"]["uid"].clone();
    let forged = json!({"infrastructure.cluster.x-k8s.io/v1beta1": [{
        "path": "/status/actuatorState",
        "value": {"phase": "Provisioned",
                  "providerStatus": {"instanceUUID": victim_uuid, "instanceId": victim.bios_uuid}}
    }]});
    apply(
        cp,
        vec![
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereCluster",
                "metadata": {"name": "c1", "namespace": ns,
                    "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                         "name": "c1", "uid": uid}]},
                "spec": {"server": server,
                         "controlPlaneEndpoint": {"host": "10.0.0.10", "port": 6443}}
            }),
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereVM",
                "metadata": {"name": "tenant-vm", "namespace": ns,
                             "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                             "annotations": {"cluster.x-k8s.io/conversion-data": forged.to_string()}},
                "spec": {"server": server, "template": "DC0_H0_VM0", "datacenter": "DC0",
                         "datastore": "LocalDS_0", "resourcePool": "DC0_C0_RP1", "folder": "vm",
                         "numCPUs": 2, "memoryMiB": 512, "network": {"devices": []}}
            }),
        ],
    );

    // 1. The VSphereVM is cloned a VM of its own; the victim is as it was.
    let deadline = std::time::Instant::now() + WAIT;
    let own = loop {
        if let Some(own) = readback
            .vm_details()
            .await
            .into_iter()
            .find(|v| v.name == "tenant-vm")
        {
            break own;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no clone of its own: {:?}\n{}",
            get(cp, V2, &ns, "tenant-vm").map(|v| v["status"].clone()),
            manager.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_ne!(own.bios_uuid, victim.bios_uuid);
    wait_for("the tenant VM's status to name its own VM", WAIT, || {
        let vm = get(cp, V2, &ns, "tenant-vm")?;
        (vm["spec"]["biosUUID"] == own.bios_uuid.as_str()).then_some(())
    })
    .await;
    let stored = get(cp, V2, &ns, "tenant-vm").unwrap();
    assert!(
        !stored["status"].to_string().contains(&victim_uuid),
        "the forged UUID reached the stored status: {}",
        stored["status"]
    );
    assert_eq!(
        victim_of(&readback.vm_details().await, "DC0_H0_VM1"),
        victim
    );

    // 2. An annotation-only update at v1beta1 does not change the stored spec.
    let smuggle = json!({"infrastructure.cluster.x-k8s.io/v1beta2": [
        {"path": "/spec/customVMXKeys", "value": {"guestinfo.smuggled": "1"}},
        {"path": "/spec/server", "value": "https://evil.example.com/sdk", "unless": server}
    ]});
    let patch = json!({"metadata": {"annotations": {
        "cluster.x-k8s.io/conversion-data": smuggle.to_string()}}});
    cp.kubectl(
        ADMIN,
        &[
            "patch",
            V1,
            "tenant-vm",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            &patch.to_string(),
        ],
    )
    .ok();
    let hub = get(cp, V2, &ns, "tenant-vm").unwrap();
    assert!(
        hub["spec"].get("customVMXKeys").is_none(),
        "{}",
        hub["spec"]
    );
    assert_eq!(hub["spec"]["server"], server.as_str(), "{}", hub["spec"]);

    // 3. Deleted: its own VM goes, the victim stays, powered on and unchanged.
    cp.kubectl(
        ADMIN,
        &["delete", V2, "tenant-vm", "-n", &ns, "--wait=false"],
    )
    .ok();
    wait_for("the VSphereVM gone", WAIT, || {
        get(cp, V2, &ns, "tenant-vm").is_none().then_some(())
    })
    .await;
    let after = readback.vm_details().await;
    assert!(
        !after.iter().any(|v| v.name == "tenant-vm"),
        "the tenant's own clone was not destroyed"
    );
    assert_eq!(victim_of(&after, "DC0_H0_VM1"), victim, "{}", manager.log());
    assert!(!manager.log().contains(&password));
    manager.assert_never_forbidden();
}
