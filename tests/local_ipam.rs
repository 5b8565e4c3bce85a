//! Static IPs in local mode, end to end against a live vcsim through `reconcile` as an admin
//! runs it: an `InClusterIPPool` in the manifests, a Machine whose NIC asks for an address from
//! it, the `IPAddressClaim` the machine makes, the `IPAddress` local mode allocates (local mode
//! is the IPAM provider here, standing in for cluster-api-ipam-provider-in-cluster), and the
//! dracut kargs in the clone's extraConfig read back from vcsim; the claim released when the
//! Machine is deleted; an exhausted or unknown pool named in the Machine's condition while
//! nothing is cloned.
#[path = "support/local_run.rs"]
mod local_run;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::path::Path;

use serde_json::Value;
use vcsim::Vcsim;

use local_run::{Run, admin, extra_config, reconcile, workdir};

const ZONE: &str = "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata:
  name: fd-a
spec:
  region: {name: region-1, type: Datacenter, tagCategory: k8s-region, autoConfigure: true}
  zone: {name: fd-a-zone, type: Datacenter, tagCategory: k8s-zone, autoConfigure: true}
  topology:
    datacenter: DC0
    datastore: LocalDS_0
    networks: [VM Network]
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata:
  name: dz-a
spec:
  server: 127.0.0.1
  failureDomain: fd-a
  placementConstraint:
    resourcePool: DC0_C0_RP1
    folder: vm
";

/// A Machine in zone dz-a (which supplies the NIC's network) whose one NIC takes an address from the pool `pool` of `kind`
/// (written as upstream's `resource`) and has a nameserver.
fn machine(name: &str, kind: &str, pool: &str) -> String {
    format!(
        "---
apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  name: {name}
  namespace: openshift-machine-api
  labels:
    vsphere-provider.io/deployment-zone: dz-a
    machine.openshift.io/cluster-api-machine-role: worker
    machine.openshift.io/cluster-api-cluster: demo
spec:
  providerSpec:
    value:
      apiVersion: machine.openshift.io/v1beta1
      kind: VSphereMachineProviderSpec
      template: DC0_H0_VM0
      numCPUs: 2
      memoryMiB: 4096
      network:
        devices:
        - nameservers: [192.168.10.53]
          addressesFromPools:
          - {{group: ipam.cluster.x-k8s.io, resource: {kind}, name: {pool}}}
"
    )
}

fn pool(name: &str, addresses: &str) -> String {
    format!(
        "---
apiVersion: ipam.cluster.x-k8s.io/v1alpha2
kind: InClusterIPPool
metadata:
  name: {name}
  namespace: openshift-machine-api
spec:
  addresses: {addresses}
  prefix: 24
  gateway: 192.168.10.1
"
    )
}

async fn sim() -> Vcsim {
    Vcsim::builder()
        .clusters(1)
        .hosts(1)
        .pools(1)
        .datastores(1)
        .start()
        .await
}

fn write(dir: &Path, machines: &[String], pools: &[String]) {
    let y = std::iter::once(ZONE.to_string())
        .chain(pools.iter().cloned())
        .chain(machines.iter().cloned())
        .collect::<String>();
    std::fs::write(dir.join("estate.yaml"), y).unwrap();
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

fn address_of(run: &Run, claim: &str) -> Option<String> {
    run.object("IPAddress", claim)
        .and_then(|a| a["spec"]["address"].as_str())
        .map(str::to_string)
}

fn provider_condition<'a>(m: &'a Value, t: &str) -> Option<&'a Value> {
    m["status"]["providerStatus"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

const KARGS: &str = "guestinfo.afterburn.initrd.network-kargs";

/// Pool → claim → address → kargs: each machine makes one claim named as upstream, owned by
/// it and held by upstream's finalizer; local mode binds it to the first free address (the
/// network address and the gateway are never handed out); the clone's extraConfig carries the
/// kargs. A second run keeps every address. Deleting a machine releases its claim (after its
/// VM is gone), and the freed address goes to the next machine that asks.
#[tokio::test]
async fn pool_claim_address_kargs_and_release_on_delete() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    let pools = [pool("workers", "[192.168.10.0/24]")];
    write(
        &manifests,
        &[
            machine("s-a", "InClusterIPPool", "workers"),
            machine("s-b", "InClusterIPPool", "workers"),
        ],
        &pools,
    );
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let claim = run.object("IPAddressClaim", "s-a-claim-0-0").unwrap();
    assert_eq!(claim["apiVersion"], "ipam.cluster.x-k8s.io/v1beta1");
    assert_eq!(claim["metadata"]["namespace"], "openshift-machine-api");
    assert_eq!(
        claim["metadata"]["finalizers"][0],
        "machine.openshift.io/ip-claim-protection"
    );
    let owner = &claim["metadata"]["ownerReferences"][0];
    let machine_uid = &run.object("Machine", "s-a").unwrap()["metadata"]["uid"];
    assert_eq!(
        (&owner["kind"], &owner["uid"], &owner["controller"]),
        (&Value::from("Machine"), machine_uid, &Value::from(true))
    );
    assert_eq!(
        claim["spec"]["poolRef"],
        serde_json::json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "workers"})
    );
    assert_eq!(claim["status"]["addressRef"]["name"], "s-a-claim-0-0");
    let addr = run.object("IPAddress", "s-a-claim-0-0").unwrap();
    assert_eq!(addr["spec"]["prefix"], 24);
    assert_eq!(addr["spec"]["gateway"], "192.168.10.1");
    assert_eq!(
        address_of(&run, "s-a-claim-0-0").as_deref(),
        Some("192.168.10.2")
    );
    assert_eq!(
        address_of(&run, "s-b-claim-0-0").as_deref(),
        Some("192.168.10.3")
    );

    let x = extra_config(&sim, "/DC0/vm/s-a").await;
    assert_eq!(
        x.get(KARGS).map(String::as_str),
        Some("ip=192.168.10.2::192.168.10.1:255.255.255.0:::none nameserver=192.168.10.53 ")
    );
    let x = extra_config(&sim, "/DC0/vm/s-b").await;
    assert_eq!(
        x.get(KARGS).map(String::as_str),
        Some("ip=192.168.10.3::192.168.10.1:255.255.255.0:::none nameserver=192.168.10.53 ")
    );
    let m = run.object("Machine", "s-a").unwrap();
    assert_eq!(m["status"]["phase"], "Running");
    assert_eq!(
        provider_condition(m, "IPAddressClaimed").unwrap()["reason"],
        "IPAddressesClaimed"
    );

    // A second run changes nothing: the addresses stay their claims' (state file).
    let again = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("0 machine change(s) in vCenter"),
        "{}",
        again.stderr
    );
    assert_eq!(
        address_of(&again, "s-a-claim-0-0").as_deref(),
        Some("192.168.10.2")
    );

    // Delete s-a: its VM goes, then its claim and address.
    let del = reconcile(&sim, &manifests, &state, &["--delete", "machine/s-a"]);
    assert!(del.object("Machine", "s-a").is_none(), "{}", del.stderr);
    assert_eq!(vms_named(&sim, "s-a").await, 0);
    assert!(
        del.object("IPAddressClaim", "s-a-claim-0-0").is_none(),
        "{}",
        del.list
    );
    assert!(del.object("IPAddress", "s-a-claim-0-0").is_none());
    assert_eq!(
        address_of(&del, "s-b-claim-0-0").as_deref(),
        Some("192.168.10.3")
    );

    // The freed address is the first free one again.
    write(
        &manifests,
        &[
            machine("s-b", "InClusterIPPool", "workers"),
            machine("s-c", "InClusterIPPool", "workers"),
        ],
        &pools,
    );
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        address_of(&run, "s-c-claim-0-0").as_deref(),
        Some("192.168.10.2")
    );
}

