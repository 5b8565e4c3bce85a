//! OpenShift's own vSphere control plane machine set manifests, reconciled unchanged in local
//! mode against a vcsim laid out like the estate they were written for
//! (`hack/vcsim/layouts/openshift-ibmcloud.json`: datacenter `IBMCloud`, clusters
//! `vcs-mdcnc-workload-{1,2,3}`, datastores `mdcnc-ds-{1,2,3}`, port group `ci-vlan-1289`, the
//! installer's folder and per-domain templates). The manifests keep naming their vCenter
//! `vcs8e-vc.ocp2.dev.cluster.com`; `--connect-to` points that name at the simulator.
//!
//! * `cpms-01` (openshift/enhancements, static IPs): the file as it is, with an Infrastructure
//!   defining its domains `fd-2/3/4` the way the installer writes them (no template: the
//!   installer's `<infrastructureName>-rhcos-<region>-<zone>` is used).
//! * `cpms-02` (CPMSO `docs/user/failure-domains.md`): its two fragments as they are — the
//!   Infrastructure `spec` and the CPMS `failureDomains` — in whole objects; 3 replicas over 2
//!   domains, the alphabetically first gets two.
#[path = "support/local_run.rs"]
mod local_run;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use vcsim::Vcsim;
use vsphere_provider::vcenter::Inventory;

use local_run::{Run, admin, workdir};

const SERVER: &str = "vcs8e-vc.ocp2.dev.cluster.com";
const INFRA_ID: &str = "ngirard-dev-bwnz9";

/// Fixture 01 with its static IP pool served locally: the installer's pool
/// (`installer.openshift.io` `IPPool`) is fulfilled by OpenShift's own IPAM controller, while
/// local mode is the IPAM provider only for the in-cluster provider's pools, so the pool
/// reference is pointed at a GlobalInClusterIPPool of the same name, written beside it into
/// `dir` (nothing else of the fixture changes).
fn fixture_01_with_local_pool(dir: &Path) -> String {
    std::fs::write(
        dir.join("pool.yaml"),
        "apiVersion: ipam.cluster.x-k8s.io/v1alpha2\nkind: GlobalInClusterIPPool\nmetadata: {name: default-0}\nspec: {addresses: [10.38.0.10-10.38.0.20], prefix: 24, gateway: 10.38.0.1}\n",
    )
    .unwrap();
    std::fs::read_to_string(fixture("cpms-01-cpms-vsphere-3fd-static-ip.yaml"))
        .unwrap()
        .replace(
            "group: installer.openshift.io",
            "group: ipam.cluster.x-k8s.io",
        )
        .replace("resource: IPPool", "resource: GlobalInClusterIPPool")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/manifests/upstream")
        .join(name)
}

async fn estate() -> Vcsim {
    let layout =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/vcsim/layouts/openshift-ibmcloud.json");
    Vcsim::builder()
        .clusters(3)
        .hosts(1)
        .arg("-layout")
        .arg(layout.to_str().unwrap())
        .start()
        .await
}

/// `fd-2/3/4` of fixture 01 on the three workload clusters, as the installer writes them.
fn infrastructure_for_01() -> Value {
    let domains: Vec<Value> = (1..=3)
        .map(|i| {
            json!({
                "name": format!("fd-{}", i + 1),
                "region": "us-east",
                "zone": format!("us-east-1{}", ["a", "b", "c"][i - 1]),
                "server": SERVER,
                "topology": {
                    "computeCluster": format!("/IBMCloud/host/vcs-mdcnc-workload-{i}"),
                    "datacenter": "IBMCloud",
                    "datastore": format!("/IBMCloud/datastore/mdcnc-ds-{i}"),
                    "networks": ["ci-vlan-1289"],
                    "resourcePool": format!("/IBMCloud/host/vcs-mdcnc-workload-{i}/Resources"),
                },
            })
        })
        .collect();
    json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "spec": {"platformSpec": {"type": "VSphere", "vsphere": {"failureDomains": domains}}},
        "status": {"infrastructureName": INFRA_ID},
    })
}

fn reconcile(sim: &Vcsim, dir: &Path, state: &Path) -> Run {
    let alias = format!("{SERVER}={}", sim.url());
    local_run::reconcile(
        sim,
        dir,
        state,
        &["--simulate-nodes", "--connect-to", &alias],
    )
}

