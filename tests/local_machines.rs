//! Machines in local mode, end to end against a live vcsim, through the `reconcile` command as
//! an admin runs it: a machine per zone type placed by zone name, read back in vCenter; the
//! deletion lifecycle with hooks; runs killed at random points and resumed; bad input.
//!
//! Coded for real vCenter. The vcsim of govmomi 0.24.2 ignored clone sizing and `powerOn`, finished
//! tasks inside the call and had no DuplicateName on clone; current vcsim (hack/vcsim/go.mod) does
//! all three like vCenter, so a run here also goes through "task still running" polls. Still
//! vcsim-only: the clone lands on the template's host whatever pool it goes to.
#[path = "support/admin_setup.rs"]
mod admin_setup;
#[path = "support/latency_proxy.rs"]
mod latency_proxy;
#[path = "support/local_run.rs"]
mod local_run;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use admin_setup::host_group;
use serde_json::Value;
use vcsim::{FaultKind, FaultSpec, Vcsim};
use vsphere_provider::vcenter::model::cluster::ClusterGroup;

use local_run::{BIN, Run, admin, extra_config, kill_runs, reconcile, vm_property, workdir};

fn zone(
    name: &str,
    fd: &str,
    kind: &str,
    cluster: Option<&str>,
    ds: &str,
    pool: Option<&str>,
    hosts: Option<(&str, &str)>,
) -> String {
    let cc = cluster
        .map(|c| format!("    computeCluster: {c}\n"))
        .unwrap_or_default();
    let h = hosts
        .map(|(vg, hg)| format!("    hosts: {{vmGroupName: {vg}, hostGroupName: {hg}}}\n"))
        .unwrap_or_default();
    let p = pool
        .map(|p| format!("    resourcePool: {p}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata:
  name: {fd}
spec:
  region: {{name: region-1, type: Datacenter, tagCategory: k8s-region, autoConfigure: true}}
  zone: {{name: {fd}-zone, type: {kind}, tagCategory: k8s-zone, autoConfigure: true}}
  topology:
    datacenter: DC0
{cc}{h}    datastore: {ds}
    networks: [VM Network]
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata:
  name: {name}
spec:
  server: 127.0.0.1
  failureDomain: {fd}
  placementConstraint:
{p}    folder: vm
---
"
    )
}

fn machine(name: &str, zone: &str, template: &str, hooks: &str) -> String {
    format!(
        "apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  name: {name}
  namespace: openshift-machine-api
  labels:
    vsphere-provider.io/deployment-zone: {zone}
    machine.openshift.io/cluster-api-machine-role: master
    machine.openshift.io/cluster-api-machine-type: master
    machine.openshift.io/cluster-api-cluster: demo
spec:
{hooks}  providerSpec:
    value:
      apiVersion: machine.openshift.io/v1beta1
      kind: VSphereMachineProviderSpec
      template: {template}
      numCPUs: 4
      memoryMiB: 16384
      diskGiB: 120
      network:
        devices: []
---
"
    )
}

/// Three zones, one per type, in three clusters; a host group precreated for the HostGroup one.
async fn estate(sim: &Vcsim, dir: &Path) {
    host_group(
        &admin(sim),
        "/DC0/host/DC0_C2",
        "hosts-c",
        &["/DC0/host/DC0_C2/DC0_C2_H0"],
    )
    .await;
    let mut y = String::new();
    y += &zone(
        "dz-a",
        "fd-a",
        "Datacenter",
        None,
        "LocalDS_0",
        Some("DC0_C0_RP1"),
        None,
    );
    y += &zone(
        "dz-b",
        "fd-b",
        "ComputeCluster",
        Some("DC0_C1"),
        "LocalDS_1",
        None,
        None,
    )
    .replace("[VM Network]", "[DC0_DVPG0]");
    y += &zone(
        "dz-c",
        "fd-c",
        "HostGroup",
        Some("DC0_C2"),
        "LocalDS_0",
        None,
        Some(("vms-c", "hosts-c")),
    );
    std::fs::write(dir.join("zones.yaml"), y).unwrap();
}

async fn sim() -> Vcsim {
    Vcsim::builder()
        .clusters(3)
        .hosts(2)
        .pools(1)
        .datastores(2)
        .start()
        .await
}

fn items<'a>(run: &'a Run, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    run.items(kind).into_iter()
}

fn machine_obj<'a>(run: &'a Run, name: &str) -> Option<&'a Value> {
    run.object("Machine", name)
}

