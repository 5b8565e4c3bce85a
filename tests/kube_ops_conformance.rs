//! One `KubeOps` contract, two implementations: the same cases run against local mode's object
//! store (`LocalCluster`) and the in-cluster `ApiServer` — here over the project's in-memory API
//! server, which stands in for kube-apiserver (JSON merge patch, status subresource,
//! finalizers, 409/404) — and over the real one: Kubernetes' own kube-apiserver v1.37.2 and
//! etcd v3.7.0 built from source (tests/support/realapi.rs; no kube-controller-manager, so no
//! garbage collection or namespace deletion, which no case needs). A case
//! that passes on one and not the other is a difference users would see between
//! `vsphere-provider reconcile` and `run`.
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "support/realapi.rs"]
mod realapi;

use std::collections::BTreeMap;

use apiserver::FakeApiServer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;
use vsphere_provider::api::Machine;
use vsphere_provider::api::machine_health_check::MachineHealthCheck;
use vsphere_provider::controllers::api_server::ApiServer;
use vsphere_provider::local::cluster::LocalCluster;
use vsphere_provider::local::store::Store;
use vsphere_provider::reconcile::kube_ops::{KubeErrorKind, KubeOps};

const NS: &str = "openshift-machine-api";

/// A world to run one case in: objects are put in directly, read back directly, and changed
/// only through the implementation under test.
trait World {
    type Ops: KubeOps;
    fn ops(&self) -> &Self::Ops;
    fn put_machine(&self, m: &Machine);
    fn put_check(&self, h: &MachineHealthCheck);
    fn machine(&self, name: &str) -> Option<Machine>;
    fn check(&self, name: &str) -> Option<MachineHealthCheck>;
    /// An IPAddressClaim of `NS`, as stored.
    fn claim(&self, name: &str) -> Option<serde_json::Value>;
}

struct Local(LocalCluster);

impl World for Local {
    type Ops = LocalCluster;
    fn ops(&self) -> &LocalCluster {
        &self.0
    }
    fn put_machine(&self, m: &Machine) {
        let mut m = m.clone();
        m.metadata
            .uid
            .get_or_insert_with(|| format!("uid-{}", m.metadata.name.clone().unwrap()));
        let k = format!("{NS}/{}", m.metadata.name.as_deref().unwrap());
        self.0.lock().machines.insert(k, m);
    }
    fn put_check(&self, h: &MachineHealthCheck) {
        let k = format!("{NS}/{}", h.metadata.name.as_deref().unwrap());
        self.0.lock().health_checks.insert(k, h.clone());
    }
    fn machine(&self, name: &str) -> Option<Machine> {
        self.0.lock().machines.get(&format!("{NS}/{name}")).cloned()
    }
    fn check(&self, name: &str) -> Option<MachineHealthCheck> {
        self.0
            .lock()
            .health_checks
            .get(&format!("{NS}/{name}"))
            .cloned()
    }
    fn claim(&self, name: &str) -> Option<serde_json::Value> {
        let c = self
            .0
            .lock()
            .ip_claims
            .get(&format!("{NS}/{name}"))
            .cloned()?;
        Some(serde_json::to_value(c).unwrap())
    }
}

struct Server(FakeApiServer, ApiServer);

impl World for Server {
    type Ops = ApiServer;
    fn ops(&self) -> &ApiServer {
        &self.1
    }
    fn put_machine(&self, m: &Machine) {
        self.0.put(m);
    }
    fn put_check(&self, h: &MachineHealthCheck) {
        self.0.put(h);
    }
    fn machine(&self, name: &str) -> Option<Machine> {
        self.0.get(Some(NS), name)
    }
    fn check(&self, name: &str) -> Option<MachineHealthCheck> {
        self.0.get(Some(NS), name)
    }
    fn claim(&self, name: &str) -> Option<serde_json::Value> {
        self.0.get_at(
            "ipam.cluster.x-k8s.io/v1beta1/ipaddressclaims",
            Some(NS),
            name,
        )
    }
}