/// The machine's VM is where cluster `n`'s domain puts it: that cluster's root pool, the
/// installer's folder, datastore `mdcnc-ds-<n>` (in its VMX path and `datastore` list), and
/// one NIC, on `ci-vlan-1289`.
async fn assert_in_cluster(sim: &Vcsim, inv: &Inventory, machine: &Value, n: usize) {
    let c = admin(sim);
    let name = machine["metadata"]["name"].as_str().unwrap();
    let uid = machine["metadata"]["uid"].as_str().unwrap();
    let vm = inv
        .vm_by_instance_uuid(uid)
        .unwrap_or_else(|| panic!("no VM for {name}"));
    let pool = vm.vm.as_ref().unwrap().resource_pool.as_ref().unwrap();
    assert_eq!(
        inv.path(pool),
        Some(format!("/IBMCloud/host/vcs-mdcnc-workload-{n}/Resources").as_str()),
        "{name}"
    );
    assert_eq!(vm.path, format!("/IBMCloud/vm/{INFRA_ID}/{name}"), "{name}");
    let props = c
        .retrieve_objects(
            std::slice::from_ref(&vm.moref),
            "VirtualMachine",
            &[
                "summary.config.vmPathName",
                "config.hardware.device",
                "datastore",
            ],
        )
        .await
        .unwrap();
    let vmx = props[0].text("summary.config.vmPathName").unwrap();
    assert!(vmx.starts_with(&format!("[mdcnc-ds-{n}]")), "{name}: {vmx}");
    let on: Vec<&str> = props[0].props["datastore"]
        .children
        .iter()
        .map(|d| d.text.as_str())
        .collect();
    let ds = inv
        .at_path(&format!("/IBMCloud/datastore/mdcnc-ds-{n}"))
        .unwrap();
    // Real vCenter lists only mdcnc-ds-<n>: a full clone moves every disk there. vcsim also lists
    // the template's datastore: it applies the clone's disk-resize `edit` (which carries the
    // template disk's backing fileName, as MAO sends it) after the copy, re-pointing the disk at
    // the template's vmdk (simulator/virtual_machine.go, CloneVMTask + configureDevice).
    assert!(
        on.contains(&ds.moref.value.as_str()),
        "{name} datastore: {on:?}"
    );
    let devices = props[0].props.get("config.hardware.device").unwrap();
    let keys: Vec<&str> = devices
        .children
        .iter()
        .filter_map(|d| {
            d.child("backing")?
                .child("port")?
                .child_text("portgroupKey")
        })
        .collect();
    let pg = inv.at_path("/IBMCloud/network/ci-vlan-1289").unwrap();
    assert_eq!(
        keys,
        [pg.moref.value.as_str()],
        "{name}: one NIC, on ci-vlan-1289"
    );
}

fn machines(run: &Run) -> Vec<&Value> {
    run.items("Machine")
}

