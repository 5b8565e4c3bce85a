//! Cluster API machines in local mode, end to end against a live vcsim through the `reconcile`
//! command: a Cluster, its VSphereCluster, three zones and a MachineDeployment per zone become
//! VMs in each zone's pool with the bootstrap Secret as `guestinfo.userdata` and cloud-init
//! metadata, powered on; a re-run changes nothing; a run killed mid-way and resumed makes no
//! second VM; bad input waits naming what is missing. Local mode plays CAPI's part (Cluster
//! readiness, MachineDeployment → Machines, the copies back onto the Machine): these tests
//! stand in for no component beyond that, which the command itself says it plays.
#[path = "support/local_run.rs"]
mod local_run;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use vcsim::Vcsim;

use local_run::{Run, admin, extra_config, kill_runs, reconcile, vm_property};

const BOOTSTRAP: &str = "#cloud-config\nruncmd: [kubeadm join]\n";

async fn sim() -> Vcsim {
    Vcsim::builder()
        .clusters(3)
        .hosts(1)
        .pools(1)
        .datastores(1)
        .start()
        .await
}

/// Zone `dz-<x>` in compute cluster `DC0_C<i>`, its pool `DC0_C<i>_RP1`.
fn zone(x: &str, i: usize) -> String {
    format!(
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata: {{name: fd-{x}}}
spec:
  region: {{name: region-1, type: Datacenter, tagCategory: k8s-region, autoConfigure: true}}
  zone: {{name: zone-{x}, type: ComputeCluster, tagCategory: k8s-zone, autoConfigure: true}}
  topology: {{datacenter: DC0, computeCluster: DC0_C{i}, datastore: LocalDS_0, networks: [VM Network]}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata: {{name: dz-{x}}}
spec:
  server: 127.0.0.1
  failureDomain: fd-{x}
  placementConstraint: {{resourcePool: DC0_C{i}_RP1, folder: vm}}
---
"
    )
}

/// The cluster: Cluster + VSphereCluster, three zones, the bootstrap Secret and a template.
fn cluster(dir: &Path) {
    let mut y = String::new();
    for (i, x) in ["a", "b", "c"].iter().enumerate() {
        y += &zone(x, i);
    }
    y += "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereCluster
metadata: {name: c1, namespace: default}
spec:
  server: 127.0.0.1
  failureDomainSelector: {}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: c1, namespace: default}
spec:
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: VSphereCluster, name: c1}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereMachineTemplate
metadata: {name: tpl, namespace: default}
spec:
  template:
    spec:
      template: DC0_H0_VM0
      numCPUs: 1
      memoryMiB: 512
      network:
        devices: [{networkName: VM Network, dhcp4: true}]
---
";
    y += &format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: boot, namespace: default}}\nstringData:\n  value: {BOOTSTRAP:?}\n  format: cloud-config\n"
    );
    std::fs::write(dir.join("cluster.yaml"), y).unwrap();
}

/// A MachineDeployment in zone `dz-<x>`, with `replicas`, its template and bootstrap Secret.
fn deployment(x: &str, replicas: u32, template: &str, secret: Option<&str>) -> String {
    let boot = secret
        .map(|s| format!("{{dataSecretName: {s}}}"))
        .unwrap_or_else(|| "{}".into());
    format!(
        "apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {{name: md-{x}, namespace: default}}
spec:
  clusterName: c1
  replicas: {replicas}
  template:
    spec:
      clusterName: c1
      failureDomain: dz-{x}
      bootstrap: {boot}
      infrastructureRef: {{apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: VSphereMachineTemplate, name: {template}}}
---
"
    )
}

fn workdir() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("m");
    std::fs::create_dir(&manifests).unwrap();
    let state = dir.path().join("state.json");
    (dir, manifests, state)
}

/// The Cluster API Machine of that name (not OpenShift's `Machine`).
fn capi_machine<'a>(run: &'a Run, name: &str) -> Option<&'a Value> {
    run.items("Machine")
        .into_iter()
        .find(|m| m["apiVersion"] == "cluster.x-k8s.io/v1beta1" && m["metadata"]["name"] == name)
}

