//! `vsphere-provider run` (the built binary) against a real API server and vcsim, as the
//! controller's ServiceAccount bound by config/rbac, serving its admission webhooks to the
//! server over TLS. The server is Kubernetes' own kube-apiserver v1.37.2 with etcd v3.7.0, built
//! from source (hack/kube/, harness in tests/support/realapi.rs); there is no
//! kube-controller-manager (no garbage collection, no namespace deletion), which nothing here
//! needs.
//!
//! One test, in order, as an operator would:
//! 1. the manager starts with a serving certificate signed by the harness's CA, holding the
//!    leader Lease;
//! 2. config/webhook goes in through a kustomize overlay that turns each `clientConfig.service`
//!    into `url: https://127.0.0.1:PORT/<path>` with that CA as `caBundle` (and drops
//!    cert-manager's Issuer and Certificate, which this cluster has no CRDs for);
//! 3. the server calls the webhooks: a failure domain the CRD accepts but our validating webhook
//!    does not is refused with the webhook's message (also as v1beta2, sent to the v1beta1
//!    endpoint by `matchPolicy: Equivalent`), and a zone without `controlPlane` is stored with
//!    the mutating webhook's default;
//! 4. config/samples-style failure domains, zones, credentials Secret and VSphereCluster on the
//!    vcsim topology of the samples: every zone becomes ready, owns its failure domain, and the
//!    VSphereCluster publishes them;
//! 5. deleting the zones, the manager releases them and deletes their failure domains (no
//!    garbage collector here: it does so itself);
//! 6. the manager logged no refusal by the API server, and stops with 0 on SIGTERM.
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/samples.rs"]
mod samples;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use process::Manager;
use realapi::{ControlPlane, Identity, SA_NAMESPACE, control_plane, repo};
use serde_json::{Value, json};
use vcsim::Vcsim;
use vsphere_provider::api::{VSphereCluster, VSphereDeploymentZone, VSphereFailureDomain};

const ADMIN: &Identity = &Identity::Admin;

/// `vsphere-provider run ARGS` as the controller's ServiceAccount, pod `manager-0`.
fn spawn_manager(cp: &ControlPlane, home: &Path, args: &[&str]) -> Manager {
    Manager::spawn("manager-0", &cp.controller_kubeconfig, home, args)
}

/// How long a log line may take to come.
const LINE_WAIT: Duration = Duration::from_secs(30);

/// `vsphere-provider run` as the ServiceAccount, electing a leader, serving its webhooks over
/// TLS with a certificate the harness's CA signed (so that CA is their `caBundle`); and the
/// webhook server's `host:port`.
fn webhook_manager(cp: &ControlPlane, work: &Path, ns: &str) -> (Manager, String) {
    let certs = work.join("certs");
    let (crt, key) = cp.issue_certificate(
        &certs,
        &format!("webhook-{ns}"),
        &["IP:127.0.0.1", "DNS:localhost"],
    );
    std::fs::rename(crt, certs.join("tls.crt")).unwrap();
    std::fs::rename(key, certs.join("tls.key")).unwrap();
    let mut manager = spawn_manager(
        cp,
        work,
        &[
            "--metrics-addr",
            "127.0.0.1:0",
            "--webhook-addr",
            "127.0.0.1:0",
            "--webhook-cert-dir",
            certs.to_str().unwrap(),
            "--leader-elect",
            "--namespace",
            SA_NAMESPACE,
        ],
    );
    let line = manager.wait_line("admission webhooks listening", LINE_WAIT);
    let webhook_addr = Manager::field(&line, "addr").expect("the webhook address");
    (manager, webhook_addr)
}

/// `path` relative to `from` (both absolute): kustomize takes a base outside the overlay only
/// by a relative path.
fn relative(from: &Path, path: &Path) -> PathBuf {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = path.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for c in &to[common..] {
        out.push(c);
    }
    out
}