fn condition<'a>(m: &'a Value, t: &str) -> Option<&'a Value> {
    m["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

#[tokio::test]
async fn a_machine_per_zone_type_lands_in_its_zones_pool_folder_and_datastore() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let mut y = String::new();
    for (m, z) in [("m-a", "dz-a"), ("m-b", "dz-b"), ("m-c", "dz-c")] {
        y += &machine(m, z, "DC0_H0_VM0", "");
    }
    std::fs::write(manifests.join("machines.yaml"), y).unwrap();
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let c = admin(&sim);
    let inv = c.inventory().await.unwrap();
    let expect = [
        ("m-a", "/DC0/host/DC0_C0/Resources/DC0_C0_RP1", "LocalDS_0"),
        ("m-b", "/DC0/host/DC0_C1/Resources", "LocalDS_1"),
        ("m-c", "/DC0/host/DC0_C2/Resources", "LocalDS_0"),
    ];
    for (name, pool, ds) in expect {
        let m = machine_obj(&run, name).unwrap();
        assert_eq!(m["status"]["phase"], "Running", "{m:#}");
        let uid = m["metadata"]["uid"].as_str().unwrap();
        let vm = inv
            .vm_by_instance_uuid(uid)
            .unwrap_or_else(|| panic!("no VM for {name}"));
        assert_eq!(vm.path, format!("/DC0/vm/{name}"), "folder");
        let info = vm.vm.as_ref().unwrap();
        assert_eq!(
            inv.path(info.resource_pool.as_ref().unwrap()),
            Some(pool),
            "{name} pool"
        );
        assert_eq!(info.power_state.as_deref(), Some("poweredOn"));
        // The datastore, in the VMX path and the VM's `datastore` list (govmomi 0.24.2 vcsim set
        // the VMX path only).
        let props = c
            .retrieve_objects(
                std::slice::from_ref(&vm.moref),
                "VirtualMachine",
                &["summary.config.vmPathName", "datastore"],
            )
            .await
            .unwrap();
        let vmx = props[0].text("summary.config.vmPathName").unwrap();
        assert!(vmx.starts_with(&format!("[{ds}]")), "{name}: {vmx}");
        let on: Vec<&str> = props[0].props["datastore"]
            .children
            .iter()
            .map(|d| d.text.as_str())
            .collect();
        let want = inv.at_path(&format!("/DC0/datastore/{ds}")).unwrap();
        // Real vCenter lists only the zone's datastore (a full clone moves every disk there).
        // vcsim also lists the template's: it applies the diskGiB resize `edit` (carrying the
        // template disk's backing fileName, as MAO sends it) after the copy, re-pointing the disk
        // at the template's vmdk (simulator/virtual_machine.go, CloneVMTask + configureDevice).
        assert!(
            on.contains(&want.moref.value.as_str()),
            "{name} datastore: {on:?}"
        );
        assert_eq!(
            m["spec"]["providerID"].as_str().unwrap(),
            format!("vsphere://{}", info.bios_uuid.as_deref().unwrap())
        );
        assert_eq!(m["status"]["nodeRef"]["name"], name);
        assert_eq!(
            m["metadata"]["labels"]["machine.openshift.io/region"],
            "region-1"
        );
    }
    // The HostGroup zone's VM is in the VM group, and joined it before it was powered on.
    let c2 = inv.at_path("/DC0/host/DC0_C2").unwrap().moref.clone();
    let cfg = c.cluster_config(&c2).await.unwrap();
    let vmc = inv
        .vm_by_instance_uuid(
            machine_obj(&run, "m-c").unwrap()["metadata"]["uid"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    match cfg.group("vms-c") {
        Some(ClusterGroup::Vm { vms, .. }) => assert_eq!(vms, std::slice::from_ref(&vmc.moref)),
        other => panic!("{other:?}"),
    }
    let join = run
        .stderr
        .find("m-c: add to VM group vms-c")
        .expect(&run.stderr);
    let power = run.stderr.find("m-c: power on").expect(&run.stderr);
    assert!(join < power, "group edit before power-on:\n{}", run.stderr);
    assert_eq!(items(&run, "Node").count(), 3);
    // m-b's zone puts its one NIC on the distributed port group: the template's NIC is gone.
    let vmb = inv
        .vm_by_instance_uuid(
            machine_obj(&run, "m-b").unwrap()["metadata"]["uid"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    let dev = c
        .retrieve_objects(
            std::slice::from_ref(&vmb.moref),
            "VirtualMachine",
            &["config.hardware.device"],
        )
        .await
        .unwrap();
    let devices = dev[0].props.get("config.hardware.device").unwrap();
    let nics: Vec<_> = devices
        .children
        .iter()
        .filter(|d| d.child("addressType").is_some() || d.child("macAddress").is_some())
        .collect();
    assert_eq!(nics.len(), 1, "{nics:#?}");
    // diskGiB grew the template's disk (vcsim stores the edited capacity).
    let disk = devices
        .children
        .iter()
        .find(|d| d.xsi_type.as_deref() == Some("VirtualDisk"))
        .unwrap();
    assert_eq!(
        disk.child_text("capacityInKB"),
        Some("125829120"),
        "{disk:#?}"
    );
    let pg = inv
        .at_path("/DC0/network/DC0_DVPG0")
        .unwrap()
        .moref
        .value
        .clone();
    let backing = nics[0].child("backing").unwrap();
    assert_eq!(
        backing
            .child("port")
            .and_then(|p| p.child_text("portgroupKey")),
        Some(pg.as_str()),
        "{backing:#?}"
    );

    // Re-running the same manifests and state: no vCenter write, no new object.
    let again = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("0 vCenter change(s) made"),
        "{}",
        again.stderr
    );
    assert!(
        again.stderr.contains("0 machine change(s) in vCenter"),
        "{}",
        again.stderr
    );
    assert_eq!(
        again.list["items"].as_array().unwrap().len(),
        run.list["items"].as_array().unwrap().len() - items(&run, "Event").count()
    );
    assert_eq!(
        items(&again, "Event").count(),
        0,
        "no events when nothing happens"
    );
}

#[tokio::test]
async fn deletion_follows_the_lifecycle_with_hooks_added_and_removed() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let pre_drain = "  lifecycleHooks:\n    preDrain:\n    - {name: EtcdQuorumOperator, owner: clusteroperator/etcd}\n";
    let pre_term = "  lifecycleHooks:\n    preTerminate:\n    - {name: kcp-cleanup, owner: test}\n";
    let write = |hooks: &str| {
        std::fs::write(
            manifests.join("m.yaml"),
            machine("m-b", "dz-b", "DC0_H0_VM0", hooks),
        )
        .unwrap()
    };
    write(pre_drain);
    assert_eq!(
        reconcile(&sim, &manifests, &state, &["--simulate-nodes"]).code,
        0
    );
    let c = admin(&sim);
    let vm_count =
        |inv: &vsphere_provider::vcenter::Inventory| inv.iter().filter(|e| e.name == "m-b").count();

    // 1. The preDrain hook holds everything: no cordon, the VM stays on.
    let run = reconcile(
        &sim,
        &manifests,
        &state,
        &["--simulate-nodes", "--delete", "machine/m-b"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let m = machine_obj(&run, "m-b").unwrap();
    assert_eq!(m["status"]["phase"], "Deleting");
    let d = condition(m, "Drainable").unwrap();
    assert_eq!(
        (d["status"].as_str(), d["reason"].as_str()),
        (Some("False"), Some("HookPresent"))
    );
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("EtcdQuorumOperator")
    );
    let node = items(&run, "Node")
        .find(|n| n["metadata"]["name"] == "m-b")
        .unwrap();
    assert_ne!(
        node["spec"]["unschedulable"], true,
        "not cordoned while the hook exists"
    );
    assert!(items(&run, "Event").any(|e| e["reason"] == "DrainBlocked"));
    assert!(
        run.stderr
            .contains("Drain operation currently blocked by: [{Name:EtcdQuorumOperator Owner:clusteroperator/etcd}]"),
        "{}",
        run.stderr
    );
    assert_eq!(vm_count(&c.inventory().await.unwrap()), 1);

    // 2. The preDrain hook goes (hooks may be removed while deleting); a preTerminate hook holds
    //    the VM after the drain. (Adding hooks to a deleting machine is refused upstream; the
    //    preTerminate one was there from the start in a real cluster.)
    write(pre_term);
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let m = machine_obj(&run, "m-b").unwrap();
    assert_eq!(condition(m, "Drained").unwrap()["status"], "True");
    assert_eq!(condition(m, "Terminable").unwrap()["reason"], "HookPresent");
    let node = items(&run, "Node")
        .find(|n| n["metadata"]["name"] == "m-b")
        .unwrap();
    assert_eq!(node["spec"]["unschedulable"], true, "cordoned");
    let inv = c.inventory().await.unwrap();
    assert_eq!(vm_count(&inv), 1, "the VM waits for the preTerminate hook");

    // 3. No hooks: power off, destroy, the Node, the finalizer — in that order.
    write("");
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert!(
        machine_obj(&run, "m-b").is_none(),
        "released and gone: {}",
        run.stderr
    );
    assert!(
        items(&run, "Node").all(|n| n["metadata"]["name"] != "m-b"),
        "node deleted"
    );
    assert_eq!(vm_count(&c.inventory().await.unwrap()), 0, "VM destroyed");
    let off = run.stderr.find("m-b: power off").expect(&run.stderr);
    let destroy = run.stderr.find("m-b: destroy").expect(&run.stderr);
    assert!(off < destroy);
}

#[tokio::test]
async fn killed_at_random_points_then_rerun_makes_exactly_one_vm_per_machine() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let mut y = String::new();
    for (m, z) in [("k-a", "dz-a"), ("k-b", "dz-b"), ("k-c", "dz-c")] {
        y += &machine(m, z, "DC0_H0_VM0", "");
    }
    std::fs::write(manifests.join("machines.yaml"), y).unwrap();
    let seed = kill_runs(&sim, &manifests, &state, &["--simulate-nodes"], 20, 400).await;
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "seed {seed}: {}", run.stderr);
    let inv = admin(&sim).inventory().await.unwrap();
    let vms: Vec<_> = inv.iter().filter(|e| e.name.starts_with("k-")).collect();
    assert_eq!(
        vms.len(),
        3,
        "seed {seed}: {:?}",
        vms.iter().map(|v| &v.path).collect::<Vec<_>>()
    );
    for name in ["k-a", "k-b", "k-c"] {
        let m = machine_obj(&run, name).unwrap();
        assert_eq!(m["status"]["phase"], "Running", "seed {seed}");
        let uid = m["metadata"]["uid"].as_str().unwrap();
        let with_uuid: Vec<_> = vms
            .iter()
            .filter(|v| v.vm.as_ref().and_then(|i| i.instance_uuid.as_deref()) == Some(uid))
            .collect();
        assert_eq!(with_uuid.len(), 1, "seed {seed}: {name}");
    }
}

#[tokio::test]
async fn bad_input_fails_the_machine_or_backs_off_without_touching_vcenter() {
    let sim = Vcsim::builder()
        .clusters(3)
        .hosts(2)
        .pools(1)
        .datastores(2)
        .credentials("admin", "secret")
        .start()
        .await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let mut y = machine("bad-template", "dz-a", "no-such-template", "");
    y += &machine("bad-zone", "dz-nope", "DC0_H0_VM0", "");
    std::fs::write(manifests.join("machines.yaml"), y).unwrap();
    let run = reconcile(&sim, &manifests, &state, &[]);
    assert_eq!(run.code, 1);
    let m = machine_obj(&run, "bad-template").unwrap();
    assert_eq!(m["status"]["phase"], "Failed");
    assert_eq!(m["status"]["errorReason"], "InvalidConfiguration");
    let msg = m["status"]["errorMessage"].as_str().unwrap();
    assert!(
        msg.starts_with("spec.providerSpec.value.template:") && msg.contains("no-such-template"),
        "{msg}"
    );
    // A zone that is not there is waited for (it may be applied later), not a failure:
    // nothing is cloned and the machine says which zone it waits for.
    let m = machine_obj(&run, "bad-zone").unwrap();
    assert_eq!(m["status"]["phase"], "Provisioning");
    assert!(m["status"]["errorReason"].is_null(), "{m}");
    assert!(
        m["status"]["providerStatus"]
            .to_string()
            .contains("waiting for the machine's placement: VSphereDeploymentZone \\\"dz-nope\\\""),
        "{m}"
    );
    assert!(
        run.stderr
            .contains("machine openshift-machine-api/bad-template is Failed"),
        "{}",
        run.stderr
    );

    // Wrong credentials: a condition, no phase change, no VM; the machine is left for the next run.
    let dir2 = tempfile::tempdir().unwrap();
    let m2 = dir2.path().join("m");
    std::fs::create_dir(&m2).unwrap();
    std::fs::copy(manifests.join("zones.yaml"), m2.join("zones.yaml")).unwrap();
    std::fs::write(
        m2.join("machines.yaml"),
        machine("good", "dz-b", "DC0_H0_VM0", ""),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["reconcile", "-f"])
        .arg(&m2)
        .args([
            "--server",
            sim.url(),
            "--username",
            "admin",
            "--password",
            "pw-Zq81x",
            "-o",
            "json",
            "--state",
        ])
        .arg(dir2.path().join("s.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "good")
        .unwrap();
    assert_ne!(m["status"]["phase"], "Failed");
    let c = condition(m, "InstanceExists").unwrap();
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("Unknown"), Some("ErrorCheckingProvider"))
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("pw-Zq81x"),
        "no secret in the output"
    );
    let inv = admin(&sim).inventory().await.unwrap();
    assert!(
        inv.iter()
            .all(|e| e.name != "good" && e.name != "bad-template"),
        "no VM created"
    );
}

/// When the sweep's vCenter read is refused (here: every property read answered 503, as a
/// vCenter behind a failing load balancer does), each machine says what failed — the read,
/// the server, the error — on stderr and in its `InstanceExists` condition, and the run exits
/// 1; no machine is left at "is -" without a reason.
#[tokio::test]
async fn a_refused_vcenter_read_is_named_for_every_machine() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    let workspace = "      workspace: {server: 127.0.0.1, datacenter: DC0, folder: /DC0/vm, resourcePool: /DC0/host/DC0_C0/Resources, datastore: LocalDS_0}\n";
    let mut y = String::new();
    for m in ["m-c0", "m-c1"] {
        y += &format!(
            "apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  name: {m}
  namespace: openshift-machine-api
spec:
  providerSpec:
    value:
      apiVersion: machine.openshift.io/v1beta1
      kind: VSphereMachineProviderSpec
      template: DC0_H0_VM0
{workspace}      network: {{devices: [{{networkName: VM Network}}]}}
---
"
        );
    }
    std::fs::write(manifests.join("machines.yaml"), y).unwrap();
    sim.inject(
        FaultSpec::new(FaultKind::Http503)
            .method("RetrievePropertiesEx")
            .count(10_000),
    )
    .await;
    let run = reconcile(&sim, &manifests, &state, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    for m in ["m-c0", "m-c1"] {
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with(&format!("machine openshift-machine-api/{m} is ")))
            .unwrap_or_else(|| panic!("no line for {m}:\n{}", run.stderr));
        assert!(
            line.contains("reading the inventory from") && line.contains("503"),
            "the read, the server and the error: {line}"
        );
        let obj = run.object("Machine", m).expect("machine in the output");
        let exists = obj["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "InstanceExists")
            .unwrap_or_else(|| panic!("InstanceExists on {m}: {obj}"));
        assert_eq!(exists["status"], "Unknown");
        assert!(
            exists["message"]
                .as_str()
                .unwrap_or_default()
                .contains("reading the inventory from"),
            "{exists}"
        );
    }
}

/// `--dry-run` covers machines: it says what it would clone, and nothing is cloned and no state
/// is kept (a later real run starts from scratch and does exactly that).
#[tokio::test]
async fn a_dry_run_says_what_it_would_clone_and_clones_nothing() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    std::fs::write(
        manifests.join("m.yaml"),
        machine("m-a", "dz-a", "DC0_H0_VM0", ""),
    )
    .unwrap();
    let vms_before = admin(&sim)
        .inventory()
        .await
        .unwrap()
        .iter()
        .filter(|e| e.kind() == "VirtualMachine")
        .count();
    let run = reconcile(&sim, &manifests, &state, &["--dry-run"]);
    assert_eq!(run.code, 1, "pending changes: {}", run.stderr);
    let would: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("would: openshift-machine-api/m-a: "))
        .collect();
    assert_eq!(would.len(), 1, "{}", run.stderr);
    assert!(would[0].contains("clone "), "{}", would[0]);
    assert!(vms_before > 0);
    assert_eq!(
        admin(&sim)
            .inventory()
            .await
            .unwrap()
            .iter()
            .filter(|e| e.kind() == "VirtualMachine")
            .count(),
        vms_before,
        "nothing cloned"
    );
    assert!(!state.exists(), "no state file on a dry run");
}

