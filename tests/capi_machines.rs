//! Cluster API machines in our zones, end to end with Cluster API's own controllers (v1.14.2,
//! hack/capi/build.sh) on the real kube-apiserver (tests/support/realapi.rs) and vcsim:
//! `clusterctl init` of core, kubeadm bootstrap, kubeadm control plane and this provider from the
//! offline repository; CAPI's three managers and ours running as processes (tests/support/capi.rs
//! says why and as whom).
//!
//! * a. One CAPI Machine per zone, each with a ready bootstrap Secret and a VSphereMachine: each
//!   VM is read back from vcsim over raw SOAP (not through our client) in its zone's pool,
//!   folder, datastore and VM group, powered on, its guestinfo decoding to the Secret and to
//!   metadata naming it; CAPI's Machine controller copies our providerID and the Machine
//!   reaches `Provisioned`.
//! * b. A KubeadmControlPlane over a VSphereMachineTemplate: KCP (its code) picks one of the
//!   control-plane failure domains CAPI copied from us for its first Machine, the kubeadm
//!   bootstrap provider writes its bootstrap data, and its VM lands in that zone.
//! * c. Deleting the Cluster: CAPI deletes its machines, we destroy every VM and release every
//!   VSphereMachine and VSphereVM.
//! * CAPV's own cluster template with CAPV's e2e failure domain, applied unchanged after
//!   `clusterctl generate` (see [`capv_cluster_template_reaches_a_provisioned_control_plane_machine_in_its_zone`]).
//!
//! Where the flow stops: vcsim VMs never boot, so no kubelet ever registers a Node. CAPI's
//! Machine phase therefore stops at `Provisioned` (Running needs a nodeRef), the Cluster's
//! ControlPlaneInitialized never turns true, KCP stops after its first Machine (its preflight
//! checks want that Machine's Node), and the kubeadm bootstrap provider holds worker joins.
//! vcsim VMs report no IP on their own either: the test gives each VM one with a raw
//! `ReconfigVM_Task` setting extraConfig `SET.guest.ipAddress`, vcsim's hook for guest
//! properties, standing in for VMware Tools in a booted guest (CAPV's own simulator setup does
//! the same job with a fixed-IP customization).
//!
//! Setup an admin would do with govc (host groups, folders, tags) uses this crate's vCenter
//! client; every assertion on vCenter goes through [`process::Readback`] instead.
//!
//! CAPI v1.14 stores its core objects at v1beta2; this provider implements the v1beta1 contract,
//! so the test writes and reads CAPI's Clusters and Machines at v1beta1
//! (`clusters.v1beta1.cluster.x-k8s.io`), which v1.14 still serves through its conversion webhook
//! (on loopback, tests/support/capi.rs); CAPV's v1.13.1 template is v1beta1 too.
//!
//! Gated on `CAPI_BIN_DIR` like tests/capi_clusterctl.rs.
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

use std::path::Path;
use std::time::{Duration, Instant};

use admin_setup::tag;
use capi::{apply_retrying, capi_bin_dir, clusterctl, text};
use capi_world::{
    ADMIN, KUBERNETES_VERSION, TEMPLATE, V1BETA1, World, ZONES, assert_guestinfo, assert_in_zone,
    b64, condition, list, readback, world,
};
use serde_json::{Value, json};