/// The domain → cluster number of both fixtures' estates.
fn cluster_of(zone_label: &str) -> usize {
    match zone_label {
        "us-east-1a" => 1,
        "us-east-1b" | "" => 2,
        "us-east-1c" => 3,
        other => panic!("unexpected zone {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_cpms_01_three_machines_one_per_domain_static_ips_from_a_pool() {
    let sim = estate().await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    let original = fixture_01_with_local_pool(&m).into_bytes();
    std::fs::write(m.join("cpms.yaml"), &original).unwrap();
    std::fs::write(
        m.join("infrastructure.json"),
        infrastructure_for_01().to_string(),
    )
    .unwrap();

    let run = reconcile(&sim, &m, &state);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ms = machines(&run);
    assert_eq!(ms.len(), 3, "{}", run.stderr);
    let inv = admin(&sim).inventory().await.unwrap();
    let mut domains = Vec::new();
    for mch in ms {
        let name = mch["metadata"]["name"].as_str().unwrap();
        assert!(
            name.starts_with(&format!("{INFRA_ID}-master-")),
            "CPMSO's <cluster id>-<role>-<rand5>-<index>: {name}"
        );
        assert_eq!(mch["status"]["phase"], "Running", "{name}");
        let zone = mch["metadata"]["labels"]["machine.openshift.io/zone"]
            .as_str()
            .unwrap();
        let n = cluster_of(zone);
        domains.push(format!("fd-{}", n + 1));
        let ps = &mch["spec"]["providerSpec"]["value"];
        assert_eq!(ps["workspace"]["server"], SERVER, "{name}");
        assert_eq!(
            ps["template"],
            format!("{INFRA_ID}-rhcos-us-east-{zone}"),
            "the installer's template name: {name}"
        );
        // Static IP devices are the template's, with the domain's network injected.
        let dev = &ps["network"]["devices"][0];
        assert_eq!(dev["addressesFromPools"][0]["name"], "default-0", "{name}");
        assert_eq!(dev["nameservers"][0], "8.8.8.8", "{name}");
        assert_eq!(dev["networkName"], "/IBMCloud/network/ci-vlan-1289");
        assert_in_cluster(&sim, &inv, mch, n).await;
    }
    domains.sort();
    assert_eq!(domains, ["fd-2", "fd-3", "fd-4"]);
    let cp = &run.items("ControlPlaneMachineSet")[0]["status"];
    assert_eq!(
        (cp["readyReplicas"].as_i64(), cp["updatedReplicas"].as_i64()),
        (Some(3), Some(3)),
        "{cp}"
    );

    // Static IPs: one claim per machine, bound to the pool's first free addresses, in order.
    let mut addresses: Vec<String> = run
        .items("IPAddress")
        .into_iter()
        .map(|a| a["spec"]["address"].as_str().unwrap().to_string())
        .collect();
    addresses.sort();
    assert_eq!(
        addresses,
        ["10.38.0.10", "10.38.0.11", "10.38.0.12"],
        "{}",
        run.list
    );
    assert_eq!(run.items("IPAddressClaim").len(), 3);

    // The manifest is left as it was, and a re-run changes nothing.
    assert_eq!(std::fs::read(m.join("cpms.yaml")).unwrap(), original);
    let again = reconcile(&sim, &m, &state);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("0 machine change(s) in vCenter"),
        "{}",
        again.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_cpms_02_fragments_unchanged_three_replicas_over_two_domains() {
    let sim = estate().await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    let text = std::fs::read_to_string(fixture(
        "cpms-02-vsphere-failuredomains-infra-and-cpms.fragments.yaml",
    ))
    .unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let infra = json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "spec": docs[0]["spec"],
        "status": {"infrastructureName": INFRA_ID},
    });
    // The CPMS of fixture 01 with fixture 02's failure domains.
    let one = fixture_01_with_local_pool(&m);
    let mut cpms: Value = serde_saphyr::from_str(&one).unwrap();
    cpms["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["failureDomains"] =
        docs[1]["template"]["machines_v1beta1_machine_openshift_io"]["failureDomains"].clone();
    std::fs::write(m.join("infrastructure.json"), infra.to_string()).unwrap();
    std::fs::write(m.join("cpms.json"), cpms.to_string()).unwrap();

    let run = reconcile(&sim, &m, &state);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let inv = admin(&sim).inventory().await.unwrap();
    let mut per_cluster = [0; 4];
    for mch in machines(&run) {
        let name = mch["metadata"]["name"].as_str().unwrap();
        assert_eq!(mch["status"]["phase"], "Running", "{name}");
        let zone = mch["metadata"]["labels"]
            .get("machine.openshift.io/zone")
            .and_then(Value::as_str)
            .unwrap_or("");
        let n = cluster_of(zone);
        per_cluster[n] += 1;
        let ps = &mch["spec"]["providerSpec"]["value"];
        assert_eq!(
            ps["template"],
            format!("{INFRA_ID}-rhcos-us-east-{zone}"),
            "{name}"
        );
        assert_in_cluster(&sim, &inv, mch, n).await;
    }
    assert_eq!(
        per_cluster,
        [0, 2, 1, 0],
        "us-east-1 (first alphabetically) gets two, us-east-2 one"
    );
}

/// The machines of the aliased vCenter act as their credentialsSecret (`vsphere-cloud-credentials`
/// in their namespace, with machine-api-operator's keys for the name the manifests give the
/// server), not as the command line: vcsim accepts only the Secret's login, and the command
/// line's (`admin`/`secret`) is refused. A VSphereCluster on the same server with other
/// credentials lends them nothing (it used to: credentials were chosen per server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aliased_vcenter_takes_the_credentials_of_the_cluster_naming_it() {
    let layout =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/vcsim/layouts/openshift-ibmcloud.json");
    let sim = Vcsim::builder()
        .clusters(3)
        .hosts(1)
        .credentials("ocp-installer", "s3cret-from-the-secret")
        .arg("-layout")
        .arg(layout.to_str().unwrap())
        .start()
        .await;
    let w = workdir();
    let (m, state) = (w.manifests.clone(), w.state.clone());
    std::fs::write(m.join("cpms.yaml"), fixture_01_with_local_pool(&m)).unwrap();
    std::fs::write(
        m.join("infrastructure.json"),
        infrastructure_for_01().to_string(),
    )
    .unwrap();
    std::fs::write(
        m.join("cluster.yaml"),
        format!(
            "apiVersion: v1
kind: Secret
metadata: {{name: vsphere-cloud-credentials, namespace: openshift-machine-api}}
stringData:
  {SERVER}.username: ocp-installer
  {SERVER}.password: s3cret-from-the-secret
---
apiVersion: v1
kind: Secret
metadata: {{name: vcenter, namespace: aaa-tenant}}
stringData: {{username: tenant, password: not-for-openshift}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereCluster
metadata: {{name: ocp, namespace: aaa-tenant}}
spec:
  server: {SERVER}
  identityRef: {{kind: Secret, name: vcenter}}
"
        ),
    )
    .unwrap();
    let run = reconcile(&sim, &m, &state);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.items("Machine").len(), 3);
    assert!(!run.stderr.contains("s3cret-from-the-secret"));
    assert!(!run.list.to_string().contains("s3cret-from-the-secret"));
}
