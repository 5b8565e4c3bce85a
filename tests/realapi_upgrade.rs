//! The upgrade from the previous release, on the real API server (Kubernetes' own
//! kube-apiserver and etcd, tests/support/realapi.rs) with vcsim.
//!
//! The previous release stored every infrastructure kind as v1beta1 and served v1beta2 without a
//! conversion webhook; its CRDs are tests/fixtures/crds/previous (crds/ of that release,
//! verbatim). This release stores v1beta2 and converts through its webhook. The test:
//! 1. installs the previous CRDs, on which this release's manager refuses to start (it writes
//!    zones at v1beta2, which those CRDs would store unconverted), and, on them, reconciles a
//!    zone, a Cluster API cluster and a machine to ready (a VM powered on in the zone), plus a
//!    VSphereMachineTemplate, a VSphereClusterTemplate and a VSphereClusterIdentity. The
//!    controllers are this release's, standing in for the previous manager, with our
//!    conversion webhook added to the previous CRDs so that what they write at v1beta2 is
//!    stored as the v1beta1 the previous manager wrote (and the VSphereVM's v1beta2 schema
//!    given the `actuatorState` this release's has, which the stand-in writes there); the
//!    storage migration they run must leave CRDs that still store v1beta1 alone;
//! 2. reads every object's bytes in etcd: v1beta1;
//! 3. upgrades the CRDs (crds/ and the conversion webhook, as `kubectl apply -k config/crd`);
//!    every object reads back at v1beta1 unchanged, and at v1beta2 with the contract's fields;
//! 4. migrates storage: all kinds but VSphereMachine by calling the migration as the
//!    controller's ServiceAccount, then VSphereMachine by the manager's controllers at start.
//!    Every object is then v1beta2 in etcd, `storedVersions` is `[v1beta2]`, and every object
//!    still reads at v1beta1 exactly as before the upgrade (nothing lost through v1beta2);
//! 5. the controllers reconcile everything after the upgrade with no vCenter write, the zone,
//!    cluster and machine stay ready on the same VM, and deleting the machine still destroys it.
//!
//! Stand-ins: CAPI's Cluster and Machine are written by the test (their CRDs are CAPI v1.14.2's,
//! no CAPI manager runs), as in tests/realapi_capi_cluster.rs; the guest IP is set in vcsim as
//! VMware Tools would report it.
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

use std::time::Duration;

use base64::Engine;
use capi_in_process::*;
use realapi::{ControlPlane, Identity, control_plane};
use serde_json::{Value, json};
use vcsim::Vcsim;
use vsphere_provider::api::{INFRA_GROUP, Kind};
use vsphere_provider::controllers::startup::{self, NotServed};
use vsphere_provider::controllers::storage_migration::{self, Outcome};
use vsphere_provider::vcenter::stats::CallKind;

const ADMIN: &Identity = &Identity::Admin;

/// The objects the test follows: (kind, namespace or "", name).
type Object = (Kind, String, String);

/// An object at `version` (`v1beta1`/`v1beta2`) as the admin reads it, managedFields included.
fn read(cp: &ControlPlane, (kind, ns, name): &Object, version: &str) -> Value {
    let resource = format!("{}.{version}.{INFRA_GROUP}", kind.plural());
    let mut args = vec![
        "get",
        resource.as_str(),
        name.as_str(),
        "-o",
        "json",
        "--show-managed-fields",
    ];
    if !ns.is_empty() {
        args.extend(["-n", ns.as_str()]);
    }
    serde_json::from_str(&cp.kubectl(ADMIN, &args).ok().stdout).unwrap()
}

/// What the upgrade must keep of an object: all but the fields the server changes on any write
/// (resourceVersion, managedFields, generation, and our conversion bookkeeping annotation).
fn kept(mut v: Value) -> Value {
    let meta = v["metadata"].as_object_mut().unwrap();
    for k in ["resourceVersion", "managedFields", "generation"] {
        meta.remove(k);
    }
    if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        a.remove(vsphere_provider::api::conversion::CONVERSION_DATA);
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
        if a.is_empty() {
            meta.remove("annotations");
        }
    }
    v
}