/// How many VMs named `name` are in `/DC0/vm`.
async fn vms_named(sim: &Vcsim, name: &str) -> usize {
    admin(sim)
        .inventory()
        .await
        .unwrap()
        .all_at_path(&format!("/DC0/vm/{name}"))
        .len()
}

/// Never a second VM: `--no-state` twice, and a state file deleted between runs, each find the
/// VM the first run cloned by the identity it carries and adopt it — one VM per Machine, every
/// time (three Machines once became six VMs on vcsim).
#[tokio::test]
async fn runs_without_the_state_adopt_their_vms_and_never_clone_a_second() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let mut y = String::new();
    for (m, z) in [("n-a", "dz-a"), ("n-b", "dz-b")] {
        y += &machine(m, z, "DC0_H0_VM0", "");
    }
    std::fs::write(manifests.join("machines.yaml"), y).unwrap();
    let no_state = || {
        let out = Command::new(BIN)
            .args(["reconcile", "-f"])
            .arg(&manifests)
            .args([
                "--server",
                sim.url(),
                "--username",
                "admin",
                "--password",
                "secret",
            ])
            .args(["--no-state", "--simulate-nodes", "-o", "json"])
            .output()
            .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            list: serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        }
    };
    for run_no in 0..2 {
        let run = no_state();
        assert_eq!(run.code, 0, "run {run_no} with --no-state: {}", run.stderr);
        for m in ["n-a", "n-b"] {
            assert_eq!(vms_named(&sim, m).await, 1, "run {run_no}: one VM for {m}");
        }
        if run_no == 1 {
            assert!(
                run.stderr.contains("Adopted") || run.list.to_string().contains("Adopted"),
                "the second run adopted: {}",
                run.stderr
            );
        }
    }
    // With a state file, then the state file lost.
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    std::fs::remove_file(&state).unwrap();
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "state deleted: {}", run.stderr);
    for m in ["n-a", "n-b"] {
        assert_eq!(vms_named(&sim, m).await, 1, "state deleted: one VM for {m}");
        let obj = run.object("Machine", m).unwrap();
        assert_eq!(obj["status"]["phase"], "Running", "{obj:#}");
    }
}

