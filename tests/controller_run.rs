//! `vsphere-provider run` as a process against the fake API server over a real socket:
//! start-up errors, probes, metrics, leader election and graceful shutdown on SIGTERM.
#[path = "controller_support/apiserver.rs"]
mod apiserver;
#[path = "controller_support/harness.rs"]
mod harness;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use apiserver::FakeApiServer;
use harness::*;
use k8s_openapi::api::coordination::v1::Lease;
use vsphere_provider::api::VSphereDeploymentZone;

/// Serve the fake API server on 127.0.0.1 and write a kubeconfig pointing at it.
async fn serve(api: &FakeApiServer, dir: &tempfile::TempDir) -> std::path::PathBuf {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = api.router();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let path = dir.path().join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: http://{addr}
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
    namespace: vsphere-provider-system
current-context: fake
users:
- name: fake
  user:
    token: not-a-secret
"
        ),
    )
    .unwrap();
    path
}

/// `run` at info level with `/metrics` on a free loopback port, as most tests here start it.
fn run_command(kubeconfig: &std::path::Path, home: &std::path::Path) -> Command {
    let mut c = command(kubeconfig, home);
    c.args([
        "--log-level",
        "info",
        "run",
        "--metrics-addr",
        "127.0.0.1:0",
    ]);
    c
}

fn command(kubeconfig: &std::path::Path, home: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vsphere-provider"));
    c.env("KUBECONFIG", kubeconfig)
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("POD_NAMESPACE")
        .env_remove("VSPHERE_USERNAME")
        .env_remove("VSPHERE_PASSWORD")
        .env_remove("VSPHERE_SERVER");
    c
}

#[test]
fn without_a_kubeconfig_it_exits_1_saying_so() {
    let home = tempfile::tempdir().unwrap();
    let out = command(&home.path().join("missing"), home.path())
        .arg("run")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no Kubernetes configuration"), "{stderr}");
}

/// A CRD not served yet (as when `kubectl apply -k config/default` creates the CRDs and the
/// Deployment together) is no exit, which a Deployment would turn into a crash loop: the
/// manager names the CRD and how to install it, checks again after 1 s, then 2 s, and starts
/// once it is served. (tests/realapi_faults.rs shows the same on the real API server.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_crds_it_waits_naming_the_missing_one_and_starts_once_installed() {
    let api = FakeApiServer::new();
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = serve(&api, &home).await;
    api.inject("GET", "/apis/machine.openshift.io/v1beta1/machines", 404, 2);
    let mut cmd = run_command(&kubeconfig, home.path());
    cmd.args(["--leader-elect=false", "--webhook-cert-dir"])
        .arg(home.path());
    let mut manager = tokio::task::spawn_blocking(move || {
        let mut m = Manager::spawn(cmd);
        for (attempt, retry_in) in [(1, "1s"), (2, "2s")] {
            let line = m.line("cannot start the controllers yet");
            assert!(
                line.contains("machines.machine.openshift.io (Machine) is not installed")
                    && line.contains("vsphere-provider crds | kubectl apply -f -")
                    && line.contains(&format!("attempt={attempt} retry_in={retry_in}")),
                "{line}"
            );
        }
        m.line("controllers started");
        m
    })
    .await
    .unwrap();
    assert!(manager.child.try_wait().unwrap().is_none(), "still running");
    let (code, log) = manager.terminate().await;
    assert_eq!(code, Some(0), "{log}");
}

/// Lines of the child's stderr, with the tracing colour codes stripped.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let ansi = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(ansi.replace_all(&line, "").into_owned());
        }
    });
    rx
}

/// A running `vsphere-provider run` and its log.
struct Manager {
    child: Child,
    lines: mpsc::Receiver<String>,
    log: Vec<String>,
}

