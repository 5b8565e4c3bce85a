//! Cluster API objects on the real API server with this provider's controllers running in the
//! test process (no Cluster API manager): the Cluster, VSphereCluster, zones and credentials the
//! tests create, standing in for what CAPI's controllers and an admin would write (each user
//! says which), and the polling helpers they wait with.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Api;
use serde_json::{Value, json};
use vsphere_provider::api::VSphereCluster;
use vsphere_provider::controllers::{self, Health, Metrics, Shared, ShutdownTrigger, shutdown};
use vsphere_provider::reconcile::views::ServerViews;
use vsphere_provider::vcenter::session::SessionCache;
use vsphere_provider::vcenter::{ClientOptions, Stats};

use super::capi_crds;
use super::realapi::{self, ControlPlane, Identity, SA_NAMESPACE};
use super::vcsim::Vcsim;

const ADMIN: &Identity = &Identity::Admin;

/// The Cluster and Machine CRDs of Cluster API, applied once per control plane.
pub fn install_capi_crds(cp: &ControlPlane) {
    capi_crds::install(cp);
}

/// The controllers in this process, as the controller's ServiceAccount; stopped when dropped.
pub struct Controllers {
    pub stats: Stats,
    /// Every Kubernetes API request the controllers made, in order.
    pub requests: Requests,
    pub metrics: Arc<Metrics>,
    trigger: Option<ShutdownTrigger>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Kubernetes API requests as `VERB path` (`GET /api/v1/namespaces/ns/secrets/s`; watches
/// and lists are GETs of the collection, with their query), and those the server refused with
/// 403 (RBAC).
#[derive(Clone, Default)]
pub struct Requests(
    Arc<std::sync::Mutex<Vec<String>>>,
    Arc<std::sync::Mutex<Vec<String>>>,
);

impl Requests {
    /// The requests refused with 403 so far.
    pub fn forbidden(&self) -> Vec<String> {
        self.1.lock().unwrap().clone()
    }

    /// How many were made so far (a mark for [`Requests::since`]).
    pub fn mark(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// The requests made after `mark`.
    pub fn since(&self, mark: usize) -> Vec<String> {
        self.0.lock().unwrap()[mark..].to_vec()
    }
}

/// `client`, logging each request into `requests` before sending it.
fn logging(client: kube::Client, requests: Requests) -> kube::Client {
    let ns = client.default_namespace().to_string();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let line = format!(
            "{} {}",
            req.method(),
            req.uri()
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or_default()
        );
        requests.0.lock().unwrap().push(line.clone());
        let (client, requests) = (client.clone(), requests.clone());
        async move {
            let answer = client.send(req).await;
            if answer
                .as_ref()
                .is_ok_and(|r| r.status() == http::StatusCode::FORBIDDEN)
            {
                requests.1.lock().unwrap().push(line);
            }
            answer
        }
    });
    kube::Client::new(service, ns)
}

impl Controllers {
    pub async fn start(cp: &ControlPlane) -> Controllers {
        Self::start_with(cp, Default::default()).await
    }

    /// [`Controllers::start`] with other intervals (`polling`).
    pub async fn start_with(
        cp: &ControlPlane,
        polling: vsphere_provider::plan::machine::waiting::Polling,
    ) -> Controllers {
        Self::start_as(cp, polling, false).await
    }

    /// [`Controllers::start`] as `vsphere-provider run` starts them: after the startup check
    /// (`controllers::startup::check`), its requests counted in [`Controllers::requests`] too.
    pub async fn start_checked(cp: &ControlPlane) -> Controllers {
        Self::start_as(cp, Default::default(), true).await
    }

    /// [`Controllers::start`] as `identity` (e.g. [`capi_only_identity`]'s).
    pub async fn start_as_identity(cp: &ControlPlane, identity: &Identity) -> Controllers {
        Self::start_full(cp, identity, Default::default(), false).await
    }