/// A VM that is not the Machine's — here one cloned by hand into the Machine's folder under
/// its name — is never cloned over and never destroyed: the Machine says whose it is (nobody's)
/// in a condition and an event, and the run exits 1.
#[tokio::test]
async fn a_foreign_vm_with_the_machines_name_is_named_and_left_alone() {
    use vsphere_provider::vcenter::model::vm::CloneSpec;
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    std::fs::write(
        manifests.join("m.yaml"),
        machine("f-a", "dz-a", "DC0_H0_VM0", ""),
    )
    .unwrap();
    let c = admin(&sim);
    let inv = c.inventory().await.unwrap();
    let template = inv.at_path("/DC0/vm/DC0_H0_VM0").unwrap().moref.clone();
    let folder = inv.at_path("/DC0/vm").unwrap().moref.clone();
    let pool = inv
        .at_path("/DC0/host/DC0_H0/Resources")
        .map(|e| e.moref.clone());
    let spec = CloneSpec {
        name: "f-a".into(),
        folder,
        datastore: None,
        pool,
        host: None,
        instance_uuid: None,
        annotation: None,
        num_cpus: None,
        num_cores_per_socket: None,
        memory_mb: None,
        extra_config: vec![],
        nics: vec![],
        disk_resize: None,
        data_disks: vec![],
        linked_clone: None,
        power_on: false,
    };
    let task = c.clone_vm(&template, &spec).await.unwrap();
    c.wait_task(&task, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(vms_named(&sim, "f-a").await, 1);
    let foreign = c
        .inventory()
        .await
        .unwrap()
        .at_path("/DC0/vm/f-a")
        .unwrap()
        .moref
        .clone();

    let run = reconcile(&sim, &manifests, &state, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(vms_named(&sim, "f-a").await, 1, "nothing cloned over it");
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("machine openshift-machine-api/f-a is "))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        line.contains("/DC0/vm/f-a") && line.contains("no Machine identity"),
        "{line}"
    );
    let obj = run.object("Machine", "f-a").unwrap();
    assert!(obj.to_string().contains("VMNameInUse"), "{obj:#}");
    // Deleting the Machine leaves the VM that was never its own.
    let run = reconcile(&sim, &manifests, &state, &["--delete", "machine/f-a"]);
    assert!(run.object("Machine", "f-a").is_none(), "{}", run.stderr);
    let still = c.inventory().await.unwrap();
    assert_eq!(
        still.at_path("/DC0/vm/f-a").map(|e| e.moref.clone()),
        Some(foreign)
    );
}