fn local() -> Local {
    Local(LocalCluster::new(
        Store::default(),
        None,
        Time(jiff::Timestamp::UNIX_EPOCH),
    ))
}

fn server() -> Server {
    let api = FakeApiServer::new();
    let client = api.client();
    let recorder = kube::runtime::events::Recorder::new(
        client.clone(),
        kube::runtime::events::Reporter {
            controller: "conformance".into(),
            instance: None,
        },
    );
    Server(api, ApiServer::new(client, recorder))
}

/// The real kube-apiserver, through `ApiServer` as the admin (what the controller's
/// ServiceAccount may do is tests/realapi_rbac.rs's to check). The cases share the test
/// binary's one control plane and the fixed namespace `NS`, so they take turns, each on an
/// emptied `NS`; objects are put in and read back with kubectl.
struct Real {
    ops: ApiServer,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Real {
    fn get<T: serde::de::DeserializeOwned>(&self, resource: &str, name: &str) -> Option<T> {
        let cp = realapi::control_plane();
        let out = cp.kubectl(
            &realapi::Identity::Admin,
            &["get", resource, name, "-n", NS, "-o", "json"],
        );
        if !out.success && out.stderr.contains("NotFound") {
            return None;
        }
        Some(serde_json::from_value(out.ok().json()).unwrap())
    }

    fn put(&self, object: &impl serde::Serialize) {
        let cp = realapi::control_plane();
        let text = serde_json::to_string(object).unwrap();
        cp.kubectl_stdin(
            &realapi::Identity::Admin,
            &["create", "-f", "-"],
            Some(&text),
        )
        .ok();
    }
}

const REAL_MACHINES: &str = "machines.machine.openshift.io";
const REAL_CHECKS: &str = "machinehealthchecks.machine.openshift.io";
const REAL_CLAIMS: &str = "ipaddressclaims.ipam.cluster.x-k8s.io";

impl World for Real {
    type Ops = ApiServer;
    fn ops(&self) -> &ApiServer {
        &self.ops
    }
    fn put_machine(&self, m: &Machine) {
        self.put(m);
    }
    fn put_check(&self, h: &MachineHealthCheck) {
        self.put(h);
    }
    fn machine(&self, name: &str) -> Option<Machine> {
        self.get(REAL_MACHINES, name)
    }
    fn check(&self, name: &str) -> Option<MachineHealthCheck> {
        self.get(REAL_CHECKS, name)
    }
    fn claim(&self, name: &str) -> Option<serde_json::Value> {
        self.get(REAL_CLAIMS, name)
    }
}

async fn real_server() -> Real {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let turn = TURN.lock().await;
    let cp = realapi::control_plane();
    let admin = realapi::Identity::Admin;
    // NS emptied: finalizers released (no controller runs here), then everything deleted.
    if !cp.kubectl(&admin, &["get", "namespace", NS]).success {
        cp.kubectl(&admin, &["create", "namespace", NS]).ok();
    }
    // The IPAM kinds are no CRD of ours: the test-only ones (see tests/fixtures/crds/SOURCES.md).
    cp.apply(
        &admin,
        "tests/fixtures/crds/ipam.cluster.x-k8s.io.test-only.yaml",
        None,
    )
    .ok();
    cp.wait_established(&[REAL_CLAIMS]);
    for resource in [REAL_MACHINES, REAL_CHECKS, REAL_CLAIMS] {
        let names = cp
            .kubectl(&admin, &["get", resource, "-n", NS, "-o", "name"])
            .ok()
            .stdout;
        for name in names.lines() {
            cp.kubectl(
                &admin,
                &[
                    "patch",
                    name,
                    "-n",
                    NS,
                    "--type=merge",
                    "-p",
                    r#"{"metadata":{"finalizers":null}}"#,
                ],
            )
            .ok();
        }
        cp.kubectl(
            &admin,
            &["delete", resource, "--all", "-n", NS, "--wait=true"],
        )
        .ok();
    }
    let client = cp.client(&admin).await;
    let recorder = kube::runtime::events::Recorder::new(
        client.clone(),
        kube::runtime::events::Reporter {
            controller: "conformance".into(),
            instance: None,
        },
    );
    Real {
        ops: ApiServer::new(client, recorder),
        _turn: turn,
    }
}

fn machine(name: &str, labels: &[(&str, &str)]) -> Machine {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {}
    }))
    .unwrap()
}

