//! The admission server end to end: AdmissionReview v1 JSON over HTTP (and HTTPS), the paths
//! registered in `config/webhook/manifests.yaml`, denials with field paths, defaulting patches.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use vsphere_provider::api::Kind;
use vsphere_provider::webhook::server::{self, Endpoint, Limits, TlsFiles};

struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), server::ServeError>>,
}

impl Server {
    async fn start(tls: Option<TlsFiles>) -> Server {
        Self::start_with(tls, Limits::default()).await
    }

    async fn start_with(tls: Option<TlsFiles>, limits: Limits) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server::serve_listener_with(listener, tls, limits, async {
            let _ = rx.await;
        }));
        Server {
            addr,
            stop: Some(tx),
            task,
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let result = tokio::time::timeout(std::time::Duration::from_secs(5), self.task).await;
        assert!(
            matches!(result, Ok(Ok(Ok(())))),
            "server did not stop cleanly: {result:?}"
        );
    }
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

async fn post(addr: SocketAddr, path: &str, review: &Value) -> (u16, Value) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (status, body) = exchange(stream, "POST", path, &review.to_string()).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn review(op: &str, object: Value, old: Option<Value>) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap().to_string();
    let (group, version) = api_version.split_once('/').unwrap();
    let kind = object["kind"].clone();
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": "things"},
            "name": object["metadata"]["name"],
            "operation": op,
            "userInfo": {"username": "admin"},
            "object": object,
            "oldObject": old,
            "dryRun": false
        }
    })
}

fn failure_domain(region_type: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereFailureDomain",
        "metadata": {"name": "zone-a"},
        "spec": {
            "region": {"name": "region-a", "type": region_type, "tagCategory": "k8s-region"},
            "zone": {"name": "zone-a", "type": "ComputeCluster", "tagCategory": "k8s-zone"},
            "topology": {"datacenter": "DC0", "computeCluster": "DC0_C0"}
        }
    })
}

fn zone() -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereDeploymentZone",
        "metadata": {"name": "zone-a"},
        "spec": {"server": "127.0.0.1", "failureDomain": "zone-a", "placementConstraint": {"resourcePool": "DC0_C0_RP1"}}
    })
}