/// Prints how long a phase took (a measurement for the record, never asserted).
fn phase(start: &mut Instant, what: &str) {
    eprintln!(
        "capi_machines: {what} in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    *start = Instant::now();
}

/// The manager's own record of the vCenter changes it made for VSphereVM `ns/name` wants the VM
/// group join before the power-on: DRS applies VM-host rules only to VMs in the group when they
/// power on (CAPV #1217). vcsim keeps no per-VM history of group edits to read this from.
fn assert_joined_before_power_on(log: &str, ns: &str, name: &str, group: &str) {
    let change = |what: &str| {
        log.find(&format!("change=VSphereVM {ns}/{name}: {what}"))
            .unwrap_or_else(|| panic!("no '{what}' for {name} in the manager's log:\n{log}"))
    };
    assert!(
        change(&format!("add to VM group {group}")) < change("power on"),
        "{name} powered on before joining {group}:\n{log}"
    );
}

/// The VSphereMachine spec every machine here clones with (the zone supplies the rest).
fn clone_spec() -> Value {
    json!({"template": TEMPLATE, "cloneMode": "fullClone", "numCPUs": 2, "memoryMiB": 2048,
           "os": "Linux", "powerOffMode": "hard"})
}

/// The cloud-config a worker's bootstrap Secret carries.
fn user_data(name: &str) -> String {
    format!("#cloud-config\nhostname: {name}\nruncmd:\n- echo {name} joined\n")
}

/// Worker `worker-{i}` in zone `zone-{i}`: its bootstrap Secret (ready, as a bootstrap
/// provider leaves it), its VSphereMachine and the CAPI Machine naming both.
fn worker(ns: &str, i: usize) -> Vec<Value> {
    let name = format!("worker-{i}");
    vec![
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
            "metadata": {"name": format!("{name}-bootstrap"), "namespace": ns,
                         "labels": {"cluster.x-k8s.io/cluster-name": "demo"}},
            "stringData": {"value": user_data(&name), "format": "cloud-config"}
        }),
        json!({
            "apiVersion": V1BETA1, "kind": "VSphereMachine",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {"cluster.x-k8s.io/cluster-name": "demo"}},
            "spec": clone_spec()
        }),
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {"cluster.x-k8s.io/cluster-name": "demo"}},
            "spec": {
                "clusterName": "demo",
                "failureDomain": format!("zone-{i}"),
                "bootstrap": {"dataSecretName": format!("{name}-bootstrap")},
                "infrastructureRef": {"apiVersion": V1BETA1, "kind": "VSphereMachine", "name": name}
            }
        }),
    ]
}

/// The Cluster `demo` over our VSphereCluster `demo` (every zone, endpoint 10.0.0.10:6443: the
/// kubeadm providers do nothing without one), a KubeadmControlPlane of one replica over the
/// VSphereMachineTemplate `demo-control-plane`.
fn cluster(ns: &str, server: &str, user: &str, password: &str) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "vsphere-credentials", "namespace": ns},
            "stringData": {"username": user, "password": password}
        }),
        json!({
            "apiVersion": V1BETA1, "kind": "VSphereCluster",
            "metadata": {"name": "demo", "namespace": ns},
            "spec": {"server": server,
                     "identityRef": {"kind": "Secret", "name": "vsphere-credentials"},
                     "controlPlaneEndpoint": {"host": "10.0.0.10", "port": 6443},
                     "failureDomainSelector": {}}
        }),
        json!({
            "apiVersion": V1BETA1, "kind": "VSphereMachineTemplate",
            "metadata": {"name": "demo-control-plane", "namespace": ns},
            "spec": {"template": {"spec": clone_spec()}}
        }),
        json!({
            "apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane",
            "metadata": {"name": "demo", "namespace": ns},
            "spec": {
                "replicas": 1,
                "version": KUBERNETES_VERSION,
                "machineTemplate": {"infrastructureRef": {"apiVersion": V1BETA1,
                    "kind": "VSphereMachineTemplate", "name": "demo-control-plane"}},
                "kubeadmConfigSpec": {}
            }
        }),
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "demo", "namespace": ns},
            "spec": {
                "infrastructureRef": {"apiVersion": V1BETA1, "kind": "VSphereCluster", "name": "demo"},
                "controlPlaneRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
                                    "kind": "KubeadmControlPlane", "name": "demo"}
            }
        }),
    ]
}

/// Gives VM `name` a guest IP (see the module doc: vcsim's stand-in for VMware Tools).
async fn set_guest_ip(w: &World, name: &str, ip: &str) {
    let vm = w.vm(name).await.unwrap();
    readback(&w.sim).set_guest_ip(&vm.moref, ip).await;
}

