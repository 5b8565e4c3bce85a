//! `clusterctl init` of Cluster API's own release (v1.10.10, built from the Go module by
//! hack/capi/build.sh) installs CAPI core, the kubeadm bootstrap and control-plane providers and
//! this provider, offline, from the local repository hack/capi/repository.sh writes (CAPI's
//! components from the module's config/, ours from hack/release.sh), on the real kube-apiserver
//! of tests/support/realapi.rs.
//!
//! Gated on `CAPI_BIN_DIR` (hack/test.sh sets it from hack/capi/build.sh): without it the test
//! says so and returns, since the CAPI build is a separate cold build of several minutes.
//!
//! Where this stops, and what stands in for what:
//! * cert-manager: the repository holds cert-manager's CRDs only (hack/capi/repository.sh says
//!   why); clusterctl's own readiness check (create a test Issuer and Certificate) passes on them,
//!   but nothing issues certificates.
//! * There is no kubelet, so no Deployment ever runs a pod (asserted: none is available). As the
//!   issue's end-to-end plan says, the manager then runs as a process with the identity the
//!   Deployment would have: the ServiceAccount clusterctl installed and the credentials Secret's
//!   values as its environment. (The harness applied config/rbac before clusterctl did; clusterctl
//!   re-applied it from the components, which is checked by its labels.)
//! * CAPI's core manager then runs as a process too (as the admin: its ClusterRole is an
//!   aggregated one, and without kube-controller-manager nothing aggregates it), with its
//!   admission webhooks moved to `https://127.0.0.1:PORT` and the harness's CA, as envtest does:
//!   its validating webhook refuses a Cluster topology while ClusterTopology is off, and its
//!   Cluster controller adds its finalizer and marks a Cluster without infrastructureRef ready.
//!   Clusters with our VSphereCluster need the contract label on our CRDs, which is another
//!   change's; the end-to-end flow builds on this.
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/samples.rs"]
mod samples;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use realapi::{ControlPlane, Identity, SA_NAME, SA_NAMESPACE, control_plane, kubectl_bin, repo};
use serde_json::{Value, json};
use vcsim::Vcsim;

const ADMIN: &Identity = &Identity::Admin;
const IMAGE: &str = "localhost/vsphere-provider:e2e";

fn capi_bin_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("CAPI_BIN_DIR").filter(|v| !v.is_empty())?);
    assert!(
        dir.join("clusterctl").is_file(),
        "CAPI_BIN_DIR={} holds no clusterctl; run hack/capi/build.sh",
        dir.display()
    );
    Some(dir)
}

