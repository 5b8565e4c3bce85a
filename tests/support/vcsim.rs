//! Test harness for the project's vCenter simulator (`hack/vcsim`: the vcsim of the govmomi
//! version pinned in `hack/vcsim/go.mod`, plus a fault-injection / statistics control API under
//! `/__vcsim/`).
//!
//! # Convention
//!
//! Integration tests (`tests/*.rs`) include this file as a module named `vcsim`:
//!
//! ```ignore
//! #[path = "support/vcsim.rs"]
//! mod vcsim;
//! use vcsim::{FaultKind, FaultSpec, Vcsim};
//! ```
//!
//! (`tests/support/` is not a test target of its own; every test binary compiles its own copy.)
//!
//! # Usage
//!
//! ```ignore
//! let sim = Vcsim::builder().clusters(2).hosts(2).pools(1).start().await;
//! let url = sim.url(); // "http://127.0.0.1:PORT/sdk"
//! sim.inject(FaultSpec::new(FaultKind::Http503).method("RetrievePropertiesEx")).await;
//! let stats = sim.stats().await;
//! assert_eq!(stats.soap("Login"), 1);
//! ```
//!
//! Every `start()` launches a separate vcsim process on `127.0.0.1:0` (the simulator picks a free
//! port and reports it through `-url-file`), so tests are independent and can run in parallel.
//! The binary is `$VCSIM_BIN` if set (hack/test.sh sets it), else whatever `hack/vcsim/build.sh`
//! prints (built once and cached under `${XDG_CACHE_HOME:-~/.cache}/vsphere-provider/vcsim/`).
//!
//! The process gets its own temporary directory (also its `TMPDIR`, so vcsim's datastore
//! directories land there) and is killed when the [`Vcsim`] is dropped; it also exits by itself
//! when the test process dies, because it watches its stdin pipe (`-exit-on-eof`).
//!
//! TLS: with `.tls(true)` vcsim serves a freshly generated self-signed ECDSA P-256 certificate
//! (CA:FALSE, SANs 127.0.0.1, ::1, localhost); [`Vcsim::cert_pem`] returns it and
//! [`Vcsim::thumbprint_sha256`] / [`Vcsim::thumbprint_sha1`] give its thumbprints. It works as its
//! own trust anchor in rustls. `.tls_legacy_cert(true)` serves a fresh RSA-1024 CA:TRUE
//! certificate instead (the shape of old vcsim's built-in one), which rustls/webpki rejects in
//! every verifying configuration.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde::Deserialize;
use tokio::process::{Child, ChildStdin, Command};

/// How long `start()` waits for vcsim to publish its URL.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Path of the vcsim binary: `$VCSIM_BIN`, else built (once per test binary) by
/// `hack/vcsim/build.sh`.
pub fn vcsim_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("VCSIM_BIN").filter(|v| !v.is_empty()) {
            let bin = PathBuf::from(bin);
            assert!(
                bin.is_file(),
                "VCSIM_BIN={} does not exist; unset it or run hack/vcsim/build.sh",
                bin.display()
            );
            return bin;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/vcsim/build.sh");
        let out = std::process::Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} failed ({}); see its output above",
            script.display(),
            out.status
        );
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let bin = PathBuf::from(&path);
        assert!(
            bin.is_file(),
            "{} printed {path:?}, which is not a file",
            script.display()
        );
        bin
    })
}

/// The ring crypto provider (the crate uses `rustls-no-provider`; nothing is installed globally).
pub fn ring_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Accepts any server certificate and any handshake signature (even RSA-1024). For the control
/// API and for tests that do not care about server identity.
#[derive(Debug)]
pub struct AcceptAnyCert;

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        ring_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A reqwest client (ring provider) that accepts any server certificate; also fine for plain HTTP.
pub fn insecure_client() -> reqwest::Client {
    let config = rustls::ClientConfig::builder_with_provider(ring_provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCert))
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .build()
        .expect("building the insecure reqwest client")
}

