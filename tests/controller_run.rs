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

#[tokio::test]
async fn without_the_crds_it_exits_1_naming_the_missing_one() {
    let api = FakeApiServer::new();
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = serve(&api, &home).await;
    api.inject("GET", "/apis/machine.openshift.io/v1beta1/machines", 404, 1);
    let out = tokio::task::spawn_blocking(move || {
        command(&kubeconfig, home.path())
            .arg("run")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("machines.machine.openshift.io (Machine) is not installed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("vsphere-provider crds | kubectl apply -f -"),
        "{stderr}"
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_serves_probes_and_metrics_leads_and_stops_cleanly_on_sigterm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = FakeApiServer::new();
    api.put(&zone("a", "vc.example.com", "missing", &[]));
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = serve(&api, &home).await;
    let mut child = command(&kubeconfig, home.path())
        .args([
            "--log-level",
            "info",
            "run",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .args(["--leader-elect", "--namespace", "vsphere-provider-system"])
        .arg("--webhook-cert-dir")
        .arg(home.path())
        .env("POD_NAME", "manager-0")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = stderr_lines(&mut child);
    let mut log = Vec::new();
    let addr = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no admin address logged:\n{}", log.join("\n")));
        log.push(line.clone());
        if line.contains("admin endpoints listening") {
            let addr = line
                .split("addr=")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            break addr.to_string();
        }
    };
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
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
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
    while let Ok(line) = lines.try_recv() {
        log.push(line);
    }
    let status = status.unwrap_or_else(|| panic!("did not stop within 10 s:\n{}", log.join("\n")));
    assert_eq!(status.code(), Some(0), "{}", log.join("\n"));
    let log = log.join("\n");
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