#[tokio::test]
async fn validating_endpoint_denies_with_field_paths_and_allows_the_good_neighbour() {
    let srv = Server::start(None).await;
    let path = server::path(Kind::VSphereFailureDomain, Endpoint::Validate);

    let (status, resp) = post(
        srv.addr,
        &path,
        &review("CREATE", failure_domain("Datacenter"), None),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(resp["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(resp["kind"], "AdmissionReview");
    assert_eq!(
        resp["response"]["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(resp["response"]["allowed"], true, "{resp}");

    let (_, resp) = post(
        srv.addr,
        &path,
        &review("CREATE", failure_domain("HostGroup"), None),
    )
    .await;
    assert_eq!(resp["response"]["allowed"], false);
    assert_eq!(resp["response"]["status"]["code"], 422);
    let message = resp["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "spec.region.type: Forbidden: region's Failure Domain type cannot be HostGroup"
        ),
        "{message}"
    );
    srv.stop().await;
}

#[tokio::test]
async fn updates_see_the_old_object() {
    let srv = Server::start(None).await;
    let path = server::path(Kind::VSphereFailureDomain, Endpoint::Validate);
    let old = failure_domain("Datacenter");
    let mut new = old.clone();
    new["spec"]["topology"]["computeCluster"] = json!("DC0_C1");
    let (_, resp) = post(srv.addr, &path, &review("UPDATE", new, Some(old.clone()))).await;
    assert_eq!(resp["response"]["allowed"], false);
    assert!(
        resp["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("spec: Forbidden: VSphereFailureDomainSpec is immutable")
    );
    // Deletes are not checked.
    let (_, resp) = post(srv.addr, &path, &review("DELETE", old.clone(), Some(old))).await;
    assert_eq!(resp["response"]["allowed"], true);
    srv.stop().await;
}

#[tokio::test]
async fn mutating_endpoint_returns_a_json_patch() {
    let srv = Server::start(None).await;
    let path = server::path(Kind::VSphereDeploymentZone, Endpoint::Mutate);
    let (_, resp) = post(srv.addr, &path, &review("CREATE", zone(), None)).await;
    assert_eq!(resp["response"]["allowed"], true);
    assert_eq!(resp["response"]["patchType"], "JSONPatch");
    let patch = resp["response"]["patch"].as_str().unwrap();
    let decoded = base64_decode(patch);
    let ops: Value = serde_json::from_slice(&decoded).unwrap();
    assert_eq!(
        ops,
        json!([{"op": "add", "path": "/spec/controlPlane", "value": true}])
    );
    // Nothing to default: no patch.
    let mut explicit = zone();
    explicit["spec"]["controlPlane"] = json!(false);
    let (_, resp) = post(srv.addr, &path, &review("CREATE", explicit, None)).await;
    assert!(resp["response"].get("patch").is_none());
    srv.stop().await;
}

/// The Machine mutating webhook (registered for CREATE) stores machine-api-operator's default
/// secrets.
#[tokio::test]
async fn the_machine_mutating_webhook_defaults_the_secrets() {
    let srv = Server::start(None).await;
    let path = server::path(Kind::Machine, Endpoint::Mutate);
    let machine = json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": "m", "namespace": "openshift-machine-api"},
        "spec": {"providerSpec": {"value": {
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "VSphereMachineProviderSpec",
            "template": "rhcos", "network": {"devices": [{"networkName": "VM Network"}]},
            "workspace": {"server": "vc.example.com", "datacenter": "DC0"}
        }}}
    });
    let (_, resp) = post(srv.addr, &path, &review("CREATE", machine, None)).await;
    assert_eq!(resp["response"]["allowed"], true);
    let ops: Value =
        serde_json::from_slice(&base64_decode(resp["response"]["patch"].as_str().unwrap()))
            .unwrap();
    let text = ops.to_string();
    assert!(
        text.contains("credentialsSecret") && text.contains("userDataSecret"),
        "{text}"
    );
    srv.stop().await;
}

#[tokio::test]
async fn wrong_kind_for_endpoint_is_denied() {
    let srv = Server::start(None).await;
    let path = server::path(Kind::Machine, Endpoint::Validate);
    let (_, resp) = post(srv.addr, &path, &review("CREATE", zone(), None)).await;
    assert_eq!(resp["response"]["allowed"], false);
    srv.stop().await;
}

#[tokio::test]
async fn every_registered_webhook_path_is_served() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/webhook/manifests.yaml"),
    )
    .unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let mut served = std::collections::BTreeSet::new();
    for kind in Kind::ALL {
        served.insert(server::path(kind, Endpoint::Validate));
        served.insert(server::path(kind, Endpoint::Mutate));
    }
    let mut validating_kinds = 0;
    let srv = Server::start(None).await;
    for doc in &docs {
        for hook in doc["webhooks"].as_array().unwrap() {
            let path = hook["clientConfig"]["service"]["path"].as_str().unwrap();
            assert!(served.contains(path), "{path} is registered but not served");
            assert_eq!(hook["admissionReviewVersions"], json!(["v1"]));
            assert_eq!(hook["sideEffects"], "None");
            let rule = &hook["rules"][0];
            let kind = Kind::ALL
                .into_iter()
                .find(|k| {
                    rule["resources"][0] == k.plural()
                        && rule["apiGroups"][0] == k.api_version().split('/').next().unwrap()
                })
                .unwrap_or_else(|| panic!("{path}: rule for no served kind"));
            assert!(
                path.ends_with(&format!("-{}", kind.name().to_lowercase())),
                "{path} vs {kind}"
            );
            if doc["kind"] == "ValidatingWebhookConfiguration" {
                validating_kinds += 1;
            }
            let (status, _) = post(srv.addr, path, &review("DELETE", zone(), None)).await;
            assert_eq!(status, 200, "{path}");
        }
    }
    // Every kind but VSphereClusterIdentity, for which CAPV registers no webhook either.
    assert_eq!(validating_kinds, Kind::ALL.len() - 1);
    let stream = TcpStream::connect(srv.addr).await.unwrap();
    let (status, body) = exchange(stream, "GET", "/healthz", "").await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    srv.stop().await;
}

fn base64_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut buf = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c).unwrap() as u32;
        buf = (buf << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
            buf &= (1 << bits) - 1;
        }
    }
    out
}

/// A self-signed certificate for `localhost` in `dir` (`tls.crt`, `tls.key`); false when
/// openssl cannot make one here (the test is then skipped).
fn make_certificate(dir: &Path) -> bool {
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
        ])
        .arg("-keyout")
        .arg(dir.join("tls.key"))
        .arg("-out")
        .arg(dir.join("tls.crt"))
        .output();
    match status {
        Ok(o) if o.status.success() => true,
        other => {
            eprintln!("skipping an HTTPS test: openssl cannot make a certificate here: {other:?}");
            false
        }
    }
}