/// A reqwest client (ring provider) trusting exactly the given PEM certificate(s) as roots.
pub fn client_trusting_pem(pem: &str) -> Result<reqwest::Client, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let cert = cert.map_err(|e| format!("bad PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("certificate rejected as trust anchor: {e}"))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(ring_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .build()
        .map_err(|e| e.to_string())
}

/// Wraps a SOAP body element (e.g. `<Login xmlns="urn:vim25">…</Login>`) in an envelope.
pub fn soap_envelope(body: &str) -> String {
    format!(
        concat!(
            r#"<?xml version="1.0" encoding="UTF-8"?>"#,
            r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" "#,
            r#"xmlns:xsd="http://www.w3.org/2001/XMLSchema" "#,
            r#"xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">"#,
            "<soapenv:Body>{}</soapenv:Body></soapenv:Envelope>"
        ),
        body
    )
}

/// Builder for a vcsim instance; unset values keep vcsim's `simulator.VPX()` defaults
/// (dc 1, cluster 1, host 3, standalone-host 1, pool 0, ds 1, vm 2, folder 0, pg 1).
#[derive(Debug, Clone, Default)]
pub struct VcsimBuilder {
    datacenters: Option<u32>,
    clusters: Option<u32>,
    hosts: Option<u32>,
    standalone_hosts: Option<u32>,
    pools: Option<u32>,
    datastores: Option<u32>,
    vms: Option<u32>,
    folders: Option<u32>,
    portgroups: Option<u32>,
    autostart: Option<bool>,
    delay_ms: Option<u64>,
    method_delays: Vec<(String, u64)>,
    idle_timeout: Option<Duration>,
    credentials: Option<(String, String)>,
    tls: bool,
    tls_legacy_cert: bool,
    trace: bool,
    extra_args: Vec<String>,
}

impl VcsimBuilder {
    /// `-dc`: datacenters.
    pub fn datacenters(mut self, n: u32) -> Self {
        self.datacenters = Some(n);
        self
    }
    /// `-cluster`: clusters per datacenter.
    pub fn clusters(mut self, n: u32) -> Self {
        self.clusters = Some(n);
        self
    }
    /// `-host`: hosts per cluster.
    pub fn hosts(mut self, n: u32) -> Self {
        self.hosts = Some(n);
        self
    }
    /// `-standalone-host`: standalone hosts per datacenter.
    pub fn standalone_hosts(mut self, n: u32) -> Self {
        self.standalone_hosts = Some(n);
        self
    }
    /// `-pool`: child resource pools per cluster (`DC0_C0_RP1..n` under `Resources`).
    pub fn pools(mut self, n: u32) -> Self {
        self.pools = Some(n);
        self
    }
    /// `-ds`: datastores (`LocalDS_0..`).
    pub fn datastores(mut self, n: u32) -> Self {
        self.datastores = Some(n);
        self
    }
    /// `-vm`: VMs per resource pool and per standalone host.
    pub fn vms(mut self, n: u32) -> Self {
        self.vms = Some(n);
        self
    }
    /// `-folder`: datacenters placed within a folder (`F0/DC0/...`).
    pub fn folders(mut self, n: u32) -> Self {
        self.folders = Some(n);
        self
    }
    /// `-pg`: distributed portgroups per datacenter.
    pub fn portgroups(mut self, n: u32) -> Self {
        self.portgroups = Some(n);
        self
    }
    /// `-autostart`: power on the model's VMs (vcsim default true).
    pub fn autostart(mut self, on: bool) -> Self {
        self.autostart = Some(on);
        self
    }
    /// `-delay`: milliseconds added to every (valid) SOAP call.
    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = Some(ms);
        self
    }
    /// `-method-delay`: extra milliseconds for one SOAP method (may be repeated).
    pub fn method_delay_ms(mut self, method: &str, ms: u64) -> Self {
        self.method_delays.push((method.to_string(), ms));
        self
    }
    /// `-idle-timeout`: session idle timeout (SOAP and REST).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }
    /// `-username`/`-password`: the only accepted SOAP login (REST still accepts any).
    pub fn credentials(mut self, user: &str, password: &str) -> Self {
        self.credentials = Some((user.to_string(), password.to_string()));
        self
    }
    /// `-tls`: serve HTTPS with a fresh self-signed ECDSA certificate.
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }
    /// `-tls -tls-legacy-cert`: serve HTTPS with a fresh RSA-1024 CA:TRUE certificate.
    pub fn tls_legacy_cert(mut self, on: bool) -> Self {
        self.tls_legacy_cert = on;
        if on {
            self.tls = true;
        }
        self
    }
    /// `-trace`: dump SOAP traffic to vcsim's stderr (see [`Vcsim::stderr_log`]).
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }
    /// Any other vcsim flag, verbatim.
    pub fn arg(mut self, arg: &str) -> Self {
        self.extra_args.push(arg.to_string());
        self
    }

    fn args(&self, dir: &Path) -> Vec<String> {
        let mut args = vec![
            "-l".to_string(),
            "127.0.0.1:0".to_string(),
            "-exit-on-eof".to_string(),
            format!("-url-file={}", dir.join("url").display()),
        ];
        let counts = [
            ("dc", self.datacenters),
            ("cluster", self.clusters),
            ("host", self.hosts),
            ("standalone-host", self.standalone_hosts),
            ("pool", self.pools),
            ("ds", self.datastores),
            ("vm", self.vms),
            ("folder", self.folders),
            ("pg", self.portgroups),
        ];
        for (flag, value) in counts {
            if let Some(n) = value {
                args.push(format!("-{flag}={n}"));
            }
        }
        if let Some(on) = self.autostart {
            args.push(format!("-autostart={on}"));
        }
        if let Some(ms) = self.delay_ms {
            args.push(format!("-delay={ms}"));
        }
        if !self.method_delays.is_empty() {
            let list: Vec<String> = self
                .method_delays
                .iter()
                .map(|(m, ms)| format!("{m}:{ms}"))
                .collect();
            args.push(format!("-method-delay={}", list.join(",")));
        }
        if let Some(t) = self.idle_timeout {
            args.push(format!("-idle-timeout={}ms", t.as_millis().max(1)));
        }
        if let Some((user, password)) = &self.credentials {
            args.push(format!("-username={user}"));
            args.push(format!("-password={password}"));
        }
        if self.tls {
            args.push("-tls".to_string());
            args.push(format!("-cert-file={}", dir.join("cert.pem").display()));
        }
        if self.tls_legacy_cert {
            args.push("-tls-legacy-cert".to_string());
        }
        if self.trace {
            args.push("-trace".to_string());
        }
        args.extend(self.extra_args.iter().cloned());
        args
    }

    /// Starts vcsim and waits (up to 20 s) until it listens. Panics with vcsim's stderr on failure.
    pub async fn start(self) -> Vcsim {
        let bin = vcsim_binary();
        let dir = tempfile::Builder::new()
            .prefix("vcsim-")
            .tempdir()
            .expect("creating a temp dir for vcsim");
        let args = self.args(dir.path());
        let stdout = std::fs::File::create(dir.path().join("stdout.log")).expect("stdout log");
        let stderr = std::fs::File::create(dir.path().join("stderr.log")).expect("stderr log");
        let started = Instant::now();
        let mut child = Command::new(bin)
            .args(&args)
            .env("TMPDIR", dir.path())
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", bin.display()));
        let stdin = child.stdin.take();

        let url_file = dir.path().join("url");
        let url = loop {
            if let Ok(text) = std::fs::read_to_string(&url_file) {
                let text = text.trim().to_string();
                if !text.is_empty() {
                    break text;
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "vcsim exited ({status}) before listening\n  command: {} {}\n  stderr:\n{}",
                    bin.display(),
                    args.join(" "),
                    read_log(&dir.path().join("stderr.log"))
                );
            }
            if started.elapsed() > START_TIMEOUT {
                let _ = child.start_kill();
                panic!(
                    "vcsim did not write {} within {START_TIMEOUT:?}\n  command: {} {}\n  stderr:\n{}",
                    url_file.display(),
                    bin.display(),
                    args.join(" "),
                    read_log(&dir.path().join("stderr.log"))
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let startup = started.elapsed();

        let parsed = url::Url::parse(&url).unwrap_or_else(|e| panic!("vcsim URL {url:?}: {e}"));
        let base_url = format!(
            "{}://{}:{}",
            parsed.scheme(),
            parsed.host_str().unwrap_or("127.0.0.1"),
            parsed.port_or_known_default().unwrap_or(80)
        );
        let cert_pem = if self.tls {
            Some(
                std::fs::read_to_string(dir.path().join("cert.pem"))
                    .expect("vcsim -tls did not write -cert-file"),
            )
        } else {
            None
        };

        Vcsim {
            child,
            stdin,
            url,
            base_url,
            cert_pem,
            startup,
            credentials: self
                .credentials
                .clone()
                .unwrap_or_else(|| ("user".to_string(), "pass".to_string())),
            control: insecure_client(),
            dir,
        }
    }
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| format!("<cannot read {}: {e}>", path.display()))
}

/// A fault for the next matching request(s); see hack/vcsim/README.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// HTTP 503 with a short text body; the simulator is not called.
    Http503,
    /// The TCP connection is closed (RST) without any response.
    Drop,
    /// SOAP: HTTP 500 with vcsim's exact NotAuthenticated fault, and the cookie's session is
    /// terminated. REST: HTTP 401 with an empty body, and the REST session is terminated.
    NotAuthenticated,
    /// Sleep, then serve normally.
    Delay(Duration),
    /// Not a request fault: the next `count` `PowerOnMultiVM_Task` batches that name the VM
    /// `vm` leave it not attempted, as vCenter does when DRS finds no host for it — the task
    /// succeeds, its `ClusterPowerOnVmResult.notAttempted` lists the VM with an
    /// `InsufficientResourcesFault`, and the batch's other VMs are powered on. (The spec's
    /// `method` must stay unset; it is always `PowerOnMultiVM_Task`.)
    RefusePowerOn { vm: String },
}