// Each case is written once, generic over the world.

async fn labels_and_annotations_removed_are_gone<W: World>(w: W) {
    w.put_machine(&machine("m", &[("keep", "1"), ("drop", "1")]));
    let before = w.machine("m").unwrap();
    let mut after = before.clone();
    after.metadata.labels.as_mut().unwrap().remove("drop");
    after.metadata.annotations = Some([("a".to_string(), "1".to_string())].into());
    w.ops().update_machine(&before, &after).await.unwrap();
    let stored = w.machine("m").unwrap();
    assert_eq!(
        stored.metadata.labels.unwrap().keys().collect::<Vec<_>>(),
        ["keep"],
        "a removed label is gone"
    );
    // And an annotation removed in turn.
    let mut again = w.machine("m").unwrap();
    let before = again.clone();
    again.metadata.annotations.as_mut().unwrap().remove("a");
    w.ops().update_machine(&before, &again).await.unwrap();
    let stored = w.machine("m").unwrap();
    assert!(
        stored.metadata.annotations.unwrap_or_default().is_empty(),
        "a removed annotation is gone"
    );
}

async fn a_released_deleting_machine_is_gone<W: World>(w: W) {
    let mut m = machine("m", &[]);
    m.metadata.finalizers = Some(vec!["machine.machine.openshift.io".into()]);
    w.put_machine(&m);
    w.ops().delete_machine(NS, "m").await.unwrap();
    let deleting = w.machine("m").expect("a finalizer keeps it");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let mut released = deleting.clone();
    released.metadata.finalizers = Some(vec![]);
    w.ops().update_machine(&deleting, &released).await.unwrap();
    assert!(w.machine("m").is_none(), "released: gone");
    // Deleting what is gone is done, not an error.
    w.ops().delete_machine(NS, "m").await.unwrap();
}

async fn create_conflicts_and_missing_objects_are_typed<W: World>(w: W) {
    let created = w.ops().create_machine(&machine("m", &[])).await.unwrap();
    assert!(created.metadata.uid.is_some(), "the store gives it a UID");
    let listed = w.ops().list_machines(NS).await.unwrap();
    assert_eq!(listed.len(), 1);
    let again = w
        .ops()
        .create_machine(&machine("m", &[]))
        .await
        .unwrap_err();
    assert_eq!(again.kind, KubeErrorKind::Conflict, "{again}");
    assert!(again.stale());
    let ghost = machine("ghost", &[]);
    let mut after = ghost.clone();
    after.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    let missing = w.ops().update_machine(&ghost, &after).await.unwrap_err();
    assert_eq!(missing.kind, KubeErrorKind::NotFound, "{missing}");
}

async fn a_check_s_annotation_and_status_are_written<W: World>(w: W) {
    let mut h: MachineHealthCheck = serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineHealthCheck",
        "metadata": {"name": "c", "namespace": NS,
                     "annotations": {"vsphere-provider.io/remediation-backoff": "{}", "other": "x"}},
        "spec": {"selector": {}}
    }))
    .unwrap();
    w.put_check(&h);
    h = w.check("c").unwrap();
    let mut after = h.clone();
    after
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove("vsphere-provider.io/remediation-backoff");
    after.status =
        Some(serde_json::from_value(json!({"expectedMachines": 3, "currentHealthy": 2})).unwrap());
    w.ops().update_health_check(&h, &after).await.unwrap();
    let stored = w.check("c").unwrap();
    assert_eq!(
        stored
            .metadata
            .annotations
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["other"]
    );
    let st = stored.status.unwrap();
    assert_eq!(
        (st.expected_machines, st.current_healthy),
        (Some(3), Some(2))
    );
}