fn clusterctl(
    capi: &Path,
    cp: &ControlPlane,
    home: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut cmd = Command::new(capi.join("clusterctl"));
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(&cp.admin_kubeconfig)
        // No network: never ask GitHub for a newer clusterctl; state and overrides under `home`.
        .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("VSPHERE_USERNAME")
        .env_remove("VSPHERE_PASSWORD")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("running clusterctl")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn get(cp: &ControlPlane, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "json"]);
    cp.kubectl(ADMIN, &all).ok().json()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The HTTP status line of a plain GET on loopback (the managers' health endpoints).
fn http_status(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.lines().next().map(str::to_string)
}

/// Points every webhook of a (Validating|Mutating)WebhookConfiguration at `https://127.0.0.1:port`
/// (same path) with the harness's CA: no Service can reach a process on loopback.
fn webhooks_to_loopback(cp: &ControlPlane, kind: &str, name: &str, port: u16) {
    let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&cp.ca_cert).unwrap());
    let config = get(cp, &[kind, name]);
    let patch: Vec<Value> = config["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let path = w["clientConfig"]["service"]["path"].as_str().unwrap();
            json!({"op": "replace", "path": format!("/webhooks/{i}/clientConfig"),
                   "value": {"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca}})
        })
        .collect();
    cp.kubectl(
        ADMIN,
        &[
            "patch",
            kind,
            name,
            "--type=json",
            "-p",
            &Value::from(patch).to_string(),
        ],
    )
    .ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusterctl_init_installs_capi_and_this_provider_and_capi_consumes_our_failure_domains() {
    let Some(capi) = capi_bin_dir() else {
        eprintln!(
            "skipped: CAPI_BIN_DIR is not set (hack/test.sh sets it from hack/capi/build.sh)"
        );
        return;
    };
    let cp = control_plane();
    let work = tempfile::tempdir().unwrap();
    let home = work.path();
    let repo_dir = home.join("repository");

    // The offline repository, as a user would make it.
    let o = Command::new(repo().join("hack/capi/repository.sh"))
        .arg("--out")
        .arg(&repo_dir)
        .args(["--image", IMAGE])
        .env("CAPI_BIN_DIR", &capi)
        .env("KUBECTL", kubectl_bin())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "hack/capi/repository.sh failed:\n{}",
        text(&o)
    );
    let config = repo_dir.join("clusterctl.yaml");
    let config = config.to_str().unwrap();
    let init = [
        "init",
        "--config",
        config,
        "--core",
        "cluster-api",
        "--bootstrap",
        "kubeadm",
        "--control-plane",
        "kubeadm",
        "--infrastructure",
        "vsphere-provider",
    ];

    // Without the credentials variables clusterctl refuses, naming both, before installing any
    // provider.
    let o = clusterctl(&capi, cp, home, &init, &[]);
    assert!(
        !o.status.success(),
        "init without credentials succeeded:\n{}",
        text(&o)
    );
    assert!(
        text(&o).contains("value for variables [VSPHERE_PASSWORD, VSPHERE_USERNAME] is not set"),
        "{}",
        text(&o)
    );

    let password = format!("pw-{}", uuid::Uuid::new_v4());
    let o = clusterctl(
        &capi,
        cp,
        home,
        &init,
        &[
            ("VSPHERE_USERNAME", "capi-user@vsphere.local"),
            ("VSPHERE_PASSWORD", &password),
        ],
    );
    let out = text(&o);
    assert!(o.status.success(), "clusterctl init failed:\n{out}");
    assert!(
        out.contains("Your management cluster has been initialized successfully!"),
        "{out}"
    );
    assert!(!out.contains(&password), "clusterctl printed the password");

    // clusterctl's inventory: four providers at the versions of the repository, ours under the
    // contract of metadata.yaml (init validated that every provider shares it).
    let providers = get(cp, &["providers.clusterctl.cluster.x-k8s.io", "-A"]);
    let mut found: Vec<(String, String, String, String)> = providers["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["metadata"]["namespace"].as_str().unwrap().to_string(),
                p["type"].as_str().unwrap().to_string(),
                p["providerName"].as_str().unwrap().to_string(),
                p["version"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    found.sort();
    let ours = format!("v{}", env!("CARGO_PKG_VERSION"));
    let s = |a: &str, b: &str, c: &str, d: &str| (a.into(), b.into(), c.into(), d.into());
    assert_eq!(
        found,
        vec![
            s(
                "capi-kubeadm-bootstrap-system",
                "BootstrapProvider",
                "kubeadm",
                "v1.10.10"
            ),
            s(
                "capi-kubeadm-control-plane-system",
                "ControlPlaneProvider",
                "kubeadm",
                "v1.10.10"
            ),
            s("capi-system", "CoreProvider", "cluster-api", "v1.10.10"),
            s(
                SA_NAMESPACE,
                "InfrastructureProvider",
                "vsphere-provider",
                &ours
            ),
        ]
    );

    // CAPI's API is served (its CRDs from the module's config/), and cert-manager's.
    cp.wait_established(&[
        "clusters.cluster.x-k8s.io",
        "machines.cluster.x-k8s.io",
        "machinesets.cluster.x-k8s.io",
        "machinedeployments.cluster.x-k8s.io",
        "machinehealthchecks.cluster.x-k8s.io",
        "kubeadmconfigs.bootstrap.cluster.x-k8s.io",
        "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
        "certificates.cert-manager.io",
    ]);

    // Our objects were installed by clusterctl: its label beside the provider label.
    for crd in [
        "vsphereclusters.infrastructure.cluster.x-k8s.io",
        "vspherefailuredomains.infrastructure.cluster.x-k8s.io",
        "vspheredeploymentzones.infrastructure.cluster.x-k8s.io",
    ] {
        let labels = &get(cp, &["crd", crd])["metadata"]["labels"];
        assert_eq!(
            labels["cluster.x-k8s.io/provider"], "infrastructure-vsphere-provider",
            "{crd}"
        );
        assert!(
            labels.get("clusterctl.cluster.x-k8s.io").is_some(),
            "{crd}: {labels}"
        );
    }
    let role = get(cp, &["clusterrole", "vsphere-provider-manager"]);
    assert_eq!(
        role["metadata"]["labels"]["cluster.x-k8s.io/provider"],
        "infrastructure-vsphere-provider"
    );

    // The Deployment, with the image asked for; no kubelet, so it never becomes available.
    let deploy = get(
        cp,
        &[
            "deployment",
            "vsphere-provider-controller-manager",
            "-n",
            SA_NAMESPACE,
        ],
    );
    let container = &deploy["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "manager");
    assert_eq!(container["image"], IMAGE);
    assert!(
        deploy["status"]["availableReplicas"].is_null(),
        "no kubelet here, yet: {deploy}"
    );

    // The credentials variables landed in the Secret the Deployment reads.
    let secret = get(
        cp,
        &[
            "secret",
            "vsphere-provider-manager-bootstrap-credentials",
            "-n",
            SA_NAMESPACE,
        ],
    );
    let decode = |k: &str| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(secret["data"][k].as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(decode("username"), "capi-user@vsphere.local");
    assert_eq!(decode("password"), password);

    // The manager as the Deployment would run it: the installed ServiceAccount, the Secret's
    // values as environment, leader election in the installed namespace; it starts its
    // controllers and stops cleanly.
    let kubeconfig = cp
        .service_account_kubeconfig(SA_NAMESPACE, SA_NAME)
        .unwrap();
    let log_path = home.join("manager.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let our_certs = home.join("our-certs");
    let (crt, key) = cp.issue_certificate(&our_certs, "our-webhook", &["IP:127.0.0.1"]);
    std::fs::rename(crt, our_certs.join("tls.crt")).unwrap();
    std::fs::rename(key, our_certs.join("tls.key")).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vsphere-provider"));
    cmd.env("KUBECONFIG", &kubeconfig)
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env("POD_NAME", "manager-0")
        .env("POD_NAMESPACE", SA_NAMESPACE)
        .env("VSPHERE_USERNAME", decode("username"))
        .env("VSPHERE_PASSWORD", decode("password"))
        .env_remove("VSPHERE_SERVER")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args([
            "--log-level",
            "info",
            "run",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .args(["--webhook-addr", "127.0.0.1:0", "--webhook-cert-dir"])
        .arg(&our_certs)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    realapi::kill_when_parent_thread_dies(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !read_log().contains("controllers started") {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the manager exited ({status}):\n{}", read_log());
        }
        assert!(
            Instant::now() < deadline,
            "no 'controllers started' in 60 s:\n{}",
            read_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let lease = get(cp, &["lease", "-n", SA_NAMESPACE]);
    assert!(
        lease["items"].as_array().is_some_and(|l| !l.is_empty()),
        "no leader Lease in {SA_NAMESPACE}"
    );

    // CAPI's core manager, as installed by clusterctl but as a process.
    let certs = home.join("capi-certs");
    let (cert, key) = cp.issue_certificate(&certs, "capi-webhook", &["IP:127.0.0.1"]);
    let (webhook, health, diagnostics) = (free_port(), free_port(), free_port());
    let capi_log_path = home.join("capi-manager.log");
    let capi_log = std::fs::File::create(&capi_log_path).unwrap();
    let mut cmd = Command::new(capi.join("manager"));
    cmd.env("KUBECONFIG", &cp.admin_kubeconfig)
        .env("HOME", home)
        .args(["--leader-elect=false", "--insecure-diagnostics"])
        .arg(format!("--webhook-port={webhook}"))
        .arg(format!("--webhook-cert-dir={}", certs.display()))
        .arg(format!(
            "--webhook-cert-name={}",
            cert.file_name().unwrap().to_str().unwrap()
        ))
        .arg(format!(
            "--webhook-key-name={}",
            key.file_name().unwrap().to_str().unwrap()
        ))
        .arg(format!("--health-addr=127.0.0.1:{health}"))
        .arg(format!("--diagnostics-address=127.0.0.1:{diagnostics}"))
        .stdin(Stdio::null())
        .stdout(capi_log.try_clone().unwrap())
        .stderr(capi_log);
    realapi::kill_when_parent_thread_dies(&mut cmd);
    let mut capi_manager = cmd.spawn().unwrap();
    let capi_log = || std::fs::read_to_string(&capi_log_path).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(120);
    while http_status(health, "/readyz").is_none_or(|l| !l.contains(" 200")) {
        if let Some(status) = capi_manager.try_wait().unwrap() {
            panic!("CAPI's manager exited ({status}):\n{}", capi_log());
        }
        assert!(
            Instant::now() < deadline,
            "CAPI's manager not ready in 120 s:\n{}",
            capi_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    webhooks_to_loopback(
        cp,
        "validatingwebhookconfiguration",
        "capi-validating-webhook-configuration",
        webhook,
    );
    webhooks_to_loopback(
        cp,
        "mutatingwebhookconfiguration",
        "capi-mutating-webhook-configuration",
        webhook,
    );

    let ns = cp.namespace("capi");
    let cluster = |name: &str, spec: Value| {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
               "metadata": {"name": name, "namespace": ns}, "spec": spec})
        .to_string()
    };
    // CAPI's webhook, not the schema, refuses a topology while the feature gate is off.
    let refused = cp
        .apply_text(
            ADMIN,
            &cluster(
                "topology",
                json!({"topology": {"class": "c", "version": "v1.33.0"}}),
            ),
            None,
        )
        .err();
    assert!(
        refused.contains("can be set only if the ClusterTopology feature flag is enabled"),
        "{refused}"
    );
    // CAPI's Cluster controller: finalizer, and a Cluster without infrastructureRef counts as
    // infrastructure-ready (v1.10 reconcileInfrastructure).
    cp.apply_text(ADMIN, &cluster("plain", json!({})), None)
        .ok();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let c = get(cp, &["cluster.cluster.x-k8s.io", "plain", "-n", &ns]);
        let finalized = c["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "cluster.cluster.x-k8s.io"));
        if finalized && c["status"]["infrastructureReady"] == true {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "CAPI did not reconcile the Cluster:\n{c}\n{}",
            capi_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Cluster API consumes what we publish: a Cluster whose infrastructure is our VSphereCluster
    // over three zones on vcsim. CAPI's Cluster controller (its code, not ours) makes itself the
    // VSphereCluster's owner, waits for our `status.ready`, then marks the Cluster's
    // infrastructure ready and copies our `status.failureDomains` and endpoint onto it.
    // Our webhooks, and the conversion webhook of the two-version CRDs, point at our manager
    // on loopback with the harness's CA (what the Service and cert-manager's CA injection do in
    // a cluster).
    let our_webhook_port: u16 = read_log()
        .lines()
        .find(|l| l.contains("admission webhooks listening"))
        .and_then(|l| l.split("addr=").nth(1))
        .and_then(|a| a.split_whitespace().next())
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no webhook address in the manager's log:\n{}", read_log()));
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let name = format!(
            "vsphere-provider-{}-webhook-configuration",
            kind.trim_end_matches("webhookconfiguration")
        );
        webhooks_to_loopback(cp, kind, &name, our_webhook_port);
    }
    let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&cp.ca_cert).unwrap());
    for crd in [
        "vspherefailuredomains.infrastructure.cluster.x-k8s.io",
        "vspheredeploymentzones.infrastructure.cluster.x-k8s.io",
    ] {
        let conversion = json!({"spec": {"conversion": {"webhook": {"clientConfig": {
            "service": null, "caBundle": ca,
            "url": format!("https://127.0.0.1:{our_webhook_port}/convert")}}}}});
        cp.kubectl(
            ADMIN,
            &[
                "patch",
                "crd",
                crd,
                "--type=merge",
                "-p",
                &conversion.to_string(),
            ],
        )
        .ok();
    }
    let sim = Vcsim::builder().clusters(3).hosts(1).pools(1).start().await;
    let names: Vec<String> = (0..3).map(|i| format!("{ns}-zone-{i}")).collect();
    let (sim_user, sim_password) = sim.credentials();
    let list = |items: Vec<Value>| json!({"apiVersion": "v1", "kind": "List", "items": items});
    let domains = list(samples::zones(sim.url(), &names, None));
    let infra = list(samples::cluster(&ns, sim.url(), sim_user, sim_password));
    let apply = |objects: &Value| {
        let deadline = Instant::now() + Duration::from_secs(30);
        // The webhook configurations just changed; the server takes a moment to use them.
        loop {
            let out = cp.kubectl_stdin(ADMIN, &["apply", "-f", "-"], Some(&objects.to_string()));
            if out.success {
                break;
            }
            assert!(Instant::now() < deadline, "{}", out.stderr);
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    apply(&domains);
    apply(&infra);
    apply(
        &json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "demo", "namespace": ns},
        "spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                       "kind": "VSphereCluster", "name": "demo"}}}),
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    let (cluster, vsphere_cluster) = loop {
        let c = get(cp, &["cluster.cluster.x-k8s.io", "demo", "-n", &ns]);
        let v = get(cp, &["vspherecluster", "demo", "-n", &ns]);
        if c["status"]["infrastructureReady"] == true
            && c["status"]["failureDomains"]
                .as_object()
                .is_some_and(|f| f.len() == 3)
        {
            break (c, v);
        }
        assert!(
            Instant::now() < deadline,
            "CAPI did not take our failure domains:\nCluster {c}\nVSphereCluster {v}\n{}",
            read_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(
        cluster["status"]["failureDomains"], vsphere_cluster["status"]["failureDomains"],
        "the Cluster's failure domains are what we published"
    );
    for name in &names {
        assert_eq!(
            cluster["status"]["failureDomains"][name]["controlPlane"], true,
            "{name}: {cluster}"
        );
    }
    assert_eq!(
        cluster["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.0.0.10", "port": 6443}),
        "CAPI copied the VSphereCluster's endpoint"
    );
    assert_eq!(vsphere_cluster["status"]["ready"], true);
    let owners = vsphere_cluster["metadata"]["ownerReferences"]
        .as_array()
        .unwrap();
    assert!(
        owners
            .iter()
            .any(|o| o["kind"] == "Cluster" && o["name"] == "demo"),
        "CAPI made its Cluster the owner: {owners:?}"
    );
    assert!(
        vsphere_cluster["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f
                .iter()
                .any(|f| f == "vspherecluster.infrastructure.cluster.x-k8s.io")),
        "{vsphere_cluster}"
    );

    // Deleting the Cluster: CAPI deletes its VSphereCluster, we release it (no machines), and
    // CAPI then lets the Cluster go.
    cp.kubectl(
        ADMIN,
        &[
            "delete",
            "cluster.cluster.x-k8s.io",
            "demo",
            "-n",
            &ns,
            "--wait=true",
            "--timeout=120s",
        ],
    )
    .ok();
    let gone = cp.kubectl(ADMIN, &["get", "vspherecluster", "demo", "-n", &ns]);
    assert!(gone.stderr.contains("NotFound"), "{}", gone.stderr);

    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the manager did not stop:\n{}",
            read_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = read_log();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(
        !log.contains("forbidden"),
        "the installed RBAC refused a call:\n{log}"
    );
    assert!(!log.contains(&password), "the manager logged the password");
    let _ = capi_manager.kill();
    let _ = capi_manager.wait();
}