/// What [`Vcsim::inject`] queues: the next `count` requests matching `method` fail with `kind`.
/// `method` matches the SOAP operation (the first element in `soapenv:Body`) exactly, or any
/// substring of a REST request's path and query; `None` matches every request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSpec {
    pub kind: FaultKind,
    pub count: u32,
    pub method: Option<String>,
}

impl FaultSpec {
    /// One occurrence, any request.
    pub fn new(kind: FaultKind) -> Self {
        FaultSpec {
            kind,
            count: 1,
            method: None,
        }
    }
    pub fn count(mut self, count: u32) -> Self {
        self.count = count;
        self
    }
    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_string());
        self
    }

    fn to_json(&self) -> serde_json::Value {
        let (kind, delay_ms) = match &self.kind {
            FaultKind::Http503 => ("http503", 0),
            FaultKind::Drop => ("drop", 0),
            FaultKind::NotAuthenticated => ("notauthenticated", 0),
            FaultKind::Delay(d) => ("delay", d.as_millis() as u64),
            FaultKind::RefusePowerOn { .. } => ("poweron-refuse", 0),
        };
        let mut v = serde_json::json!({ "kind": kind, "count": self.count, "delay_ms": delay_ms });
        if let FaultKind::RefusePowerOn { vm } = &self.kind {
            v["vm"] = serde_json::Value::String(vm.clone());
        }
        if let Some(m) = &self.method {
            v["method"] = serde_json::Value::String(m.clone());
        }
        v
    }
}