/// A kustomize overlay of config/webhook for a webhook server on `addr` whose certificate `ca`
/// signed: every `clientConfig.service` becomes `url` + `caBundle`; cert-manager's Issuer and
/// Certificate are dropped. The JSON 6902 patches are made from config/webhook/manifests.yaml,
/// so every webhook registered there is pointed at the server.
fn webhook_overlay(dir: &Path, addr: &str, ca: &Path) -> PathBuf {
    let overlay = dir.join("webhook-overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(std::fs::read(ca).unwrap());
    let text = std::fs::read_to_string(repo().join("config/webhook/manifests.yaml")).unwrap();
    let configs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let mut patches = Vec::new();
    let mut registered = 0;
    for config in configs.iter().filter(|c| !c.is_null()) {
        let mut ops = Vec::new();
        for (i, w) in config["webhooks"].as_array().unwrap().iter().enumerate() {
            let path = w["clientConfig"]["service"]["path"].as_str().unwrap();
            ops.push(
                json!({"op": "remove", "path": format!("/webhooks/{i}/clientConfig/service")}),
            );
            ops.push(
                json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/url"),
                            "value": format!("https://{addr}{path}")}),
            );
            ops.push(
                json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"),
                            "value": ca_bundle}),
            );
            registered += 1;
        }
        patches.push(json!({
            "target": {"kind": config["kind"], "name": config["metadata"]["name"]},
            "patch": serde_json::to_string(&ops).unwrap(),
        }));
    }
    assert!(registered > 0, "config/webhook registers no webhook");
    for (kind, name) in [
        ("Issuer", "vsphere-provider-selfsigned-issuer"),
        ("Certificate", "vsphere-provider-serving-cert"),
    ] {
        patches.push(json!({
            "patch": serde_json::to_string(&json!({
                "$patch": "delete",
                "apiVersion": "cert-manager.io/v1",
                "kind": kind,
                "metadata": {"name": name, "namespace": SA_NAMESPACE},
            }))
            .unwrap()
        }));
    }
    let kustomization = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [relative(&overlay, &repo().join("config/webhook"))],
        "patches": patches,
    });
    std::fs::write(
        overlay.join("kustomization.yaml"),
        serde_json::to_string_pretty(&kustomization).unwrap(),
    )
    .unwrap();
    overlay
}

/// Polls `f` every 250 ms for up to `limit`.
async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// config/samples-style objects on a vcsim with the samples' topology: for each zone name a
/// VSphereFailureDomain and a VSphereDeploymentZone (controlPlane left unset, identityRef the
/// Secret `<ns>-zones` of the controller's namespace); and, apart, the credentials: that Secret,
/// and the credentials Secret and a VSphereCluster in `ns` selecting every zone of the server.
fn samples_style(sim: &Vcsim, ns: &str, zones: &[String]) -> (Value, Value) {
    let server = sim.url().to_string();
    let (user, password) = sim.credentials();
    let list = |items: Vec<Value>| json!({"apiVersion": "v1", "kind": "List", "items": items});
    let identity = format!("{ns}-zones");
    let mut credentials = samples::cluster(ns, &server, user, password);
    credentials.push(samples::zone_credentials(
        SA_NAMESPACE,
        &identity,
        user,
        password,
    ));
    (
        list(samples::zones(&server, zones, None, &identity)),
        list(credentials),
    )
}