#[tokio::test]
async fn https_with_a_certificate_from_files() {
    let dir = tempfile::tempdir().unwrap();
    if !make_certificate(dir.path()) {
        return;
    }
    let srv = Server::start(Some(TlsFiles::in_dir(dir.path()))).await;

    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in
        rustls::pki_types::CertificateDer::pem_file_iter(dir.path().join("tls.crt")).unwrap()
    {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(srv.addr).await.unwrap();
    let tls = connector
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    let path = server::path(Kind::VSphereFailureDomain, Endpoint::Validate);
    let (status, body) = exchange(
        tls,
        "POST",
        &path,
        &review("CREATE", failure_domain("HostGroup"), None).to_string(),
    )
    .await;
    assert_eq!(status, 200);
    let resp: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(resp["response"]["allowed"], false);
    srv.stop().await;
}

/// An upstream object with fields of upstream's feature-gated schema (`authoritativeAPI`, set by
/// the API server in clusters with `MachineAPIMigration`): both endpoints admit it and leave
/// those fields alone.
async fn admitted_unchanged(srv: &Server, kind: Kind, object: Value, gated: &[&str]) {
    let (_, resp) = post(
        srv.addr,
        &server::path(kind, Endpoint::Validate),
        &review("CREATE", object.clone(), None),
    )
    .await;
    assert_eq!(resp["response"]["allowed"], true, "{kind}: {resp}");
    let (_, resp) = post(
        srv.addr,
        &server::path(kind, Endpoint::Mutate),
        &review("CREATE", object, None),
    )
    .await;
    assert_eq!(resp["response"]["allowed"], true, "{kind}: {resp}");
    if let Some(patch) = resp["response"]["patch"].as_str() {
        let ops: Vec<Value> = serde_json::from_slice(&base64_decode(patch)).unwrap();
        for op in &ops {
            let path = op["path"].as_str().unwrap_or_default();
            assert!(
                !gated.iter().any(|g| path.starts_with(g)),
                "{kind}: the patch touches {path}"
            );
        }
    }
}

fn upstream_fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/manifests/upstream")
        .join(name);
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn machine_and_cpms_with_authoritative_api_pass_unchanged() {
    let srv = Server::start(None).await;
    let mut machine = upstream_fixture("cpms-04-machine-vsphere-master-0.yaml");
    machine["spec"]["authoritativeAPI"] = json!("MachineAPI");
    machine["status"] = json!({"authoritativeAPI": "MachineAPI", "synchronizedGeneration": 2});
    admitted_unchanged(
        &srv,
        Kind::Machine,
        machine,
        &["/spec/authoritativeAPI", "/status"],
    )
    .await;
    let mut cpms = upstream_fixture("cpms-01-cpms-vsphere-3fd-static-ip.yaml");
    cpms["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["spec"]["authoritativeAPI"] =
        json!("ClusterAPI");
    admitted_unchanged(
        &srv,
        Kind::ControlPlaneMachineSet,
        cpms,
        &["/spec/template/machines_v1beta1_machine_openshift_io/spec/authoritativeAPI"],
    )
    .await;
    srv.stop().await;
}

/// The topology pass-through needs the request's `dryRun`: the server hands it to the
/// VSphereMachineTemplate rules. A changed template annotated for a topology dry-run is allowed
/// in a dry-run request and denied (CAPV's message) in a real one; the VSphereMachine
/// defaulter patches `spec.datacenter`.
#[tokio::test]
async fn machine_template_immutability_lets_topology_dry_runs_through() {
    let srv = Server::start(None).await;
    let path = server::path(Kind::VSphereMachineTemplate, Endpoint::Validate);
    let template = |hw: &str| {
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachineTemplate",
            "metadata": {"name": "workers", "namespace": "default",
                "annotations": {"topology.cluster.x-k8s.io/dry-run": ""}},
            "spec": {"template": {"spec": {"template": "t", "hardwareVersion": hw}}}})
    };
    for (dry_run, allowed) in [(true, true), (false, false)] {
        let mut r = review("UPDATE", template("vmx-17"), Some(template("vmx-16")));
        r["request"]["dryRun"] = dry_run.into();
        let (status, resp) = post(srv.addr, &path, &r).await;
        assert_eq!(status, 200);
        assert_eq!(
            resp["response"]["allowed"], allowed,
            "dryRun {dry_run}: {resp}"
        );
        if !allowed {
            let msg = resp["response"]["status"]["message"].as_str().unwrap();
            assert!(
                msg.contains("spec.template.spec")
                    && msg.contains("Please create a new resource instead"),
                "{msg}"
            );
        }
    }
    let machine = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachine",
        "metadata": {"name": "m", "namespace": "default"}, "spec": {"template": "t", "powerOffMode": "hard"}});
    let (_, resp) = post(
        srv.addr,
        &server::path(Kind::VSphereMachine, Endpoint::Mutate),
        &review("CREATE", machine, None),
    )
    .await;
    use base64::Engine;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(resp["response"]["patch"].as_str().unwrap())
        .unwrap();
    let patch: Value = serde_json::from_slice(&patch).unwrap();
    assert!(
        patch
            .as_array()
            .unwrap()
            .iter()
            .any(|op| op["path"] == "/spec/datacenter" && op["value"] == "*"),
        "{patch}"
    );
    srv.stop().await;
}