/// Requests vcsim received (including faulted ones; control API calls excluded).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct Stats {
    /// SOAP operation name (`Login`, `RetrievePropertiesEx`, `<invalid>`) → count.
    pub soap: BTreeMap<String, u64>,
    /// `METHOD /rest/path[?query]` → count.
    pub rest: BTreeMap<String, u64>,
    /// Anything else (`GET /about`, `GET /sdk/vimServiceVersions.xml`, …).
    #[serde(default)]
    pub other: BTreeMap<String, u64>,
    pub total: u64,
}

impl Stats {
    /// Calls of one SOAP operation.
    pub fn soap(&self, op: &str) -> u64 {
        self.soap.get(op).copied().unwrap_or(0)
    }
    /// All SOAP calls.
    pub fn soap_total(&self) -> u64 {
        self.soap.values().sum()
    }
    /// REST calls whose key (`METHOD path?query`) contains `needle`.
    pub fn rest_matching(&self, needle: &str) -> u64 {
        self.rest
            .iter()
            .filter(|(k, _)| k.contains(needle))
            .map(|(_, v)| v)
            .sum()
    }
    /// All REST calls.
    pub fn rest_total(&self) -> u64 {
        self.rest.values().sum()
    }
}

/// Sessions terminated by [`Vcsim::expire_sessions`].
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
pub struct ExpiredSessions {
    pub soap: u64,
    pub rest: u64,
}

/// A running vcsim process; killed on drop.
pub struct Vcsim {
    child: Child,
    stdin: Option<ChildStdin>,
    url: String,
    base_url: String,
    cert_pem: Option<String>,
    startup: Duration,
    credentials: (String, String),
    control: reqwest::Client,
    // Last field: removed after the child has been killed.
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Vcsim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vcsim")
            .field("url", &self.url)
            .field("pid", &self.child.id())
            .finish()
    }
}

impl Vcsim {
    pub fn builder() -> VcsimBuilder {
        VcsimBuilder::default()
    }

    /// A default-topology vcsim.
    pub async fn start_default() -> Vcsim {
        Self::builder().start().await
    }