/// A pool with one address and two machines: one gets it, the other waits — nothing cloned for
/// it, its condition and the run's summary name the exhausted pool; a pool that does not exist
/// is named the same way. A bigger pool on the next run lets the waiting machine go on.
#[tokio::test]
async fn an_exhausted_or_unknown_pool_holds_the_clone_and_is_named() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    write(
        &manifests,
        &[
            machine("x-a", "InClusterIPPool", "tiny"),
            machine("x-b", "InClusterIPPool", "tiny"),
            machine("x-c", "inclusterippools", "missing"),
        ],
        &[pool("tiny", "[192.168.10.5]")],
    );
    let run = reconcile(&sim, &manifests, &state, &["--simulate-nodes"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(vms_named(&sim, "x-a").await, 1);
    assert_eq!(
        address_of(&run, "x-a-claim-0-0").as_deref(),
        Some("192.168.10.5")
    );
    for (m, why) in [
        (
            "x-b",
            "InClusterIPPool openshift-machine-api/tiny has no free address",
        ),
        (
            "x-c",
            "InClusterIPPool openshift-machine-api/missing not found in the manifests",
        ),
    ] {
        assert_eq!(vms_named(&sim, m).await, 0, "nothing cloned for {m}");
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with(&format!("machine openshift-machine-api/{m} is ")))
            .unwrap_or_else(|| panic!("{}", run.stderr));
        assert!(
            line.contains(why) && line.contains(&format!("{m}-claim-0-0")),
            "{line}"
        );
        let obj = run.object("Machine", m).unwrap();
        let c = provider_condition(obj, "IPAddressClaimed").unwrap();
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "WaitingForIPAddress");
        assert!(c["message"].as_str().unwrap().contains(why), "{c}");
        assert!(run.object("IPAddress", &format!("{m}-claim-0-0")).is_none());
    }

    // More addresses: the waiting machine is bound and cloned on the next run.
    write(
        &manifests,
        &[
            machine("x-a", "InClusterIPPool", "tiny"),
            machine("x-b", "InClusterIPPool", "tiny"),
        ],
        &[pool("tiny", "[192.168.10.5, 192.168.10.9-192.168.10.10]")],
    );
    let del = reconcile(
        &sim,
        &manifests,
        &state,
        &["--delete", "machine/x-c", "--simulate-nodes"],
    );
    assert_eq!(del.code, 0, "{}", del.stderr);
    assert_eq!(vms_named(&sim, "x-b").await, 1);
    assert_eq!(
        address_of(&del, "x-b-claim-0-0").as_deref(),
        Some("192.168.10.9")
    );
    assert!(
        del.object("IPAddressClaim", "x-c-claim-0-0").is_none(),
        "{}",
        del.list
    );
}

/// A pool the manifests get wrong is refused when they load, naming the pool and the field;
/// nothing is reconciled.
#[tokio::test]
async fn a_bad_pool_is_refused_naming_the_pool_and_field() {
    let sim = sim().await;
    let w = workdir();
    let (manifests, state) = (w.manifests.clone(), w.state.clone());
    write(
        &manifests,
        &[machine("b-a", "InClusterIPPool", "bad")],
        &[pool("bad", "[192.168.10.5, 192.168.10.300]")],
    );
    let run = reconcile(&sim, &manifests, &state, &[]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("InClusterIPPool bad")
            && run.stderr.contains("spec.addresses[1]")
            && run.stderr.contains("192.168.10.300"),
        "{}",
        run.stderr
    );
    assert_eq!(vms_named(&sim, "b-a").await, 0);
}
