//! Cluster API's own controllers and clusterctl (hack/capi/build.sh) against the real API server
//! of realapi.rs, for the end-to-end tests (tests/capi_*.rs): the offline clusterctl repository
//! and `clusterctl init`, CAPI's managers and ours as processes, and their admission webhooks
//! moved to loopback.
//!
//! There is no kubelet, so no Deployment clusterctl installs ever runs a pod: each manager runs
//! here as a process instead. CAPI's run as the admin (their installed ClusterRoles are
//! aggregated ones, and without kube-controller-manager nothing fills them in); ours runs as the
//! ServiceAccount clusterctl installed. Webhook configurations get a
//! `url: https://127.0.0.1:PORT/...` clientConfig with the harness's CA, as envtest does (no
//! Service can reach a process on loopback, and no cert-manager injects a CA here).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use super::realapi::{self, ControlPlane, Identity, SA_NAMESPACE, kubectl_bin, repo};

const ADMIN: &Identity = &Identity::Admin;

/// `clusterctl init` of every provider of the offline repository.
pub const INIT_PROVIDERS: [&str; 8] = [
    "--core",
    "cluster-api",
    "--bootstrap",
    "kubeadm",
    "--control-plane",
    "kubeadm",
    "--infrastructure",
    "vsphere-provider",
];

/// `CAPI_BIN_DIR` (hack/capi/build.sh's output), or None when unset: the CAPI build is a
/// separate cold build of several minutes, so tests needing it say so and return.
pub fn capi_bin_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("CAPI_BIN_DIR").filter(|v| !v.is_empty())?);
    assert!(
        dir.join("clusterctl").is_file(),
        "CAPI_BIN_DIR={} holds no clusterctl; run hack/capi/build.sh",
        dir.display()
    );
    Some(dir)
}