    /// The SOAP endpoint, `http(s)://127.0.0.1:PORT/sdk`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `scheme://127.0.0.1:PORT` (REST lives under `/rest/...`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `127.0.0.1:PORT`.
    pub fn host_port(&self) -> &str {
        self.base_url
            .split_once("://")
            .map(|(_, rest)| rest)
            .unwrap_or(&self.base_url)
    }

    /// The server certificate (PEM) when started with TLS.
    pub fn cert_pem(&self) -> Option<String> {
        self.cert_pem.clone()
    }

    /// The server certificate (DER) when started with TLS.
    pub fn cert_der(&self) -> Option<Vec<u8>> {
        let pem = self.cert_pem.as_ref()?;
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).expect("vcsim wrote a bad PEM");
        Some(der.as_ref().to_vec())
    }

    /// SHA-256 thumbprint of the server certificate, upper-case hex pairs joined by `:`.
    pub fn thumbprint_sha256(&self) -> Option<String> {
        use sha2::Digest;
        self.cert_der()
            .map(|der| colon_hex(sha2::Sha256::digest(&der).as_slice()))
    }

    /// SHA-1 thumbprint of the server certificate, upper-case hex pairs joined by `:`
    /// (the form vSphere shows).
    pub fn thumbprint_sha1(&self) -> Option<String> {
        use sha1::Digest;
        self.cert_der()
            .map(|der| colon_hex(sha1::Sha1::digest(&der).as_slice()))
    }

    /// A SOAP login that works: the configured `credentials`, else vcsim's default `user`/`pass`
    /// (without `-username`/`-password` any non-empty pair is accepted).
    pub fn credentials(&self) -> (&str, &str) {
        (&self.credentials.0, &self.credentials.1)
    }

    /// Time from spawn until the URL was published.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// vcsim's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Everything vcsim wrote to stderr so far (log lines, `-trace` output).
    pub fn stderr_log(&self) -> String {
        read_log(&self.dir.path().join("stderr.log"))
    }

    /// The instance's private temp directory (also vcsim's `TMPDIR`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn control_url(&self, path: &str) -> String {
        format!("{}/__vcsim/{path}", self.base_url)
    }

    async fn control_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let mut req = self.control.request(method.clone(), self.control_url(path));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("vcsim control {method} {path}: {e}"));
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        assert!(
            status.is_success(),
            "vcsim control {method} {path}: HTTP {status}: {text}"
        );
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("vcsim control {method} {path}: bad JSON {text:?}: {e}"))
    }

    /// Queues a fault; faults are consumed in the order they were queued.
    pub async fn inject(&self, spec: FaultSpec) {
        self.control_call(reqwest::Method::POST, "fault", Some(spec.to_json()))
            .await;
    }

    /// Number of queued fault entries not yet fully consumed.
    pub async fn pending_faults(&self) -> usize {
        let v = self.control_call(reqwest::Method::GET, "fault", None).await;
        v.as_array().map(Vec::len).unwrap_or(0)
    }

    /// Drops all queued faults.
    pub async fn clear_faults(&self) {
        self.control_call(reqwest::Method::DELETE, "fault", None)
            .await;
    }

    /// Terminates every SOAP and REST session, as the idle timeout would: the next call with an
    /// old cookie gets NotAuthenticated (SOAP) or 401 (REST).
    pub async fn expire_sessions(&self) -> ExpiredSessions {
        let v = self
            .control_call(reqwest::Method::POST, "sessions/expire", None)
            .await;
        serde_json::from_value(v).expect("expire response")
    }

    /// Request counters since start or the last [`Vcsim::reset_stats`].
    pub async fn stats(&self) -> Stats {
        let v = self.control_call(reqwest::Method::GET, "stats", None).await;
        serde_json::from_value(v).expect("stats response")
    }

    /// Zeroes the request counters.
    pub async fn reset_stats(&self) {
        self.control_call(reqwest::Method::POST, "stats/reset", None)
            .await;
    }

    /// Graceful shutdown: closes vcsim's stdin (it exits on EOF, like on SIGTERM) and waits up to
    /// 10 s for it to exit; kills it after that.
    pub async fn shutdown(mut self) -> ExitStatus {
        drop(self.stdin.take());
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(status) => status.expect("waiting for vcsim"),
            Err(_) => {
                let _ = self.child.start_kill();
                self.child.wait().await.expect("waiting for killed vcsim")
            }
        }
    }
}

impl Drop for Vcsim {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn colon_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}