/// VM path → (instance UUID, resource pool name, power state) for VMs whose name starts so.
async fn vms(sim: &Vcsim, prefix: &str) -> Vec<(String, String)> {
    let inv = admin(sim).inventory().await.unwrap();
    inv.iter()
        .filter(|e| e.name.starts_with(prefix))
        .map(|e| {
            (
                e.path.clone(),
                e.vm.as_ref()
                    .and_then(|v| v.instance_uuid.clone())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// The VM's power state, BIOS UUID and extraConfig (key → value), as vCenter (here vcsim)
/// has them.
async fn vm_facts(
    sim: &Vcsim,
    path: &str,
) -> (String, String, std::collections::BTreeMap<String, String>) {
    (
        vm_property(sim, path, "runtime.powerState").await.text,
        vm_property(sim, path, "config.uuid").await.text,
        extra_config(sim, path).await,
    )
}

async fn pool_of(sim: &Vcsim, path: &str) -> String {
    let pool = vm_property(sim, path, "resourcePool").await.text;
    let inv = admin(sim).inventory().await.unwrap();
    inv.iter()
        .find(|e| e.moref.value == pool)
        .map(|e| e.path.clone())
        .unwrap_or(pool)
}

#[tokio::test]
async fn a_deployment_per_zone_becomes_vms_in_the_zones_pools_and_a_rerun_changes_nothing() {
    let sim = sim().await;
    let (_d, manifests, state) = workdir();
    cluster(&manifests);
    let mut y = deployment("a", 2, "tpl", Some("boot"));
    y += &deployment("b", 1, "tpl", Some("boot"));
    y += &deployment("c", 1, "tpl", Some("boot"));
    std::fs::write(manifests.join("md.yaml"), y).unwrap();

    // A dry run says what it would do and does none of it (its zones are not tagged yet, so
    // the machines would wait for them).
    let dry = reconcile(&sim, &manifests, &state, &["--dry-run"]);
    assert!(
        dry.stderr
            .contains("would: Machine default/md-a-0: created for MachineDeployment default/md-a"),
        "{}",
        dry.stderr
    );
    assert!(
        dry.stderr.contains(
            "cluster api machine default/md-a-0 is Provisioning: WaitingForFailureDomain"
        ),
        "{}",
        dry.stderr
    );
    assert!(
        vms(&sim, "md-").await.is_empty(),
        "a dry run clones nothing"
    );
    assert!(!state.exists(), "no state file on a dry run");

    // The VMs are made and powered on; with no guest tools in vcsim they report no address, so
    // the machines are not provisioned yet and the run says so.
    let first = reconcile(&sim, &manifests, &state, &[]);
    assert_ne!(first.code, 0, "{}", first.stderr);
    assert!(
        first.stderr.contains("cluster api machine default/md-a-0 is Provisioning: WaitingForNetworkAddress: VM md-a-0 reports no IP address yet"),
        "{}",
        first.stderr
    );
    // Then each guest reports an address, as VMware Tools in a booted guest would (stand-in:
    // vcsim's `SET.guest.ipAddress`).
    let c = admin(&sim);
    let inv = c.inventory().await.unwrap();
    for (i, (path, _)) in vms(&sim, "md-").await.iter().enumerate() {
        let vm = inv.at_path(path).unwrap().moref.clone();
        let t = c
            .set_extra_config(
                &vm,
                &[("SET.guest.ipAddress".into(), format!("10.0.0.{}", 10 + i))],
            )
            .await
            .unwrap();
        c.wait_task(&t, Duration::from_secs(10)).await.unwrap();
    }
    let run = reconcile(&sim, &manifests, &state, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("4/4 Cluster API machine(s) provisioned"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("clone"),
        "nothing cloned again: {}",
        run.stderr
    );
    let cluster = run
        .items("Cluster")
        .into_iter()
        .find(|c| c["apiVersion"] == "cluster.x-k8s.io/v1beta1")
        .unwrap();
    assert_eq!(cluster["status"]["infrastructureReady"], true);
    let decode = |s: &str| {
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(s).unwrap()).unwrap()
    };
    for (name, pool) in [
        ("md-a-0", "/DC0/host/DC0_C0/Resources/DC0_C0_RP1"),
        ("md-a-1", "/DC0/host/DC0_C0/Resources/DC0_C0_RP1"),
        ("md-b-0", "/DC0/host/DC0_C1/Resources/DC0_C1_RP1"),
        ("md-c-0", "/DC0/host/DC0_C2/Resources/DC0_C2_RP1"),
    ] {
        let path = format!("/DC0/vm/{name}");
        assert_eq!(pool_of(&sim, &path).await, pool, "{name}");
        let (power, bios, x) = vm_facts(&sim, &path).await;
        assert_eq!(power, "poweredOn", "{name}");
        assert_eq!(decode(&x["guestinfo.userdata"]), BOOTSTRAP);
        assert_eq!(x["guestinfo.userdata.encoding"], "base64");
        let md = decode(&x["guestinfo.metadata"]);
        assert!(md.contains(&format!("local-hostname: {name}")), "{md}");
        assert!(md.contains("macaddress: "), "{md}");
        // The Machine as CAPI would have it: the provider ID of its VM, Provisioned.
        let m = capi_machine(&run, name).unwrap();
        assert_eq!(m["status"]["phase"], "Provisioned", "{m:#}");
        assert_eq!(
            m["spec"]["providerID"].as_str().unwrap(),
            format!("vsphere://{bios}")
        );
        assert!(m["status"]["addresses"][0]["address"].is_string(), "{m:#}");
        // The VM's instance UUID is its VSphereVM's UID.
        let vm = run.object("VSphereVM", name).unwrap();
        let uid = vm["metadata"]["uid"].as_str().unwrap();
        assert!(
            vms(&sim, name).await.iter().any(|(_, u)| u == uid),
            "{name}"
        );
    }
    assert!(
        !run.stderr.contains(BOOTSTRAP.trim()),
        "the bootstrap data is never printed"
    );

    // Again: nothing to do.
    let again = reconcile(&sim, &manifests, &state, &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(!again.stderr.contains("done:"), "{}", again.stderr);
    assert!(
        again.stderr.contains("0 machine change(s) in vCenter"),
        "{}",
        again.stderr
    );
    assert_eq!(vms(&sim, "md-").await.len(), 4);

    // A dry run of a scale-up names the clone it would make, and makes none.
    let up = deployment("a", 2, "tpl", Some("boot"))
        + &deployment("b", 1, "tpl", Some("boot"))
        + &deployment("c", 2, "tpl", Some("boot"));
    std::fs::write(manifests.join("md.yaml"), up).unwrap();
    let dry = reconcile(&sim, &manifests, &state, &["--dry-run"]);
    assert!(
        dry.stderr
            .contains("would: VSphereVM default/md-c-1: created for VSphereMachine default/md-c-1"),
        "{}",
        dry.stderr
    );
    assert!(
        dry.stderr
            .contains("would: VSphereVM default/md-c-1: clone"),
        "{}",
        dry.stderr
    );
    assert_eq!(vms(&sim, "md-").await.len(), 4);

    // Scaled down and deleted: their VMs are destroyed, the rest stay.
    let mut y = deployment("a", 1, "tpl", Some("boot"));
    y += &deployment("b", 1, "tpl", Some("boot"));
    y += &deployment("c", 1, "tpl", Some("boot"));
    std::fs::write(manifests.join("md.yaml"), y).unwrap();
    let down = reconcile(
        &sim,
        &manifests,
        &state,
        &["--delete", "machinedeployment/md-b"],
    );
    assert_eq!(down.code, 0, "{}", down.stderr);
    assert!(
        down.stderr
            .contains("done: VSphereVM default/md-b-0: destroy"),
        "{}",
        down.stderr
    );
    let left: Vec<String> = vms(&sim, "md-").await.into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        left,
        ["/DC0/vm/md-a-0", "/DC0/vm/md-c-0"],
        "{}",
        down.stderr
    );
    assert!(capi_machine(&down, "md-a-1").is_none());
    assert!(capi_machine(&down, "md-b-0").is_none());
    assert!(down.object("VSphereVM", "md-b-0").is_none());
    assert!(down.object("VSphereMachine", "md-b-0").is_none());
}

#[tokio::test]
async fn killed_at_random_points_then_resumed_makes_one_vm_per_machine() {
    let sim = sim().await;
    let (_d, manifests, state) = workdir();
    cluster(&manifests);
    let mut y = String::new();
    for x in ["a", "b", "c"] {
        y += &deployment(x, 1, "tpl", Some("boot"));
    }
    std::fs::write(manifests.join("md.yaml"), y).unwrap();
    let seed = kill_runs(&sim, &manifests, &state, &[], 12, 500).await;
    let run = reconcile(&sim, &manifests, &state, &[]);
    // No guest reports an address in vcsim: the machines end at WaitingForNetworkAddress.
    assert!(
        !run.stderr.contains("failed"),
        "seed {seed}: {}",
        run.stderr
    );
    assert_eq!(
        run.stderr.matches("WaitingForNetworkAddress").count(),
        3,
        "seed {seed}: {}",
        run.stderr
    );
    let all = vms(&sim, "md-").await;
    assert_eq!(all.len(), 3, "seed {seed}: {all:?}");
    for x in ["a", "b", "c"] {
        let name = format!("md-{x}-0");
        let vm = run.object("VSphereVM", &name).unwrap();
        let uid = vm["metadata"]["uid"].as_str().unwrap();
        assert_eq!(
            all.iter().filter(|(_, u)| u == uid).count(),
            1,
            "seed {seed}: {name}"
        );
    }
}

#[tokio::test]
async fn bad_input_waits_naming_what_is_missing_and_clones_nothing() {
    let sim = sim().await;
    let (_d, manifests, state) = workdir();
    cluster(&manifests);
    let mut y = deployment("a", 1, "nope", Some("boot"));
    // No bootstrap data: local mode runs no bootstrap provider.
    y += &deployment("b", 1, "tpl", None);
    // A failure domain no zone is named after.
    y += &deployment("c", 1, "tpl", Some("boot"))
        .replace("failureDomain: dz-c", "failureDomain: dz-gone");
    // A template vCenter does not have: the VM cannot be made; the machine fails saying why.
    y += &deployment("a", 1, "tpl-x", Some("boot")).replace("md-a", "md-x");
    y += "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereMachineTemplate
metadata: {name: tpl-x, namespace: default}
spec:
  template:
    spec:
      template: no-such-template
---
";
    std::fs::write(manifests.join("md.yaml"), y).unwrap();
    let run = reconcile(&sim, &manifests, &state, &[]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "machinedeployment default/md-a waits: MachineDeployment default/md-a: spec.template.spec.infrastructureRef: VSphereMachineTemplate default/nope not found"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("cluster api machine default/md-b-0 is Pending")
            && run.stderr.contains(
                "local mode runs no bootstrap provider: set spec.bootstrap.dataSecretName"
            ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("cluster api machine default/md-c-0 is Provisioning: WaitingForFailureDomain: VSphereDeploymentZone dz-gone (the machine's failure domain) not found"),
        "{}",
        run.stderr
    );
    let failed = run
        .stderr
        .lines()
        .find(|l| l.starts_with("cluster api machine default/md-x-0 is Failed: "))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(failed.contains("no-such-template"), "{failed}");
    assert!(vms(&sim, "md-").await.is_empty(), "nothing cloned");
    assert!(run.object("VSphereVM", "md-b-0").is_none());
    // Fixed: the next run makes them (local mode rolls no template change out to Machines
    // already made: those are deleted and made again, as a rollout would replace them).
    let mut y = deployment("a", 1, "tpl", Some("boot"));
    y += &deployment("b", 1, "tpl", Some("boot"));
    y += &deployment("c", 1, "tpl", Some("boot"));
    std::fs::write(manifests.join("md.yaml"), y).unwrap();
    let run = reconcile(
        &sim,
        &manifests,
        &state,
        &[
            "--delete",
            "machine/md-b-0",
            "--delete",
            "machine.cluster.x-k8s.io/md-c-0",
        ],
    );
    assert!(!run.stderr.contains("waits:"), "{}", run.stderr);
    assert_eq!(
        run.stderr.matches("WaitingForNetworkAddress").count(),
        3,
        "{}",
        run.stderr
    );
    assert_eq!(vms(&sim, "md-").await.len(), 3, "{}", run.stderr);
}

/// An OpenShift Machine and a Cluster API machine on the same server are one sweep: the run
/// reconciles both as one group and makes both VMs.
#[tokio::test]
async fn openshift_and_cluster_api_machines_of_a_server_share_one_sweep() {
    let sim = sim().await;
    let (_d, manifests, state) = workdir();
    cluster(&manifests);
    let openshift = format!(
        "apiVersion: v1
kind: Secret
metadata: {{name: worker-user-data, namespace: openshift-machine-api}}
stringData: {{userData: '{}'}}
---
apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  name: os-0
  namespace: openshift-machine-api
  labels: {{vsphere-provider.io/deployment-zone: dz-b}}
spec:
  providerSpec:
    value:
      apiVersion: machine.openshift.io/v1beta1
      kind: VSphereMachineProviderSpec
      template: DC0_H0_VM0
      network: {{devices: []}}
---
",
        local_run::IGNITION
    );
    std::fs::write(
        manifests.join("md.yaml"),
        deployment("a", 1, "tpl", Some("boot")) + &openshift,
    )
    .unwrap();
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    let groups: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("reconciling ") && l.contains("machine(s)"))
        .collect();
    assert_eq!(groups.len(), 1, "{}", run.stderr);
    assert!(
        groups[0].starts_with("reconciling 2 machine(s) on "),
        "{}",
        run.stderr
    );
    let made: Vec<String> = vms(&sim, "")
        .await
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p == "/DC0/vm/md-a-0" || p == "/DC0/vm/os-0")
        .collect();
    assert_eq!(made.len(), 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("1/1 machine(s) running"),
        "{}",
        run.stderr
    );
}

/// A Cluster API machine whose device asks for an address from an `InClusterIPPool`: its
/// `IPAddressClaim` (owned by the VSphereVM, named `<vm>-<device>-<pool>` as CAPV names it) is
/// bound by local mode — which plays the IPAM provider here, as it says, standing in for
/// cluster-api-ipam-provider-in-cluster — and the bound address and the pool's gateway reach the
/// guest in `guestinfo.metadata`; no afterburn kargs (an OpenShift Machine's) are written.
#[tokio::test]
async fn an_address_from_a_pool_reaches_the_guest_metadata() {
    let sim = sim().await;
    let (_d, manifests, state) = workdir();
    cluster(&manifests);
    let mut y = deployment("a", 1, "tpl-ip", Some("boot"));
    y += "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereMachineTemplate
metadata: {name: tpl-ip, namespace: default}
spec:
  template:
    spec:
      template: DC0_H0_VM0
      numCPUs: 1
      memoryMiB: 512
      network:
        devices:
        - networkName: VM Network
          nameservers: [10.20.0.53]
          addressesFromPools:
          - {apiGroup: ipam.cluster.x-k8s.io, kind: InClusterIPPool, name: nodes}
---
apiVersion: ipam.cluster.x-k8s.io/v1alpha2
kind: InClusterIPPool
metadata: {name: nodes, namespace: default}
spec:
  addresses: [10.20.0.10-10.20.0.20]
  prefix: 24
  gateway: 10.20.0.1
---
";
    std::fs::write(manifests.join("md.yaml"), y).unwrap();
    let run = reconcile(&sim, &manifests, &state, &[]);
    let claim = run
        .object("IPAddressClaim", "md-a-0-0-0")
        .unwrap_or_else(|| panic!("no claim md-a-0-0-0: {}", run.stderr));
    let owner = &claim["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "VSphereVM", "{claim}");
    assert_eq!(owner["name"], "md-a-0", "{claim}");
    let found = vms(&sim, "md-a-0").await;
    let (path, _) = found
        .first()
        .unwrap_or_else(|| panic!("no VM: {}", run.stderr));
    let (_, _, extra) = vm_facts(&sim, path).await;
    let metadata = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(&extra["guestinfo.metadata"])
            .unwrap(),
    )
    .unwrap();
    assert!(metadata.contains("10.20.0.10/24"), "{metadata}");
    assert!(
        metadata.contains("10.20.0.1"),
        "the pool's gateway: {metadata}"
    );
    assert!(metadata.contains("10.20.0.53"), "{metadata}");
    assert!(
        !extra.contains_key("guestinfo.afterburn.initrd.network-kargs"),
        "{extra:?}"
    );
}

/// CAPV v1.17's own `cluster-template.yaml`, written in v1beta2 throughout (core, KCP, CABPK and
/// infrastructure), filled with variables only, as `clusterctl generate cluster` would: local
/// mode reads the v1beta2 Cluster, VSphereCluster, VSphereMachineTemplates and MachineDeployment,
/// plays the MachineDeployment into Machines and VSphereMachines, and passes over the kinds of
/// other controllers (KubeadmControlPlane, KubeadmConfigTemplate, ClusterResourceSet,
/// ConfigMaps), saying so. Nothing boots without a bootstrap provider: the machines wait, naming
/// what local mode lacks.
#[tokio::test]
async fn capvs_v1beta2_template_applies_unchanged_with_variables_only() {
    let sim = sim().await;
    let (user, password) = sim.credentials();
    let (_dir, manifests, state) = workdir();
    // A SHA-256 pin (the template requires a non-empty one; vcsim here is plain http).
    let pin = format!("{}AB", "AB:".repeat(31));
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/capv/v1.17/cluster-template.yaml"),
    )
    .unwrap();
    let vars: std::collections::BTreeMap<&str, &str> = [
        ("CLUSTER_NAME", "demo"),
        ("NAMESPACE", "default"),
        ("VSPHERE_SERVER", "127.0.0.1"),
        ("VSPHERE_TLS_THUMBPRINT", &pin),
        ("VSPHERE_DATACENTER", "DC0"),
        ("VSPHERE_DATASTORE", "LocalDS_0"),
        ("VSPHERE_NETWORK", "VM Network"),
        ("VSPHERE_RESOURCE_POOL", "DC0_C0_RP1"),
        ("VSPHERE_FOLDER", "vm"),
        ("VSPHERE_TEMPLATE", "DC0_H0_VM0"),
        ("VSPHERE_STORAGE_POLICY", "gold"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.0.0.10"),
        ("KUBERNETES_VERSION", "v1.33.0"),
        ("CPI_IMAGE_K8S_VERSION", "v1.33.0"),
        ("CONTROL_PLANE_MACHINE_COUNT", "3"),
        ("WORKER_MACHINE_COUNT", "2"),
        ("VSPHERE_USERNAME", user),
        ("VSPHERE_PASSWORD", password),
        ("VSPHERE_SSH_AUTHORIZED_KEY", "ssh-ed25519 AAAA test"),
    ]
    .into();
    let placeholder = regex::Regex::new(r"\$\{([A-Z0-9_]+)(?::?=([^}]*))?\}").unwrap();
    let filled = placeholder.replace_all(&template, |c: &regex::Captures| {
        vars.get(&c[1])
            .map(|v| v.to_string())
            .or_else(|| c.get(2).map(|d| d.as_str().to_string()))
            .unwrap_or_else(|| panic!("variable {} has no value", &c[1]))
    });
    std::fs::write(manifests.join("cluster.yaml"), filled.as_bytes()).unwrap();
    let run = reconcile(&sim, &manifests, &state, &[]);
    // Machines waiting for bootstrap data is "not ready" (exit 1), not an input error (2).
    assert_eq!(run.code, 1, "{}", run.stderr);
    for kind in [
        "KubeadmControlPlane demo",
        "KubeadmConfigTemplate demo-md-0",
        "ClusterResourceSet demo-crs-0",
        "ConfigMap csi-manifests",
    ] {
        assert!(
            run.stderr.lines().any(|l| l.starts_with("skipped: ")
                && l.contains(kind)
                && l.ends_with("another controller's kind, not played by local mode")),
            "{kind}: {}",
            run.stderr
        );
    }
    // The v1beta2 MachineDeployment (2 workers) became Machines with their VSphereMachines,
    // stamped from the v1beta2 VSphereMachineTemplate.
    for i in 0..2 {
        let name = format!("demo-md-0-{i}");
        let machine = run
            .items("Machine")
            .into_iter()
            .find(|m| m["metadata"]["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no Machine {name}: {}", run.list));
        assert!(
            machine["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("cluster.x-k8s.io/")),
            "{machine}"
        );
        let vsm = run
            .items("VSphereMachine")
            .into_iter()
            .find(|m| m["metadata"]["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no VSphereMachine {name}: {}", run.stderr));
        assert_eq!(vsm["spec"]["template"], "DC0_H0_VM0", "{vsm}");
        assert_eq!(vsm["spec"]["storagePolicyName"], "gold", "{vsm}");
    }
    assert!(
        run.stderr
            .contains("local mode runs no bootstrap provider: set spec.bootstrap.dataSecretName"),
        "{}",
        run.stderr
    );
}

/// `customVMXKeys` in local mode: a template with a refused key (docs/vmx-keys.md) is refused
/// with the manifests, naming the key, and nothing is cloned; with only benign keys the VM gets
/// them in its extraConfig next to the provider's own.
#[tokio::test]
async fn a_refused_custom_vmx_key_is_refused_naming_it_and_benign_ones_reach_the_vm() {
    let sim = sim().await;
    let (_d, manifests, state) = workdir();
    cluster(&manifests);
    let template = |keys: &str| {
        format!(
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereMachineTemplate
metadata: {{name: tpl-vmx, namespace: default}}
spec:
  template:
    spec:
      template: DC0_H0_VM0
      numCPUs: 1
      memoryMiB: 512
      network:
        devices: [{{networkName: VM Network, dhcp4: true}}]
      customVMXKeys: {{{keys}}}
---
"
        )
    };
    let md = deployment("a", 1, "tpl-vmx", Some("boot"));
    std::fs::write(
        manifests.join("md.yaml"),
        template(r#"disk.EnableUUID: "TRUE", Isolation.Tools.Copy.Disable: "FALSE""#) + &md,
    )
    .unwrap();
    let run = reconcile(&sim, &manifests, &state, &[]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "spec.template.spec.customVMXKeys[Isolation.Tools.Copy.Disable]: Forbidden: this key may not be set"
        ),
        "{}",
        run.stderr
    );
    assert!(vms(&sim, "md-").await.is_empty(), "nothing cloned");

    std::fs::write(
        manifests.join("md.yaml"),
        template(r#"disk.EnableUUID: "TRUE""#) + &md,
    )
    .unwrap();
    let run = reconcile(&sim, &manifests, &state, &[]);
    let made = vms(&sim, "md-a-").await;
    assert_eq!(made.len(), 1, "{}", run.stderr);
    let (_, _, x) = vm_facts(&sim, &made[0].0).await;
    assert_eq!(
        x.get("disk.EnableUUID").map(String::as_str),
        Some("TRUE"),
        "{x:?}"
    );
    assert!(x.contains_key("guestinfo.userdata"), "{x:?}");
    assert!(
        !x.keys()
            .any(|k| k.to_ascii_lowercase().starts_with("isolation.")),
        "{x:?}"
    );
}