/// Machine `name` once CAPI has copied our providerID and set phase Provisioned: the
/// providerID is `vsphere://<the VM's BIOS UUID>` and the address ours.
async fn assert_provisioned(w: &World, ns: &str, name: &str, ip: &str) {
    let vm = w.vm(name).await.unwrap();
    let machine = w
        .until(
            &format!("Machine {name} Provisioned"),
            Duration::from_secs(90),
            async || {
                let m = w
                    .find("machines.v1beta1.cluster.x-k8s.io", name, ns)
                    .unwrap();
                if m["status"]["phase"] == "Provisioned" && m["spec"]["providerID"].is_string() {
                    Ok(m)
                } else {
                    Err(format!(
                        "Machine {}; VSphereMachine {}",
                        m["status"],
                        w.find("vspheremachine", name, ns)
                            .map(|v| v["status"].clone())
                            .unwrap_or_default()
                    ))
                }
            },
        )
        .await;
    assert_eq!(
        machine["spec"]["providerID"],
        format!("vsphere://{}", vm.bios_uuid),
        "CAPI copied our providerID"
    );
    let vsm = w.find("vspheremachine", name, ns).unwrap();
    assert_eq!(vsm["spec"]["providerID"], machine["spec"]["providerID"]);
    assert_eq!(vsm["status"]["ready"], true, "{vsm}");
    let addresses = machine["status"]["addresses"].as_array().cloned();
    assert!(
        addresses
            .unwrap_or_default()
            .iter()
            .any(|a| a["address"] == ip),
        "Machine {name} addresses (copied by CAPI from ours) lack {ip}: {machine}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capi_machines_and_a_kubeadm_control_plane_land_in_our_zones_and_go_with_the_cluster() {
    let Some(capi) = capi_bin_dir() else {
        eprintln!(
            "skipped: CAPI_BIN_DIR is not set (hack/test.sh sets it from hack/capi/build.sh)"
        );
        return;
    };
    let mut t = Instant::now();
    let w = world(capi).await;
    phase(&mut t, "clusterctl init, vcsim, four managers started");
    let cp = w.cp;
    let ns = cp.namespace("capi-machines");
    let server = w.sim.url().to_string();
    let (user, password) = w.sim.credentials();

    // Three zones, verified against vcsim (autoConfigure makes the VM groups and rules).
    w.three_ready_zones().await;

    phase(&mut t, "three zones ready");
    // The Cluster, the machines: every object admitted by its owner's webhooks (ours, CAPI's,
    // KCP's).
    apply_retrying(cp, &list(cluster(&ns, &server, user, password)));
    apply_retrying(cp, &list((0..ZONES).flat_map(|i| worker(&ns, i)).collect()));
    let cluster = w
        .until(
            "CAPI to take our failure domains",
            Duration::from_secs(120),
            async || {
                let c = w
                    .find("clusters.v1beta1.cluster.x-k8s.io", "demo", &ns)
                    .unwrap();
                if c["status"]["infrastructureReady"] == true
                    && c["status"]["failureDomains"]
                        .as_object()
                        .is_some_and(|f| f.len() == ZONES)
                {
                    Ok(c)
                } else {
                    Err(c["status"].to_string())
                }
            },
        )
        .await;
    assert_eq!(
        cluster["status"]["failureDomains"],
        w.get(&["vspherecluster", "demo", "-n", &ns])["status"]["failureDomains"],
        "CAPI copied our failure domains"
    );
    phase(
        &mut t,
        "Cluster infrastructure ready with our failure domains",
    );
    // a. One Machine per zone. CAPI makes each Machine its VSphereMachine's owner; we clone
    // the VM into the zone, join its VM group, power it on.
    let groups = w
        .until(
            "three worker VMs powered on",
            Duration::from_secs(180),
            async || {
                let vms = readback(&w.sim).vm_details().await;
                let on = (0..ZONES)
                    .filter(|i| {
                        vms.iter().any(|v| {
                            v.name == format!("worker-{i}") && v.power_state == "poweredOn"
                        })
                    })
                    .count();
                if on == ZONES {
                    Ok(readback(&w.sim).vm_groups().await)
                } else {
                    let states: Vec<_> = w
                        .items("vspheremachine", &ns)
                        .iter()
                        .map(|v| (v["metadata"]["name"].clone(), v["status"].clone()))
                        .collect();
                    Err(format!(
                        "{on} of {ZONES} powered on; VSphereMachines {states:?}"
                    ))
                }
            },
        )
        .await;
    phase(&mut t, "three worker VMs cloned and powered on");
    for i in 0..ZONES {
        let name = format!("worker-{i}");
        let vm = w.vm(&name).await.unwrap();
        assert_in_zone(&groups, &vm, i);
        assert_joined_before_power_on(&w.ours.log(), &ns, &name, &format!("vms-{i}"));
        assert_guestinfo(&vm, &user_data(&name));
        let vsm = w.find("vspheremachine", &name, &ns).unwrap();
        assert!(
            vsm["metadata"]["finalizers"].as_array().is_some_and(|f| f
                .iter()
                .any(|f| f == "vspheremachine.infrastructure.cluster.x-k8s.io")),
            "{vsm}"
        );
        assert!(
            vsm["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|o| o
                    .iter()
                    .any(|o| o["kind"] == "Machine" && o["name"] == name.as_str())),
            "CAPI made the Machine the owner: {vsm}"
        );
        let vm_object = w
            .find("vspherevm", &name, &ns)
            .unwrap_or_else(|| panic!("no VSphereVM {name}"));
        assert!(
            vm_object["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|o| o
                    .iter()
                    .any(|o| o["kind"] == "VSphereMachine" && o["name"] == name.as_str())),
            "{vm_object}"
        );
        assert!(
            vm_object["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| f
                    .iter()
                    .any(|f| f == "vspherevm.infrastructure.cluster.x-k8s.io")),
            "{vm_object}"
        );
        // No IP yet, so not ready, and the VSphereMachine says why; CAPI leaves the Machine
        // short of Provisioned.
        w.until(
            &format!("{name}: waiting for a network address"),
            Duration::from_secs(30),
            async || {
                let vsm = w.find("vspheremachine", &name, &ns).unwrap();
                match condition(&vsm, "VirtualMachineProvisioned") {
                    Some(c) if c["reason"] == "WaitingForNetworkAddress" => Ok(()),
                    _ => Err(vsm["status"].to_string()),
                }
            },
        )
        .await;
        let vsm = w.find("vspheremachine", &name, &ns).unwrap();
        assert_ne!(vsm["status"]["ready"], true, "{vsm}");
        let m = w
            .find("machines.v1beta1.cluster.x-k8s.io", &name, &ns)
            .unwrap();
        assert_ne!(m["status"]["phase"], "Provisioned", "{m}");
    }
    for i in 0..ZONES {
        set_guest_ip(&w, &format!("worker-{i}"), &format!("10.1.0.{}", 10 + i)).await;
    }
    // The flow stops at Provisioned: no kubelet ever joins, so there is no nodeRef and never
    // Running.
    for i in 0..ZONES {
        assert_provisioned(
            &w,
            &ns,
            &format!("worker-{i}"),
            &format!("10.1.0.{}", 10 + i),
        )
        .await;
    }

    phase(
        &mut t,
        "three worker Machines Provisioned after their guest IPs",
    );
    // b. KubeadmControlPlane: its first (and, without a Node, only) Machine gets a control-plane
    // failure domain from those CAPI copied from us, CABPK writes its bootstrap data, and its
    // VM lands in that zone with that data.
    let cp_machine = w
        .until(
            "KCP's Machine with bootstrap data",
            Duration::from_secs(120),
            async || {
                let machines = w.control_plane_machines(&ns);
                match machines.as_slice() {
                    [m] if m["spec"]["bootstrap"]["dataSecretName"].is_string() => Ok(m.clone()),
                    _ => Err(format!(
                        "Machines {machines:?}; KCP {}",
                        w.find("kubeadmcontrolplane", "demo", &ns)
                            .map(|k| k["status"].clone())
                            .unwrap_or_default()
                    )),
                }
            },
        )
        .await;
    let cp_name = cp_machine["metadata"]["name"].as_str().unwrap().to_string();
    let fd = cp_machine["spec"]["failureDomain"]
        .as_str()
        .unwrap_or_else(|| panic!("KCP placed its Machine in no failure domain: {cp_machine}"))
        .to_string();
    assert_eq!(
        cluster["status"]["failureDomains"][&fd]["controlPlane"], true,
        "{fd}: {cluster}"
    );
    let zone_index: usize = fd
        .strip_prefix("zone-")
        .and_then(|i| i.parse().ok())
        .unwrap_or_else(|| panic!("{fd} is not one of our zones"));
    let vm = w
        .until(
            &format!("the VM of {cp_name}"),
            Duration::from_secs(120),
            async || match w.vm(&cp_name).await {
                Some(vm) if vm.power_state == "poweredOn" => Ok(vm),
                other => Err(format!(
                    "{other:?}; VSphereMachines {:?}; VSphereVMs {:?}",
                    w.items("vspheremachine", &ns)
                        .iter()
                        .map(|v| v["status"].clone())
                        .collect::<Vec<_>>(),
                    w.items("vspherevm", &ns)
                        .iter()
                        .map(|v| v["status"].clone())
                        .collect::<Vec<_>>()
                )),
            },
        )
        .await;
    let groups = readback(&w.sim).vm_groups().await;
    assert_in_zone(&groups, &vm, zone_index);
    assert_joined_before_power_on(&w.ours.log(), &ns, &cp_name, &format!("vms-{zone_index}"));
    let secret = w.get(&[
        "secret",
        cp_machine["spec"]["bootstrap"]["dataSecretName"]
            .as_str()
            .unwrap(),
        "-n",
        &ns,
    ]);
    let kubeadm_data = b64(secret["data"]["value"].as_str().unwrap());
    assert!(
        kubeadm_data.contains("kubeadm init"),
        "CABPK's init data: {kubeadm_data}"
    );
    assert_guestinfo(&vm, &kubeadm_data);
    set_guest_ip(&w, &cp_name, "10.1.0.100").await;
    assert_provisioned(&w, &ns, &cp_name, "10.1.0.100").await;
    assert_eq!(
        w.control_plane_machines(&ns).len(),
        1,
        "KCP stops at one Machine: its preflight checks want that Machine's Node"
    );

    phase(&mut t, "KCP's Machine placed, cloned, Provisioned");
    // c. Deleting the Cluster: CAPI deletes the Machines and KCP, each Machine its
    // VSphereMachine; we power off and destroy every VM, delete the VSphereVMs and release
    // every finalizer, and CAPI lets the Cluster go.
    let names: Vec<String> = (0..ZONES)
        .map(|i| format!("worker-{i}"))
        .chain([cp_name.clone()])
        .collect();
    cp.kubectl(
        ADMIN,
        &[
            "delete",
            "clusters.v1beta1.cluster.x-k8s.io",
            "demo",
            "-n",
            &ns,
            "--wait=false",
        ],
    )
    .ok();
    w.until(
        "the Cluster gone",
        Duration::from_secs(180),
        async || match w.find("clusters.v1beta1.cluster.x-k8s.io", "demo", &ns) {
            None => Ok(()),
            Some(c) => Err(format!(
                "Cluster {}; Machines {}",
                c["status"],
                w.get(&["machines.v1beta1.cluster.x-k8s.io", "-n", &ns])["items"]
            )),
        },
    )
    .await;
    phase(&mut t, "Cluster deleted with its four machines");
    let left: Vec<String> = readback(&w.sim)
        .vm_details()
        .await
        .into_iter()
        .map(|v| v.name)
        .filter(|n| names.contains(n))
        .collect();
    assert!(left.is_empty(), "VMs left in vCenter: {left:?}");
    for kind in [
        "vspheremachine",
        "vspherevm",
        "machines.v1beta1.cluster.x-k8s.io",
    ] {
        let items = w.items(kind, &ns);
        assert!(items.is_empty(), "{kind} left: {items:?}");
    }

    capv_cluster_template_reaches_a_provisioned_control_plane_machine_in_its_zone(&w).await;
    phase(
        &mut t,
        "CAPV's cluster template: zone, Provisioned control-plane Machine, deletion",
    );

    let mut ours = w.ours;
    assert_eq!(ours.terminate(), Some(0), "{}", ours.log());
    let log = ours.log();
    assert!(!log.contains(password), "the manager logged the password");
    for refusal in ["forbidden", "Forbidden"] {
        assert!(
            !log.contains(refusal),
            "the installed RBAC refused a call:\n{log}"
        );
    }
    drop(w.managers);
}

/// CAPV's own cluster template (templates/cluster-template.yaml of CAPV v1.13.1, the CAPV minor
/// paired with CAPI v1.10) with the failure domain of CAPV's e2e flavor `ownerrefs-finalizers`
/// (its failure-domains.yaml and its VSphereCluster `failureDomainSelector: {}` patch), all
/// three files unchanged: `clusterctl generate` substitutes their variables with vcsim's values
/// and kustomize applies the patch as upstream's kustomization does. The failure domain is
/// applied (and waited for) before the rest, as an admin's zones precede the clusters using them.
///
/// What cannot work against vcsim, and why:
/// * Nothing boots: the KubeadmControlPlane's one Machine stops at Provisioned (after the
///   test's guest IP), the kube-vip static pod and the ClusterResourceSet (CPI, CSI) never reach
///   a workload cluster, and the MachineDeployment's worker waits for its bootstrap data (CABPK
///   holds joins until the control plane is initialized), so no worker VM is cloned.
/// * The tags: CAPV's failure-domains.yaml has `autoConfigure` commented out, so, as CAPV's e2e
///   setup does with govc, the test creates the region tag (category k8s-region, named after the
///   datacenter) and zone tag (k8s-zone, named after the compute cluster) first.
/// * `${VSPHERE_STORAGE_POLICY}` is empty (the e2e base kustomization removes the field;
///   vcsim's only policy would place nothing differently), `${VSPHERE_TLS_THUMBPRINT}` is empty
///   (vcsim serves plain HTTP here).
/// * `cloneMode: linkedClone`: vcsim's template VM has no snapshot, so the clone is a full one,
///   as CAPV does then (`pkg/services/govmomi/vcenter/clone.go`).
async fn capv_cluster_template_reaches_a_provisioned_control_plane_machine_in_its_zone(w: &World) {
    let cp = w.cp;
    // Only CAPV's zone in play: the selector `{}` takes every zone of the server.
    for kind in ["vspheredeploymentzone", "vspherefailuredomain"] {
        cp.kubectl(
            ADMIN,
            &["delete", kind, "--all", "--wait=true", "--timeout=60s"],
        )
        .ok();
    }
    tag(&w.admin, "k8s-region", "DC0", &["Datacenter"], &["/DC0"]).await;
    tag(
        &w.admin,
        "k8s-zone",
        "DC0_C1",
        &["ClusterComputeResource"],
        &["/DC0/host/DC0_C1"],
    )
    .await;

    let ns = cp.namespace("capv-template");
    let (user, password) = w.sim.credentials();
    let server = w.sim.url().to_string();
    let vars: Vec<(&str, &str)> = vec![
        ("NAMESPACE", &ns),
        ("CLUSTER_NAME", "capv"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.0.0.20"),
        ("CPI_IMAGE_K8S_VERSION", KUBERNETES_VERSION),
        ("VSPHERE_SERVER", &server),
        ("VSPHERE_TLS_THUMBPRINT", ""),
        ("VSPHERE_USERNAME", user),
        ("VSPHERE_PASSWORD", password),
        ("VSPHERE_DATACENTER", "DC0"),
        ("VSPHERE_COMPUTE_CLUSTER", "DC0_C1"),
        ("VSPHERE_RESOURCE_POOL", "DC0_C1_RP1"),
        ("VSPHERE_DATASTORE", "LocalDS_1"),
        ("VSPHERE_FOLDER", "zone-1-vms"),
        ("VSPHERE_NETWORK", "VM Network"),
        ("VSPHERE_TEMPLATE", TEMPLATE),
        ("VSPHERE_STORAGE_POLICY", ""),
        (
            "VSPHERE_SSH_AUTHORIZED_KEY",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2e test",
        ),
    ];
    let fixtures = realapi::repo().join("tests/fixtures");
    let dir = w.home.path().join("capv-template");
    std::fs::create_dir_all(&dir).unwrap();
    let generate = |args: &[&str], out: &str| {
        let o = clusterctl(&w.capi, cp, w.home.path(), args, &vars);
        assert!(o.status.success(), "clusterctl {args:?}:\n{}", text(&o));
        std::fs::write(dir.join(out), &o.stdout).unwrap();
    };
    let path = |p: &Path| p.to_str().unwrap().to_string();
    generate(
        &[
            "generate",
            "cluster",
            "capv",
            "--from",
            &path(&fixtures.join("capv/cluster-template.yaml")),
            "--target-namespace",
            &ns,
            "--kubernetes-version",
            KUBERNETES_VERSION,
            "--control-plane-machine-count",
            "1",
            "--worker-machine-count",
            "1",
        ],
        "cluster-template.yaml",
    );
    generate(
        &[
            "generate",
            "yaml",
            "--from",
            &path(&fixtures.join("capv-e2e-failure-domains.v1beta1.yaml")),
        ],
        "failure-domains.yaml",
    );
    generate(
        &[
            "generate",
            "yaml",
            "--from",
            &path(&fixtures.join("capv/vspherecluster-failuredomainselector.yaml")),
        ],
        "vspherecluster-failuredomainselector.yaml",
    );
    // The failure domain first, as an admin sets zones up before clusters use them: applied in
    // one go, the VSphereCluster can be ready (with no failure domains) before the zone exists,
    // and KCP places its first Machine with the failure domains of that moment, none (CAPV's
    // VSphereCluster does the same: it only waits for zones that exist).
    apply_retrying(
        cp,
        &std::fs::read_to_string(dir.join("failure-domains.yaml")).unwrap(),
    );
    w.until(
        "CAPV's zone ready",
        Duration::from_secs(60),
        async || match w.get(&["vspheredeploymentzone", "ownerrefs-finalizers"])["status"] {
            ref s if s["ready"] == true => Ok(()),
            ref s => Err(s.to_string()),
        },
    )
    .await;
    // Then the cluster template with the flavor's VSphereCluster patch, as upstream's
    // ownerrefs-finalizers kustomization (without its identity patches).
    std::fs::write(
        dir.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - cluster-template.yaml\npatchesStrategicMerge:\n  - vspherecluster-failuredomainselector.yaml\n",
    )
    .unwrap();
    let rendered = cp
        .kubectl(ADMIN, &["kustomize", dir.to_str().unwrap()])
        .ok()
        .stdout;
    apply_retrying(cp, &rendered);

    let machine = w
        .until(
            "the CAPV template's control-plane Machine with its VM",
            Duration::from_secs(180),
            async || {
                let machines = w.control_plane_machines(&ns);
                let [m] = machines.as_slice() else {
                    return Err(format!(
                        "Machines {machines:?}; Cluster {}",
                        w.find("clusters.v1beta1.cluster.x-k8s.io", "capv", &ns)
                            .map(|c| c["status"].clone())
                            .unwrap_or_default()
                    ));
                };
                let name = m["metadata"]["name"].as_str().unwrap();
                match w.vm(name).await {
                    Some(vm) if vm.power_state == "poweredOn" => Ok((m.clone(), vm)),
                    other => Err(format!(
                        "{other:?}; VSphereMachine {}; VSphereVM {}",
                        w.find("vspheremachine", name, &ns)
                            .map(|v| v["status"].clone())
                            .unwrap_or_default(),
                        w.find("vspherevm", name, &ns)
                            .map(|v| v["status"].clone())
                            .unwrap_or_default()
                    )),
                }
            },
        )
        .await;
    let (m, vm) = machine;
    assert_eq!(m["spec"]["failureDomain"], "ownerrefs-finalizers", "{m}");
    assert_eq!(vm.pool, "DC0_C1_RP1", "{vm:?}");
    assert_eq!(vm.folder, "zone-1-vms", "{vm:?}");
    let cp_name = vm.name.clone();
    set_guest_ip(w, &cp_name, "10.2.0.10").await;
    assert_provisioned(w, &ns, &cp_name, "10.2.0.10").await;

    // The worker: CABPK holds its join (no initialized control plane), so it waits for
    // bootstrap data and nothing is cloned for it. Its MachineSet may still be making it.
    let workers = w
        .until(
            "the MachineDeployment's one worker Machine",
            Duration::from_secs(60),
            async || {
                let list = w.get(&[
                    "machines.v1beta1.cluster.x-k8s.io",
                    "-n",
                    &ns,
                    "-l",
                    "!cluster.x-k8s.io/control-plane",
                ]);
                let items = list["items"].as_array().cloned().unwrap_or_default();
                match items.len() {
                    1 => Ok(items),
                    _ => Err(format!("worker Machines: {items:?}")),
                }
            },
        )
        .await;
    assert!(
        workers[0]["spec"]["bootstrap"]["dataSecretName"].is_null(),
        "{}",
        workers[0]
    );
    let worker = workers[0]["metadata"]["name"].as_str().unwrap();
    assert!(w.vm(worker).await.is_none());
    w.until(
        &format!("{worker}: waiting for the control plane"),
        Duration::from_secs(30),
        async || {
            let vsm = w.find("vspheremachine", worker, &ns);
            match vsm
                .as_ref()
                .and_then(|v| condition(v, "VirtualMachineProvisioned"))
            {
                Some(c) if c["reason"] == "WaitingForControlPlaneInitialized" => Ok(()),
                _ => Err(format!("{vsm:?}")),
            }
        },
    )
    .await;

    cp.kubectl(
        ADMIN,
        &[
            "delete",
            "clusters.v1beta1.cluster.x-k8s.io",
            "capv",
            "-n",
            &ns,
            "--wait=false",
        ],
    )
    .ok();
    w.until(
        "the CAPV template's Cluster gone",
        Duration::from_secs(180),
        async || match w.find("clusters.v1beta1.cluster.x-k8s.io", "capv", &ns) {
            None => Ok(()),
            Some(c) => Err(c["status"].to_string()),
        },
    )
    .await;
    assert!(w.vm(&cp_name).await.is_none(), "{cp_name} left in vCenter");
}