/// Waits until each zone is ready (conditions True, finalizer on, owning its failure domain)
/// and the VSphereCluster `ns/demo` publishes them all as control plane domains; returns how
/// long the zones took.
async fn assert_zones_ready_and_published(
    cp: &ControlPlane,
    ns: &str,
    zones: &[String],
    limit: Duration,
) -> Duration {
    let admin = cp.client(ADMIN).await;
    let zone_api: Api<VSphereDeploymentZone> = Api::all(admin.clone());
    let fd_api: Api<VSphereFailureDomain> = Api::all(admin.clone());
    let cluster_api: Api<VSphereCluster> = Api::namespaced(admin.clone(), ns);
    let started = Instant::now();
    for name in zones {
        let z = wait_for(&format!("zone {name} ready"), limit, || {
            let api = zone_api.clone();
            let name = name.clone();
            async move {
                let z = api.get(&name).await.ok()?;
                (z.status.as_ref().and_then(|s| s.ready) == Some(true)).then_some(z)
            }
        })
        .await;
        assert_eq!(
            z.spec.control_plane,
            Some(true),
            "the mutating webhook's default"
        );
        assert!(
            z.metadata
                .finalizers
                .unwrap_or_default()
                .contains(&"vspheredeploymentzone.infrastructure.cluster.x-k8s.io".to_string())
        );
        let status = serde_json::to_value(z.status.unwrap()).unwrap();
        for t in [
            "VCenterAvailable",
            "PlacementConstraintMet",
            "VSphereFailureDomainValidated",
            "Ready",
        ] {
            assert_eq!(
                condition(&status, t).as_deref(),
                Some("True"),
                "{name} {t}: {status}"
            );
        }
        let fd = fd_api.get(name).await.unwrap();
        let owners: Vec<String> = fd
            .metadata
            .owner_references
            .unwrap_or_default()
            .iter()
            .map(|o| format!("{}/{}", o.kind, o.name))
            .collect();
        assert_eq!(owners, [format!("VSphereDeploymentZone/{name}")]);
    }
    let ready_after = started.elapsed();
    let published = wait_for("the cluster's failure domains", limit, || {
        let api = cluster_api.clone();
        let want = zones.len();
        async move {
            let c = api.get("demo").await.ok()?;
            let fds = c.status.as_ref()?.failure_domains.clone()?;
            (fds.len() == want).then_some(fds)
        }
    })
    .await;
    let names: Vec<String> = published.iter().map(|f| f.name.clone()).collect();
    assert_eq!(names, zones, "sorted by name");
    for f in &published {
        assert_eq!(f.control_plane, Some(true), "{f:?}");
    }
    eprintln!(
        "realapi: {} zones ready {ready_after:.2?} after they were applied; published by the \
         VSphereCluster after {:.2?}",
        zones.len(),
        started.elapsed()
    );
    ready_after
}