    async fn start_as(
        cp: &ControlPlane,
        polling: vsphere_provider::plan::machine::waiting::Polling,
        checked: bool,
    ) -> Controllers {
        Self::start_full(cp, &Identity::Controller, polling, checked).await
    }

    async fn start_full(
        cp: &ControlPlane,
        identity: &Identity,
        polling: vsphere_provider::plan::machine::waiting::Polling,
        checked: bool,
    ) -> Controllers {
        let stats = Stats::default();
        let metrics_stats = stats.clone();
        let requests = Requests::default();
        let metrics = Metrics::new(stats.clone());
        let shared = Shared {
            client: logging(cp.client(identity).await, requests.clone()),
            server: cp.server.clone(),
            sessions: SessionCache::new(stats.clone(), ClientOptions::default()),
            views: Arc::new(ServerViews::new(Duration::from_secs(30))),
            manager: None,
            trust: Default::default(),
            metrics: metrics.clone(),
            reporter: "vsphere-provider".into(),
            converts: false,
            polling,
            health: Health::new(false),
            namespace: SA_NAMESPACE.into(),
            default_zone_selector: None,
        };
        if checked {
            controllers::startup::check(&shared.client, &shared.server)
                .await
                .expect("the startup check passes");
        }
        let (trigger, signal) = shutdown::channel();
        let task = tokio::spawn(async move { controllers::run_controllers(&shared, signal).await });
        Controllers {
            stats: metrics_stats,
            requests,
            metrics,
            trigger: Some(trigger),
            task: Some(task),
        }
    }