/// clusterctl with the admin kubeconfig (except for `generate yaml`, which has no such flag), no
/// network (no version check), its state under `home`.
pub fn clusterctl(
    capi: &Path,
    cp: &ControlPlane,
    home: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut cmd = Command::new(capi.join("clusterctl"));
    cmd.args(args);
    if !args.starts_with(&["generate", "yaml"]) {
        cmd.arg("--kubeconfig").arg(&cp.admin_kubeconfig);
    }
    // No network: never ask GitHub for a newer clusterctl; state and overrides under `home`.
    cmd.env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
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

/// stdout then stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `kubectl get ARGS -o json` as the admin.
pub fn get(cp: &ControlPlane, args: &[&str]) -> Value {
    let kind = args.first().map(|k| realapi::at_v1beta1(k));
    let mut all = vec!["get"];
    all.extend(kind.as_deref());
    all.extend_from_slice(args.get(1..).unwrap_or_default());
    all.extend(["-o", "json"]);
    cp.kubectl(ADMIN, &all).ok().json()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The HTTP status line of a plain GET on loopback (the managers' health endpoints).
pub fn http_status(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.lines().next().map(str::to_string)
}

/// The harness CA, base64, as a caBundle.
pub fn ca_bundle(cp: &ControlPlane) -> String {
    base64::engine::general_purpose::STANDARD.encode(std::fs::read(&cp.ca_cert).unwrap())
}

/// Points every webhook of a (Validating|Mutating)WebhookConfiguration at `https://127.0.0.1:port`
/// (same path) with the harness's CA: no Service can reach a process on loopback.
pub fn webhooks_to_loopback(cp: &ControlPlane, kind: &str, name: &str, port: u16) {
    let ca = ca_bundle(cp);
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

/// Points the conversion webhook of the CRDs `kubectl get crd SELECTOR` lists (only those whose
/// webhook is `service`, a webhook clientConfig's `service`, when given) at
/// `https://127.0.0.1:port/convert` with the harness's CA, as the Service and cert-manager's CA
/// injection do in a cluster. Returns how many it patched.
///
/// Since CAPI v1.11 CAPI's CRDs store v1beta2 and still serve v1beta1, so every v1beta1 read or
/// write of a CAPI object (ours, the tests', CAPV's v1beta1 templates) goes through CAPI's
/// conversion webhook.
pub fn conversion_to_loopback(
    cp: &ControlPlane,
    selector: &[&str],
    service: Option<&Value>,
    port: u16,
) -> usize {
    let ca = ca_bundle(cp);
    let mut args = vec!["crd"];
    args.extend_from_slice(selector);
    let crds = get(cp, &args);
    let mut patched = 0;
    for crd in crds["items"].as_array().unwrap() {
        let conversion = &crd["spec"]["conversion"];
        let target = &conversion["webhook"]["clientConfig"]["service"];
        if conversion["strategy"] != "Webhook"
            || service.is_some_and(|s| {
                target["name"] != s["name"] || target["namespace"] != s["namespace"]
            })
        {
            continue;
        }
        let patch = json!({"spec": {"conversion": {"webhook": {"clientConfig": {
            "service": null, "caBundle": ca,
            "url": format!("https://127.0.0.1:{port}/convert")}}}}});
        cp.kubectl(
            ADMIN,
            &[
                "patch",
                "crd",
                crd["metadata"]["name"].as_str().unwrap(),
                "--type=merge",
                "-p",
                &patch.to_string(),
            ],
        )
        .ok();
        patched += 1;
    }
    patched
}

/// The Cluster API release of `capi` (hack/capi/build.sh's VERSIONS, e.g. `v1.14.2`).
pub fn capi_version(capi: &Path) -> String {
    let versions = std::fs::read_to_string(capi.join("VERSIONS")).unwrap();
    versions
        .lines()
        .find_map(|l| l.strip_prefix("cluster-api "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no cluster-api line in {}/VERSIONS", capi.display()))
        .to_string()
}

/// Writes the offline repository (hack/capi/repository.sh, as a user would) under `home` and
/// returns its clusterctl.yaml.
pub fn repository(capi: &Path, home: &Path, image: &str) -> String {
    let repo_dir = home.join("repository");
    let o = Command::new(repo().join("hack/capi/repository.sh"))
        .arg("--out")
        .arg(&repo_dir)
        .args(["--image", image])
        .env("CAPI_BIN_DIR", capi)
        .env("KUBECTL", kubectl_bin())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "hack/capi/repository.sh failed:\n{}",
        text(&o)
    );
    repo_dir
        .join("clusterctl.yaml")
        .to_str()
        .unwrap()
        .to_string()
}

/// One of CAPI's managers (`manager`, `kubeadm-bootstrap-manager`,
/// `kubeadm-control-plane-manager`) as a process; killed when dropped.
pub struct CapiManager {
    pub name: String,
    child: Child,
    log_path: PathBuf,
    pub webhook_port: u16,
}

impl CapiManager {
    /// Starts `binary` of `capi` as the admin (see the module doc), waits until its /readyz
    /// answers 200 (up to 120 s), then points its webhook configurations (`webhook_configs`,
    /// validating first then mutating, names as installed) at it.
    pub fn start(
        capi: &Path,
        cp: &ControlPlane,
        home: &Path,
        binary: &str,
        validating: &str,
        mutating: &str,
    ) -> CapiManager {
        Self::start_with(capi, cp, home, binary, validating, mutating, &[])
    }

    /// [`CapiManager::start`] with `extra` arguments (e.g. `--feature-gates=ClusterTopology=true`).
    pub fn start_with(
        capi: &Path,
        cp: &ControlPlane,
        home: &Path,
        binary: &str,
        validating: &str,
        mutating: &str,
        extra: &[&str],
    ) -> CapiManager {
        let certs = home.join(format!("{binary}-certs"));
        let (cert, key) = cp.issue_certificate(&certs, binary, &["IP:127.0.0.1"]);
        let (webhook, health, diagnostics) = (free_port(), free_port(), free_port());
        let log_path = home.join(format!("capi-{binary}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let mut cmd = Command::new(capi.join(binary));
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
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        realapi::kill_when_parent_thread_dies(&mut cmd);
        let mut m = CapiManager {
            name: binary.to_string(),
            child: cmd.spawn().unwrap(),
            log_path,
            webhook_port: webhook,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while http_status(health, "/readyz").is_none_or(|l| !l.contains(" 200")) {
            if let Some(status) = m.child.try_wait().unwrap() {
                panic!("{binary} exited ({status}):\n{}", m.log());
            }
            assert!(
                Instant::now() < deadline,
                "{binary} not ready in 120 s:\n{}",
                m.log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        // The CRDs this manager converts: those whose conversion webhook is its webhook Service
        // (the one its admission webhooks name). Read before the admission webhooks move.
        let service =
            get(cp, &["validatingwebhookconfiguration", validating])["webhooks"][0]["clientConfig"]
                ["service"]
                .clone();
        webhooks_to_loopback(cp, "validatingwebhookconfiguration", validating, webhook);
        webhooks_to_loopback(cp, "mutatingwebhookconfiguration", mutating, webhook);
        assert!(service.is_object(), "{validating} names no webhook Service");
        let converted = conversion_to_loopback(cp, &[], Some(&service), webhook);
        assert!(converted > 0, "no CRD converts through {service}");
        m
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The last `n` lines of the log (for failure messages).
    pub fn tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for CapiManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Our manager as the Deployment clusterctl installed would run it: the installed
/// ServiceAccount, the credentials Secret's values as environment, leader election in the
/// installed namespace, webhooks on loopback with a certificate of the harness's CA. Returns
/// once it logged "controllers started"; killed when dropped.
pub struct OurManager {
    child: Child,
    log_path: PathBuf,
}

impl OurManager {
    /// The manager with its own credentials for `servers` (VSPHERE_SERVER, comma-separated).
    pub fn start(
        cp: &ControlPlane,
        home: &Path,
        username: &str,
        password: &str,
        servers: &str,
    ) -> OurManager {
        Self::start_with(cp, home, username, password, servers, &[])
    }

    /// [`OurManager::start`] with more arguments for `run` (e.g. `--thumbprint HEX`).
    pub fn start_with(
        cp: &ControlPlane,
        home: &Path,
        username: &str,
        password: &str,
        servers: &str,
        extra: &[&str],
    ) -> OurManager {
        let kubeconfig = cp
            .service_account_kubeconfig(SA_NAMESPACE, realapi::SA_NAME)
            .unwrap();
        let log_path = home.join("vsphere-provider.log");
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
            .env("VSPHERE_USERNAME", username)
            .env("VSPHERE_PASSWORD", password)
            .env("VSPHERE_SERVER", servers)
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
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        realapi::kill_when_parent_thread_dies(&mut cmd);
        let mut m = OurManager {
            child: cmd.spawn().unwrap(),
            log_path,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !m.log().contains("controllers started") {
            if let Some(status) = m.child.try_wait().unwrap() {
                panic!("the manager exited ({status}):\n{}", m.log());
            }
            assert!(
                Instant::now() < deadline,
                "no 'controllers started' in 60 s:\n{}",
                m.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        m
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The port of our admission webhooks, from the log.
    pub fn webhook_port(&self) -> u16 {
        self.log()
            .lines()
            .find(|l| l.contains("admission webhooks listening"))
            .and_then(|l| l.split("addr=").nth(1))
            .and_then(|a| a.split_whitespace().next())
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no webhook address in the manager's log:\n{}", self.log()))
    }

    /// Our admission webhooks, and the conversion webhook of every CRD of ours that has one,
    /// pointed at this process on loopback with the harness's CA (what the Service and
    /// cert-manager's CA injection do in a cluster).
    pub fn wire_webhooks(&self, cp: &ControlPlane) {
        let port = self.webhook_port();
        for kind in [
            "validatingwebhookconfiguration",
            "mutatingwebhookconfiguration",
        ] {
            let name = format!(
                "vsphere-provider-{}-webhook-configuration",
                kind.trim_end_matches("webhookconfiguration")
            );
            webhooks_to_loopback(cp, kind, &name, port);
        }
        conversion_to_loopback(
            cp,
            &[
                "-l",
                "cluster.x-k8s.io/provider=infrastructure-vsphere-provider",
            ],
            None,
            port,
        );
    }

    /// SIGTERM, then the exit code (within 30 s).
    pub fn terminate(&mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            assert!(
                Instant::now() < deadline,
                "the manager did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for OurManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kubectl apply -f -` of `objects` as the admin, retried for up to 30 s: webhook
/// configurations that just changed take the server a moment to use.
pub fn apply_retrying(cp: &ControlPlane, objects: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cp.kubectl_stdin(ADMIN, &["apply", "-f", "-"], Some(objects));
        if out.success {
            return;
        }
        assert!(Instant::now() < deadline, "{}", out.stderr);
        std::thread::sleep(Duration::from_millis(500));
    }
}