/// One manager at a time: they share the leader Lease, and the webhooks are cluster-wide.
static ONE_MANAGER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A v1beta1 condition of a zone read at v1beta2 (the hub keeps them for v1beta1 readers under
/// `status.deprecated.v1beta1`).
fn condition(status: &Value, type_: &str) -> Option<String> {
    status
        .pointer("/deprecated/v1beta1/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| c["status"].as_str().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_serves_webhooks_to_the_server_and_readies_zones_as_the_service_account() {
    let _one = ONE_MANAGER.lock().await;
    let cp = control_plane();
    let ns = cp.namespace("manager");
    let work = cp.dir.join(&ns);
    // The samples' vcsim topology (`-dc 1 -cluster 3 -pool 1`); fewer hosts.
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;

    // 1. The manager, as the ServiceAccount, electing a leader, with its webhooks.
    let (mut manager, webhook_addr) = webhook_manager(cp, &work, &ns);

    // 2. config/webhook through an overlay.
    let overlay = webhook_overlay(&work, &webhook_addr, &cp.ca_cert);
    /// Deletes the webhook configurations however the test ends: with `failurePolicy: Fail`
    /// they would refuse every later write of these kinds once the manager is gone.
    struct Uninstall(PathBuf);
    impl Drop for Uninstall {
        fn drop(&mut self) {
            control_plane().kubectl(
                ADMIN,
                &[
                    "delete",
                    "--ignore-not-found",
                    "-k",
                    self.0.to_str().unwrap(),
                ],
            );
        }
    }
    let _uninstall = Uninstall(overlay.clone());
    let applied = cp.apply(ADMIN, overlay.to_str().unwrap(), None).ok();
    assert!(
        applied
            .stdout
            .contains("validatingwebhookconfiguration.admissionregistration.k8s.io/vsphere-provider-validating-webhook-configuration created"),
        "{}",
        applied.stdout
    );
    for (kind, name, prefix) in [
        (
            "mutatingwebhookconfiguration",
            "vsphere-provider-mutating-webhook-configuration",
            "mutate",
        ),
        (
            "validatingwebhookconfiguration",
            "vsphere-provider-validating-webhook-configuration",
            "validate",
        ),
    ] {
        let stored = cp
            .kubectl(ADMIN, &["get", kind, name, "-o", "json"])
            .ok()
            .json();
        for w in stored["webhooks"].as_array().unwrap() {
            let url = w["clientConfig"]["url"].as_str().unwrap();
            assert!(
                url.starts_with(&format!("https://{webhook_addr}/{prefix}-")),
                "{url}"
            );
            assert!(w["clientConfig"].get("service").is_none(), "{w}");
        }
    }

    // 3. The server calls them. A HostGroup region passes the CRD and not our webhook; the
    // configuration takes a moment to reach the server's admission chain.
    let fd = |name: &str, version: &str, region_type: &str| {
        json!({
            "apiVersion": format!("infrastructure.cluster.x-k8s.io/{version}"),
            "kind": "VSphereFailureDomain",
            "metadata": {"name": name},
            "spec": {
                "region": {"name": "region-a", "type": region_type, "tagCategory": "k8s-region"},
                "zone": {"name": "zone-x", "type": "ComputeCluster", "tagCategory": "k8s-zone"},
                "topology": {"datacenter": "DC0", "computeCluster": "DC0_C0"}
            }
        })
        .to_string()
    };
    let denial = "admission webhook \"vvspherefailuredomain.infrastructure.cluster.x-k8s.io\" \
                  denied the request";
    let why = "spec.region.type: Forbidden: region's Failure Domain type cannot be HostGroup";
    let refused = wait_for("the validating webhook", Duration::from_secs(30), || {
        let out = cp.kubectl_stdin(
            ADMIN,
            &["apply", "-f", "-"],
            Some(&fd(&format!("{ns}-hostgroup"), "v1beta1", "HostGroup")),
        );
        async move { (!out.success && out.stderr.contains(denial)).then_some(out.stderr) }
    })
    .await;
    assert!(refused.contains(why), "{refused}");
    // v1beta2 goes to the v1beta1 endpoint (matchPolicy: Equivalent).
    let refused = cp
        .kubectl_stdin(
            ADMIN,
            &["apply", "-f", "-"],
            Some(&fd(
                &format!("{ns}-hostgroup-v1beta2"),
                "v1beta2",
                "HostGroup",
            )),
        )
        .err();
    assert!(
        refused.contains(denial) && refused.contains(why),
        "{refused}"
    );
    // The mutating webhooks default what the CRD leaves unset.
    let probe = format!("{ns}-probe");
    cp.kubectl_stdin(
        ADMIN,
        &["apply", "-f", "-"],
        Some(&fd(&probe, "v1beta1", "Datacenter")),
    )
    .ok();
    // Read as v1beta1: kubectl's default for the group is v1beta2, whose schema has no
    // autoConfigure (see realapi_crds.rs on the versions).
    let stored_fd = cp
        .kubectl(
            ADMIN,
            &[
                "get",
                "vspherefailuredomains.v1beta1.infrastructure.cluster.x-k8s.io",
                &probe,
                "-o",
                "json",
            ],
        )
        .ok()
        .json();
    assert_eq!(
        stored_fd["spec"]["region"]["autoConfigure"], false,
        "{stored_fd}"
    );
    // An update is checked against the old object: the spec is immutable.
    let changed = fd(&probe, "v1beta1", "Datacenter").replace("DC0_C0", "DC0_C1");
    let refused = cp
        .kubectl_stdin(ADMIN, &["apply", "-f", "-"], Some(&changed))
        .err();
    assert!(
        refused.contains("spec: Forbidden: VSphereFailureDomainSpec is immutable"),
        "{refused}"
    );

    // customVMXKeys of a refused class are refused by the machine webhooks, naming the key
    // (docs/vmx-keys.md); a benign key alone passes.
    let vmx_template = |name: &str, keys: Value| {
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereMachineTemplate",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"template": {"spec": {"template": "t", "customVMXKeys": keys}}}
        })
        .to_string()
    };
    let refused = cp
        .kubectl_stdin(
            ADMIN,
            &["apply", "-f", "-"],
            Some(&vmx_template(
                "vmx-refused",
                json!({"disk.EnableUUID": "TRUE", "Isolation.Tools.Copy.Disable": "FALSE"}),
            )),
        )
        .err();
    assert!(
        refused.contains(
            "spec.template.spec.customVMXKeys[Isolation.Tools.Copy.Disable]: Forbidden: this key may not be set"
        ),
        "{refused}"
    );
    cp.kubectl_stdin(
        ADMIN,
        &["apply", "-f", "-"],
        Some(&vmx_template(
            "vmx-benign",
            json!({"disk.EnableUUID": "TRUE"}),
        )),
    )
    .ok();

    // 4. config/samples-style objects on this vcsim, the credentials and the VSphereCluster
    // first (a zone reconciled before them waits for its retry: see the ignored test below).
    let zones: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|z| format!("{ns}-zone-{z}"))
        .collect();
    let (domains, cluster) = samples_style(&sim, &ns, &zones);
    cp.apply_text(ADMIN, &cluster.to_string(), None).ok();
    cp.apply_text(ADMIN, &domains.to_string(), None).ok();
    assert_zones_ready_and_published(cp, &ns, &zones, Duration::from_secs(30)).await;
    let admin = cp.client(ADMIN).await;
    let leases: Api<Lease> = Api::namespaced(admin.clone(), SA_NAMESPACE);
    let lease = leases.get("vsphere-provider-leader").await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("manager-0")
    );

    // 5. Deleting the zones: the manager releases its finalizer and deletes each failure
    // domain with its last zone itself (as CAPV does; this server has no garbage collector to
    // act on the owner references).
    let mut args = vec![
        "delete",
        "vspheredeploymentzones",
        "--wait=true",
        "--timeout=60s",
    ];
    args.extend(zones.iter().map(String::as_str));
    cp.kubectl(ADMIN, &args).ok();
    let fd_api: Api<VSphereFailureDomain> = Api::all(admin.clone());
    for name in &zones {
        wait_for(
            &format!("failure domain {name} deleted"),
            Duration::from_secs(30),
            || {
                let api = fd_api.clone();
                let name = name.clone();
                async move { api.get_opt(&name).await.unwrap().is_none().then_some(()) }
            },
        )
        .await;
    }
    cp.kubectl(ADMIN, &["delete", "vspherecluster", "demo", "-n", &ns])
        .ok();

    // 6. Nothing the manager did was refused, and it stops cleanly.
    let code = manager.terminate();
    let log = manager.log();
    if std::env::var_os("REALAPI_SHOW_LOG").is_some() {
        eprintln!("{log}");
    }
    assert_eq!(code, Some(0), "{log}");
    for refusal in ["forbidden", "Forbidden", " 403"] {
        assert!(
            !log.contains(refusal),
            "the manager was refused something ({refusal}):\n{log}"
        );
    }
}

