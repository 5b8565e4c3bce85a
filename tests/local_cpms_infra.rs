//! The control plane machine set in local mode against a live vcsim with its failure domains
//! from OpenShift's `Infrastructure` (no VSphereDeploymentZone at all): an Infrastructure and a
//! CPMS shaped like fixture `cpms-02` (CPMSO `docs/user/failure-domains.md`, vSphere section;
//! the CPMS template as fixture `cpms-01`: `workspace: {}`, `template: ""`), names adapted to
//! vcsim and a third domain added: three machines, one per compute cluster, each VM in its
//! domain's pool.
#[path = "support/local_run.rs"]
mod local_run;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::path::Path;

use serde_json::Value;
use vcsim::Vcsim;

use local_run::{Run, admin, workdir};

/// Fixture 02's domains on vcsim: `us-east-1` as the fixture (pool given as the cluster's
/// `Resources`), `us-east-2` without `resourcePool` (the `<computeCluster>/Resources` default),
/// `us-east-3` in a child pool. Every domain names the template (basename injected); no
/// `status.infrastructureName`, so VMs go to the datacenter's `vm` folder.
const INFRA: &str = "apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata:
  name: cluster
spec:
  cloudConfig:
    key: config
    name: cloud-provider-config
  platformSpec:
    type: VSphere
    vsphere:
      failureDomains:
      - name: us-east-1
        region: us-east
        server: 127.0.0.1
        topology:
          computeCluster: /DC0/host/DC0_C0
          datacenter: DC0
          datastore: /DC0/datastore/LocalDS_0
          networks:
          - VM Network
          resourcePool: /DC0/host/DC0_C0/Resources
          template: /DC0/vm/DC0_H0_VM0
        zone: us-east-1a
      - name: us-east-2
        region: us-east
        server: 127.0.0.1
        topology:
          computeCluster: /DC0/host/DC0_C1
          datacenter: DC0
          datastore: /DC0/datastore/LocalDS_0
          networks:
          - VM Network
          template: /DC0/vm/DC0_H0_VM0
        zone: us-east-1b
      - name: us-east-3
        region: us-east
        server: 127.0.0.1
        topology:
          computeCluster: /DC0/host/DC0_C2
          datacenter: DC0
          datastore: /DC0/datastore/LocalDS_0
          networks:
          - VM Network
          resourcePool: /DC0/host/DC0_C2//Resources/DC0_C2_RP1
          template: /DC0/vm/DC0_H0_VM0
        zone: us-east-1c
";

const CPMS: &str = "apiVersion: machine.openshift.io/v1
kind: ControlPlaneMachineSet
metadata:
  labels:
    machine.openshift.io/cluster-api-cluster: demo
  name: cluster
  namespace: openshift-machine-api
spec:
  replicas: 3
  selector:
    matchLabels:
      machine.openshift.io/cluster-api-cluster: demo
      machine.openshift.io/cluster-api-machine-role: master
      machine.openshift.io/cluster-api-machine-type: master
  state: Active
  strategy: {}
  template:
    machineType: machines_v1beta1_machine_openshift_io
    machines_v1beta1_machine_openshift_io:
      failureDomains:
        platform: VSphere
        vsphere:
        - name: us-east-1
        - name: us-east-2
        - name: us-east-3
      metadata:
        labels:
          machine.openshift.io/cluster-api-cluster: demo
          machine.openshift.io/cluster-api-machine-role: master
          machine.openshift.io/cluster-api-machine-type: master
      spec:
        lifecycleHooks: {}
        metadata: {}
        providerSpec:
          value:
            apiVersion: machine.openshift.io/v1beta1
            credentialsSecret:
              name: vsphere-cloud-credentials
            diskGiB: 100
            kind: VSphereMachineProviderSpec
            memoryMiB: 16384
            metadata:
              creationTimestamp: null
            network:
              devices: []
            numCPUs: 4
            numCoresPerSocket: 2
            snapshot: \"\"
            template: \"\"
            userDataSecret:
              name: master-user-data
            workspace: {}
";

/// A run with simulated kubelets (machine sets wait for Running machines).
fn reconcile(sim: &Vcsim, dir: &Path, state: &Path) -> Run {
    local_run::reconcile(sim, dir, state, &["--simulate-nodes"])
}