/// The `apiVersion` etcd holds the object in: its raw bytes, read from etcd's JSON gateway
/// (`/v3/kv/range`), not through the API server.
async fn stored_as(cp: &ControlPlane, (kind, ns, name): &Object) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let suffix = if ns.is_empty() {
        format!("/{INFRA_GROUP}/{}/{name}", kind.plural())
    } else {
        format!("/{INFRA_GROUP}/{}/{ns}/{name}", kind.plural())
    };
    let range = |body: Value| async move {
        reqwest::Client::new()
            .post(format!("{}/v3/kv/range", cp.etcd_url))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    // The API server's prefix is the harness's (`/registry-N`): find the key by its tail.
    let keys = range(json!({
        "key": b64.encode("/registry"), "range_end": b64.encode("/registrz"), "keys_only": true
    }))
    .await;
    let key = keys["kvs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|kv| kv["key"].as_str())
        .map(|k| String::from_utf8(b64.decode(k).unwrap()).unwrap())
        .find(|k| k.ends_with(&suffix))
        .unwrap_or_else(|| panic!("etcd has no key ending {suffix}"));
    let reply = range(json!({"key": b64.encode(&key)})).await;
    let value = reply["kvs"][0]["value"].as_str().unwrap();
    let object: Value = serde_json::from_slice(&b64.decode(value).unwrap()).unwrap();
    object["apiVersion"].as_str().unwrap().to_string()
}

fn crd(cp: &ControlPlane, kind: Kind) -> Value {
    cp.kubectl(
        ADMIN,
        &[
            "get",
            "crd",
            &storage_migration::crd_name(kind),
            "-o",
            "json",
        ],
    )
    .ok()
    .json()
}

fn stored_versions(cp: &ControlPlane, kind: Kind) -> Vec<String> {
    serde_json::from_value(crd(cp, kind)["status"]["storedVersions"].clone()).unwrap()
}

fn infrastructure_kinds() -> Vec<Kind> {
    Kind::ALL
        .into_iter()
        .filter(|k| k.api_version().starts_with(INFRA_GROUP))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_stored_as_v1beta1_are_converted_migrated_and_reconciled_with_no_vcenter_write() {
    realapi::start_as_previous_release();
    let cp = control_plane();
    install_capi_crds(cp);
    for kind in infrastructure_kinds() {
        let crd = crd(cp, kind);
        let stores: Vec<&Value> = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["storage"] == true)
            .map(|v| &v["name"])
            .collect();
        assert_eq!(stores, [&json!("v1beta1")], "{kind}: the previous CRDs");
        assert_ne!(crd["spec"]["conversion"]["strategy"], "Webhook", "{kind}");
    }
    // This release's manager against the previous CRDs waits for the upgrade and says why: it
    // writes zones at v1beta2, which those CRDs would store unconverted as v1beta1.
    let sa = cp.client(&Identity::Controller).await;
    let refused = startup::check(&sa, "test").await.unwrap_err();
    assert!(
        matches!(&refused, NotServed::CrdOlderThanManager { kind, writes, .. }
            if kind == "VSphereFailureDomain" && writes == "v1beta2"),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("kubectl apply -k config/crd"),
        "{refused}"
    );
    // The stand-in previous manager is this release's (module documentation). Its zones are
    // typed at v1beta2, so the previous CRDs get our conversion webhook (storage stays
    // v1beta1): the webhook stores those writes as the v1beta1 zones the previous release
    // wrote.
    cp.conversion_to(cp.conversion_port).unwrap();
    stand_in_keeps_actuator_state(cp);
    startup::check(&sa, "test").await.unwrap();

    let ns = cp.namespace("upgrade");
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let (user, password) = sim.credentials();
    let readback = process::Readback::new(sim.url(), sim.base_url(), user, password);

    // 1. The previous release's world, reconciled to ready.
    let before = Controllers::start(cp).await;
    let bootstrap = bootstrap_secret_m1(&ns, "#cloud-config\n");
    let templates = [
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachineTemplate",
            "metadata": {"name": "workers", "namespace": ns},
            "spec": {"template": {"spec": {"template": "DC0_H0_VM0", "numCPUs": 2, "memoryMiB": 2048,
                "guestSoftPowerOffTimeout": "5m", "powerOffMode": "trySoft",
                "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]}}}}
        }),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereClusterTemplate",
            "metadata": {"name": "class", "namespace": ns},
            "spec": {"template": {"spec": {"server": sim.url(),
                "identityRef": {"kind": "Secret", "name": "vsphere-credentials"}}}}
        }),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereClusterIdentity",
            "metadata": {"name": format!("{ns}-identity")},
            "spec": {"secretName": "upgrade-identity",
                "allowedNamespaces": {"selector": {"matchLabels": {"team": "a"}}}}
        }),
    ];
    let mut more = vec![bootstrap];
    more.extend(templates);
    let zone = ready_cluster(cp, &ns, &sim, more).await;
    // CAPI's cluster and machine controllers (stand-ins, see the module documentation).
    // A v1beta1 Duration v1beta2 holds as seconds, and a v1beta1-only failure domain.
    capi_machine_m1(
        cp,
        &ns,
        &zone,
        json!({"template": "DC0_H0_VM0", "numCPUs": 2, "memoryMiB": 2048,
            "powerOffMode": "trySoft", "guestSoftPowerOffTimeout": "10m",
            "failureDomain": zone,
            "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]}}),
    );
    let vm = eventually(
        "the VM",
        Duration::from_secs(90),
        || async { readback.vms().await.into_iter().find(|v| v.name == "m1") },
        |_| true,
    )
    .await;
    eventually(
        "the VM powered on",
        Duration::from_secs(60),
        || async { Some(readback.vm_props(&vm.moref, &["runtime.powerState"]).await) },
        |p| p.get("runtime.powerState").map(String::as_str) == Some("poweredOn"),
    )
    .await;
    m1_ready_with_ip(cp, &ns, &readback, &vm.moref, "10.0.0.42").await;
    // Let the last status writes land, then stop: the previous release is done.
    tokio::time::sleep(Duration::from_secs(3)).await;
    before.stop().await;
    // The stand-in applied the cluster's status at v1beta2; the previous release applied it at
    // v1beta1, and managedFields are kept per version. Leave them as it did (hub-types §4.2),
    // with an older vCenterVersion so that this release's first pass must apply at v1beta2,
    // plus a condition and an annotation of other writers that must survive that apply.
    previous_release_cluster_status(cp, &ns, "c1").await;

    let objects: Vec<Object> = vec![
        (Kind::VSphereFailureDomain, String::new(), zone.clone()),
        (Kind::VSphereDeploymentZone, String::new(), zone.clone()),
        (Kind::VSphereCluster, ns.clone(), "c1".into()),
        (Kind::VSphereMachine, ns.clone(), "m1".into()),
        (Kind::VSphereVM, ns.clone(), "m1".into()),
        (Kind::VSphereMachineTemplate, ns.clone(), "workers".into()),
        (Kind::VSphereClusterTemplate, ns.clone(), "class".into()),
        (
            Kind::VSphereClusterIdentity,
            String::new(),
            format!("{ns}-identity"),
        ),
    ];
    assert_eq!(
        objects.len(),
        infrastructure_kinds().len(),
        "one of each kind"
    );
    let snapshot: Vec<Value> = objects
        .iter()
        .map(|o| kept(read(cp, o, "v1beta1")))
        .collect();
    for o in &objects {
        assert_eq!(
            stored_as(cp, o).await,
            "infrastructure.cluster.x-k8s.io/v1beta1",
            "{o:?}"
        );
    }
    // This release's migration ran against the previous CRDs and left them alone.
    for kind in infrastructure_kinds() {
        assert_eq!(stored_versions(cp, kind), ["v1beta1"], "{kind}");
    }

    // 3. The upgrade: this release's CRDs and conversion webhook.
    cp.install_crds().unwrap();
    for kind in infrastructure_kinds() {
        assert_eq!(stored_versions(cp, kind), ["v1beta1", "v1beta2"], "{kind}");
    }
    for (o, was) in objects.iter().zip(&snapshot) {
        assert_eq!(
            &kept(read(cp, o, "v1beta1")),
            was,
            "{o:?} at v1beta1 after the upgrade"
        );
    }
    let cluster = read(cp, &objects[2], "v1beta2");
    assert_eq!(
        cluster["status"]["initialization"]["provisioned"], true,
        "{cluster}"
    );
    assert_eq!(
        cluster["status"]["failureDomains"][0]["name"],
        zone.as_str()
    );
    let machine = read(cp, &objects[3], "v1beta2");
    assert_eq!(machine["status"]["initialization"]["provisioned"], true);
    assert_eq!(machine["spec"]["guestSoftPowerOffTimeoutSeconds"], 600);
    assert!(machine["spec"].get("failureDomain").is_none(), "{machine}");

    // 4. Storage migration: all kinds but VSphereMachine directly, as the controller.
    for kind in infrastructure_kinds() {
        if kind == Kind::VSphereMachine {
            continue;
        }
        match storage_migration::migrate(&sa, kind).await.unwrap() {
            Outcome::Migrated(m) => assert_eq!(m.rewritten + m.skipped, 1, "{kind}: {m:?}"),
            other => panic!("{kind}: {other:?}"),
        }
        assert_eq!(stored_versions(cp, kind), ["v1beta2"], "{kind}");
        // A second pass finds nothing to do (one read).
        assert_eq!(
            storage_migration::migrate(&sa, kind).await.unwrap(),
            Outcome::NothingToDo
        );
    }
    for o in objects.iter().filter(|o| o.0 != Kind::VSphereMachine) {
        assert_eq!(
            stored_as(cp, o).await,
            Kind::VSphereCluster.storage_version(),
            "{o:?}"
        );
    }
    for (o, was) in objects.iter().zip(&snapshot) {
        assert_eq!(
            &kept(read(cp, o, "v1beta1")),
            was,
            "{o:?}: lost through v1beta2"
        );
    }
    // The shared actuator's state is a field of the stored v1beta2 VSphereVM (not held in the
    // conversion annotation), so a hub reader sees it as it is.
    let vm_v2 = read(cp, &objects[4], "v1beta2");
    assert!(
        vm_v2["status"]["actuatorState"].is_object(),
        "the VSphereVM's state at v1beta2: {vm_v2}"
    );
    assert!(
        vm_v2["metadata"]["annotations"]
            .get(vsphere_provider::api::conversion::CONVERSION_DATA)
            .and_then(Value::as_str)
            .is_none_or(|held| !held.contains("actuatorState")),
        "{vm_v2}"
    );

    // 5. This release's manager: migrates VSphereMachine at start, reconciles with no write.
    let after = Controllers::start(cp).await;
    eventually(
        "the manager's migration of vspheremachines",
        Duration::from_secs(60),
        || async { Some(stored_versions(cp, Kind::VSphereMachine)) },
        |v| v == &["v1beta2".to_string()],
    )
    .await;
    assert_eq!(
        stored_as(cp, &objects[3]).await,
        Kind::VSphereMachine.storage_version()
    );
    // Every controller reconciles at start (zone verified, cluster and machine read): give them
    // time, then nothing may have been written to vCenter.
    eventually(
        "the reconciles after the upgrade",
        Duration::from_secs(60),
        || async { Some(after.stats.snapshot().kind(CallKind::Read)) },
        |reads| *reads > 0,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let calls = after.stats.snapshot();
    assert_eq!(
        calls.kind(CallKind::Write),
        0,
        "vCenter writes after the upgrade: {}",
        calls.summary()
    );
    let zone_status = get_json(cp, "vspheredeploymentzone", "", &zone).unwrap();
    assert_eq!(zone_status["status"]["ready"], true, "{zone_status}");
    let c1 = get_json(cp, "vspherecluster", &ns, "c1").unwrap();
    assert_eq!(c1["status"]["ready"], true, "{c1}");
    cluster_status_applied_at_v1beta2(cp, &ns, "c1", &zone).await;
    let m1 = get_json(cp, "vspheremachine", &ns, "m1").unwrap();
    assert_eq!(m1["status"]["ready"], true, "{m1}");
    let vms: Vec<_> = readback
        .vms()
        .await
        .into_iter()
        .filter(|v| v.name == "m1")
        .collect();
    assert_eq!(vms.len(), 1, "one VM, the same");
    assert_eq!(vms[0].moref, vm.moref);

    // The migrated machine still goes the whole way.
    delete_vsphere_machine_m1(cp, &ns).await;
    assert!(
        !readback.vms().await.iter().any(|v| v.name == "m1"),
        "the VM is destroyed"
    );
    cp.kubectl(ADMIN, &["delete", "vspheredeploymentzone", &zone])
        .ok();
    after.stop().await;
}

/// The stand-in previous manager writes VSphereVMs at v1beta2, with the actuator's state in
/// `status.actuatorState`, which the previous release's v1beta2 schema lacks (that release wrote
/// VSphereVMs at v1beta1, where the field is): the API server would prune it from every write.
/// Give the previous CRD's v1beta2 the field this release's has, so the stand-in's writes are
/// stored as the previous release's were (its v1beta1 keeps the field).
fn stand_in_keeps_actuator_state(cp: &ControlPlane) {
    let crd = crd(cp, Kind::VSphereVM);
    let at = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|v| v["name"] == "v1beta2")
        .expect("the previous CRD serves v1beta2");
    let patch = json!([{
        "op": "add",
        "path": format!("/spec/versions/{at}/schema/openAPIV3Schema/properties/status/properties/actuatorState"),
        "value": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    }]);
    cp.kubectl(
        ADMIN,
        &[
            "patch",
            "crd",
            &storage_migration::crd_name(Kind::VSphereVM),
            "--type=json",
            "-p",
            &patch.to_string(),
        ],
    )
    .ok();
}

/// Another writer of the VSphereCluster (CAPV's cluster-module controller, CAPI's topology
/// controller): what it owns must survive our manager's change of apply version.
const OTHER_WRITER: &str = "other-writer";

/// The VSphereCluster `name` as the previous release left it: its status applied at v1beta1 by
/// our field manager (what that release sent: `ready`, the v1beta1 `conditions`, our entries of
/// `v1beta2.conditions`, the `failureDomains` map, `initialization`, `vCenterVersion`, the last
/// set to an older vCenter), and a `v1beta2.conditions` entry and an annotation of another
/// writer.
async fn previous_release_cluster_status(cp: &ControlPlane, ns: &str, name: &str) {
    use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
    let client = cp.client(ADMIN).await;
    let gvk = GroupVersionKind::gvk(INFRA_GROUP, "v1beta1", "VSphereCluster");
    let resource = kube::api::ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::namespaced_with(client, ns, &resource);
    let now = read(
        cp,
        &(Kind::VSphereCluster, ns.into(), name.into()),
        "v1beta1",
    );
    let status = &now["status"];
    let ours = ["FailureDomainsReady", "Ready", "Paused", "VCenterAvailable"];
    let v1beta2: Vec<&Value> = status["v1beta2"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| ours.contains(&c["type"].as_str().unwrap_or_default()))
        .collect();
    let body = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereCluster",
        "status": {
            "ready": true,
            "conditions": status["conditions"],
            "v1beta2": {"conditions": v1beta2},
            "failureDomains": status["failureDomains"],
            "initialization": {"provisioned": true},
            "vCenterVersion": "7.0.3",
        }
    });
    let apply = |manager: &str| PatchParams::apply(manager).force();
    api.patch_status(
        name,
        &apply(vsphere_provider::controllers::FIELD_MANAGER),
        &Patch::Apply(&body),
    )
    .await
    .unwrap();
    let theirs = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereCluster",
        "status": {"v1beta2": {"conditions": [{
            "type": "ClusterModulesReady", "status": "True", "reason": "Ready", "message": "",
            "lastTransitionTime": "2026-11-01T00:00:00Z"
        }]}}
    });
    api.patch_status(name, &apply(OTHER_WRITER), &Patch::Apply(&theirs))
        .await
        .unwrap();
    let annotation = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereCluster",
        "metadata": {"name": name, "annotations": {"topology.cluster.x-k8s.io/cloned-from": "class"}}
    });
    api.patch(name, &apply(OTHER_WRITER), &Patch::Apply(&annotation))
        .await
        .unwrap();
    let managers = status_managers(&read(
        cp,
        &(Kind::VSphereCluster, ns.into(), name.into()),
        "v1beta1",
    ));
    assert!(
        managers.contains(&(
            vsphere_provider::controllers::FIELD_MANAGER.to_string(),
            "infrastructure.cluster.x-k8s.io/v1beta1".to_string()
        )),
        "{managers:?}"
    );
}