/// Zones applied before the VSphereCluster holding their credentials (as `kubectl apply -k
/// config/samples` may order them: the zones' file comes first): each zone's first reconcile
/// fails with "no credentials … failed until something changes" and a 60 s retry, and the
/// VSphereCluster (or its Secret) arriving did not wake it, so the zones became ready a minute
/// later instead of at once. A VSphereCluster change now wakes its server's zones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zones_applied_before_their_credentials_are_ready_once_the_credentials_come() {
    let _one = ONE_MANAGER.lock().await;
    let cp = control_plane();
    let ns = cp.namespace("late-credentials");
    let work = cp.dir.join(&ns);
    std::fs::create_dir_all(&work).unwrap();
    // On 127.0.0.2, apart from the other tests' simulators on 127.0.0.1 (servers with different
    // explicit ports are different servers since src/vcenter/model/endpoint.rs `same_server`
    // compares ports too; the separate address keeps this test independent of that rule).
    let sim = Vcsim::builder()
        .clusters(3)
        .hosts(1)
        .pools(1)
        .arg("-l")
        .arg("127.0.0.2:0")
        .start()
        .await;
    let mut manager = spawn_manager(
        cp,
        &work,
        &[
            "--metrics-addr",
            "127.0.0.1:0",
            "--webhook-cert-dir",
            work.to_str().unwrap(),
            "--leader-elect",
            "--namespace",
            SA_NAMESPACE,
        ],
    );
    manager.wait_line("controllers started", LINE_WAIT);
    let zones: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|z| format!("{ns}-zone-{z}"))
        .collect();
    let (mut domains, cluster) = samples_style(&sim, &ns, &zones);
    // No webhooks here: set what the mutating webhook would.
    for item in domains["items"].as_array_mut().unwrap() {
        if item["kind"] == "VSphereDeploymentZone" {
            item["spec"]["controlPlane"] = json!(true);
        }
    }
    cp.apply_text(ADMIN, &domains.to_string(), None).ok();
    manager.wait_line(
        &format!("spec.identityRef: Secret {SA_NAMESPACE}/{ns}-zones not found"),
        LINE_WAIT,
    );
    cp.apply_text(ADMIN, &cluster.to_string(), None).ok();
    assert_zones_ready_and_published(cp, &ns, &zones, Duration::from_secs(30)).await;
    assert_eq!(manager.terminate(), Some(0), "{}", manager.log());
}