/// User data reaches the guest as machine-api-operator puts it there: the Ignition config of
/// the Secret the provider spec names, base64-encoded once, in
/// `guestinfo.ignition.config.data`, with the hostname, stealclock and the machine's identity;
/// the payload appears in no output, status or event.
#[tokio::test]
async fn user_data_reaches_the_clone_and_nowhere_else() {
    use base64::Engine as _;
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    std::fs::write(
        manifests.join("m.yaml"),
        machine("u-a", "dz-a", "DC0_H0_VM0", ""),
    )
    .unwrap();
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let x = extra_config(&sim, "/DC0/vm/u-a").await;
    let b64 = base64::engine::general_purpose::STANDARD.encode(local_run::IGNITION);
    assert_eq!(x.get("guestinfo.ignition.config.data"), Some(&b64));
    assert_eq!(
        x.get("guestinfo.ignition.config.data.encoding")
            .map(String::as_str),
        Some("base64")
    );
    assert_eq!(x.get("guestinfo.hostname").map(String::as_str), Some("u-a"));
    assert_eq!(x.get("stealclock.enable").map(String::as_str), Some("TRUE"));
    assert_eq!(
        x.get("vsphere-provider.machine").map(String::as_str),
        Some("openshift-machine-api/u-a cluster=demo")
    );
    let everything = format!("{}{}", run.stderr, run.list);
    assert!(
        !everything.contains(&b64) && !everything.contains("passwd"),
        "the payload leaked"
    );
}

/// A Machine whose user data Secret is missing waits, naming the Secret, and nothing is
/// cloned; once the Secret is there, the next run clones it.
#[tokio::test]
async fn a_missing_user_data_secret_holds_the_clone_and_names_the_secret() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let user_data = std::fs::read_to_string(manifests.join(local_run::USER_DATA_FILE)).unwrap();
    std::fs::remove_file(manifests.join(local_run::USER_DATA_FILE)).unwrap();
    std::fs::write(
        manifests.join("m.yaml"),
        machine("w-a", "dz-a", "DC0_H0_VM0", ""),
    )
    .unwrap();
    let run = reconcile(&sim, &manifests, &state, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(vms_named(&sim, "w-a").await, 0, "nothing cloned");
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("machine openshift-machine-api/w-a is "))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        line.contains("Secret openshift-machine-api/worker-user-data"),
        "{line}"
    );
    let obj = run.object("Machine", "w-a").unwrap();
    assert!(obj.to_string().contains("UserDataUnavailable"), "{obj:#}");
    std::fs::write(manifests.join(local_run::USER_DATA_FILE), user_data).unwrap();
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(vms_named(&sim, "w-a").await, 1);
}

/// New VMs of one datacenter that are ready in the same sweep are powered on by one
/// `PowerOnMultiVM_Task` (DRS fully automated, as upstream), not one task each; every machine
/// still reaches Running. (vcsim's clone tasks finish at their own pace, so the three VMs may be
/// ready in one sweep or two: fewer tasks than VMs, never a per-VM `PowerOnVM_Task`.) (vcsim returns per-VM
/// results but has no DRS: the override option is asserted on the wire in the client's tests;
/// a VM the batch did not power on is the next test, with hack/vcsim's `poweron-refuse` fault.)
#[tokio::test]
async fn new_vms_of_a_datacenter_are_powered_on_by_one_task() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let mut y = String::new();
    for (m, z) in [("p-a", "dz-a"), ("p-b", "dz-b"), ("p-c", "dz-a")] {
        y += &machine(m, z, "DC0_H0_VM0", "");
    }
    std::fs::write(manifests.join("machines.yaml"), y).unwrap();
    sim.reset_stats().await;
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let stats = sim.stats().await;
    let tasks = stats.soap("PowerOnMultiVM_Task");
    assert!(
        (1..3).contains(&tasks),
        "{tasks} power-on tasks for three VMs"
    );
    assert_eq!(stats.soap("PowerOnVM_Task"), 0);
    for m in ["p-a", "p-b", "p-c"] {
        assert_eq!(
            run.object("Machine", m).unwrap()["status"]["phase"],
            "Running"
        );
    }
}

/// A batch power-on that leaves one VM not attempted (vCenter's `notAttempted`, here vcsim's
/// `poweron-refuse` fault standing in for DRS finding no host: the task succeeds with an
/// `InsufficientResourcesFault` for that VM) fails that machine only, with the fault's type (not
/// vCenter's localized message: conditions carry no text a server wrote), and
/// retries it: it is neither Running nor Failed, while the batch's other machines are Running
/// after the same run. Once vCenter admits the VM, the next run powers it on, still in a batch.
#[tokio::test]
async fn a_vm_a_batch_power_on_refuses_is_retried_and_the_others_run() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let mut y = String::new();
    for (m, z) in [("r-a", "dz-a"), ("r-b", "dz-b"), ("r-c", "dz-a")] {
        y += &machine(m, z, "DC0_H0_VM0", "");
    }
    std::fs::write(manifests.join("machines.yaml"), y).unwrap();
    // Every batch of this run that names r-b refuses it.
    sim.inject(FaultSpec::new(FaultKind::RefusePowerOn { vm: "r-b".into() }).count(100))
        .await;
    sim.reset_stats().await;
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 1, "a machine failed this run: {}", run.stderr);
    let stats = sim.stats().await;
    assert!(stats.soap("PowerOnMultiVM_Task") >= 1);
    assert_eq!(stats.soap("PowerOnVM_Task"), 0, "no per-VM power-on");
    for m in ["r-a", "r-c"] {
        assert_eq!(
            run.object("Machine", m).unwrap()["status"]["phase"],
            "Running"
        );
    }
    // r-b: not Running, and retried rather than Failed: local mode prints a machine that backs
    // off as "is <phase>: <what failed>", a Failed one as "is Failed: <reason>: <message>".
    let refused = run.object("Machine", "r-b").unwrap();
    assert_eq!(refused["status"]["phase"], "Provisioned", "{refused:#}");
    assert!(refused["status"]["errorReason"].is_null(), "{refused:#}");
    assert_eq!(
        refused["status"]["providerStatus"]["instanceState"], "poweredOff",
        "{refused:#}"
    );
    let c = refused["status"]["providerStatus"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "MachineCreation"))
        .unwrap_or_else(|| panic!("{refused:#}"));
    assert_eq!(c["status"], "False", "{c:#}");
    let why = c["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("InsufficientResourcesFault")
            && !why.contains("resources in the parent resource pool are insufficient"),
        "{why}"
    );
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("machine openshift-machine-api/r-b is "))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        line.starts_with("machine openshift-machine-api/r-b is Provisioned: ")
            && line.contains("InsufficientResourcesFault"),
        "{line}"
    );

    sim.clear_faults().await;
    sim.reset_stats().await;
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let stats = sim.stats().await;
    assert_eq!(
        stats.soap("PowerOnMultiVM_Task"),
        1,
        "r-b alone, in a batch"
    );
    assert_eq!(stats.soap("PowerOnVM_Task"), 0);
    assert_eq!(
        stats.soap("CloneVM_Task"),
        0,
        "the refused VM is kept, not re-cloned"
    );
    for m in ["r-a", "r-b", "r-c"] {
        assert_eq!(
            run.object("Machine", m).unwrap()["status"]["phase"],
            "Running"
        );
    }
}