/// (manager, apiVersion) of the Apply entries of an object's status.
fn status_managers(object: &Value) -> Vec<(String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["operation"] == "Apply" && m["subresource"] == "status")
        .map(|m| {
            (
                m["manager"].as_str().unwrap().to_string(),
                m["apiVersion"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// After the upgrade our manager applies the cluster's status at v1beta2 (hub-types §4.2): its
/// managed fields move to v1beta2 with nothing it owned at v1beta1 lost (`ready`, the map of
/// failure domains, each v1beta1 condition once), and what the other writer owns stays.
async fn cluster_status_applied_at_v1beta2(cp: &ControlPlane, ns: &str, name: &str, zone: &str) {
    let object = (Kind::VSphereCluster, ns.to_string(), name.to_string());
    let v2 = eventually(
        "the VSphereCluster's vCenterVersion from this release's check",
        Duration::from_secs(60),
        || async { Some(read(cp, &object, "v1beta2")) },
        |v| v["status"]["vCenterVersion"] != "7.0.3",
    )
    .await;
    assert_eq!(
        status_managers(&v2)
            .into_iter()
            .filter(|(m, _)| m == vsphere_provider::controllers::FIELD_MANAGER)
            .collect::<Vec<_>>(),
        [(
            vsphere_provider::controllers::FIELD_MANAGER.to_string(),
            "infrastructure.cluster.x-k8s.io/v1beta2".to_string()
        )],
        "{v2}"
    );
    assert_eq!(v2["status"]["initialization"]["provisioned"], true, "{v2}");
    assert_eq!(v2["status"]["failureDomains"][0]["name"], zone, "{v2}");
    let types = |list: &Value| -> Vec<String> {
        let mut t: Vec<String> = list
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["type"].as_str().unwrap().to_string())
            .collect();
        t.sort();
        t
    };
    assert_eq!(
        types(&v2["status"]["conditions"]),
        [
            "ClusterModulesReady",
            "FailureDomainsReady",
            "Paused",
            "Ready",
            "VCenterAvailable"
        ],
        "ours once each, and the other writer's: {v2}"
    );
    assert_eq!(
        v2["metadata"]["annotations"]["topology.cluster.x-k8s.io/cloned-from"],
        "class"
    );
    let v1 = read(cp, &object, "v1beta1");
    assert_eq!(v1["status"]["ready"], true, "{v1}");
    assert!(v1["status"]["failureDomains"][zone].is_object(), "{v1}");
    assert_eq!(
        types(&v1["status"]["conditions"]),
        ["FailureDomainsAvailable", "Ready", "VCenterAvailable"],
        "{v1}"
    );
}