const SHORT: std::time::Duration = std::time::Duration::from_millis(300);

/// Waits until the server closes `stream`; returns how long after `started` (fails past 5 s).
async fn closed_after(mut stream: TcpStream, started: std::time::Instant) -> std::time::Duration {
    let mut sink = Vec::new();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_end(&mut sink),
    )
    .await;
    assert!(closed.is_ok(), "the server kept a silent connection open");
    started.elapsed()
}

#[tokio::test]
async fn a_caller_that_sends_no_headers_is_dropped_after_the_header_timeout() {
    let limits = Limits {
        header_read_timeout: SHORT,
        ..Limits::default()
    };
    let srv = Server::start_with(None, limits).await;
    let started = std::time::Instant::now();
    let silent = TcpStream::connect(srv.addr).await.unwrap();
    let mut slow = TcpStream::connect(srv.addr).await.unwrap();
    slow.write_all(b"POST /convert HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    for stream in [silent, slow] {
        let took = closed_after(stream, started).await;
        assert!(took >= SHORT / 2, "closed before the timeout: {took:?}");
    }
    // A caller that does send its request is served as before.
    let (status, body) = exchange(
        TcpStream::connect(srv.addr).await.unwrap(),
        "GET",
        "/healthz",
        "",
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    srv.stop().await;
}

#[tokio::test]
async fn a_caller_that_never_finishes_the_tls_handshake_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    if !make_certificate(dir.path()) {
        return;
    }
    let limits = Limits {
        handshake_timeout: SHORT,
        ..Limits::default()
    };
    let srv = Server::start_with(Some(TlsFiles::in_dir(dir.path())), limits).await;
    let started = std::time::Instant::now();
    let silent = TcpStream::connect(srv.addr).await.unwrap();
    let took = closed_after(silent, started).await;
    assert!(took >= SHORT / 2, "closed before the timeout: {took:?}");
    srv.stop().await;
}

#[tokio::test]
async fn connections_past_the_cap_wait_until_a_slot_frees() {
    let limits = Limits {
        max_connections: 2,
        ..Limits::default()
    };
    let srv = Server::start_with(None, limits).await;
    let first = TcpStream::connect(srv.addr).await.unwrap();
    let _second = TcpStream::connect(srv.addr).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let addr = srv.addr;
    let mut third = tokio::spawn(async move {
        exchange(
            TcpStream::connect(addr).await.unwrap(),
            "GET",
            "/healthz",
            "",
        )
        .await
    });
    // Two idle connections hold both slots: the third is not taken on, however long it waits
    // (the header timeout is 10 s), and costs the server nothing meanwhile.
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(500), &mut third)
            .await
            .is_err(),
        "a connection past the cap was served"
    );
    drop(first);
    let (status, body) = tokio::time::timeout(std::time::Duration::from_secs(5), third)
        .await
        .expect("served once a slot freed")
        .unwrap();
    assert_eq!((status, body.as_str()), (200, "ok"));
    srv.stop().await;
}

/// Issue 42 N6: the header timeout does not cover the body; the request timeout does. A body
/// trickled a byte at a time (each byte well within any read timeout) is cut off when the whole
/// request has taken the request timeout, and a caller who sends its request at once, on the
/// same limits, is served.
#[tokio::test]
async fn a_trickled_body_is_cut_off_at_the_request_timeout() {
    let limits = Limits {
        request_timeout: SHORT,
        ..Limits::default()
    };
    let srv = Server::start_with(None, limits).await;
    let mut slow = TcpStream::connect(srv.addr).await.unwrap();
    let started = std::time::Instant::now();
    slow.write_all(b"POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
        .await
        .unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..100 {
            if slow.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        }
        slow
    });
    let mut slow = trickle.await.unwrap();
    let mut sink = Vec::new();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(1),
        slow.read_to_end(&mut sink),
    )
    .await;
    let took = started.elapsed();
    assert!(
        closed.is_ok(),
        "the trickling caller was still connected after {took:?}"
    );
    assert!(took >= SHORT, "closed before the timeout: {took:?}");
    let (status, body) = exchange(
        TcpStream::connect(srv.addr).await.unwrap(),
        "GET",
        "/healthz",
        "",
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    srv.stop().await;
}

