//! The control plane machine set in local mode against a live vcsim: three zones, three
//! replicas — one VM per compute cluster; a vertical scale rolled out one index at a time (each
//! index: create → replacement Running → delete the old machine, never two indexes in flight);
//! a deleted machine replaced in its zone; all three deleted at once, held by the etcd quorum
//! hook (each line says what holds it and which hook to remove) or, without hooks, drained one
//! at a time to the end (issue #27).
#[path = "support/local_run.rs"]
mod local_run;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use vcsim::Vcsim;
use vsphere_provider::vcenter::Inventory;
use vsphere_provider::vcenter::model::cluster::{ClusterGroup, GroupChange};

use local_run::{Run, admin, workdir};

fn zones() -> String {
    let mut y = String::new();
    for (z, c) in [("zone-a", 0), ("zone-b", 1), ("zone-c", 2)] {
        y += &format!(
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata: {{name: {z}}}
spec:
  region: {{name: region-a, type: Datacenter, tagCategory: k8s-region, autoConfigure: true}}
  zone: {{name: {z}, type: ComputeCluster, tagCategory: k8s-zone, autoConfigure: true}}
  topology: {{datacenter: DC0, computeCluster: DC0_C{c}, datastore: LocalDS_0, networks: [VM Network]}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata: {{name: {z}}}
spec:
  server: 127.0.0.1
  failureDomain: {z}
  placementConstraint: {{resourcePool: DC0_C{c}_RP1, folder: vm}}
---
"
        );
    }
    y
}

fn cpms(cpus: u32) -> String {
    format!(
        "apiVersion: machine.openshift.io/v1
kind: ControlPlaneMachineSet
metadata: {{name: cluster, namespace: openshift-machine-api}}
spec:
  replicas: 3
  state: Active
  strategy: {{type: RollingUpdate}}
  selector:
    matchLabels:
      machine.openshift.io/cluster-api-cluster: demo
      machine.openshift.io/cluster-api-machine-role: master
      machine.openshift.io/cluster-api-machine-type: master
  template:
    machineType: machines_v1beta1_machine_openshift_io
    machines_v1beta1_machine_openshift_io:
      failureDomains:
        platform: VSphere
        vsphere: [{{name: zone-a}}, {{name: zone-b}}, {{name: zone-c}}]
      metadata:
        labels:
          machine.openshift.io/cluster-api-cluster: demo
          machine.openshift.io/cluster-api-machine-role: master
          machine.openshift.io/cluster-api-machine-type: master
      spec:
        providerSpec:
          value:
            apiVersion: machine.openshift.io/v1beta1
            kind: VSphereMachineProviderSpec
            template: DC0_H0_VM0
            numCPUs: {cpus}
            memoryMiB: 16384
            diskGiB: 120
            network: {{devices: []}}
            workspace: {{}}
"
    )
}

/// A run with simulated kubelets (machine sets wait for Running machines).
fn reconcile(sim: &Vcsim, dir: &Path, state: &Path, extra: &[&str]) -> Run {
    local_run::reconcile(sim, dir, state, &[&["--simulate-nodes"], extra].concat())
}

fn items<'a>(run: &'a Run, kind: &str) -> Vec<&'a Value> {
    run.items(kind)
}