/// The CRDs of every infrastructure kind get config/crd/patches' conversion stanza with the
/// Service replaced by the manager's URL and the harness CA as `caBundle` (what cert-manager's
/// CA injection and the Service do in a cluster); dropping the guard points them back at the
/// harness's webhook however the test ends.
struct ConversionWebhook(Vec<String>);

impl ConversionWebhook {
    fn wire(cp: &ControlPlane, webhook_addr: &str) -> Self {
        let ca_bundle =
            base64::engine::general_purpose::STANDARD.encode(std::fs::read(&cp.ca_cert).unwrap());
        let mut wired = ConversionWebhook(Vec::new());
        let mut patches: Vec<PathBuf> = std::fs::read_dir(repo().join("config/crd/patches"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("webhook_in_"))
            .collect();
        patches.sort();
        assert_eq!(patches.len(), 8, "one per infrastructure kind");
        for file in patches {
            let patch: Value =
                serde_saphyr::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
            let mut conversion = patch["spec"]["conversion"].clone();
            let path = conversion["webhook"]["clientConfig"]["service"]["path"]
                .as_str()
                .unwrap()
                .to_string();
            conversion["webhook"]["clientConfig"] =
                json!({"url": format!("https://{webhook_addr}{path}"), "caBundle": ca_bundle});
            let name = patch["metadata"]["name"].as_str().unwrap().to_string();
            wired.0.push(name.clone());
            cp.kubectl(
                ADMIN,
                &[
                    "patch",
                    "crd",
                    &name,
                    "--type=merge",
                    "-p",
                    &json!({"spec": {"conversion": conversion}}).to_string(),
                ],
            )
            .ok();
        }
        wired
    }
}

impl Drop for ConversionWebhook {
    fn drop(&mut self) {
        // Back to the harness's own webhook: the CRDs store v1beta2, so every later v1beta1
        // request needs one.
        let cp = control_plane();
        if let Err(e) = cp.conversion_to(cp.conversion_port) {
            eprintln!(
                "realapi_controller: restoring the conversion webhook of {:?}: {e}",
                self.0
            );
        }
    }
}

fn v1beta1(plural: &str) -> String {
    format!("{plural}.v1beta1.infrastructure.cluster.x-k8s.io")
}

/// config/crd's conversion webhook, served by the manager, keeps every field through kubectl's
/// default version (v1beta2, the newest served). Without it, a `kubectl get` + `kubectl
/// replace` through v1beta2 lost what v1beta2 has no place for. A failure domain's
/// `autoConfigure` is a v1beta2 field here (CAPV dropped it); a VSphereMachine's `failureDomain`
/// and the exact text of its soft power-off timeout are not, and come back from the
/// `cluster.x-k8s.io/conversion-data` annotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectls_default_version_keeps_every_field_through_the_conversion_webhook() {
    let _one = ONE_MANAGER.lock().await;
    let cp = control_plane();
    let ns = cp.namespace("convert");
    let work = cp.dir.join(&ns);
    let (mut manager, webhook_addr) = webhook_manager(cp, &work, &ns);
    let wired = ConversionWebhook::wire(cp, &webhook_addr);

