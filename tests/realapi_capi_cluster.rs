//! The VSphereCluster as a Cluster API InfraCluster, on the real API server (Kubernetes' own
//! kube-apiserver, tests/support/realapi.rs) with vcsim, the controllers running in this process
//! as the controller's ServiceAccount bound by config/rbac.
//!
//! The Cluster API `Cluster` and `Machine` CRDs are installed unmodified from the
//! `sigs.k8s.io/cluster-api` v1.14.2 Go module (`core/config/crd/bases/`, fetched through the Go
//! module proxy by `go mod download`): test-only CRDs, no Cluster API controller runs. They
//! serve v1beta1 and store v1beta2; with no CAPI manager there is no conversion webhook (the
//! bases carry none), so the test writes CAPI's objects at v1beta2, as CAPI v1.14 stores them,
//! and names them at v1beta2 in owner references, as CAPI v1.14 sets them. The
//! ownerReference from the VSphereCluster to its Cluster is set by the test, standing in for
//! CAPI's cluster controller (which sets exactly that, contract §1 "What CAPI itself sets"); the
//! Machine stands for one CAPI's machine controllers would have made. Everything else (finalizer,
//! pause, identity, ready, deletion) is this provider's and is what is asserted. The machine
//! test says which CAPI-side writes it stands in for.
#[path = "support/capi_crds.rs"]
mod capi_crds;
#[path = "support/capi_in_process.rs"]
mod capi_in_process;
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::time::{Duration, Instant};

use capi_in_process::*;
use kube::api::{DeleteParams, Patch, PatchParams};
use realapi::{Identity, SA_NAMESPACE, control_plane};
use serde_json::json;
use vcsim::Vcsim;

const ADMIN: &Identity = &Identity::Admin;
const FINALIZER: &str = "vspherecluster.infrastructure.cluster.x-k8s.io";