    pub async fn stop(mut self) {
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
pub async fn wait_until(
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

/// The VSphereCluster as JSON (all of it, whatever the types know), at v1beta2 (the type's
/// version).
pub async fn get(api: &Api<VSphereCluster>, name: &str) -> Option<Value> {
    api.get_opt(name)
        .await
        .unwrap()
        .map(|c| serde_json::to_value(c).unwrap())
}

/// Whether `c` was read at v1beta1 (its `apiVersion`).
fn read_at_v1beta1(c: &Value) -> bool {
    c["apiVersion"]
        .as_str()
        .is_some_and(|v| v.ends_with("/v1beta1"))
}

/// `(status, reason, message)` of a v1beta2 (metav1) condition, wherever the version `c` was
/// read at keeps it (v1beta2: `status.conditions`; v1beta1: `status.v1beta2.conditions`).
pub fn v1beta2(c: &Value, t: &str) -> Option<(String, String, String)> {
    let list = if read_at_v1beta1(c) {
        &c["status"]["v1beta2"]["conditions"]
    } else {
        &c["status"]["conditions"]
    };
    let found = list.as_array()?.iter().find(|x| x["type"] == t)?.clone();
    let s = |k: &str| found[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason"), s("message")))
}

/// `(status, reason)` of a v1beta1 condition, wherever the version `c` was read at keeps it
/// (v1beta1: `status.conditions`; v1beta2: `status.deprecated.v1beta1.conditions`).
pub fn v1beta1(c: &Value, t: &str) -> Option<(String, String)> {
    let list = if read_at_v1beta1(c) {
        &c["status"]["conditions"]
    } else {
        &c["status"]["deprecated"]["v1beta1"]["conditions"]
    };
    let found = list.as_array()?.iter().find(|x| x["type"] == t)?.clone();
    let s = |k: &str| found[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason")))
}

pub fn finalizers(c: &Value) -> Vec<String> {
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
pub fn create_cluster(cp: &ControlPlane, ns: &str, name: &str, paused: bool) -> String {
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
pub fn vsphere_cluster(
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
pub async fn owned_cluster(
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

/// The ground a machine test starts from: a zone (applied with `more`: the bootstrap Secret,
/// templates) and the Cluster `c1` owning a VSphereCluster that publishes it and uses the
/// credentials Secret, once that VSphereCluster is ready. Returns the zone's name.
pub async fn ready_cluster(cp: &ControlPlane, ns: &str, sim: &Vcsim, more: Vec<Value>) -> String {
    let zone = apply_zone(cp, ns, sim, more);
    let api = owned_cluster(
        cp,
        ns,
        sim,
        json!({"kind": "Secret", "name": "vsphere-credentials"}),
        true,
        false,
    )
    .await;
    wait_until(&api, "c1 provisioned", Duration::from_secs(60), |c| {
        c["status"]["initialization"]["provisioned"] == true
    })
    .await;
    zone
}

/// The bootstrap data Secret `m1-bootstrap` (cloud-config `value`), as a bootstrap provider
/// writes it.
pub fn bootstrap_secret_m1(ns: &str, value: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "m1-bootstrap", "namespace": ns},
        "stringData": {"value": value, "format": "cloud-config"}
    })
}

/// Delete the VSphereMachine `m1` as CAPI does with its Machine, and wait until it is gone
/// (its VM destroyed and both finalizers released).
pub async fn delete_vsphere_machine_m1(cp: &ControlPlane, ns: &str) {
    cp.kubectl(
        ADMIN,
        &["delete", "vspheremachine", "m1", "-n", ns, "--wait=false"],
    )
    .ok();
    eventually(
        "the VSphereMachine gone",
        Duration::from_secs(90),
        || async { Some(get_json(cp, "vspheremachine", ns, "m1")) },
        Option::is_none,
    )
    .await;
}

pub fn credentials_secret(ns: &str, name: &str, sim: &Vcsim) -> Value {
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
pub fn apply_zone(cp: &ControlPlane, ns: &str, sim: &Vcsim, more: Vec<Value>) -> String {
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

/// Poll `get` every 250 ms until it yields a value `holds` accepts, for up to `limit`.
pub async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    limit: Duration,
    get: impl Fn() -> F,
    holds: impl Fn(&T) -> bool,
) -> T {
    eventually_or(String::new, what, limit, get, holds).await
}

/// [`eventually`], saying what `context` shows when it times out.
pub async fn eventually_or<T, F: std::future::Future<Output = Option<T>>>(
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
pub fn get_json(cp: &ControlPlane, kind: &str, ns: &str, name: &str) -> Option<Value> {
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

/// What CAPI's cluster and machine controllers would write for machine `m1` of Cluster `c1` in
/// `zone` (stand-ins; each user's module documentation says so): the Cluster's infrastructure
/// provisioned, the Machine `m1` (bootstrap Secret `m1-bootstrap`), and the VSphereMachine `m1`
/// (v1beta1, `spec` as given) owned by it.
pub fn capi_machine_m1(cp: &ControlPlane, ns: &str, zone: &str, spec: Value) {
    capi_machine_m1_with(cp, ns, zone, spec, Some("m1-bootstrap"));
}

/// [`capi_machine_m1`], the Machine's bootstrap data `data_secret` (`None`: not produced yet,
/// the Machine naming only its bootstrap config, as CAPI's machine controller makes it).
pub fn capi_machine_m1_with(
    cp: &ControlPlane,
    ns: &str,
    zone: &str,
    spec: Value,
    data_secret: Option<&str>,
) {
    let bootstrap = match data_secret {
        Some(name) => json!({"dataSecretName": name}),
        None => json!({"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
            "kind": "KubeadmConfig", "name": "m1"}}),
    };
    cp.kubectl(
        ADMIN,
        &[
            "patch",
            "cluster.cluster.x-k8s.io",
            "c1",
            "-n",
            ns,
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
                "bootstrap": bootstrap,
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "VSphereMachine", "name": "m1"}
            }
        })
        .to_string(),
        None,
    )
    .ok();
    let machine_uid =
        get_json(cp, "machine.cluster.x-k8s.io", ns, "m1").unwrap()["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string();
    cp.apply_text(
        ADMIN,
        &json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachine",
            "metadata": {"name": "m1", "namespace": ns,
                "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                    "name": "m1", "uid": machine_uid, "controller": true}]},
            "spec": spec
        })
        .to_string(),
        None,
    )
    .ok();
}

/// m1's guest reports `ip` (set in vcsim, as VMware Tools would report it): the VSphereMachine
/// `m1` as read at v1beta1 once it is ready.
#[allow(dead_code)]
pub async fn m1_ready_with_ip(
    cp: &ControlPlane,
    ns: &str,
    readback: &super::process::Readback,
    moref: &str,
    ip: &str,
) -> Value {
    readback.set_guest_ip(moref, ip).await;
    eventually(
        "the VSphereMachine ready",
        Duration::from_secs(90),
        || async { get_json(cp, "vspheremachine", ns, "m1") },
        |v| v["status"]["ready"] == true,
    )
    .await
}

/// The ServiceAccount of a Cluster API-only install: `capi-only` in the manager's namespace,
/// bound by `config/rbac` with the `config/capi-only` component as `kubectl kustomize` renders
/// them (roles and bindings renamed `<name>-capi-only`, so they sit beside the harness's own),
/// and by a RoleBinding of its Secret ClusterRole in each of `namespaces` (what an admin binds
/// per tenant namespace). Waits until the server's authorizer has the grants.
pub fn capi_only_identity(cp: &ControlPlane, namespaces: &[&str]) -> Identity {
    const SA: &str = "capi-only";
    let target = realapi::repo().join("target");
    std::fs::create_dir_all(&target).unwrap();
    let dir = tempfile::Builder::new()
        .prefix(".realapi.capi-only.")
        .tempdir_in(&target)
        .unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "resources: [../../config/rbac]\ncomponents: [../../config/capi-only]\n",
    )
    .unwrap();
    let text = cp
        .kubectl(ADMIN, &["kustomize", dir.path().to_str().unwrap()])
        .ok()
        .stdout;
    let objects: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let renamed = |v: &Value| json!(format!("{}-capi-only", v.as_str().unwrap()));
    let mut items = Vec::new();
    for mut o in objects {
        let kind = o["kind"].as_str().unwrap_or_default().to_string();
        if !kind.ends_with("Role") && !kind.ends_with("RoleBinding") {
            continue;
        }
        o["metadata"]["name"] = renamed(&o["metadata"]["name"]);
        if kind.ends_with("Binding") {
            o["roleRef"]["name"] = renamed(&o["roleRef"]["name"]);
            o["subjects"] =
                json!([{"kind": "ServiceAccount", "name": SA, "namespace": SA_NAMESPACE}]);
        }
        items.push(o);
    }
    assert!(
        !items
            .iter()
            .any(|o| o["metadata"]["name"] == "vsphere-provider-openshift-capi-only"),
        "config/capi-only leaves the OpenShift ClusterRole out"
    );
    for ns in namespaces {
        items.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "vsphere-provider-secrets-capi-only", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "vsphere-provider-secrets-capi-only"},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": SA_NAMESPACE}]
        }));
    }
    cp.apply_text(
        ADMIN,
        &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
        None,
    )
    .ok();
    let kubeconfig = cp.service_account_kubeconfig(SA_NAMESPACE, SA).unwrap();
    let user = format!("system:serviceaccount:{SA_NAMESPACE}:{SA}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut checks = vec![(
        "list".to_string(),
        "vsphereclusters.infrastructure.cluster.x-k8s.io".to_string(),
        None,
    )];
    checks.extend(namespaces.iter().map(|ns| {
        (
            "get".to_string(),
            "secrets".to_string(),
            Some(ns.to_string()),
        )
    }));
    for (verb, resource, ns) in checks {
        loop {
            let mut args = vec!["auth", "can-i", &verb, &resource, "--as", &user];
            if let Some(ns) = &ns {
                args.extend(["-n", ns]);
            }
            if cp.kubectl(ADMIN, &args).stdout.trim() == "yes" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{user} never allowed {verb} {resource}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Identity::Kubeconfig(kubeconfig)
}