impl Manager {
    fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
        let lines = stderr_lines(&mut child);
        Manager {
            child,
            lines,
            log: Vec::new(),
        }
    }

    /// The first log line containing `needle` (waiting up to 20 s).
    fn line(&mut self, needle: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| {
                    panic!("no log line with {needle:?}:\n{}", self.log.join("\n"))
                });
            self.log.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// The `addr=` of the first log line containing `needle`.
    fn addr(&mut self, needle: &str) -> String {
        let line = self.line(needle);
        line.split("addr=")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    }

    /// SIGTERM, then the exit code (panics if it does not exit within 10 s).
    async fn terminate(mut self) -> (Option<i32>, String) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let mut child = self.child;
        let status = tokio::task::spawn_blocking(move || {
            for _ in 0..100 {
                if let Some(s) = child.try_wait().unwrap() {
                    return Some(s);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            None
        })
        .await
        .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        while let Ok(line) = self.lines.try_recv() {
            self.log.push(line);
        }
        let log = self.log.join("\n");
        let status = status.unwrap_or_else(|| panic!("did not stop within 10 s:\n{log}"));
        (status.code(), log)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_serves_probes_and_metrics_leads_and_stops_cleanly_on_sigterm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = FakeApiServer::new();
    api.put(&zone("a", "vc.example.com", "missing", &[]));
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = serve(&api, &home).await;
    let mut cmd = run_command(&kubeconfig, home.path());
    cmd.args(["--leader-elect", "--namespace", "vsphere-provider-system"])
        .arg("--webhook-cert-dir")
        .arg(home.path())
        .env("POD_NAME", "manager-0");
    let mut manager = Manager::spawn(cmd);
    let addr = manager.addr("admin endpoints listening");
    let http = reqwest::Client::new();
    let get = |path: &str| {
        let (http, url) = (http.clone(), format!("http://{addr}{path}"));
        async move {
            let r = http.get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    assert_eq!(get("/healthz").await, (200, "ok".into()));
    assert_eq!(get("/livez").await.0, 200);

    // It leads (the Lease names it), reconciles the zone and becomes ready.
    api.wait_for("the finalizer", CONVERGE, |api| {
        api.get::<VSphereDeploymentZone>(None, "a")
            .filter(has_finalizer)
    })
    .await;
    let lease = api
        .get::<Lease>(Some("vsphere-provider-system"), "vsphere-provider-leader")
        .unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("manager-0")
    );
    let mut ready = (0, String::new());
    for _ in 0..100 {
        ready = get("/readyz").await;
        if ready.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ready, (200, "caches synced".into()));
    let (code, metrics) = get("/metrics").await;
    assert_eq!(code, 200);
    assert!(
        metric(
            &metrics,
            r#"vsphere_provider_reconciles_total{controller="vspheredeploymentzone",result="ok"}"#
        ) >= 1.0,
        "{metrics}"
    );
    assert!(metrics.contains("# TYPE vsphere_provider_reconcile_duration_seconds histogram"));

    // SIGTERM: controllers stop, the Lease is released, exit 0.
    let (code, log) = manager.terminate().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("admission webhooks are NOT served"), "{log}");
    let lease = api
        .get::<Lease>(Some("vsphere-provider-system"), "vsphere-provider-leader")
        .unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity,
        None,
        "released on shutdown"
    );
}

/// This host's address on its default route, if it has one (no packet is sent).
fn non_loopback_ip() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("10.255.255.255:9").ok()?;
    Some(s.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
}