/// Machine name → (deployment zone, uid, numCPUs).
fn machines(run: &Run) -> Vec<(String, String, String, u64)> {
    let mut v: Vec<_> = items(run, "Machine")
        .into_iter()
        .map(|m| {
            (
                m["metadata"]["name"].as_str().unwrap().to_string(),
                m["metadata"]["labels"]["vsphere-provider.io/deployment-zone"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                m["metadata"]["uid"].as_str().unwrap().to_string(),
                m["spec"]["providerSpec"]["value"]["numCPUs"]
                    .as_u64()
                    .unwrap_or(0),
            )
        })
        .collect();
    v.sort();
    v
}

/// The VM of the machine with `uid` is in `zone`'s pool (`zone-a` → DC0_C0's `DC0_C0_RP1`, …);
/// returns the zone's cluster number.
fn assert_in_zone_pool(inv: &Inventory, uid: &str, zone: &str, what: &str) -> usize {
    let vm = inv
        .vm_by_instance_uuid(uid)
        .unwrap_or_else(|| panic!("no VM for {what}"));
    let c = match zone {
        "zone-a" => 0,
        "zone-b" => 1,
        _ => 2,
    };
    let pool = vm.vm.as_ref().unwrap().resource_pool.clone().unwrap();
    assert_eq!(
        inv.path(&pool),
        Some(format!("/DC0/host/DC0_C{c}/Resources/DC0_C{c}_RP1").as_str()),
        "{what}'s VM is in its zone's pool"
    );
    c
}

/// The CPMS events of a run, as (reason, index) in order.
fn cpms_events(run: &Run) -> Vec<(String, String)> {
    items(run, "Event")
        .into_iter()
        .filter(|e| e["involvedObject"]["kind"] == "ControlPlaneMachineSet")
        .filter(|e| e["reason"] == "Create" || e["reason"] == "Delete")
        .map(|e| {
            let msg = e["message"].as_str().unwrap_or_default();
            let index = msg
                .split("index ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or_default()
                .to_string();
            (e["reason"].as_str().unwrap().to_string(), index)
        })
        .collect()
}

#[tokio::test]
async fn three_replicas_three_clusters_rolled_one_index_at_a_time_and_replaced_in_zone() {
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    std::fs::write(m.join("zones.yaml"), zones()).unwrap();
    std::fs::write(m.join("cpms.yaml"), cpms(4)).unwrap();
    let admin = admin(&sim);

    // Three machines, one per zone, each VM in its zone's pool.
    let run = reconcile(&sim, &m, &state, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ms = machines(&run);
    assert_eq!(ms.len(), 3);
    let zones: Vec<&str> = ms.iter().map(|m| m.1.as_str()).collect();
    let mut sorted = zones.clone();
    sorted.sort();
    assert_eq!(sorted, ["zone-a", "zone-b", "zone-c"]);
    let inv = admin.inventory().await.unwrap();
    for (name, zone, uid, _) in &ms {
        let c = assert_in_zone_pool(&inv, uid, zone, name);
        assert!(
            name.ends_with(&format!("-{c}")),
            "index {c} maps to {zone}: {name}"
        );
    }
    let cp = &items(&run, "ControlPlaneMachineSet")[0]["status"];
    assert_eq!(
        (cp["readyReplicas"].as_i64(), cp["updatedReplicas"].as_i64()),
        (Some(3), Some(3))
    );

    // A vertical scale: one index at a time, the old machine deleted after its replacement.
    std::fs::write(m.join("cpms.yaml"), cpms(8)).unwrap();
    let run = reconcile(&sim, &m, &state, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ev = cpms_events(&run);
    assert_eq!(
        ev,
        [
            ("Create".to_string(), "0".to_string()),
            ("Delete".into(), "0".into()),
            ("Create".into(), "1".into()),
            ("Delete".into(), "1".into()),
            ("Create".into(), "2".into()),
            ("Delete".into(), "2".into()),
        ],
        "never two indexes in flight"
    );
    let ms2 = machines(&run);
    assert_eq!(ms2.len(), 3);
    assert!(ms2.iter().all(|m| m.3 == 8), "{ms2:?}");
    let inv = admin.inventory().await.unwrap();
    let vms = inv
        .iter()
        .filter(|e| e.kind() == "VirtualMachine" && e.name.starts_with("demo-master"))
        .count();
    assert_eq!(vms, 3, "the old VMs are gone");

    // A deleted machine is replaced in its zone.
    let (victim, zone, _, _) = ms2[1].clone();
    let run = reconcile(
        &sim,
        &m,
        &state,
        &["--delete", &format!("machine/{victim}")],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ms3 = machines(&run);
    assert_eq!(ms3.len(), 3);
    assert!(ms3.iter().all(|m| m.0 != victim));
    let replacement = ms3
        .iter()
        .find(|m| !ms2.iter().any(|o| o.0 == m.0))
        .unwrap();
    assert_eq!(replacement.1, zone, "replaced in the same zone");

    // Re-running changes nothing.
    let again = reconcile(&sim, &m, &state, &[]);
    assert_eq!(again.code, 0);
    assert!(
        again.stderr.contains("0 machine change(s) in vCenter"),
        "{}",
        again.stderr
    );
    assert_eq!(machines(&again), ms3);

    // Deleting the set releases its machines and deletes none of them (its finalizer, as in
    // the cluster).
    let gone = reconcile(
        &sim,
        &m,
        &state,
        &["--delete", "controlplanemachineset/cluster"],
    );
    assert_eq!(gone.code, 0, "{}", gone.stderr);
    assert!(gone.items("ControlPlaneMachineSet").is_empty());
    let left = gone.items("Machine");
    assert_eq!(left.len(), 3);
    for mch in left {
        assert!(mch["metadata"].get("deletionTimestamp").is_none(), "{mch}");
        assert!(
            mch["metadata"]["ownerReferences"]
                .as_array()
                .is_none_or(|r| r.iter().all(|o| o["kind"] != "ControlPlaneMachineSet")),
            "released: {mch}"
        );
    }
}

fn mhc(paused: bool) -> String {
    let ann = if paused {
        "\n  annotations: {cluster.x-k8s.io/paused: \"\"}"
    } else {
        ""
    };
    format!(
        "apiVersion: machine.openshift.io/v1beta1
kind: MachineHealthCheck
metadata:
  name: control-plane
  namespace: openshift-machine-api{ann}
spec:
  selector:
    matchLabels:
      machine.openshift.io/cluster-api-machine-role: master
  unhealthyConditions:
  - {{type: Ready, status: \"False\", timeout: 300s}}
  - {{type: Ready, status: Unknown, timeout: 300s}}
  maxUnhealthy: 1
"
    )
}

fn not_ready_node(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{node-role.kubernetes.io/master: \"\", node-role.kubernetes.io/control-plane: \"\"}}
status:
  conditions:
  - {{type: Ready, status: \"False\", reason: KubeletNotReady, lastTransitionTime: \"2026-11-23T10:00:00Z\"}}
---
"
    )
}

#[tokio::test]
async fn an_unhealthy_control_plane_machine_is_replaced_in_its_zone_two_are_held_back() {
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    std::fs::write(m.join("zones.yaml"), zones()).unwrap();
    std::fs::write(m.join("cpms.yaml"), cpms(4)).unwrap();
    let now = ["--now", "2026-11-23T10:10:00Z"];
    let run = reconcile(&sim, &m, &state, &now);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ms = machines(&run);

    // Paused: a NotReady node past its timeout changes nothing.
    std::fs::write(m.join("mhc.yaml"), mhc(true)).unwrap();
    std::fs::write(m.join("node.yaml"), not_ready_node(&ms[0].0)).unwrap();
    let run = reconcile(&sim, &m, &state, &now);
    assert_eq!(machines(&run), ms, "a paused check remediates nothing");

    // One NotReady control plane node: its machine is deleted through the lifecycle and
    // replaced in the same zone.
    std::fs::write(m.join("mhc.yaml"), mhc(false)).unwrap();
    let run = reconcile(&sim, &m, &state, &now);
    let after = machines(&run);
    assert_eq!(after.len(), 3, "{}", run.stderr);
    assert!(
        after.iter().all(|x| x.0 != ms[0].0),
        "remediated: {after:?}"
    );
    let replacement = after
        .iter()
        .find(|x| !ms.iter().any(|o| o.0 == x.0))
        .unwrap();
    assert_eq!(replacement.1, ms[0].1, "replaced in the same zone");
    assert!(
        items(&run, "Event")
            .iter()
            .any(|e| e["reason"] == "MachineRemediated")
    );
    let inv = admin(&sim).inventory().await.unwrap();
    assert!(
        inv.vm_by_instance_uuid(&ms[0].2).is_none(),
        "the old VM is destroyed"
    );
    assert_in_zone_pool(&inv, &replacement.2, &replacement.1, "the replacement");

    // Two NotReady control plane nodes: nothing is deleted, and the check says why.
    std::fs::remove_file(m.join("node.yaml")).unwrap();
    let run = reconcile(&sim, &m, &state, &[]);
    let healthy = machines(&run);
    let two = format!(
        "{}{}",
        not_ready_node(&healthy[0].0),
        not_ready_node(&healthy[1].0)
    );
    std::fs::write(m.join("node.yaml"), two).unwrap();
    let run = reconcile(&sim, &m, &state, &["--now", "2030-01-01T00:00:00Z"]);
    assert_eq!(machines(&run), healthy, "nothing deleted: {}", run.stderr);
    let reasons: Vec<&str> = items(&run, "Event")
        .iter()
        .filter_map(|e| e["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"RemediationRestricted"), "{reasons:?}");
    let mhc = &items(&run, "MachineHealthCheck")[0]["status"];
    assert_eq!(mhc["remediationsAllowed"], 0);
    assert_eq!(mhc["expectedMachines"], 3);
}

/// Three HostGroup zones in one compute cluster (a host group per host, precreated as an admin
/// would; autoConfigure adds the VM groups and the VM-host rules): the set's three machines,
/// one per zone, each VM in its zone's VM group, the groups joined before power-on.
/// vcsim does not enforce VM-host rules (nor place a clone on the destination cluster's
/// hosts), so which host a VM runs on is vCenter's to decide and not asserted here; the VM
/// group membership is what makes real vCenter keep it on the group's hosts.
#[tokio::test]
async fn host_group_zones_put_each_machine_in_its_zones_vm_group() {
    let sim = Vcsim::builder().clusters(1).hosts(3).start().await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    let admin = admin(&sim);
    let inv = admin.inventory().await.unwrap();
    let cluster = inv.at_path("/DC0/host/DC0_C0").unwrap().moref.clone();
    let groups: Vec<GroupChange> = (0..3)
        .map(|i| {
            GroupChange::Add(ClusterGroup::Host {
                name: format!("hosts-{}", ["a", "b", "c"][i]),
                hosts: vec![
                    inv.at_path(&format!("/DC0/host/DC0_C0/DC0_C0_H{i}"))
                        .unwrap()
                        .moref
                        .clone(),
                ],
            })
        })
        .collect();
    let t = admin
        .reconfigure_cluster(&cluster, &[], &groups)
        .await
        .unwrap();
    admin.wait_task(&t, Duration::from_secs(10)).await.unwrap();
    let mut zones = String::new();
    for z in ["a", "b", "c"] {
        zones += &format!(
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata: {{name: zone-{z}}}
spec:
  region: {{name: region-a, type: ComputeCluster, tagCategory: k8s-region, autoConfigure: true}}
  zone: {{name: zone-{z}, type: HostGroup, tagCategory: k8s-zone, autoConfigure: true}}
  topology:
    datacenter: DC0
    computeCluster: DC0_C0
    hosts: {{vmGroupName: vms-{z}, hostGroupName: hosts-{z}}}
    datastore: LocalDS_0
    networks: [VM Network]
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata: {{name: zone-{z}}}
spec:
  server: 127.0.0.1
  failureDomain: zone-{z}
  placementConstraint: {{folder: vm}}
---
"
        );
    }
    std::fs::write(m.join("zones.yaml"), zones).unwrap();
    std::fs::write(m.join("cpms.yaml"), cpms(4)).unwrap();

    let run = reconcile(&sim, &m, &state, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ms = machines(&run);
    let mut in_zones: Vec<&str> = ms.iter().map(|m| m.1.as_str()).collect();
    in_zones.sort();
    assert_eq!(in_zones, ["zone-a", "zone-b", "zone-c"]);
    let inv = admin.inventory().await.unwrap();
    let cfg = admin.cluster_config(&cluster).await.unwrap();
    for (name, zone, uid, _) in &ms {
        let z = zone.trim_start_matches("zone-");
        let vm = inv
            .vm_by_instance_uuid(uid)
            .unwrap_or_else(|| panic!("no VM for {name}"));
        assert_eq!(
            vm.vm.as_ref().unwrap().power_state.as_deref(),
            Some("poweredOn"),
            "{name}"
        );
        match cfg.group(&format!("vms-{z}")) {
            Some(ClusterGroup::Vm { vms, .. }) => {
                assert_eq!(
                    vms,
                    std::slice::from_ref(&vm.moref),
                    "{name} alone in vms-{z}"
                )
            }
            other => panic!("vms-{z}: {other:?}"),
        }
        let join = run
            .stderr
            .find(&format!("{name}: add to VM group vms-{z}"))
            .expect(&run.stderr);
        let power = run
            .stderr
            .find(&format!("{name}: power on"))
            .expect(&run.stderr);
        assert!(join < power, "group edit before power-on:\n{}", run.stderr);
    }
    // The zones' VM-host rules, made by autoConfigure, are enabled and mandatory.
    for z in ["a", "b", "c"] {
        let rule = cfg
            .vm_host_rules()
            .find(|r| r.name == format!("vms-{z}-hosts-{z}-affinity"))
            .unwrap_or_else(|| panic!("no rule for zone-{z}: {:?}", cfg.rules));
        assert!(rule.enabled && rule.mandatory, "{rule:?}");
        assert_eq!(
            rule.affine_host_group.as_deref(),
            Some(format!("hosts-{z}").as_str())
        );
    }
}

/// Adding a third zone to a set whose three machines sit in two zones moves exactly one
/// machine: one replacement created in the new zone, one machine deleted, the others kept.
#[tokio::test]
async fn adding_a_third_zone_moves_exactly_one_machine() {
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    std::fs::write(m.join("zones.yaml"), zones()).unwrap();
    let all = "[{name: zone-a}, {name: zone-b}, {name: zone-c}]";
    let two = cpms(4).replace(all, "[{name: zone-a}, {name: zone-b}]");
    assert_ne!(two, cpms(4));
    std::fs::write(m.join("cpms.yaml"), &two).unwrap();
    let run = reconcile(&sim, &m, &state, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let before = machines(&run);
    let mut zones_before: Vec<&str> = before.iter().map(|m| m.1.as_str()).collect();
    zones_before.sort();
    assert_eq!(zones_before, ["zone-a", "zone-a", "zone-b"]);

    std::fs::write(m.join("cpms.yaml"), cpms(4)).unwrap();
    let run = reconcile(&sim, &m, &state, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let after = machines(&run);
    let mut zones_after: Vec<&str> = after.iter().map(|m| m.1.as_str()).collect();
    zones_after.sort();
    assert_eq!(zones_after, ["zone-a", "zone-b", "zone-c"]);
    let kept = after.iter().filter(|a| before.contains(a)).count();
    assert_eq!(kept, 2, "exactly one machine moved:\n{before:?}\n{after:?}");
    let events = cpms_events(&run);
    assert_eq!(
        events.iter().filter(|e| e.0 == "Create").count(),
        1,
        "{events:?}"
    );
    assert_eq!(
        events.iter().filter(|e| e.0 == "Delete").count(),
        1,
        "{events:?}"
    );
}

/// `--no-state` twice: the second run knows none of the set's Machines (they are not in the
/// manifests and there is no state), finds their VMs by the identity each carries
/// (`vsphere-provider.machine`), recreates each Machine under its own name and adopts its VM —
/// exactly three VMs, the same three names, never a second control plane.
#[tokio::test]
async fn no_state_twice_adopts_the_sets_vms_and_never_makes_a_second_control_plane() {
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let w = workdir();
    std::fs::write(w.manifests.join("zones.yaml"), zones()).unwrap();
    std::fs::write(w.manifests.join("cpms.yaml"), cpms(4)).unwrap();
    let run_no_state = || local_run::reconcile_no_state(&sim, &w.manifests, &["--simulate-nodes"]);
    let vm_names = || async {
        let inv = admin(&sim).inventory().await.unwrap();
        let mut names: Vec<String> = inv
            .iter()
            .filter(|e| e.vm.as_ref().is_some_and(|v| v.machine.is_some()))
            .map(|e| e.name.clone())
            .collect();
        names.sort();
        names
    };
    let first = run_no_state();
    assert_eq!(first.code, 0, "{}", first.stderr);
    let names: Vec<String> = machines(&first).into_iter().map(|m| m.0).collect();
    assert_eq!(names.len(), 3);
    assert_eq!(vm_names().await, names);

    let second = run_no_state();
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(
        vm_names().await,
        names,
        "exactly the three VMs of the first run"
    );
    let again: Vec<String> = machines(&second).into_iter().map(|m| m.0).collect();
    assert_eq!(
        again, names,
        "the set's machines recreated under their own names"
    );
    for m in items(&second, "Machine") {
        assert_eq!(m["status"]["phase"], "Running", "{m}");
    }
    let adopted = items(&second, "Event")
        .into_iter()
        .filter(|e| e["reason"] == "Adopted")
        .count();
    assert_eq!(adopted, 3, "{}", second.list);
    assert!(
        second.stderr.contains("0 machine change(s) in vCenter"),
        "nothing cloned, nothing powered: {}",
        second.stderr
    );
}

/// A dry run says what it would do, all of it, and nothing as done: one summary for zones and
/// machines together (it said "0 change(s) would be made" for the zones before the machines'
/// count), the clones with inventory paths (they showed morefs), "would create" for the set's
/// machines, no EVENTS table (its events narrate steps not taken), no empty message after a
/// condition's reason, and the state file read but not written.
#[tokio::test]
async fn a_dry_run_says_what_it_would_do_and_nothing_as_done() {
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    std::fs::write(m.join("zones.yaml"), zones()).unwrap();
    let run = reconcile(&sim, &m, &state, &[]);
    assert_eq!(run.code, 0, "the zones are ready first: {}", run.stderr);
    std::fs::write(m.join("cpms.yaml"), cpms(4)).unwrap();
    let before = std::fs::read(&state).unwrap();

    let out = local_run::command(&sim, &m, &state)
        .args(["--simulate-nodes", "--dry-run"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "pending changes: {stdout}{stderr}"
    );

    let would: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("would: "))
        .collect();
    let clones: Vec<&str> = would
        .iter()
        .copied()
        .filter(|l| l.contains(": clone "))
        .collect();
    assert_eq!(clones.len(), 3, "{stdout}");
    for (c, line) in ["DC0_C0", "DC0_C1", "DC0_C2"].iter().zip({
        let mut sorted = clones.clone();
        sorted.sort_by_key(|l| l.split(" into pool ").nth(1).map(str::to_string));
        sorted
    }) {
        assert!(
            line.contains(&format!(
                ": clone /DC0/vm/DC0_H0_VM0 into pool /DC0/host/{c}/Resources/{c}_RP1 as "
            )),
            "{line}"
        );
    }
    assert!(
        !stdout.contains("VirtualMachine:") && !stdout.contains("ResourcePool:"),
        "{stdout}"
    );
    let summary = stdout.lines().last().unwrap();
    assert!(
        summary.starts_with(&format!(
            "dry run, nothing changed: would make 0 zone change(s) and {} machine change(s); 3/3 zone(s) ready; ",
            would.len()
        )),
        "{summary}"
    );
    assert!(!stdout.contains("would be made"), "{stdout}");
    assert!(!stdout.contains("EVENTS"), "{stdout}");

    assert_eq!(
        stderr
            .matches("control plane machine set: would create ")
            .count(),
        3,
        "{stderr}"
    );
    assert!(!stderr.contains(": created "), "{stderr}");
    assert!(
        stderr.contains(&format!("state: {} (read only: dry run)", state.display())),
        "{stderr}"
    );
    assert!(
        stderr.lines().all(|l| !l.ends_with(": ")),
        "no empty message after a reason: {stderr}"
    );
    assert_eq!(
        std::fs::read(&state).unwrap(),
        before,
        "the state is not written"
    );
}

/// The set's template with the etcd operator's quorum guard, as OpenShift's machines carry it.
fn cpms_with_quorum_hook(cpus: u32) -> String {
    cpms(cpus).replace(
        "      spec:\n        providerSpec:",
        "      spec:\n        lifecycleHooks:\n          preDrain:\n          - {name: EtcdQuorumOperator, owner: clusteroperator/etcd}\n        providerSpec:",
    )
}

/// Issue #27: all three control plane machines deleted at once (three `--delete`, runs
/// repeated). Each says what holds it — the etcd quorum guard, named with its owner — and the
/// line says what to do: remove the hook of the machine whose replacement is Running (the set
/// replaces one index at a time), keep the others'. Removing the holders in that order, as the
/// etcd operator would, lets every deletion finish, and the set ends with three new machines.
#[tokio::test]
async fn all_control_plane_machines_deleted_at_once_say_what_holds_them_and_finish_once_released() {
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    std::fs::write(m.join("zones.yaml"), zones()).unwrap();
    std::fs::write(m.join("cpms.yaml"), cpms_with_quorum_hook(4)).unwrap();
    let run = reconcile(&sim, &m, &state, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let old: Vec<String> = machines(&run).into_iter().map(|m| m.0).collect();
    assert_eq!(old.len(), 3);

    let deletes: Vec<String> = old.iter().map(|n| format!("machine/{n}")).collect();
    let mut args = Vec::new();
    for d in &deletes {
        args.extend(["--delete", d.as_str()]);
    }
    let run = reconcile(&sim, &m, &state, &args);
    for again in [run, reconcile(&sim, &m, &state, &[])] {
        assert_eq!(again.code, 1, "held: {}", again.stderr);
        assert!(
            !again.stderr.contains("deletion in progress"),
            "{}",
            again.stderr
        );
        for name in &old {
            let line = again
                .stderr
                .lines()
                .find(|l| {
                    l.contains(&format!(
                        "machine openshift-machine-api/{name} is being deleted"
                    ))
                })
                .unwrap_or_else(|| panic!("no line for {name}: {}", again.stderr));
            assert!(
                line.contains(
                    "HookPresent: Drain operation currently blocked by: [{Name:EtcdQuorumOperator Owner:clusteroperator/etcd}]; clusteroperator/etcd removes EtcdQuorumOperator once a replacement control plane machine's etcd member has joined"
                ),
                "{line}"
            );
            let c = &again.object("Machine", name).unwrap()["status"]["conditions"];
            let drainable = c
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == "Drainable")
                .unwrap();
            assert_eq!(
                (drainable["status"].as_str(), drainable["reason"].as_str()),
                (Some("False"), Some("HookPresent"))
            );
            if name.ends_with("-0") {
                assert!(
                    line.contains(&format!(
                        "is Running: local mode plays no hook owner, so remove the hook as its owner would now: --remove-hook machine/{name}:EtcdQuorumOperator"
                    )),
                    "index 0's replacement is Running: {line}"
                );
            } else {
                assert!(
                    line.contains("the control plane machine set replaces one index at a time, and index 0's old machine goes first")
                        && line.contains("keep this hook until the replacement is Running"),
                    "{line}"
                );
            }
        }
        // Nothing was drained: no control plane node is cordoned while the hooks hold.
        assert!(
            again
                .items("Node")
                .iter()
                .all(|n| n["spec"]["unschedulable"] != true)
        );
    }

    // Remove the hook the output names, run after run, as the etcd operator would.
    let mut run = reconcile(&sim, &m, &state, &[]);
    for _ in 0..3 {
        let Some(flag) = run
            .stderr
            .split("--remove-hook ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .map(str::to_string)
        else {
            break;
        };
        run = reconcile(&sim, &m, &state, &["--remove-hook", &flag]);
    }
    assert_eq!(run.code, 0, "every deletion finished: {}", run.stderr);
    let now: Vec<String> = machines(&run).into_iter().map(|m| m.0).collect();
    assert_eq!(now.len(), 3);
    assert!(now.iter().all(|n| !old.contains(n)), "{now:?} {old:?}");
    let inv = admin(&sim).inventory().await.unwrap();
    for name in &old {
        assert!(
            !inv.iter()
                .any(|e| e.kind() == "VirtualMachine" && &e.name == name),
            "{name}'s VM is destroyed"
        );
    }
}

/// Without hooks, all three control plane machines deleted at once drain one at a time (the
/// others say which machine goes first, then whose cordoned Node they wait for) and the run
/// ends with every deletion finished; before, all three were cordoned in one pass and waited
/// for each other for ever, saying only "deletion in progress".
#[tokio::test]
async fn all_control_plane_machines_deleted_at_once_without_hooks_drain_one_at_a_time() {
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    std::fs::write(m.join("zones.yaml"), zones()).unwrap();
    std::fs::write(m.join("cpms.yaml"), cpms(4)).unwrap();
    let run = reconcile(&sim, &m, &state, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let old: Vec<String> = machines(&run).into_iter().map(|m| m.0).collect();
    let deletes: Vec<String> = old.iter().map(|n| format!("machine/{n}")).collect();
    let mut args = Vec::new();
    for d in &deletes {
        args.extend(["--delete", d.as_str()]);
    }
    let run = reconcile(&sim, &m, &state, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let now: Vec<String> = machines(&run).into_iter().map(|m| m.0).collect();
    assert_eq!(now.len(), 3);
    assert!(now.iter().all(|n| !old.contains(n)), "{now:?} {old:?}");
    let requeued: Vec<&str> = run
        .items("Event")
        .into_iter()
        .filter(|e| e["reason"] == "DrainRequeued")
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert!(
        requeued.iter().any(|m| m.contains("is drained first"))
            && requeued.iter().any(|m| m.contains("is already cordoned")),
        "{requeued:?}"
    );
    // Never two control plane nodes cordoned at once: each DrainProceeding comes after the
    // previous machine's VM was destroyed.
    let order: Vec<(String, String)> = run
        .items("Event")
        .into_iter()
        .filter(|e| {
            e["reason"] == "DrainProceeding"
                || e["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Destroying VM"))
        })
        .map(|e| {
            (
                e["reason"].as_str().unwrap().to_string(),
                e["involvedObject"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut draining: Option<String> = None;
    for (reason, who) in &order {
        if reason == "DrainProceeding" {
            assert!(draining.is_none(), "two drains at once: {order:?}");
            draining = Some(who.clone());
        } else if draining.as_ref() == Some(who) {
            draining = None;
        }
    }
}