/// One test at a time: each runs its own controllers, which would otherwise reconcile the
/// other tests' objects too.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_cluster_gets_the_finalizer_becomes_ready_with_its_zone_and_its_deletion_waits_for_machines()
 {
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    install_capi_crds(cp);
    let ns = cp.namespace("capi-ready");
    // The CRDs as the server holds them (applied from crds/) carry the contract label CAPI
    // looks up, listing the served versions that follow the v1beta1 contract: v1beta2 is
    // served too, but CAPI would read v1beta1 fields from it at the last listed version.
    for (crd, versions) in [
        ("vsphereclusters", "v1beta1"),
        ("vsphereclusteridentities", "v1beta1"),
        ("vspherefailuredomains", "v1beta1"),
        ("vspheredeploymentzones", "v1beta1"),
    ] {
        let label = cp
            .kubectl(
                ADMIN,
                &[
                    "get",
                    "crd",
                    &format!("{crd}.infrastructure.cluster.x-k8s.io"),
                    "-o",
                    r"jsonpath={.metadata.labels.cluster\.x-k8s\.io/v1beta1}",
                ],
            )
            .ok()
            .stdout;
        assert_eq!(label, versions, "{crd}");
    }
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let controllers = Controllers::start(cp).await;

    // One zone on the vCenter, as config/samples has them (controlPlane set: no webhook here).
    let zone = apply_zone(cp, &ns, &sim, Vec::new());
    let api = owned_cluster(
        cp,
        &ns,
        &sim,
        json!({"kind": "Secret", "name": "vsphere-credentials"}),
        true,
        false,
    )
    .await;
    let c = wait_until(&api, "c1 ready", Duration::from_secs(60), |c| {
        c["status"]["initialization"]["provisioned"] == true
    })
    .await;
    assert_eq!(finalizers(&c), [FINALIZER], "{c}");
    assert_eq!(c["status"]["initialization"]["provisioned"], true, "{c}");
    assert_eq!(
        c["status"]["failureDomains"],
        json!([{"name": zone.clone(), "controlPlane": true}]),
        "{c}"
    );
    assert!(
        !c["status"]["vCenterVersion"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{c}"
    );
    assert_eq!(v1beta2(&c, "Ready").unwrap().0, "True", "{c}");
    assert_eq!(v1beta2(&c, "VCenterAvailable").unwrap().0, "True", "{c}");
    assert_eq!(v1beta2(&c, "FailureDomainsReady").unwrap().0, "True", "{c}");
    assert_eq!(v1beta2(&c, "Paused").unwrap().1, "NotPaused", "{c}");
    assert_eq!(v1beta1(&c, "Ready").unwrap().0, "True", "{c}");
    assert_eq!(
        v1beta1(&c, "FailureDomainsAvailable").unwrap().0,
        "True",
        "{c}"
    );

    // A Machine of the Cluster (label cluster-name), then the VSphereCluster is deleted: it
    // stays, saying how many machines remain, until the Machine is gone.
    cp.apply_text(
        ADMIN,
        &json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m1", "namespace": ns, "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
            "spec": {
                "clusterName": "c1",
                "bootstrap": {"dataSecretName": "m1-bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "VSphereMachine", "name": "m1"}
            }
        })
        .to_string(),
        None,
    )
    .ok();
    api.delete("c1", &DeleteParams::default()).await.unwrap();
    let c = wait_until(
        &api,
        "the deletion to wait for m1",
        Duration::from_secs(30),
        |c| v1beta2(c, "Ready").is_some_and(|r| r.1 == "Deleting"),
    )
    .await;
    let (status, _, message) = v1beta2(&c, "Ready").unwrap();
    assert_eq!(status, "False");
    assert_eq!(
        message, "waiting for 1 machine of Cluster c1 to be deleted: Machine m1",
        "{c}"
    );
    assert_eq!(
        v1beta1(&c, "Ready").unwrap(),
        ("False".into(), "Deleting".into())
    );
    assert_eq!(finalizers(&c), [FINALIZER]);
    assert_eq!(
        c["status"]["initialization"]["provisioned"], true,
        "provisioned is never reset"
    );
    cp.kubectl(
        ADMIN,
        &["delete", "machine.cluster.x-k8s.io", "m1", "-n", &ns],
    )
    .ok();
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(&api, "c1").await.is_some() {
        assert!(Instant::now() < deadline, "c1 still there after m1 is gone");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    cp.kubectl(ADMIN, &["delete", "vspheredeploymentzone", &zone])
        .ok();
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_cluster_gets_only_the_paused_condition_until_resumed() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    install_capi_crds(cp);
    let ns = cp.namespace("capi-paused");
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let controllers = Controllers::start(cp).await;
    cp.apply_text(
        ADMIN,
        &credentials_secret(&ns, "creds", &sim).to_string(),
        None,
    )
    .ok();
    let api = owned_cluster(
        cp,
        &ns,
        &sim,
        json!({"kind": "Secret", "name": "creds"}),
        true,
        true,
    )
    .await;
    let c = wait_until(&api, "Paused", Duration::from_secs(30), |c| {
        v1beta2(c, "Paused").is_some()
    })
    .await;
    assert_eq!(
        v1beta2(&c, "Paused").unwrap(),
        (
            "True".into(),
            "Paused".into(),
            "Cluster c1 has spec.paused: true".into()
        )
    );
    // Nothing but the Paused condition: no finalizer, no readiness, no publication.
    assert!(finalizers(&c).is_empty(), "{c}");
    let status = c["status"].as_object().unwrap();
    assert_eq!(status.keys().collect::<Vec<_>>(), ["conditions"], "{c}");
    assert_eq!(
        c["status"]["conditions"].as_array().unwrap().len(),
        1,
        "{c}"
    );

    // Resumed: within the owned-cluster poll (30 s), the cluster is reconciled to ready.
    cp.kubectl(
        ADMIN,
        &[
            "patch",
            "cluster.cluster.x-k8s.io",
            "c1",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"paused":false}}"#,
        ],
    )
    .ok();
    let c = wait_until(&api, "ready after resume", Duration::from_secs(60), |c| {
        c["status"]["initialization"]["provisioned"] == true
    })
    .await;
    assert_eq!(v1beta2(&c, "Paused").unwrap().1, "NotPaused");
    assert_eq!(finalizers(&c), [FINALIZER]);

    // The annotation on the VSphereCluster pauses it too (and wakes it at once).
    api.patch(
        "c1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}})),
    )
    .await
    .unwrap();
    let c = wait_until(&api, "paused by annotation", Duration::from_secs(30), |c| {
        v1beta2(c, "Paused").is_some_and(|p| p.0 == "True")
    })
    .await;
    assert_eq!(
        v1beta2(&c, "Paused").unwrap().2,
        "VSphereCluster has the annotation cluster.x-k8s.io/paused"
    );
    assert_eq!(c["status"]["initialization"]["provisioned"], true);
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_identity_is_refused_outside_its_allowed_namespaces() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    install_capi_crds(cp);
    let ns = cp.namespace("capi-identity");
    let sim = Vcsim::builder()
        .clusters(1)
        .hosts(1)
        .pools(1)
        .credentials("capi-admin", "identity-pw-7f3a")
        .start()
        .await;
    let controllers = Controllers::start(cp).await;
    let identity = format!("{ns}-identity");
    // The identity's Secret lives in the controller's namespace.
    cp.apply_text(
        ADMIN,
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            credentials_secret(SA_NAMESPACE, &identity, &sim),
            {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "VSphereClusterIdentity",
                "metadata": {"name": identity},
                "spec": {
                    "secretName": identity,
                    "allowedNamespaces": {"selector": {"matchLabels": {"vsphere-tenant": ns}}}
                }
            }
        ]})
        .to_string(),
        None,
    )
    .ok();
    let api = owned_cluster(
        cp,
        &ns,
        &sim,
        json!({"kind": "VSphereClusterIdentity", "name": identity}),
        false,
        false,
    )
    .await;
    let c = wait_until(
        &api,
        "VCenterAvailable False",
        Duration::from_secs(30),
        |c| v1beta2(c, "VCenterAvailable").is_some_and(|v| v.0 == "False"),
    )
    .await;
    let (_, reason, message) = v1beta2(&c, "VCenterAvailable").unwrap();
    assert_eq!(reason, "VCenterUnreachable");
    assert!(
        message.contains(&format!(
            "VSphereClusterIdentity {identity} does not allow namespace {ns}"
        )),
        "{message}"
    );
    assert_eq!(v1beta1(&c, "Ready").unwrap().0, "False");
    assert!(
        c["status"]["initialization"]["provisioned"].is_null(),
        "{c}"
    );
    assert!(
        !c.to_string().contains("identity-pw-7f3a"),
        "no secret in the status"
    );

    // The namespace gets the label the identity selects: ready at the next poll.
    cp.kubectl(
        ADMIN,
        &["label", "namespace", &ns, &format!("vsphere-tenant={ns}")],
    )
    .ok();
    let c = wait_until(&api, "ready once allowed", Duration::from_secs(60), |c| {
        c["status"]["initialization"]["provisioned"] == true
    })
    .await;
    assert_eq!(v1beta2(&c, "VCenterAvailable").unwrap().0, "True");
    controllers.stop().await;
}