/// Metrics are plain HTTP without authentication, so they stay on loopback: from another
/// address the metrics port does not answer, and the probe port (which the kubelet reaches from
/// the node) serves health but no `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_not_served_to_another_address() {
    let Some(ip) = non_loopback_ip() else {
        eprintln!("skipping: this host has no non-loopback address");
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = FakeApiServer::new();
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = serve(&api, &home).await;
    let mut cmd = run_command(&kubeconfig, home.path());
    cmd.args(["--health-probe-bind-address", "0.0.0.0:0"])
        .args([
            "--leader-elect=false",
            "--namespace",
            "vsphere-provider-system",
        ])
        .arg("--webhook-cert-dir")
        .arg(home.path());
    let mut manager = Manager::spawn(cmd);
    let metrics_addr: std::net::SocketAddr =
        manager.addr("admin endpoints listening").parse().unwrap();
    let probe_addr: std::net::SocketAddr = manager.addr("health probes listening").parse().unwrap();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let get = |addr: String, path: &str| {
        let (http, url) = (http.clone(), format!("http://{addr}{path}"));
        async move {
            match http.get(url).send().await {
                Ok(r) => Ok((r.status().as_u16(), r.text().await.unwrap())),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    // From loopback: metrics.
    let (code, body) = get(metrics_addr.to_string(), "/metrics").await.unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("vsphere_provider_"), "{body}");
    // From another address: the metrics port is not listening there.
    let elsewhere = format!("{ip}:{}", metrics_addr.port());
    assert!(
        get(elsewhere, "/metrics").await.is_err(),
        "metrics answered on {ip}"
    );
    // The probe port answers health there, never metrics.
    let probe = format!("{ip}:{}", probe_addr.port());
    assert_eq!(
        get(probe.clone(), "/healthz").await.unwrap(),
        (200, "ok".into())
    );
    let (code, body) = get(probe, "/metrics").await.unwrap();
    assert_eq!(code, 404, "{body}");
    assert!(!body.contains("vsphere_provider_"), "{body}");
    let (code, log) = manager.terminate().await;
    assert_eq!(code, Some(0), "{log}");
}

/// A self-signed certificate for localhost in `dir` (tls.crt, tls.key), if openssl is here.
fn certificate(dir: &std::path::Path) -> bool {
    Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(dir.join("tls.key"))
        .arg("-out")
        .arg(dir.join("tls.crt"))
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_certificate_the_webhooks_are_served_and_without_election_it_runs_at_once() {
    let home = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    if !certificate(certs.path()) {
        eprintln!("skipping: openssl cannot make a certificate here");
        return;
    }
    let api = FakeApiServer::new();
    api.put(&zone("a", "vc.example.com", "missing", &[]));
    let kubeconfig = serve(&api, &home).await;
    let mut cmd = run_command(&kubeconfig, home.path());
    cmd.args(["--leader-elect=false", "--webhook-addr", "127.0.0.1:0"])
        .arg("--webhook-cert-dir")
        .arg(certs.path());
    let mut manager = Manager::spawn(cmd);
    let webhook = manager.addr("admission webhooks listening");

    // HTTPS with the served certificate.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in
        rustls::pki_types::CertificateDer::pem_file_iter(certs.path().join("tls.crt")).unwrap()
    {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(&webhook).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tls.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // No election: the zone is reconciled without any Lease.
    api.wait_for("the finalizer", CONVERGE, |api| {
        api.get::<VSphereDeploymentZone>(None, "a")
            .filter(has_finalizer)
    })
    .await;
    assert!(
        api.get::<Lease>(Some("vsphere-provider-system"), "vsphere-provider-leader")
            .is_none()
    );
    let (code, log) = manager.terminate().await;
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn the_pod_grace_period_covers_the_drain_release_and_logout() {
    let manifest = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/manager/manager.yaml"),
    )
    .unwrap();
    let grace: u64 = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("terminationGracePeriodSeconds:"))
        .expect("terminationGracePeriodSeconds is set")
        .trim()
        .parse()
        .unwrap();
    // The drain, then releasing the lease (3 s at most) and logging out of vCenter (3 s at
    // most), with a little room for the servers and the exit.
    let needed = vsphere_provider::controllers::DRAIN_TIMEOUT.as_secs() + 3 + 3 + 2;
    assert!(
        grace >= needed,
        "terminationGracePeriodSeconds {grace} < {needed}"
    );
}