fn items<'a>(run: &'a Run, kind: &str) -> Vec<&'a Value> {
    run.items(kind)
}

#[tokio::test]
async fn infrastructure_failure_domains_three_machines_one_per_compute_cluster() {
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    std::fs::write(m.join("infrastructure.yaml"), INFRA).unwrap();
    std::fs::write(m.join("cpms.yaml"), CPMS).unwrap();
    let admin = admin(&sim);

    let run = reconcile(&sim, &m, &state);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let machines = items(&run, "Machine");
    assert_eq!(machines.len(), 3, "{}", run.stderr);
    let inv = admin.inventory().await.unwrap();
    let mut zones = Vec::new();
    for mch in &machines {
        let name = mch["metadata"]["name"].as_str().unwrap();
        let labels = &mch["metadata"]["labels"];
        assert!(
            labels.get("vsphere-provider.io/deployment-zone").is_none(),
            "no deployment zone to name: {name}"
        );
        assert_eq!(labels["machine.openshift.io/region"], "us-east", "{name}");
        let zone = labels["machine.openshift.io/zone"].as_str().unwrap();
        zones.push(zone.to_string());
        let ps = &mch["spec"]["providerSpec"]["value"];
        assert_eq!(
            ps["template"], "DC0_H0_VM0",
            "basename of topology.template"
        );
        assert_eq!(ps["workspace"]["server"], "127.0.0.1");
        assert_eq!(ps["workspace"]["folder"], "/DC0/vm");
        assert_eq!(
            ps["network"]["devices"][0]["networkName"],
            "/DC0/network/VM Network"
        );
        let (c, pool) = match zone {
            "us-east-1a" => (0, "/DC0/host/DC0_C0/Resources"),
            "us-east-1b" => (1, "/DC0/host/DC0_C1/Resources"),
            _ => (2, "/DC0/host/DC0_C2/Resources/DC0_C2_RP1"),
        };
        assert_eq!(ps["workspace"]["resourcePool"], pool, "{name}");
        assert!(
            name.ends_with(&format!("-{c}")),
            "index {c} → {zone}: {name}"
        );
        let uid = mch["metadata"]["uid"].as_str().unwrap();
        let vm = inv
            .vm_by_instance_uuid(uid)
            .unwrap_or_else(|| panic!("no VM for {name}"));
        let vm_pool = vm.vm.as_ref().unwrap().resource_pool.clone().unwrap();
        assert_eq!(inv.path(&vm_pool), Some(pool), "{name}'s VM");
        assert_eq!(
            vm.path,
            format!("/DC0/vm/{}", vm.name),
            "{name}'s VM folder"
        );
        assert_eq!(mch["status"]["phase"], "Running", "{name}");
    }
    zones.sort();
    assert_eq!(zones, ["us-east-1a", "us-east-1b", "us-east-1c"]);
    let cp = &items(&run, "ControlPlaneMachineSet")[0]["status"];
    assert_eq!(
        (cp["readyReplicas"].as_i64(), cp["updatedReplicas"].as_i64()),
        (Some(3), Some(3)),
        "{cp}"
    );
    // The folder default taken for want of status.infrastructureName is said.
    assert!(
        items(&run, "Event")
            .iter()
            .any(|e| e["reason"] == "FailureDomainDefaulted"
                && e["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("no status.infrastructureName")),
        "{}",
        run.list
    );
    // The Infrastructure is kept in the state, unknown fields included.
    let infra = items(&run, "Infrastructure");
    assert_eq!(infra.len(), 1);
    assert_eq!(
        infra[0]["spec"]["cloudConfig"]["name"],
        "cloud-provider-config"
    );

    // Re-running changes nothing.
    let again = reconcile(&sim, &m, &state);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("0 machine change(s) in vCenter"),
        "{}",
        again.stderr
    );
    let mut before: Vec<&str> = machines
        .iter()
        .map(|m| m["metadata"]["name"].as_str().unwrap())
        .collect();
    let mut after: Vec<String> = items(&again, "Machine")
        .iter()
        .map(|m| m["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    before.sort();
    after.sort();
    assert_eq!(after, before);
}