/// A Cluster API machine end to end through this provider: the CAPI Machine and its
/// VSphereMachine become a VSphereVM and a VM in the zone, with the bootstrap data and the
/// cloud-init metadata in its guestinfo, powered on; once the guest reports an IP the
/// VSphereMachine is ready with `vsphere://<BIOS UUID>`; deleting the VSphereMachine destroys
/// the VM and releases both finalizers.
///
/// Stand-ins, said here: the test sets the Cluster's
/// `status.initialization.infrastructureProvisioned` (v1beta1 `infrastructureReady`) and the
/// VSphereMachine's owner reference (CAPI's cluster and machine controllers set exactly those;
/// `tests/capi_clusterctl.rs` runs the real ones), and the guest IP (VMware Tools in a booted
/// guest; vcsim's `SET.guest.ipAddress`). vcsim is read back with raw SOAP, not our client.
/// The controllers run as a Cluster API-only install (config/capi-only), and nothing they ask
/// is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vsphere_machine_becomes_a_vm_in_its_zone_with_its_bootstrap_data_and_goes_with_it() {
    use base64::Engine as _;
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    install_capi_crds(cp);
    let ns = cp.namespace_unbound("capi-machine");
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let (user, password) = sim.credentials();
    let readback = process::Readback::new(sim.url(), sim.base_url(), user, password);
    // As a Cluster API-only install (config/rbac with config/capi-only): no Node, pod or
    // OpenShift write is needed for a machine's life.
    let identity = capi_only_identity(cp, &[&ns]);
    let controllers = Controllers::start_as_identity(cp, &identity).await;
    // (VM groups: tests/capi_machines.rs, under CAPI's controllers.)
    let bootstrap = bootstrap_secret_m1(&ns, "#cloud-config\nruncmd: [kubeadm join]\n");
    let zone = ready_cluster(cp, &ns, &sim, vec![bootstrap]).await;
    // CAPI's cluster and machine controllers would now say the infrastructure is ready and
    // make the Machine and its VSphereMachine (stand-ins).
    // trySoft: the deletion asks the guest to shut down (vcsim's ShutdownGuest powers the VM
    // off, as a guest with VMware Tools would).
    capi_machine_m1(
        cp,
        &ns,
        &zone,
        json!({"template": "DC0_H0_VM0", "numCPUs": 2, "memoryMiB": 2048,
            "powerOffMode": "trySoft", "guestSoftPowerOffTimeout": "10m",
            "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]}}),
    );

    // The VSphereVM, and its VM in vcsim under the VSphereVM's UID, powered on in the zone.
    let machine_status = || {
        format!(
            "{:#} {:#}",
            get_json(cp, "vspheremachine", &ns, "m1").unwrap_or_default()["status"]["conditions"]
                [0]["message"],
            get_json(cp, "vspheredeploymentzone", "", &zone).unwrap_or_default()["status"]
        )
    };
    let vsvm = eventually_or(
        machine_status,
        "the VSphereVM",
        Duration::from_secs(60),
        || async { get_json(cp, "vspherevm", &ns, "m1") },
        |v| !v["metadata"]["uid"].is_null(),
    )
    .await;
    let uid = vsvm["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(vsvm["spec"]["resourcePool"], "DC0_C0_RP1", "{vsvm}");
    assert_eq!(vsvm["spec"]["datastore"], "LocalDS_0", "{vsvm}");
    let vm = eventually(
        "the VM",
        Duration::from_secs(60),
        || async { readback.vms().await.into_iter().find(|v| v.name == "m1") },
        |_| true,
    )
    .await;
    assert_eq!(
        vm.instance_uuid, uid,
        "the clone's instance UUID is the VSphereVM's UID"
    );
    let props = eventually(
        "the VM powered on",
        Duration::from_secs(60),
        || async {
            Some(
                readback
                    .vm_props(
                        &vm.moref,
                        &[
                            "runtime.powerState",
                            "resourcePool",
                            "config.uuid",
                            r#"config.extraConfig["guestinfo.userdata"]"#,
                            r#"config.extraConfig["guestinfo.userdata.encoding"]"#,
                            r#"config.extraConfig["guestinfo.metadata"]"#,
                        ],
                    )
                    .await,
            )
        },
        |p| p.get("runtime.powerState").map(String::as_str) == Some("poweredOn"),
    )
    .await;
    let decode = |k: &str| {
        let v = props
            .get(k)
            .unwrap_or_else(|| panic!("{k} missing: {props:?}"));
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(v).unwrap()).unwrap()
    };
    assert_eq!(
        decode(r#"config.extraConfig["guestinfo.userdata"]"#),
        "#cloud-config\nruncmd: [kubeadm join]\n"
    );
    assert_eq!(
        props[r#"config.extraConfig["guestinfo.userdata.encoding"]"#],
        "base64"
    );
    let metadata = decode(r#"config.extraConfig["guestinfo.metadata"]"#);
    assert!(metadata.contains("local-hostname: m1"), "{metadata}");
    assert!(
        metadata.contains("macaddress: "),
        "matched by the clone's MAC: {metadata}"
    );
    let bios = props["config.uuid"].clone();

    // No IP yet: not ready, and says so. Then the guest reports one.
    let vsm = get_json(cp, "vspheremachine", &ns, "m1").unwrap();
    assert_ne!(vsm["status"]["ready"], true, "{vsm}");
    let vsm = m1_ready_with_ip(cp, &ns, &readback, &vm.moref, "10.0.0.42").await;
    assert_eq!(
        vsm["spec"]["providerID"],
        format!("vsphere://{bios}"),
        "{vsm}"
    );
    assert!(
        vsm["status"]["addresses"].to_string().contains("10.0.0.42"),
        "{vsm}"
    );
    assert!(
        vsm["metadata"]["finalizers"]
            .to_string()
            .contains("vspheremachine.infrastructure.cluster.x-k8s.io"),
        "{vsm}"
    );
    assert!(
        !vsm.to_string().contains("kubeadm join"),
        "no bootstrap data in the status"
    );

    // CAPI deletes the VSphereMachine with its Machine: the VM goes, then both objects.
    delete_vsphere_machine_m1(cp, &ns).await;
    assert!(get_json(cp, "vspherevm", &ns, "m1").is_none());
    assert!(
        !readback.vms().await.iter().any(|v| v.name == "m1"),
        "the VM is destroyed"
    );
    // Zones are cluster-scoped: one left behind would be published by the next test's cluster
    // if its vcsim got this one's port.
    cp.kubectl(ADMIN, &["delete", "vspheredeploymentzone", &zone])
        .ok();
    assert_eq!(
        forbidden_here(&controllers, &ns),
        Vec::<String>::new(),
        "refused to the Cluster API-only ServiceAccount"
    );
    controllers.stop().await;
}

/// The VSphereMachine's reconciles of a provisioned machine so far (its controller's `ok`
/// reconciles metric).
fn vsm_reconciles(controllers: &Controllers) -> u64 {
    controllers
        .metrics
        .encode()
        .lines()
        .find(|l| {
            l.starts_with(
                r#"vsphere_provider_reconciles_total{controller="vspheremachine",result="ok"}"#,
            )
        })
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
        .unwrap_or(0)
}

/// Issue #27: the VSphereMachine controller reads Cluster API's Machine and Cluster from
/// watched caches. A Machine's change wakes its VSphereMachine at once (here the bootstrap
/// provider's `dataSecretName` appearing: the VSphereVM follows within seconds, not at the
/// machine's next 10 s look), and the passes of a provisioned machine — woken by its own,
/// its Machine's and its Cluster's changes — make no request for the Machine, the Cluster or
/// the bootstrap Secret (the Secret is read only to make the VSphereVM).
///
/// Stand-ins as in the test above; the Machine starts with only its bootstrap config, and the
/// test sets `dataSecretName` (what CAPI's machine controller copies from the bootstrap config),
/// a label on the Machine and the Cluster's `controlPlaneInitialized` (CAPI's cluster
/// controller). Requests are those of the controllers' own client, logged as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_change_wakes_its_vsphere_machine_and_provisioned_passes_read_only_caches() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    install_capi_crds(cp);
    let ns = cp.namespace("capi-cached");
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let (user, password) = sim.credentials();
    let readback = process::Readback::new(sim.url(), sim.base_url(), user, password);
    let controllers = Controllers::start(cp).await;
    let bootstrap = bootstrap_secret_m1(&ns, "#cloud-config\n");
    let zone = ready_cluster(cp, &ns, &sim, vec![bootstrap]).await;
    capi_machine_m1_with(
        cp,
        &ns,
        &zone,
        json!({"template": "DC0_H0_VM0",
            "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]}}),
        None,
    );
    eventually(
        "the VSphereMachine waiting (its status says on what)",
        Duration::from_secs(60),
        || async { get_json(cp, "vspheremachine", &ns, "m1") },
        |v| v["status"]["conditions"].to_string().contains("WaitingFor"),
    )
    .await;
    // Its pass just ran (it wrote that status): its next look is 10 s away.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(get_json(cp, "vspherevm", &ns, "m1").is_none());
    let set = Instant::now();
    cp.kubectl(
        ADMIN,
        &[
            "patch",
            "machine.cluster.x-k8s.io",
            "m1",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"bootstrap":{"dataSecretName":"m1-bootstrap"}}}"#,
        ],
    )
    .ok();
    eventually(
        "the VSphereVM",
        Duration::from_secs(30),
        || async { get_json(cp, "vspherevm", &ns, "m1") },
        |_| true,
    )
    .await;
    let took = set.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "the VSphereVM came {took:?} after dataSecretName: woken by a poll, not by the Machine"
    );

    // Provisioned: the VM on, its guest IP reported, the machine ready.
    let vm = eventually(
        "the VM",
        Duration::from_secs(60),
        || async { readback.vms().await.into_iter().find(|v| v.name == "m1") },
        |_| true,
    )
    .await;
    m1_ready_with_ip(cp, &ns, &readback, &vm.moref, "10.0.0.43").await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Its passes, woken by its own change, its Machine's and its Cluster's.
    let mark = controllers.requests.mark();
    let before = vsm_reconciles(&controllers);
    let changes: [&[&str]; 3] = [
        &[
            "annotate",
            "vspheremachine",
            "m1",
            "-n",
            &ns,
            "example.com/touch=1",
        ],
        &[
            "label",
            "machine.cluster.x-k8s.io",
            "m1",
            "-n",
            &ns,
            "example.com/touch=1",
        ],
        &[
            "patch",
            "cluster.cluster.x-k8s.io",
            "c1",
            "-n",
            &ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"initialization":{"infrastructureProvisioned":true,"controlPlaneInitialized":true}}}"#,
        ],
    ];
    for change in changes {
        cp.kubectl(ADMIN, change).ok();
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let woken = vsm_reconciles(&controllers) - before;
    assert!(woken >= 3, "{woken} passes for 3 changes");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reads: Vec<String> = controllers
        .requests
        .since(mark)
        .into_iter()
        .filter(|r| {
            let single = |kind: &str| {
                r.starts_with(&format!(
                    "GET /apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/{kind}/"
                ))
            };
            single("machines") || single("clusters") || r.contains("/secrets/m1-bootstrap")
        })
        .collect();
    assert!(
        reads.is_empty(),
        "{woken} passes read {reads:#?} (all requests: {:#?})",
        controllers.requests.since(mark)
    );

    delete_vsphere_machine_m1(cp, &ns).await;
    cp.kubectl(ADMIN, &["delete", "vspheredeploymentzone", &zone])
        .ok();
    controllers.stop().await;
}

/// Requests of `requests` that match none of `allowed` (prefixes of `VERB path`), for the
/// message of a failed budget.
fn unexpected(requests: &[String], allowed: &[&str]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| !allowed.iter().any(|a| r.starts_with(a)))
        .cloned()
        .collect()
}

