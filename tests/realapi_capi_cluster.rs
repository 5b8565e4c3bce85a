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
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use realapi::{ControlPlane, Identity, SA_NAMESPACE, control_plane};
use serde_json::{Value, json};
use vcsim::Vcsim;
use vsphere_provider::api::VSphereCluster;
use vsphere_provider::controllers::{self, Health, Metrics, Shared, ShutdownTrigger, shutdown};
use vsphere_provider::reconcile::views::ServerViews;
use vsphere_provider::vcenter::session::SessionCache;
use vsphere_provider::vcenter::{ClientOptions, Stats};

const ADMIN: &Identity = &Identity::Admin;
const FINALIZER: &str = "vspherecluster.infrastructure.cluster.x-k8s.io";

/// One test at a time: each runs its own controllers, which would otherwise reconcile the
/// other tests' objects too.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The Cluster and Machine CRDs of Cluster API, applied once per control plane.
fn install_capi_crds(cp: &ControlPlane) {
    capi_crds::install(cp);
}

/// The controllers in this process, as the controller's ServiceAccount; stopped when dropped.
struct Controllers {
    trigger: Option<ShutdownTrigger>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Controllers {
    async fn start(cp: &ControlPlane) -> Controllers {
        let stats = Stats::default();
        let shared = Shared {
            client: cp.client(&Identity::Controller).await,
            sessions: SessionCache::new(stats.clone(), ClientOptions::default()),
            views: Arc::new(ServerViews::new(Duration::from_secs(30))),
            manager: None,
            trust: Default::default(),
            metrics: Metrics::new(stats),
            reporter: "vsphere-provider".into(),
            converts: false,
            polling: Default::default(),
            health: Health::new(false),
            namespace: SA_NAMESPACE.into(),
        };
        let (trigger, signal) = shutdown::channel();
        let task = tokio::spawn(async move { controllers::run_controllers(&shared, signal).await });
        Controllers {
            trigger: Some(trigger),
            task: Some(task),
        }
    }

    async fn stop(mut self) {
        if let Some(t) = self.trigger.take() {
            t.trigger();
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .expect("controllers stop")
                .expect("controllers task");
        }
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The VSphereCluster `c1` as JSON once `holds` says so, polling every 250 ms for up to `limit`.
async fn wait_until(
    api: &Api<VSphereCluster>,
    what: &str,
    limit: Duration,
    holds: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(c) = get(api, "c1").await.filter(|c| holds(c)) {
            return c;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The VSphereCluster as JSON (all of it, whatever the types know).
async fn get(api: &Api<VSphereCluster>, name: &str) -> Option<Value> {
    api.get_opt(name)
        .await
        .unwrap()
        .map(|c| serde_json::to_value(c).unwrap())
}

/// `(status, reason, message)` of a v1beta2 condition.
fn v1beta2(c: &Value, t: &str) -> Option<(String, String, String)> {
    let found = c["status"]["v1beta2"]["conditions"]
        .as_array()?
        .iter()
        .find(|x| x["type"] == t)?
        .clone();
    let s = |k: &str| found[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason"), s("message")))
}

/// `(status, reason)` of a v1beta1 condition.
fn v1beta1(c: &Value, t: &str) -> Option<(String, String)> {
    let found = c["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|x| x["type"] == t)?
        .clone();
    let s = |k: &str| found[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason")))
}

fn finalizers(c: &Value) -> Vec<String> {
    c["metadata"]["finalizers"]
        .as_array()
        .map(|f| {
            f.iter()
                .map(|x| x.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A Cluster API `Cluster` (v1beta2) named `name` whose infrastructureRef is the VSphereCluster
/// of the same name; returns its uid.
fn create_cluster(cp: &ControlPlane, ns: &str, name: &str, paused: bool) -> String {
    cp.apply_text(
        ADMIN,
        &json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "paused": paused,
                "controlPlaneEndpoint": {"host": "10.0.0.10", "port": 6443},
                "infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "VSphereCluster", "name": name
                }
            }
        })
        .to_string(),
        None,
    )
    .ok();
    cp.kubectl(
        ADMIN,
        &[
            "get",
            "cluster.cluster.x-k8s.io",
            name,
            "-n",
            ns,
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    )
    .ok()
    .stdout
}

/// A VSphereCluster on `server` owned by Cluster `name` (uid `owner_uid`), with `identity_ref`
/// and, when `zones` is set, `failureDomainSelector: {}`.
fn vsphere_cluster(
    ns: &str,
    name: &str,
    owner_uid: &str,
    server: &str,
    identity_ref: Value,
    zones: bool,
) -> Value {
    let mut spec = json!({
        "server": server,
        "identityRef": identity_ref,
        "controlPlaneEndpoint": {"host": "10.0.0.10", "port": 6443}
    });
    if zones {
        spec["failureDomainSelector"] = json!({});
    }
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereCluster",
        "metadata": {
            "name": name, "namespace": ns,
            // What CAPI's cluster controller sets (see the module documentation).
            "ownerReferences": [{
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                "name": name, "uid": owner_uid
            }]
        },
        "spec": spec
    })
}

/// Cluster `c1` (paused or not) and the VSphereCluster `c1` it owns, on `sim`, naming
/// `identity_ref`, selecting every zone when `zones`; the VSphereClusters of `ns` as the admin.
async fn owned_cluster(
    cp: &ControlPlane,
    ns: &str,
    sim: &Vcsim,
    identity_ref: Value,
    zones: bool,
    paused: bool,
) -> Api<VSphereCluster> {
    let uid = create_cluster(cp, ns, "c1", paused);
    let c = vsphere_cluster(ns, "c1", &uid, sim.url(), identity_ref, zones);
    cp.apply_text(ADMIN, &c.to_string(), None).ok();
    Api::namespaced(cp.client(ADMIN).await, ns)
}

fn credentials_secret(ns: &str, name: &str, sim: &Vcsim) -> Value {
    let (user, password) = sim.credentials();
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "type": "Opaque",
        "stringData": {"username": user, "password": password}
    })
}

/// Zone `<ns>-zone` (failure domain and deployment zone, autoConfigure, on compute cluster
/// DC0_C0 of `sim`, a control-plane zone acting as the admin's Secret `<ns>-zone` in the
/// controller's namespace) and the credentials Secret `vsphere-credentials` of `ns`, with `more`
/// objects, applied together; returns the zone's name.
fn apply_zone(cp: &ControlPlane, ns: &str, sim: &Vcsim, more: Vec<Value>) -> String {
    let zone = format!("{ns}-zone");
    let mut items = vec![
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereFailureDomain",
            "metadata": {"name": zone},
            "spec": {
                "region": {"name": "region-a", "type": "Datacenter", "tagCategory": "k8s-region", "autoConfigure": true},
                "zone": {"name": zone, "type": "ComputeCluster", "tagCategory": "k8s-zone", "autoConfigure": true},
                "topology": {"datacenter": "DC0", "computeCluster": "DC0_C0", "datastore": "LocalDS_0", "networks": ["VM Network"]}
            }
        }),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereDeploymentZone",
            "metadata": {"name": zone},
            "spec": {
                "server": sim.url(), "failureDomain": zone, "controlPlane": true,
                "identityRef": {"kind": "Secret", "name": zone},
                "placementConstraint": {"resourcePool": "DC0_C0_RP1", "folder": "vm"}
            }
        }),
        credentials_secret(SA_NAMESPACE, &zone, sim),
        credentials_secret(ns, "vsphere-credentials", sim),
    ];
    items.extend(more);
    cp.apply_text(
        ADMIN,
        &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
        None,
    )
    .ok();
    zone
}

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
        c["status"]["ready"] == true
    })
    .await;
    assert_eq!(finalizers(&c), [FINALIZER], "{c}");
    assert_eq!(c["status"]["initialization"]["provisioned"], true, "{c}");
    assert_eq!(
        c["status"]["failureDomains"],
        json!({zone.clone(): {"controlPlane": true}}),
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
    assert_eq!(c["status"]["ready"], true, "ready is never reset");
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
    assert_eq!(status.keys().collect::<Vec<_>>(), ["v1beta2"], "{c}");
    assert_eq!(
        c["status"]["v1beta2"]["conditions"]
            .as_array()
            .unwrap()
            .len(),
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
        c["status"]["ready"] == true
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
    assert_eq!(c["status"]["ready"], true);
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
    assert!(c["status"]["ready"].is_null(), "{c}");
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
        c["status"]["ready"] == true
    })
    .await;
    assert_eq!(v1beta2(&c, "VCenterAvailable").unwrap().0, "True");
    controllers.stop().await;
}