/// `tagIDs` are attached once the VM runs (as upstream, after power-on), checked before
/// writing and read in one bulk call; once recorded (`TagsAttached`), a steady run attaches
/// nothing. (That it also reads no VM tags is the planner's `tags_to_check` unit test: the
/// zones' own verification reads attached tags every run, so REST counts cannot tell.)
#[tokio::test]
async fn tag_ids_are_attached_once_after_power_on() {
    use vsphere_provider::vcenter::model::tags::CategorySpec;
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let c = admin(&sim);
    let cat = c
        .create_category(&CategorySpec {
            name: "openshift-demo".into(),
            description: String::new(),
            cardinality: "MULTIPLE".into(),
            associable_types: vec![],
        })
        .await
        .unwrap();
    let tag = c.create_tag("demo", &cat, "").await.unwrap();
    let y = machine("t-a", "dz-a", "DC0_H0_VM0", "").replace(
        "      numCPUs: 4\n",
        &format!("      numCPUs: 4\n      tagIDs: [\"{tag}\"]\n"),
    );
    std::fs::write(manifests.join("m.yaml"), y).unwrap();
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let vm = c
        .inventory()
        .await
        .unwrap()
        .at_path("/DC0/vm/t-a")
        .unwrap()
        .moref
        .clone();
    assert_eq!(c.list_attached_tags(&vm).await.unwrap(), vec![tag.clone()]);
    let obj = run.object("Machine", "t-a").unwrap();
    assert!(obj.to_string().contains("TagsAttached"), "{obj:#}");
    sim.reset_stats().await;
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let stats = sim.stats().await;
    assert_eq!(
        stats.rest_matching("action=attach"),
        0,
        "steady: no tag writes"
    );
}

/// `machine(...)` with `extra` provider spec lines (six-space indented) before `network:`.
fn machine_with(name: &str, zone: &str, extra: &str) -> String {
    machine(name, zone, "DC0_H0_VM0", "")
        .replace("      network:\n", &format!("{extra}      network:\n"))
}

/// The virtual disks of a VM as vCenter (here vcsim) lists them in `config.hardware.device`,
/// and the devices themselves.
async fn disks_of(
    sim: &Vcsim,
    path: &str,
) -> (
    Vec<vsphere_provider::vcenter::soap::Node>,
    Vec<vsphere_provider::vcenter::soap::Node>,
) {
    let devices = vm_property(sim, path, "config.hardware.device")
        .await
        .children;
    let disks = devices
        .iter()
        .filter(|d| d.xsi_type.as_deref() == Some("VirtualDisk"))
        .cloned()
        .collect();
    (disks, devices)
}

/// `dataDisks[]` become new disks of the clone, read back from vCenter: on the controller of
/// the template's first disk, at the lowest free units (the OS disk holds 0; the SCSI
/// controller's own 7 is never used), each of its size, in its own new file beside the VM,
/// thin or thick as asked; the OS disk is still grown to diskGiB in the same clone.
#[tokio::test]
async fn data_disks_are_created_on_the_template_disks_controller_at_free_units() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let disks = "      dataDisks:
      - {name: thin, sizeGiB: 1, provisioningMode: Thin}
      - {name: thick, sizeGiB: 2, provisioningMode: Thick}
      - {name: eager, sizeGiB: 3, provisioningMode: EagerlyZeroed}
      - {name: policy, sizeGiB: 4}
      - {name: five, sizeGiB: 1}
      - {name: six, sizeGiB: 1}
      - {name: seven, sizeGiB: 1}
";
    std::fs::write(
        manifests.join("m.yaml"),
        machine_with("dd-a", "dz-a", disks),
    )
    .unwrap();
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        machine_obj(&run, "dd-a").unwrap()["status"]["phase"],
        "Running"
    );

    let (template_disks, template_devices) = disks_of(&sim, "/DC0/vm/DC0_H0_VM0").await;
    assert_eq!(template_disks.len(), 1, "vcsim's template has one disk");
    let controller = template_disks[0]
        .child_text("controllerKey")
        .unwrap()
        .to_string();
    let scsi = template_devices
        .iter()
        .find(|d| d.child_text("key") == Some(controller.as_str()))
        .unwrap();
    assert_eq!(
        scsi.child_text("scsiCtlrUnitNumber"),
        Some("7"),
        "{scsi:#?}"
    );
    assert_eq!(template_disks[0].child_text("unitNumber"), Some("0"));

    let (disks, _) = disks_of(&sim, "/DC0/vm/dd-a").await;
    let gib = |n: i64| (n * 1024 * 1024).to_string();
    // controllerKey, unitNumber, capacityInKB, thinProvisioned, eagerlyScrub.
    let shown: Vec<[String; 5]> = disks
        .iter()
        .map(|d| {
            let b = d.child("backing").unwrap();
            let text = |n: &vsphere_provider::vcenter::soap::Node, f: &str| {
                n.child_text(f).unwrap_or("unset").to_string()
            };
            [
                text(d, "controllerKey"),
                text(d, "unitNumber"),
                text(d, "capacityInKB"),
                text(b, "thinProvisioned"),
                text(b, "eagerlyScrub"),
            ]
        })
        .collect();
    // vcsim stores a flag the spec leaves unset as false (configureDevice: "These properties
    // default to false"), so a disk without a provisioning mode reads thick and lazily zeroed
    // here; that the request leaves both unset is checked on the clone body (vcenter::vm
    // tests). Real vCenter applies the datastore's or storage policy's default.
    let want = |unit: &str, size: i64, thin: &str, eager: &str| {
        [
            controller.clone(),
            unit.to_string(),
            gib(size),
            thin.to_string(),
            eager.to_string(),
        ]
    };
    assert_eq!(
        shown[1..],
        [
            want("1", 1, "true", "false"),
            want("2", 2, "false", "false"),
            want("3", 3, "false", "true"),
            want("4", 4, "false", "false"),
            want("5", 1, "false", "false"),
            want("6", 1, "false", "false"),
            // 7 is the controller's.
            want("8", 1, "false", "false"),
        ],
        "{shown:?}"
    );
    // The OS disk: unit 0, grown to diskGiB (120) in the same clone.
    assert_eq!(
        (shown[0][1].as_str(), shown[0][2].as_str()),
        ("0", gib(120).as_str())
    );
    // Each data disk is a file of its own in the VM's directory, named by vCenter.
    let files: Vec<&str> = disks[1..]
        .iter()
        .map(|d| d.child("backing").unwrap().child_text("fileName").unwrap())
        .collect();
    let mut unique = files.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 7, "{files:?}");
    assert!(
        files
            .iter()
            .all(|f| f.contains("dd-a/") && f.ends_with(".vmdk")),
        "{files:?}"
    );
}