/// Issue #27: the restart resync (a new manager reconciling every object once with nothing to
/// change), its startup check included, costs one request per watched kind (the initial list
/// streamed in the watch, no list before it), one read of the credentials Secret however many
/// reconciles use it, one read of each CRD we write (the startup check's, which the storage
/// migration reuses), and nothing else: no `list ?limit=1` look per kind before the watches
/// (the CRD reads and the watches' first answers tell what those told), no GET of a Machine,
/// Cluster or VSphereVM (the caches have them), no write. Before: a list and a watch per kind,
/// a look of its own per optional kind (Cluster API's) and 7 more by the startup check, the
/// Secret once per sweep and reconcile.
///
/// Stand-ins as in the tests above (the Machine, the Cluster's status, the guest IP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resync_reads_each_kind_once_and_the_credentials_secret_once() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    install_capi_crds(cp);
    let ns = cp.namespace("capi-resync");
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let (user, password) = sim.credentials();
    let readback = process::Readback::new(sim.url(), sim.base_url(), user, password);
    let controllers = Controllers::start(cp).await;
    let bootstrap = bootstrap_secret_m1(&ns, "#cloud-config\n");
    let zone = ready_cluster(cp, &ns, &sim, vec![bootstrap]).await;
    capi_machine_m1(
        cp,
        &ns,
        &zone,
        json!({"template": "DC0_H0_VM0",
            "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]}}),
    );
    let vm = eventually(
        "the VM",
        Duration::from_secs(60),
        || async { readback.vms().await.into_iter().find(|v| v.name == "m1") },
        |_| true,
    )
    .await;
    m1_ready_with_ip(cp, &ns, &readback, &vm.moref, "10.0.0.44").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    controllers.stop().await;

    // The restart, as `run` makes it (the startup check, then the controllers): every object
    // reconciled once, until the requests stop for 3 s.
    let controllers = Controllers::start_checked(cp).await;
    let mut seen = 0;
    let mut quiet_since = Instant::now();
    let started = Instant::now();
    while quiet_since.elapsed() < Duration::from_secs(3) || vsm_reconciles(&controllers) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the resync never settled: {:#?}",
            controllers.requests.since(0)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        let n = controllers.requests.mark();
        if n != seen {
            seen = n;
            quiet_since = Instant::now();
        }
    }
    let all = controllers.requests.since(0);
    // The controllers watch every namespace, and the other tests of this binary share the API
    // server (and leave their objects): what their objects cost is theirs. Counted here: the
    // watches, lists and CRD reads, and what names this test's namespace, zone or Secrets.
    let zone_secret_path = format!("/namespaces/{SA_NAMESPACE}/secrets/{zone}");
    let (requests, theirs): (Vec<String>, Vec<String>) = all.into_iter().partition(|r| {
        r.contains("watch=true")
            || r.contains("limit=")
            || r.contains("/customresourcedefinitions/")
            || r.contains(&format!("/namespaces/{ns}/"))
            || r.contains(&zone_secret_path)
            || (!r.contains("/namespaces/") && r.contains(zone.as_str()))
    });
    eprintln!(
        "realapi_capi_cluster: restart resync, {} requests for this test's objects: \
         {requests:#?}; {} for the other tests' objects: {theirs:#?}",
        requests.len(),
        theirs.len()
    );
    let watches: Vec<&String> = requests
        .iter()
        .filter(|r| r.contains("watch=true"))
        .collect();
    assert!(
        watches.iter().all(|w| w.contains("sendInitialEvents=true")),
        "initial lists are streamed: {watches:#?}"
    );
    let lists: Vec<&String> = requests
        .iter()
        .filter(|r| r.starts_with("GET ") && !r.contains("watch=true") && r.contains('?'))
        .collect();
    assert!(lists.is_empty(), "no list besides the watches: {lists:#?}");
    let secret = format!("GET /api/v1/namespaces/{ns}/secrets/vsphere-credentials");
    let zone_secret = format!("GET /api/v1/namespaces/{SA_NAMESPACE}/secrets/{zone}");
    for s in [&secret, &zone_secret] {
        let reads = requests
            .iter()
            .filter(|r| r.starts_with(s.as_str()))
            .count();
        assert_eq!(reads, 1, "{s}: read once for all: {requests:#?}");
    }
    let other = unexpected(
        &requests,
        &[
            "GET /api/v1/nodes?",
            "GET /apis/infrastructure.cluster.x-k8s.io/",
            "GET /apis/machine.openshift.io/",
            "GET /apis/cluster.x-k8s.io/v1beta2/clusters?",
            "GET /apis/cluster.x-k8s.io/v1beta2/machines?",
            // The startup check's read of our CRDs (the storage migration then reads none).
            "GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/",
            &secret,
            &zone_secret,
        ],
    );
    assert!(other.is_empty(), "nothing else: {other:#?}");
    let single_gets = unexpected(
        &requests
            .iter()
            .filter(|r| r.starts_with("GET /apis/infrastructure") && !r.contains('?'))
            .cloned()
            .collect::<Vec<_>>(),
        &[],
    );
    assert!(
        single_gets.is_empty(),
        "no object read one by one: {single_gets:#?}"
    );
    let crd_reads = requests
        .iter()
        .filter(|r| r.contains("/customresourcedefinitions/"))
        .count();
    assert_eq!(crd_reads, 8, "each CRD read once: {requests:#?}");
    // 12 watched kinds, 8 CRDs, 2 Secrets (the cluster's identity, the zone's): 22, where the
    // startup check's 7 looks made it 29.
    assert!(
        requests.len() <= 22,
        "{} requests: {requests:#?}",
        requests.len()
    );
    delete_vsphere_machine_m1(cp, &ns).await;
    cp.kubectl(ADMIN, &["delete", "vspheredeploymentzone", &zone])
        .ok();
    controllers.stop().await;
}

/// Issue #27: the credentials Secret is remembered for a while (`--credentials-reread-interval`,
/// 10 min here), yet a rotated password takes effect at the next login: when vCenter refuses
/// the password remembered, the Secret is read again at once. The cluster starts with a wrong
/// password in its identity Secret (refused), the admin rotates it to the right one, and the
/// cluster is provisioned within seconds, not at the next reread; the refused password and the
/// new one are in no status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_secret_password_is_used_at_the_next_login() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    install_capi_crds(cp);
    let ns = cp.namespace("capi-rotate");
    let sim = Vcsim::builder()
        .clusters(1)
        .hosts(1)
        .pools(1)
        .credentials("rotate-admin", "rotated-pw-5c1e")
        .start()
        .await;
    let polling = vsphere_provider::plan::machine::waiting::Polling {
        credentials_reread: Duration::from_secs(600),
        ..Default::default()
    };
    let controllers = Controllers::start_with(cp, polling).await;
    let mut secret = credentials_secret(&ns, "vsphere-credentials", &sim);
    secret["stringData"]["password"] = json!("stale-pw-0b9d");
    cp.apply_text(ADMIN, &secret.to_string(), None).ok();
    let api = owned_cluster(
        cp,
        &ns,
        &sim,
        json!({"kind": "Secret", "name": "vsphere-credentials"}),
        false,
        false,
    )
    .await;
    let c = wait_until(
        &api,
        "VCenterAvailable False",
        Duration::from_secs(30),
        |c| v1beta2(c, "VCenterAvailable").is_some_and(|v| v.0 == "False"),
    )
    .await;
    assert!(
        !c.to_string().contains("stale-pw-0b9d"),
        "no secret in the status"
    );
    // Refused twice, so the copy in memory was used at least once more.
    tokio::time::sleep(Duration::from_secs(6)).await;

    let mark = controllers.requests.mark();
    let rotated = Instant::now();
    cp.apply_text(
        ADMIN,
        &credentials_secret(&ns, "vsphere-credentials", &sim).to_string(),
        None,
    )
    .ok();
    let c = wait_until(
        &api,
        "provisioned with the rotated password",
        Duration::from_secs(60),
        |c| c["status"]["initialization"]["provisioned"] == true,
    )
    .await;
    let took = rotated.elapsed();
    assert!(
        took < Duration::from_secs(45),
        "the rotated password took {took:?}: read at the reread, not after the refused login"
    );
    assert_eq!(v1beta2(&c, "VCenterAvailable").unwrap().0, "True");
    assert!(
        !c.to_string().contains("rotated-pw-5c1e"),
        "no secret in the status"
    );
    let reads = controllers
        .requests
        .since(mark)
        .into_iter()
        .filter(|r| r.contains(&format!("/namespaces/{ns}/secrets/vsphere-credentials")))
        .count();
    assert!(reads >= 1, "the Secret read again after the refusal");
    eprintln!(
        "realapi_capi_cluster: rotated password used after {took:?}, {reads} reads of the Secret"
    );
    controllers.stop().await;
}