/// An IP address claim is created once (a second create of the same name is fine: it was
/// ours), carries the protection finalizer, and is released — finalizer dropped, deleted — once;
/// releasing one that is gone is fine.
async fn an_ip_address_claim_is_created_once_and_released<W: World>(w: W) {
    use vsphere_provider::api::machine::AddressesFromPool;
    use vsphere_provider::plan::machine::ipam::{NewClaim, claim_object};
    let claim = claim_object(&NewClaim {
        namespace: NS.into(),
        name: "m-claim-0-0".into(),
        pool: AddressesFromPool {
            group: "ipam.cluster.x-k8s.io".into(),
            resource: "InClusterIPPool".into(),
            name: "workers".into(),
        },
        machine: "m".into(),
        machine_uid: "uid-m".into(),
        owner: ("machine.openshift.io/v1beta1", "Machine"),
    });
    w.ops().create_ip_address_claim(&claim).await.unwrap();
    w.ops().create_ip_address_claim(&claim).await.unwrap();
    let stored = w.claim("m-claim-0-0").expect("created");
    assert_eq!(
        stored["metadata"]["finalizers"],
        json!(["machine.openshift.io/ip-claim-protection"])
    );
    assert_eq!(stored["spec"]["poolRef"]["kind"], "InClusterIPPool");
    assert_eq!(stored["metadata"]["ownerReferences"][0]["uid"], "uid-m");
    w.ops()
        .release_ip_address_claim(NS, "m-claim-0-0")
        .await
        .unwrap();
    assert!(w.claim("m-claim-0-0").is_none(), "released");
    w.ops()
        .release_ip_address_claim(NS, "m-claim-0-0")
        .await
        .unwrap();
}

/// A field the new status no longer has is gone from the stored one: a machine's cleared
/// `providerStatus.taskRef` (omitted when empty) stayed on the API server when the status was
/// sent whole as a merge patch, and the machine re-read its failed clone task forever.
async fn a_status_field_removed_is_gone<W: World>(w: W) {
    w.put_machine(&machine("m", &[]));
    let before = w.machine("m").unwrap();
    let mut after = before.clone();
    after.status = Some(
        serde_json::from_value(json!({"phase": "Provisioning", "providerStatus": {
            "taskRef": "task-100", "instanceId": "bios-1"}}))
        .unwrap(),
    );
    w.ops().update_machine(&before, &after).await.unwrap();
    let written = w.machine("m").unwrap();
    let provider = |m: &Machine| m.status.as_ref().unwrap().provider_status.clone().unwrap();
    assert_eq!(provider(&written)["taskRef"], "task-100");
    let mut cleared = written.clone();
    cleared.status.as_mut().unwrap().provider_status = Some(json!({"instanceId": "bios-1"}));
    w.ops().update_machine(&written, &cleared).await.unwrap();
    let stored = provider(&w.machine("m").unwrap());
    assert_eq!(stored, json!({"instanceId": "bios-1"}), "taskRef removed");
}

macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod local_cluster {
            $(#[tokio::test] async fn $case() { super::$case(super::local()).await; })*
        }
        mod api_server {
            $(#[tokio::test] async fn $case() { super::$case(super::server()).await; })*
        }
        mod real_api_server {
            $(#[tokio::test] async fn $case() { super::$case(super::real_server().await).await; })*
        }
    };
}

conformance!(
    an_ip_address_claim_is_created_once_and_released,
    labels_and_annotations_removed_are_gone,
    a_released_deleting_machine_is_gone,
    create_conflicts_and_missing_objects_are_typed,
    a_check_s_annotation_and_status_are_written,
    a_status_field_removed_is_gone,
);