/// A connection to `to` from the loopback address `source` (127.0.0.0/8 is all loopback on
/// Linux, so each address is another peer to the server).
async fn connect_from(source: &str, to: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

/// Whether the server closes `stream` within a second without being sent anything.
async fn closed_at_once(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(1), stream.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// Issue 42 N6: one peer holding idle connections takes at most its share of the slots; a caller
/// from another address is still served.
#[tokio::test]
async fn one_peer_cannot_take_every_slot() {
    let limits = Limits {
        max_connections: 4,
        max_connections_per_peer: 2,
        ..Limits::default()
    };
    let srv = Server::start_with(None, limits).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(connect_from("127.0.0.1", srv.addr).await);
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut refused = 0;
    for stream in &mut held {
        if closed_at_once(stream).await {
            refused += 1;
        }
    }
    assert_eq!(
        refused, 2,
        "the peer's connections past its share are closed"
    );
    let served = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        exchange(
            connect_from("127.0.0.2", srv.addr).await,
            "GET",
            "/healthz",
            "",
        ),
    )
    .await
    .expect("another peer is served while the first holds its share");
    assert_eq!((served.0, served.1.as_str()), (200, "ok"));
    srv.stop().await;
}

/// Issue 42 N7: a page of 500 objects of 8 KiB (over 4 MiB, twice axum's default limit) converts;
/// a review over [`conversion::MAX_BODY_BYTES`] is refused as too large before it is read.
#[tokio::test]
async fn a_list_page_converts_and_a_review_over_the_limit_is_refused() {
    use vsphere_provider::webhook::conversion;
    let srv = Server::start(None).await;
    let object = |i: usize| {
        let mut fd = failure_domain("Datacenter");
        fd["metadata"]["name"] = json!(format!("fd-{i}"));
        // managedFields and labels make up most of a real object's size.
        fd["metadata"]["labels"] = json!({"padding": "x".repeat(60)});
        fd["metadata"]["managedFields"] =
            json!([{"manager": "m", "fieldsV1": {"f:x": "y".repeat(8 * 1024)}}]);
        fd
    };
    let page: Vec<Value> = (0..500).map(object).collect();
    let request = |objects: Vec<Value>| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u-1", "desiredAPIVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                        "objects": objects}})
    };
    let body = request(page).to_string();
    assert!(body.len() > 4 << 20 && body.len() < conversion::MAX_BODY_BYTES);
    let (status, answer) = exchange(
        TcpStream::connect(srv.addr).await.unwrap(),
        "POST",
        conversion::PATH,
        &body,
    )
    .await;
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["response"]["result"]["status"], "Success");
    let converted = answer["response"]["convertedObjects"].as_array().unwrap();
    assert_eq!(converted.len(), 500);
    assert_eq!(converted[499]["metadata"]["name"], "fd-499");

    // Only the headers are sent: the refusal comes before the body is read.
    let mut over = TcpStream::connect(srv.addr).await.unwrap();
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        conversion::PATH,
        conversion::MAX_BODY_BYTES + 1
    );
    over.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 64];
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), over.read(&mut answer))
        .await
        .expect("answered without the body")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    srv.stop().await;
}

/// The request timeout runs per request: a keep-alive connection that answered one request
/// and then waited longer than the timeout serves its next request.
#[tokio::test]
async fn the_request_timeout_starts_again_with_each_request() {
    let limits = Limits {
        request_timeout: SHORT,
        ..Limits::default()
    };
    let srv = Server::start_with(None, limits).await;
    let mut stream = TcpStream::connect(srv.addr).await.unwrap();
    for _ in 0..2 {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0u8; 256];
        while !answer.ends_with(b"\r\n\r\nok") {
            let n =
                tokio::time::timeout(std::time::Duration::from_secs(2), stream.read(&mut chunk))
                    .await
                    .expect("answered")
                    .unwrap();
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&answer));
            answer.extend_from_slice(&chunk[..n]);
        }
        assert!(answer.starts_with(b"HTTP/1.1 200"));
        tokio::time::sleep(SHORT + SHORT / 2).await;
    }
    srv.stop().await;
}