/// The requests of `controllers` refused with 403 that concern `ns`, the manager's namespace
/// or no namespace. Earlier tests' clusters stay in their namespaces (never deleted), where
/// the Secret role is not bound for this ServiceAccount: reads of their Secrets are refused, as
/// in any namespace the admin has not opened to the manager.
fn forbidden_here(controllers: &Controllers, ns: &str) -> Vec<String> {
    controllers
        .requests
        .forbidden()
        .into_iter()
        .filter(|r| {
            !r.contains("/namespaces/")
                || r.contains(&format!("/namespaces/{ns}/"))
                || r.contains(&format!("/namespaces/{SA_NAMESPACE}/"))
        })
        .collect()
}

/// The owner references of `s` as `(kind, name)`.
fn owners(s: &serde_json::Value) -> Vec<(String, String)> {
    s["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let f = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (f("kind"), f("name"))
        })
        .collect()
}

/// Security review N4: a tenant names any Secret of its namespace as `identityRef`, and an
/// adopted Secret (owner reference + finalizer) is deleted with the cluster by the garbage
/// collector. A Secret is adopted only once vCenter accepted its credentials, and only if it
/// has no other owner and no keys besides `username` and `password`; otherwise the cluster says
/// why (v1beta2 condition `IdentitySecretAdopted`, naming no value or user name) and the Secret
/// keeps nothing pointing at the cluster, so it outlives the cluster's deletion. (No garbage
/// collector runs here: "outlives" is no owner reference to the cluster and no finalizer left,
/// which is all the collector acts on.)
///
/// The controllers run as a Cluster API-only install: config/rbac with config/capi-only, the
/// Secret ClusterRole bound in the test's namespace; no request of theirs is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_secret_is_adopted_only_as_a_working_identity_with_nothing_else() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    install_capi_crds(cp);
    let ns = cp.namespace_unbound("capi-adopt");
    let sim = Vcsim::builder()
        .clusters(1)
        .hosts(1)
        .pools(1)
        .credentials("adopt-admin@vsphere.local", "adopt-pw-7c2e")
        .start()
        .await;
    let (user, password) = sim.credentials();
    let identity = capi_only_identity(cp, &[&ns]);
    let controllers = Controllers::start_as_identity(cp, &identity).await;
    let secret = |name: &str, data: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": ns}, "type": "Opaque", "stringData": data})
    };
    let holder = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "holder", "namespace": ns}});
    cp.apply_text(ADMIN, &holder.to_string(), None).ok();
    let holder_uid = get_json(cp, "configmap", &ns, "holder").unwrap()["metadata"]["uid"].clone();
    let mut owned = secret("owned", json!({"username": user, "password": password}));
    owned["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "holder", "uid": holder_uid}]);
    let secrets = [
        secret("good", json!({"username": user, "password": password})),
        secret(
            "extra",
            json!({"username": user, "password": password, "ca.crt": "not an identity"}),
        ),
        owned,
        secret(
            "wrong",
            json!({"username": user, "password": "never-accepted-pw-3f1a"}),
        ),
    ];
    for s in &secrets {
        cp.apply_text(ADMIN, &s.to_string(), None).ok();
    }
    for name in ["good", "extra", "owned", "wrong"] {
        let uid = create_cluster(cp, &ns, name, false);
        let c = vsphere_cluster(
            &ns,
            name,
            &uid,
            sim.url(),
            json!({"kind": "Secret", "name": name}),
            false,
        );
        cp.apply_text(ADMIN, &c.to_string(), None).ok();
    }
    let cluster = |name: &'static str| {
        let (cp, ns) = (cp, ns.clone());
        move || {
            let ns = ns.clone();
            async move { get_json(cp, "vspherecluster", &ns, name) }
        }
    };
    let limit = Duration::from_secs(60);

    // A working identity and nothing else: adopted once provisioned, with no condition.
    let good = eventually("good provisioned", limit, cluster("good"), |c| {
        c["status"]["ready"] == true
    })
    .await;
    assert!(v1beta2(&good, "IdentitySecretAdopted").is_none(), "{good}");
    let adopted = eventually(
        "the good Secret adopted",
        limit,
        || async { get_json(cp, "secret", &ns, "good") },
        |s| !owners(s).is_empty(),
    )
    .await;
    assert_eq!(
        owners(&adopted),
        [("VSphereCluster".to_string(), "good".to_string())]
    );
    assert_eq!(
        finalizers(&adopted),
        ["vspherecluster/infrastructure.cluster.x-k8s.io"]
    );

    // Working credentials, but more than an identity, or another's: the cluster runs on them,
    // says why the Secret is not its own, and holds nothing on it.
    for (name, says) in [
        (
            "extra",
            "it holds keys besides username and password: ca.crt",
        ),
        ("owned", "it is owned by ConfigMap holder"),
    ] {
        let c = eventually_or(
            || {
                format!(
                    "{:#}",
                    get_json(cp, "vspherecluster", &ns, name).unwrap_or_default()["status"]
                )
            },
            &format!("{name} says its Secret is not adopted"),
            limit,
            cluster(name),
            |c| v1beta2(c, "IdentitySecretAdopted").is_some(),
        )
        .await;
        let (status, reason, message) = v1beta2(&c, "IdentitySecretAdopted").unwrap();
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "SecretNotAdopted")
        );
        assert!(
            message.contains(&format!("identity Secret {name} is not adopted"))
                && message.contains(says),
            "{message}"
        );
        assert_eq!(c["status"]["ready"], true, "{c}");
        let text = c["status"].to_string();
        assert!(!text.contains(user) && !text.contains(password), "{text}");
    }
    // Never accepted: refused by vCenter, and never adopted (the adoption would have come
    // before the login).
    let wrong = eventually("wrong refused by vCenter", limit, cluster("wrong"), |c| {
        v1beta2(c, "VCenterAvailable").is_some_and(|v| v.0 == "False")
    })
    .await;
    assert!(!wrong.to_string().contains("never-accepted-pw-3f1a"));

    // The clusters go: only the adopted Secret is left for the garbage collector.
    for name in ["good", "extra", "owned", "wrong"] {
        cp.kubectl(
            ADMIN,
            &["delete", "vspherecluster", name, "-n", &ns, "--wait=false"],
        )
        .ok();
    }
    for name in ["good", "extra", "owned", "wrong"] {
        eventually(
            &format!("{name} deleted"),
            limit,
            || async { Some(get_json(cp, "vspherecluster", &ns, name).is_none()) },
            |gone| *gone,
        )
        .await;
    }
    let good = get_json(cp, "secret", &ns, "good").unwrap();
    assert_eq!(owners(&good), [("VSphereCluster".into(), "good".into())]);
    assert!(finalizers(&good).is_empty(), "{good}");
    for name in ["extra", "owned", "wrong"] {
        let s = get_json(cp, "secret", &ns, name)
            .unwrap_or_else(|| panic!("the Secret {name} is gone"));
        assert!(
            !owners(&s).iter().any(|(kind, _)| kind == "VSphereCluster"),
            "{name}: {s}"
        );
        assert!(finalizers(&s).is_empty(), "{name}: {s}");
    }
    let s = get_json(cp, "secret", &ns, "owned").unwrap();
    assert_eq!(owners(&s), [("ConfigMap".into(), "holder".into())]);
    assert_eq!(
        forbidden_here(&controllers, &ns),
        Vec::<String>::new(),
        "refused to the Cluster API-only ServiceAccount"
    );
    controllers.stop().await;
}