    let fd_name = format!("{ns}-fd");
    let fd = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereFailureDomain",
        "metadata": {"name": fd_name},
        "spec": {
            "region": {"name": "r", "type": "Datacenter", "tagCategory": "k8s-region", "autoConfigure": true},
            "zone": {"name": "z", "type": "ComputeCluster", "tagCategory": "k8s-zone", "autoConfigure": true},
            "topology": {"datacenter": "DC0", "computeCluster": "DC0_C0"}
        }
    });
    cp.kubectl_stdin(ADMIN, &["create", "-f", "-"], Some(&fd.to_string()))
        .ok();
    // A VSphereMachine written as v1beta1 with what v1beta2 lacks; read the way kubectl reads
    // by default — the CRD update takes a moment to reach the server's handlers.
    let machine = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereMachine",
        "metadata": {"name": "m", "namespace": ns},
        "spec": {"template": "ubuntu", "failureDomain": "zone-a", "powerOffMode": "trySoft",
                 "guestSoftPowerOffTimeout": "5m", "namingStrategy": {"template": "{{ .machine.name }}"}}
    });
    cp.kubectl_stdin(ADMIN, &["create", "-f", "-"], Some(&machine.to_string()))
        .ok();
    let as_v1beta2 = wait_for(
        "a v1beta2 read through the webhook",
        Duration::from_secs(30),
        || {
            let out = cp.kubectl(
                ADMIN,
                &["get", "vspheremachine", "m", "-n", &ns, "-o", "json"],
            );
            async move {
                let read: Value = serde_json::from_str(&out.stdout).ok()?;
                read["metadata"]["annotations"]
                    .get(vsphere_provider::api::conversion::CONVERSION_DATA)
                    .is_some()
                    .then_some(read)
            }
        },
    )
    .await;
    assert_eq!(
        as_v1beta2["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta2"
    );
    assert_eq!(as_v1beta2["spec"]["guestSoftPowerOffTimeoutSeconds"], 300);
    assert_eq!(
        as_v1beta2["spec"]["naming"]["template"],
        "{{ .machine.name }}"
    );
    assert!(as_v1beta2["spec"].get("failureDomain").is_none());
    cp.kubectl_stdin(
        ADMIN,
        &["replace", "-f", "-"],
        Some(&as_v1beta2.to_string()),
    )
    .ok();
    let back = cp
        .kubectl(
            ADMIN,
            &[
                "get",
                &v1beta1("vspheremachines"),
                "m",
                "-n",
                &ns,
                "-o",
                "json",
            ],
        )
        .ok()
        .json();
    for field in [
        "failureDomain",
        "guestSoftPowerOffTimeout",
        "namingStrategy",
    ] {
        assert_eq!(
            back["spec"][field], machine["spec"][field],
            "{field}: {back}"
        );
    }
    assert!(back["metadata"].get("annotations").is_none(), "{back}");

    // autoConfigure is read and written through v1beta2 as it is.
    let read = cp
        .kubectl(
            ADMIN,
            &["get", "vspherefailuredomains", &fd_name, "-o", "json"],
        )
        .ok()
        .json();
    assert_eq!(
        read["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta2"
    );
    assert_eq!(read["spec"]["region"]["autoConfigure"], true, "{read}");
    assert!(read["metadata"].get("annotations").is_none(), "{read}");

    // Lists go through the webhook too, and the printer columns read the converted objects.
    let table = cp
        .kubectl(ADMIN, &["get", "vspherefailuredomains", &fd_name])
        .ok();
    assert!(table.stdout.contains("DC0_C0"), "{}", table.stdout);

    cp.kubectl(ADMIN, &["delete", "vspheremachine", "m", "-n", &ns])
        .ok();
    cp.kubectl(
        ADMIN,
        &[
            "delete",
            "vspherefailuredomain",
            &fd_name,
            "--ignore-not-found",
        ],
    )
    .ok();
    drop(wired);
    assert_eq!(manager.terminate(), Some(0), "{}", manager.log());
}

/// CAPV v1.17's cluster template (v1beta2 throughout) as clusterctl would render it: its
/// VSphereCluster and VSphereMachineTemplates are created unchanged in v1beta2, stored as
/// v1beta1, and read back in both versions with every field there and nothing kept aside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capv_v1_17_v1beta2_objects_are_stored_and_read_back_in_both_versions() {
    let _one = ONE_MANAGER.lock().await;
    let cp = control_plane();
    let ns = cp.namespace("capv117");
    let work = cp.dir.join(&ns);
    let (mut manager, webhook_addr) = webhook_manager(cp, &work, &ns);
    let wired = ConversionWebhook::wire(cp, &webhook_addr);

    // clusterctl's substitution: defaults where the template gives one, else a value.
    let text =
        std::fs::read_to_string(repo().join("tests/fixtures/capv/v1.17/cluster-template.yaml"))
            .unwrap();
    let text = regex::Regex::new(r"\$\{([A-Z0-9_]+)(:=([^}]*))?\}")
        .unwrap()
        .replace_all(&text, |c: &regex::Captures| match (&c[1], c.get(3)) {
            (_, Some(default)) => default.as_str().to_string(),
            ("NAMESPACE", _) => ns.clone(),
            ("CLUSTER_NAME", _) => "capv117".to_string(),
            ("CONTROL_PLANE_ENDPOINT_IP", _) => "10.0.0.10".to_string(),
            ("VSPHERE_TLS_THUMBPRINT", _) => "AA:BB".to_string(),
            (var, _) => var.to_ascii_lowercase().replace('_', "-"),
        })
        .into_owned();
    // The CRD updates take a moment to reach the server's handlers: a v1beta1 object with a
    // field v1beta2 lacks shows when reads go through the webhook.
    let probe = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereMachine", "metadata": {"name": "probe", "namespace": ns},
        "spec": {"template": "t", "failureDomain": "zone-a"}});
    cp.kubectl_stdin(ADMIN, &["create", "-f", "-"], Some(&probe.to_string()))
        .ok();
    wait_for("reads through the webhook", Duration::from_secs(30), || {
        let out = cp.kubectl(
            ADMIN,
            &["get", "vspheremachine", "probe", "-n", &ns, "-o", "json"],
        );
        async move {
            let read: Value = serde_json::from_str(&out.stdout).ok()?;
            read["metadata"]["annotations"]
                .get(vsphere_provider::api::conversion::CONVERSION_DATA)
                .map(|_| ())
        }
    })
    .await;

    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let objects: Vec<Value> = docs
        .into_iter()
        .filter(|d| {
            d["apiVersion"] == "infrastructure.cluster.x-k8s.io/v1beta2"
                && (d["kind"] == "VSphereCluster" || d["kind"] == "VSphereMachineTemplate")
        })
        .collect();
    assert_eq!(objects.len(), 3, "the cluster and two machine templates");

    /// Every field `want` has is in `got`, equal (the server adds metadata and defaults).
    fn contains(got: &Value, want: &Value) -> bool {
        match (got, want) {
            (Value::Object(g), Value::Object(w)) => w
                .iter()
                .all(|(k, v)| g.get(k).is_some_and(|gv| contains(gv, v))),
            _ => got == want,
        }
    }
    let plural = |kind: &Value| format!("{}s", kind.as_str().unwrap().to_ascii_lowercase());
    for object in &objects {
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        cp.kubectl_stdin(ADMIN, &["create", "-f", "-"], Some(&object.to_string()))
            .ok();
        // The default version (v1beta2), then the storage version: the specs of these two
        // kinds are the same JSON in both.
        let resource = plural(&object["kind"]);
        for (resource, version) in [
            (resource.clone(), "v1beta2"),
            (v1beta1(&resource), "v1beta1"),
        ] {
            let read = cp
                .kubectl(ADMIN, &["get", &resource, &name, "-n", &ns, "-o", "json"])
                .ok()
                .json();
            assert_eq!(
                read["apiVersion"],
                format!("infrastructure.cluster.x-k8s.io/{version}")
            );
            assert!(contains(&read["spec"], &object["spec"]), "{object}\n{read}");
            assert!(read["metadata"].get("annotations").is_none(), "{read}");
        }
    }
    drop(wired);
    assert_eq!(manager.terminate(), Some(0), "{}", manager.log());
}