/// A template without a disk has no controller for data disks; a Machine asking for them
/// fails naming the field, and nothing is cloned. (A VM made in vcsim with CreateVM_Task and
/// no devices is such a template.)
#[tokio::test]
async fn data_disks_from_a_template_without_a_disk_fail_the_machine_and_clone_nothing() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let c = admin(&sim);
    let inv = c.inventory().await.unwrap();
    let folder = inv.at_path("/DC0/vm").unwrap().moref.clone();
    let pool = inv
        .at_path("/DC0/host/DC0_C0/Resources")
        .unwrap()
        .moref
        .clone();
    let body = format!(
        r#"<CreateVM_Task xmlns="urn:vim25"><_this type="Folder">{}</_this><config><name>diskless</name><guestId>otherGuest</guestId><files><vmPathName>[LocalDS_0]</vmPathName></files></config><pool type="ResourcePool">{}</pool></CreateVM_Task>"#,
        folder.value, pool.value
    );
    wait_for(&c, "CreateVM_Task", &body).await;
    let (disks, _) = disks_of(&sim, "/DC0/vm/diskless").await;
    assert!(disks.is_empty(), "{disks:#?}");
    let m = machine_with(
        "dd-none",
        "dz-a",
        "      dataDisks: [{name: data, sizeGiB: 1}]\n",
    )
    .replace("template: DC0_H0_VM0", "template: diskless")
    .replace("      diskGiB: 120\n", "");
    std::fs::write(manifests.join("m.yaml"), m).unwrap();
    let run = reconcile(&sim, &manifests, &state, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let m = machine_obj(&run, "dd-none").unwrap();
    assert_eq!(m["status"]["phase"], "Failed", "{m:#}");
    assert_eq!(m["status"]["errorReason"], "InvalidConfiguration");
    assert_eq!(
        m["status"]["errorMessage"],
        "spec.providerSpec.value.dataDisks: template /DC0/vm/diskless has no virtual disk, and data disks go on the controller of its first disk"
    );
    assert_eq!(vms_named(&sim, "dd-none").await, 0, "nothing cloned");
}

/// Start a task with a raw SOAP call and wait for it; its result.
async fn wait_for(
    c: &vsphere_provider::vcenter::Client,
    method: &str,
    body: &str,
) -> Option<vsphere_provider::vcenter::MoRef> {
    use vsphere_provider::vcenter::model::task::TaskRef;
    use vsphere_provider::vcenter::{CallKind, MoRef};
    let answer = c.call(method, CallKind::Write, body).await.unwrap();
    let task = MoRef::from_node(answer.child("returnval").unwrap()).unwrap();
    let task = TaskRef {
        task,
        operation: method.to_string(),
    };
    c.wait_task(&task, Duration::from_secs(30)).await.unwrap()
}

/// Take a snapshot of a VM (`CreateSnapshot_Task`; vcsim keeps the tree and the current
/// snapshot as vCenter does); the snapshot's reference.
async fn snapshot(sim: &Vcsim, vm_path: &str, name: &str) -> vsphere_provider::vcenter::MoRef {
    let c = admin(sim);
    let vm = c
        .inventory()
        .await
        .unwrap()
        .at_path(vm_path)
        .unwrap()
        .moref
        .clone();
    let body = format!(
        r#"<CreateSnapshot_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this><name>{name}</name><memory>false</memory><quiesce>false</quiesce></CreateSnapshot_Task>"#,
        vm.value
    );
    wait_for(&c, "CreateSnapshot_Task", &body).await.unwrap()
}