/// Poll `get` every 250 ms until it yields a value `holds` accepts, for up to `limit`.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    limit: Duration,
    get: impl Fn() -> F,
    holds: impl Fn(&T) -> bool,
) -> T {
    eventually_or(String::new, what, limit, get, holds).await
}

/// [`eventually`], saying what `context` shows when it times out.
async fn eventually_or<T, F: std::future::Future<Output = Option<T>>>(
    context: impl Fn() -> String,
    what: &str,
    limit: Duration,
    get: impl Fn() -> F,
    holds: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = get().await.filter(|v| holds(v)) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {}",
            context()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// An object of `kind` in `ns` as JSON, as kubectl shows it (None when absent).
fn get_json(cp: &ControlPlane, kind: &str, ns: &str, name: &str) -> Option<Value> {
    let out = cp.kubectl(
        ADMIN,
        &[
            "get",
            &realapi::at_v1beta1(kind),
            name,
            "-n",
            ns,
            "-o",
            "json",
            "--ignore-not-found",
        ],
    );
    let text = out.ok().stdout;
    (!text.trim().is_empty()).then(|| serde_json::from_str(&text).unwrap())
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vsphere_machine_becomes_a_vm_in_its_zone_with_its_bootstrap_data_and_goes_with_it() {
    use base64::Engine as _;
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    install_capi_crds(cp);
    let ns = cp.namespace("capi-machine");
    let sim = Vcsim::builder().clusters(1).hosts(1).pools(1).start().await;
    let (user, password) = sim.credentials();
    let readback = process::Readback::new(sim.url(), sim.base_url(), user, password);
    let controllers = Controllers::start(cp).await;
    // (VM groups: tests/capi_machines.rs, under CAPI's controllers.)
    let bootstrap = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "m1-bootstrap", "namespace": ns},
        "stringData": {"value": "#cloud-config\nruncmd: [kubeadm join]\n", "format": "cloud-config"}
    });
    let zone = apply_zone(cp, &ns, &sim, vec![bootstrap]);
    let api = owned_cluster(
        cp,
        &ns,
        &sim,
        json!({"kind": "Secret", "name": "vsphere-credentials"}),
        true,
        false,
    )
    .await;
    wait_until(&api, "c1 ready", Duration::from_secs(60), |c| {
        c["status"]["ready"] == true
    })
    .await;
    // CAPI's cluster controller would now say the infrastructure is ready (stand-in).
    cp.kubectl(
        ADMIN,
        &[
            "patch",
            "cluster.cluster.x-k8s.io",
            "c1",
            "-n",
            &ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"initialization":{"infrastructureProvisioned":true}}}"#,
        ],
    )
    .ok();
    cp.apply_text(
        ADMIN,
        &json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m1", "namespace": ns, "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
            "spec": {
                "clusterName": "c1", "failureDomain": zone,
                "bootstrap": {"dataSecretName": "m1-bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "VSphereMachine", "name": "m1"}
            }
        })
        .to_string(),
        None,
    )
    .ok();
    let machine_uid =
        get_json(cp, "machine.cluster.x-k8s.io", &ns, "m1").unwrap()["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string();
    cp.apply_text(
        ADMIN,
        &json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachine",
            "metadata": {"name": "m1", "namespace": ns,
                "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                // What CAPI's machine controller sets (stand-in).
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                    "name": "m1", "uid": machine_uid, "controller": true}]},
            // trySoft: the deletion asks the guest to shut down (vcsim's ShutdownGuest powers
            // the VM off, as a guest with VMware Tools would).
            "spec": {"template": "DC0_H0_VM0", "numCPUs": 2, "memoryMiB": 2048,
                "powerOffMode": "trySoft", "guestSoftPowerOffTimeout": "10m",
                "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]}}
        })
        .to_string(),
        None,
    )
    .ok();

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
    readback.set_guest_ip(&vm.moref, "10.0.0.42").await;
    let vsm = eventually(
        "the VSphereMachine ready",
        Duration::from_secs(90),
        || async { get_json(cp, "vspheremachine", &ns, "m1") },
        |v| v["status"]["ready"] == true,
    )
    .await;
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
    cp.kubectl(
        ADMIN,
        &["delete", "vspheremachine", "m1", "-n", &ns, "--wait=false"],
    )
    .ok();
    eventually(
        "the VSphereMachine gone",
        Duration::from_secs(90),
        || async { Some(get_json(cp, "vspheremachine", &ns, "m1")) },
        Option::is_none,
    )
    .await;
    assert!(get_json(cp, "vspherevm", &ns, "m1").is_none());
    assert!(
        !readback.vms().await.iter().any(|v| v.name == "m1"),
        "the VM is destroyed"
    );
    // Zones are cluster-scoped: one left behind would be published by the next test's cluster
    // if its vcsim got this one's port.
    cp.kubectl(ADMIN, &["delete", "vspheredeploymentzone", &zone])
        .ok();
    controllers.stop().await;
}