/// Linked clones, checked on the wire: vcsim (govmomi v0.56.0) does not model them — it
/// ignores `diskMoveType` and `snapshot` and copies the disks ("TODO: consider DiskMoveType"
/// in its CloneVMTask) — so what is asserted is the request this provider sends, recorded by
/// a proxy between it and vcsim. Real vCenter would give each clone a delta disk whose parent
/// is the snapshot's disk.
///
/// - no `snapshot`: the template's current snapshot; a named one by path; each with
///   `createNewChildDiskBacking`, and no resize `edit` though diskGiB is set (data disks are
///   still added);
/// - the snapshot trees are read once for all machines, with the templates' devices;
/// - a `snapshot` that does not exist fails the Machine naming it and the template's
///   snapshots, and no clone is asked for (upstream would make a full clone).
#[tokio::test]
async fn linked_clones_ask_for_the_templates_snapshot_and_a_missing_one_fails_the_machine() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let base = snapshot(&sim, "/DC0/vm/DC0_H0_VM0", "base").await;
    let patched = snapshot(&sim, "/DC0/vm/DC0_H0_VM0", "patched").await;
    assert_ne!(base, patched);
    let linked = |snapshot: &str| format!("      cloneMode: linkedClone\n{snapshot}");
    let mut y = machine_with("lc-current", "dz-a", &linked(""));
    y += &machine_with(
        "lc-base",
        "dz-a",
        &(linked("      snapshot: base\n")
            + "      dataDisks: [{name: data, sizeGiB: 2, provisioningMode: Thin}]\n"),
    );
    y += &machine_with("lc-missing", "dz-a", &linked("      snapshot: golden\n"));
    y += &machine_with("lc-full", "dz-a", "      snapshot: base\n");
    std::fs::write(manifests.join("m.yaml"), y).unwrap();

    let proxy = latency_proxy::LatencyProxy::recording(sim.host_port().parse().unwrap());
    let out = Command::new(BIN)
        .args(["reconcile", "-f"])
        .arg(&manifests)
        .args(["--server", &proxy.url_for(sim.url()), "--username", "admin"])
        .args(["--password", "secret", "--state"])
        .arg(&state)
        .args(["-o", "json", "--simulate-nodes"])
        .output()
        .unwrap();
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        list: serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    };
    assert_eq!(run.code, 1, "lc-missing fails: {}", run.stderr);

    let clones = proxy.calls("CloneVM_Task");
    let clone_of = |name: &str| -> Vec<&String> {
        clones
            .iter()
            .filter(|b| b.contains(&format!("<name>{name}</name>")))
            .collect()
    };
    let moref = |m: &vsphere_provider::vcenter::MoRef| {
        format!(
            r#"<snapshot type="VirtualMachineSnapshot">{}</snapshot>"#,
            m.value
        )
    };
    let child = "<diskMoveType>createNewChildDiskBacking</diskMoveType>";
    for (name, snap) in [("lc-current", &patched), ("lc-base", &base)] {
        let bodies = clone_of(name);
        assert_eq!(bodies.len(), 1, "{name}: {clones:#?}");
        let body = bodies[0];
        assert!(body.contains(child), "{name}: {body}");
        assert!(body.contains(&moref(snap)), "{name}: {body}");
        assert!(body.contains("</powerOn>") && body.find("</powerOn>") < body.find("<snapshot "));
        // diskGiB (120) is set, but a linked clone's disk is not resized.
        assert!(
            !body.contains("<operation>edit</operation>"),
            "{name}: {body}"
        );
        assert_eq!(
            machine_obj(&run, name).unwrap()["status"]["phase"],
            "Running"
        );
    }
    let base_body = clone_of("lc-base")[0];
    assert!(
        base_body.contains("<operation>add</operation><fileOperation>create</fileOperation><device xsi:type=\"VirtualDisk\">"),
        "{base_body}"
    );
    // A snapshot without cloneMode linkedClone is ignored: a full clone, resized.
    let full = clone_of("lc-full");
    assert_eq!(full.len(), 1, "{clones:#?}");
    assert!(
        !full[0].contains("diskMoveType") && !full[0].contains("<snapshot "),
        "{}",
        full[0]
    );
    assert!(
        full[0].contains("<operation>edit</operation>"),
        "{}",
        full[0]
    );
    // One read of the snapshot trees, with the devices, for every machine of the sweep.
    let tree_reads: Vec<String> = proxy
        .calls("RetrievePropertiesEx")
        .into_iter()
        .filter(|b| b.contains("<pathSet>snapshot</pathSet>"))
        .collect();
    assert_eq!(tree_reads.len(), 1, "{tree_reads:#?}");
    assert!(tree_reads[0].contains("<pathSet>config.hardware.device</pathSet>"));

    assert!(
        clone_of("lc-missing").is_empty(),
        "no clone asked: {clones:#?}"
    );
    let m = machine_obj(&run, "lc-missing").unwrap();
    assert_eq!(m["status"]["phase"], "Failed", "{m:#}");
    assert_eq!(m["status"]["errorReason"], "InvalidConfiguration");
    assert_eq!(
        m["status"]["errorMessage"],
        "spec.providerSpec.value.snapshot: template /DC0/vm/DC0_H0_VM0 has no snapshot \"golden\" (its snapshots: base, base/patched)"
    );
    assert_eq!(vms_named(&sim, "lc-missing").await, 0);
    drop(proxy);
}

/// A worker Machine of zone dz-a (control plane ones are deleted one at a time: quorum).
fn worker(name: &str) -> String {
    machine(name, "dz-a", "DC0_H0_VM0", "")
        .replace("-type: master", "-type: worker")
        .replace("-role: master", "-role: worker")
}

/// The machines of one sweep take their vCenter steps together: deleting five machines in one
/// run costs about the round trips of deleting one (their power-offs and destroys start at once,
/// up to 8), not five times as many. Measured as the sequential depth of what the run sent
/// through a proxy that delays every request (busy time ÷ delay): the round trips a user waits
/// for one after another, whatever the machine's speed.
#[tokio::test]
async fn the_machines_of_one_sweep_take_their_vcenter_steps_together() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    estate(&sim, &manifests).await;
    let names: Vec<String> = (0..6).map(|i| format!("t-{i}")).collect();
    let y: String = names.iter().map(|n| worker(n)).collect();
    std::fs::write(manifests.join("m.yaml"), y).unwrap();
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let delay = Duration::from_millis(150);
    let depth_of_deleting = |which: &[String]| {
        let proxy = latency_proxy::LatencyProxy::start(sim.host_port().parse().unwrap(), delay);
        let mut c = Command::new(BIN);
        c.args(["reconcile", "-f"])
            .arg(&manifests)
            .args(["--server", &proxy.url_for(sim.url()), "--username", "admin"])
            .args(["--password", "secret", "--state"])
            .arg(&state)
            .args(["-o", "json", "--simulate-nodes"]);
        for n in which {
            c.args(["--delete", &format!("machine/{n}")]);
        }
        let run = Run::from(c.output().unwrap());
        for n in which {
            assert!(machine_obj(&run, n).is_none(), "{n} gone: {}", run.stderr);
            assert!(
                run.stderr.contains(&format!("{n}: destroy")),
                "{}",
                run.stderr
            );
        }
        proxy.busy().as_secs_f64() / delay.as_secs_f64()
    };
    let one = depth_of_deleting(&names[..1]);
    // Gone from the manifests too, as an admin would remove it (or the next run makes it again).
    let rest: String = names[1..].iter().map(|n| worker(n)).collect();
    std::fs::write(manifests.join("m.yaml"), rest).unwrap();
    let five = depth_of_deleting(&names[1..]);
    // One after another, the four more power-offs and destroys would add 8 round trips.
    assert!(
        five <= one + 3.0,
        "deleting five took {five:.1} round trips one after another, one took {one:.1}"
    );
    for n in &names {
        assert_eq!(vms_named(&sim, n).await, 0, "{n}'s VM destroyed");
    }
}
