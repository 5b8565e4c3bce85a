//! A real Kubernetes control plane for the tests: Kubernetes' own **kube-apiserver v1.37.2** and
//! **etcd v3.7.0**, built from source through the Go module proxy by `hack/kube/build.sh` (see
//! hack/kube/README.md), started on 127.0.0.1 with TLS, RBAC and ServiceAccount tokens.
//!
//! There is no kube-controller-manager, scheduler or kubelet: no garbage collection, a deleted
//! namespace stays `Terminating` forever, no `default` ServiceAccount (its admission plugin is
//! off), pods stay `Pending`, PodDisruptionBudgets get no status. So every test works in a
//! namespace of its own ([`ControlPlane::namespace`]) and never waits for a namespace to go.
//!
//! # Convention
//!
//! ```ignore
//! #[path = "support/realapi.rs"]
//! mod realapi;
//! use realapi::{Identity, control_plane};
//!
//! let cp = control_plane();                  // started once per test binary, then shared
//! let ns = cp.namespace("crd");              // a fresh namespace for this test
//! cp.apply(&Identity::Admin, "crds", None).ok();
//! let sa = cp.client(&Identity::Controller).await; // kube::Client as the controller's SA
//! ```
//!
//! # What [`control_plane`] sets up (once per test binary)
//!
//! * The binaries of `$KUBE_BIN_DIR` (hack/test.sh sets it), else of the directory
//!   `hack/kube/build.sh` prints (a cold build takes 8–12 min; cached after).
//! * A CA, an apiserver serving certificate (IP SAN 127.0.0.1), an admin client certificate
//!   (CN=admin, O=system:masters) and a ServiceAccount signing key, made with openssl as
//!   `hack/kube/up.sh` makes them; free loopback ports; etcd with `--unsafe-no-fsync`.
//! * As the admin, with kubectl, as a user would: the namespace `vsphere-provider-system`,
//!   `kubectl apply -f crds/` (waiting for every CRD to be Established) and
//!   `kubectl apply -k config/rbac` — unmodified; [`ControlPlane::namespace`] binds the manager's
//!   Secret ClusterRole in each test namespace, as an admin binds it per tenant namespace.
//! * Our conversion webhook, in this process for the binary's life (the library's webhook
//!   server on 127.0.0.1 with a certificate of the harness's CA), and every infrastructure CRD's
//!   `spec.conversion` pointed at it, as config/crd and cert-manager do in a cluster: the CRDs
//!   store v1beta2, so every v1beta1 read and write (the controllers') is converted by it.
//!   A manager process a test starts may point them at itself instead
//!   ([`ControlPlane::conversion_port`] is this one's, to point them back).
//! * [`start_as_previous_release`] before the first [`control_plane`] installs the CRDs of the
//!   release before (tests/fixtures/crds/previous: v1beta1 stored, no conversion) instead, for
//!   the upgrade test; [`ControlPlane::install_crds`] then upgrades them.
//! * A token for the ServiceAccount `vsphere-provider-system/vsphere-provider-controller-manager`
//!   (TokenRequest, `kubectl create token`) in a kubeconfig: [`Identity::Controller`].
//!
//! # Restarts
//!
//! [`ControlPlane::stop_apiserver`] and [`ControlPlane::start_apiserver`] stop kube-apiserver
//! (SIGTERM) and start it again with the same flags — same etcd, certificates, ServiceAccount
//! keys and port — so clients holding the old kubeconfigs and tokens reconnect to the same
//! URL and find every object, as after a control plane restart. The supervisor thread does
//! both (see below for why it must be the one to spawn).
//!
//! # Cleanup guarantee
//!
//! The processes never outlive the test binary, however it ends (normal exit, a panic, SIGKILL):
//! * etcd and kube-apiserver are started with `PR_SET_PDEATHSIG = SIGKILL` (set with `prctl` in
//!   the forked child before `exec`) from a supervisor thread that never exits. The kernel kills
//!   them when that thread dies, which is when the test process dies. (The signal follows the
//!   *thread* that forked the child, which is why a test thread, which ends with its test, must
//!   not be the one to start them.)
//! * A watchdog (`sh`) holds the read end of a pipe whose write end only the test process holds
//!   (close-on-exec, so no other child inherits it). At EOF (the test process is gone) it kills
//!   whatever is left of the recorded pids (checking `/proc/PID/exe` first) and removes the state
//!   directory (certificates, logs, etcd data). It ignores SIGINT/SIGTERM/SIGHUP so a Ctrl-C of
//!   the whole process group still gets its clean-up done.
#![allow(dead_code)]

use std::ffi::{c_int, c_ulong};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// How long etcd, and then kube-apiserver, may take to become ready.
pub const START_TIMEOUT: Duration = Duration::from_secs(90);
/// The controller's namespace and ServiceAccount, as config/rbac names them.
pub const SA_NAMESPACE: &str = "vsphere-provider-system";
pub const SA_NAME: &str = "vsphere-provider-controller-manager";

/// `kind` (as kubectl takes it: `vspheremachine`, `vspheremachines`) pinned to v1beta1 when it
/// is one of our infrastructure kinds: kubectl reads the newest served version (v1beta2, also
/// the storage version) by default, and the tests look at the v1beta1 fields the controllers
/// write.
/// Anything else is returned as it is.
pub fn at_v1beta1(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    vsphere_provider::api::Kind::ALL
        .into_iter()
        .filter(|k| {
            k.api_version()
                .starts_with(vsphere_provider::api::INFRA_GROUP)
        })
        .find(|k| lower == k.name().to_ascii_lowercase() || lower == k.plural())
        .map(|k| {
            format!(
                "{}.v1beta1.{}",
                k.plural(),
                vsphere_provider::api::INFRA_GROUP
            )
        })
        .unwrap_or_else(|| kind.to_string())
}

/// The repository root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// kubectl: `$KUBECTL`, else `kubectl` from PATH.
pub fn kubectl_bin() -> String {
    std::env::var("KUBECTL")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "kubectl".to_string())
}

/// Who talks to the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    /// `system:masters` (client certificate CN=admin).
    Admin,
    /// `system:serviceaccount:vsphere-provider-system:vsphere-provider-controller-manager`, a
    /// TokenRequest token, bound by config/rbac as applied.
    Controller,
    /// Any other kubeconfig (e.g. from [`ControlPlane::service_account`]).
    Kubeconfig(PathBuf),
}

/// The running control plane. See the module documentation.
#[derive(Debug)]
pub struct ControlPlane {
    pub bin_dir: PathBuf,
    /// State directory: pki/, logs, kubeconfigs, etcd data. Removed by the watchdog.
    pub dir: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    pub etcd_url: String,
    pub admin_kubeconfig: PathBuf,
    pub controller_kubeconfig: PathBuf,
    /// PEM of the CA that signs the apiserver's and the admin's certificates (and
    /// [`ControlPlane::issue_certificate`]'s).
    pub ca_cert: PathBuf,
    /// The first kube-apiserver's (a restarted one gets another; see `pids` in `dir`).
    pub apiserver_pid: u32,
    pub etcd_pid: u32,
    /// kube-apiserver spawn → `/readyz` ok.
    pub apiserver_ready_after: Duration,
    /// The whole start: certificates, etcd, kube-apiserver, CRDs, RBAC, token.
    pub started_after: Duration,
    /// The port of this process's conversion webhook (see the module documentation).
    pub conversion_port: u16,
    namespaces: AtomicUsize,
    /// Requests to the supervisor thread ([`ControlPlane::stop_apiserver`] and
    /// [`ControlPlane::start_apiserver`]).
    control: Mutex<mpsc::Sender<Control>>,
}

static CONTROL_PLANE: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
static PREVIOUS_RELEASE: AtomicBool = AtomicBool::new(false);

/// Makes the first [`control_plane`] install the previous release's CRDs (v1beta1 stored, no
/// conversion webhook) instead of crds/; call before it. For the upgrade test.
#[allow(dead_code)]
pub fn start_as_previous_release() {
    PREVIOUS_RELEASE.store(true, Ordering::SeqCst);
}
static SECOND_CONTROL_PLANE: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

/// The test binary's control plane, started on first use (blocking the caller until it is ready;
/// a failed start fails every caller with the same message).
pub fn control_plane() -> &'static ControlPlane {
    started(&CONTROL_PLANE)
}

/// A second control plane, its own etcd, API server and certificates, for tests that need two
/// clusters (`clusterctl move` from one management cluster to another).
pub fn second_control_plane() -> &'static ControlPlane {
    started(&SECOND_CONTROL_PLANE)
}

fn started(cell: &'static OnceLock<Result<ControlPlane, String>>) -> &'static ControlPlane {
    let result = cell.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        // The supervisor thread starts the processes and then parks for the rest of the test
        // binary's life: PR_SET_PDEATHSIG fires when the *thread* that forked them exits.
        std::thread::Builder::new()
            .name("realapi-supervisor".into())
            .spawn(move || supervise(tx))
            .expect("spawning the realapi supervisor thread");
        rx.recv()
            .unwrap_or_else(|_| Err("the realapi supervisor thread died during start".into()))
    });
    match result {
        Ok(cp) => cp,
        Err(e) => panic!("the real kube-apiserver did not start:\n{e}"),
    }
}

/// The directory holding `kube-apiserver` and `etcd`: `$KUBE_BIN_DIR`, else the last line
/// `hack/kube/build.sh` prints.
pub fn kube_bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("KUBE_BIN_DIR").filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        for b in ["kube-apiserver", "etcd"] {
            if !dir.join(b).is_file() {
                return Err(format!(
                    "KUBE_BIN_DIR={} has no {b}; unset it or run hack/kube/build.sh",
                    dir.display()
                ));
            }
        }
        return Ok(dir);
    }
    let script = repo().join("hack/kube/build.sh");
    eprintln!(
        "realapi: KUBE_BIN_DIR is not set; running {} (a cold build takes minutes)",
        script.display()
    );
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed ({})", script.display(), out.status));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default().trim();
    let dir = PathBuf::from(last);
    if !dir.join("kube-apiserver").is_file() {
        return Err(format!(
            "{} printed {last:?}, which holds no kube-apiserver",
            script.display()
        ));
    }
    Ok(dir)
}

// --- process lifetime -----------------------------------------------------------------------

unsafe extern "C" {
    fn prctl(option: c_int, ...) -> c_int;
    fn getppid() -> c_int;
}
const PR_SET_PDEATHSIG: c_int = 1;
const SIGKILL: c_ulong = 9;

/// Makes the kernel SIGKILL the child when the thread that spawns it exits (PR_SET_PDEATHSIG,
/// set between fork and exec). Spawn from a thread that lives as long as the child should.
pub fn kill_when_parent_thread_dies(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id() as c_int;
    // SAFETY: prctl and getppid are async-signal-safe system calls; the closure allocates only
    // on its error paths, which end the child.
    unsafe {
        cmd.pre_exec(move || {
            if prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then no signal would come.
            if getppid() != parent {
                return Err(std::io::Error::other("parent exited before exec"));
            }
            Ok(())
        })
    }
}

/// The watchdog: waits for EOF on stdin (the test process is gone), then kills what is left of
/// the processes listed in `$1/pids` ("PID EXE" lines) and removes `$1`.
const WATCHDOG: &str = r#"
trap '' INT TERM HUP
dir="$1"
cat >/dev/null
if [ -f "$dir/pids" ]; then
  while read -r pid exe; do
    if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]; then kill -KILL "$pid" 2>/dev/null; fi
  done <"$dir/pids"
  i=0
  while [ $i -lt 100 ]; do
    left=0
    while read -r pid exe; do
      if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]; then left=1; fi
    done <"$dir/pids"
    [ $left = 0 ] && break
    sleep 0.1; i=$((i + 1))
  done
fi
rm -rf "$dir"
"#;

fn record_pid(dir: &Path, pid: u32, exe: &Path) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("pids"))
        .expect("writing the pid list");
    writeln!(f, "{pid} {}", exe.display()).expect("writing the pid list");
}

struct Processes {
    etcd: Child,
    apiserver: Child,
    apiserver_spec: ApiserverSpec,
    control: mpsc::Receiver<Control>,
    _watchdog: Child,
    _watchdog_stdin: ChildStdin,
}

/// What a test asks the supervisor thread to do with kube-apiserver (the supervisor spawns it
/// again, so PR_SET_PDEATHSIG still follows the thread that lives as long as the binary).
enum Control {
    /// SIGTERM (a graceful stop, as in a rolling restart), SIGKILL after 60 s; answers once it
    /// has exited.
    Stop(mpsc::Sender<Result<(), String>>),
    /// Start it again with the same flags (etcd, certificates, port); answers once `/readyz`
    /// is ok, with how long that took.
    Start(mpsc::Sender<Result<Duration, String>>),
}

fn supervise(tx: mpsc::Sender<Result<ControlPlane, String>>) {
    let processes = match start() {
        Ok((cp, processes)) => {
            let _ = tx.send(Ok(cp));
            processes
        }
        Err(e) => {
            let _ = tx.send(Err(e));
            // Park anyway: whatever was started stays tied to this thread's life (and the
            // watchdog's pipe stays open until the process exits).
            loop {
                std::thread::park();
            }
        }
    };
    let Processes {
        mut etcd,
        apiserver,
        apiserver_spec,
        control,
        _watchdog,
        _watchdog_stdin,
    } = processes;
    let mut apiserver = Some(apiserver);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the supervisor");
    // Report a server that exits on its own (once); the tests' own errors then make sense.
    let mut reported = false;
    loop {
        match control.recv_timeout(Duration::from_secs(1)) {
            Ok(Control::Stop(reply)) => {
                let result = match apiserver.take() {
                    None => Err("kube-apiserver is not running".to_string()),
                    Some(mut child) => stop_gracefully(&mut child),
                };
                let _ = reply.send(result);
            }
            Ok(Control::Start(reply)) => {
                let result = if apiserver.is_some() {
                    Err("kube-apiserver is already running".to_string())
                } else {
                    apiserver_spec.spawn_ready(&rt).map(|(child, ready_after)| {
                        apiserver = Some(child);
                        reported = false;
                        ready_after
                    })
                };
                let _ = reply.send(result);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // The ControlPlane is static: its sender never goes away while tests run.
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_secs(1)),
        }
        if reported {
            continue;
        }
        if let Ok(Some(status)) = etcd.try_wait() {
            eprintln!("realapi: etcd exited on its own ({status}) during the tests");
            reported = true;
        }
        if let Some(Ok(Some(status))) = apiserver.as_mut().map(Child::try_wait) {
            eprintln!("realapi: kube-apiserver exited on its own ({status}) during the tests");
            reported = true;
        }
    }
}

/// SIGTERM, then SIGKILL if it has not exited within 60 s; waits for the exit.
fn stop_gracefully(child: &mut Child) -> Result<(), String> {
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return Ok(()),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                return child.wait().map(|_| ()).map_err(|e| e.to_string());
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

// --- start ----------------------------------------------------------------------------------

fn run(cmd: &mut Command) -> Result<Output, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out)
}

fn openssl(args: &[&str]) -> Result<(), String> {
    run(Command::new("openssl").args(args)).map(|_| ())
}

fn ec_key(path: &Path) -> Result<(), String> {
    openssl(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        path.to_str().unwrap(),
    ])
}

/// `NAME.key` + `NAME.crt` in `pki`, signed by `pki/ca.{crt,key}`, valid one year.
fn sign(pki: &Path, name: &str, subject: &str, extensions: &str) -> Result<(), String> {
    let p = |f: &str| pki.join(f).to_str().unwrap().to_string();
    ec_key(&pki.join(format!("{name}.key")))?;
    std::fs::write(pki.join(format!("{name}.ext")), extensions).map_err(|e| e.to_string())?;
    openssl(&[
        "req",
        "-new",
        "-key",
        &p(&format!("{name}.key")),
        "-subj",
        subject,
        "-out",
        &p(&format!("{name}.csr")),
    ])?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        &p(&format!("{name}.csr")),
        "-CA",
        &p("ca.crt"),
        "-CAkey",
        &p("ca.key"),
        "-CAcreateserial",
        "-CAserial",
        &p("ca.srl"),
        "-days",
        "365",
        "-sha256",
        "-extfile",
        &p(&format!("{name}.ext")),
        "-out",
        &p(&format!("{name}.crt")),
    ])?;
    let _ = std::fs::remove_file(pki.join(format!("{name}.csr")));
    let _ = std::fs::remove_file(pki.join(format!("{name}.ext")));
    Ok(())
}

fn make_pki(pki: &Path) -> Result<(), String> {
    std::fs::create_dir_all(pki).map_err(|e| e.to_string())?;
    let p = |f: &str| pki.join(f).to_str().unwrap().to_string();
    ec_key(&pki.join("ca.key"))?;
    openssl(&[
        "req",
        "-x509",
        "-new",
        "-key",
        &p("ca.key"),
        "-sha256",
        "-days",
        "365",
        "-subj",
        "/CN=vsphere-provider-realapi-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        "-out",
        &p("ca.crt"),
    ])?;
    sign(
        pki,
        "apiserver",
        "/CN=kube-apiserver",
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,\
         DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n",
    )?;
    sign(
        pki,
        "admin",
        "/O=system:masters/CN=admin",
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         extendedKeyUsage=clientAuth\n",
    )?;
    openssl(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        &p("sa.key"),
    ])?;
    openssl(&["pkey", "-in", &p("sa.key"), "-pubout", "-out", &p("sa.pub")])
}

/// Distinct free loopback ports (nothing listens on them now; a race with another process is
/// caught by the start retry).
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0"))
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().unwrap().port())
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A plain-HTTP GET on loopback, for etcd's `/health`.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

fn spawn_server(bin: &Path, args: &[String], log: &Path, dir: &Path) -> Result<Child, String> {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| e.to_string())?;
    let err_file = log_file.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(err_file);
    kill_when_parent_thread_dies(&mut cmd);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot spawn {}: {e}", bin.display()))?;
    record_pid(dir, child.id(), bin);
    Ok(child)
}

fn start_etcd(bin_dir: &Path, dir: &Path) -> Result<(Child, String), String> {
    let bin = bin_dir.join("etcd");
    let mut last = String::new();
    for attempt in 1..=3 {
        let [client, peer] = free_ports::<2>();
        let url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let data = dir.join(format!("etcd-data-{attempt}"));
        let args = vec![
            "--name=realapi".to_string(),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls={url}"),
            format!("--advertise-client-urls={url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=realapi={peer_url}"),
            "--unsafe-no-fsync".to_string(),
            "--logger=zap".to_string(),
            "--log-level=warn".to_string(),
        ];
        let log = dir.join("etcd.log");
        let mut child = spawn_server(&bin, &args, &log, dir)?;
        let started = Instant::now();
        loop {
            if http_get(client, "/health").is_some_and(|r| r.contains("\"health\":\"true\"")) {
                return Ok((child, url));
            }
            if let Ok(Some(status)) = child.try_wait() {
                last = format!("etcd exited ({status}):\n{}", tail(&log, 20));
                break;
            }
            if started.elapsed() > START_TIMEOUT {
                let _ = child.kill();
                return Err(format!(
                    "etcd not healthy after {START_TIMEOUT:?}:\n{}",
                    tail(&log, 20)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Most likely a port taken between picking and binding: try new ones.
        eprintln!("realapi: etcd start attempt {attempt} failed; retrying");
    }
    Err(last)
}

fn kubeconfig_text(server: &str, ca: &Path, user: &str, namespace: &str, fields: &str) -> String {
    let b64 = |p: &Path| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(p).unwrap())
    };
    format!(
        "apiVersion: v1
kind: Config
clusters:
  - name: realapi
    cluster:
      server: {server}
      certificate-authority-data: {ca}
users:
  - name: {user}
    user:
{fields}
contexts:
  - name: {user}
    context:
      cluster: realapi
      user: {user}
      namespace: {namespace}
current-context: {user}
",
        ca = b64(ca),
    )
}

async fn readyz(kubeconfig: &Path) -> Result<String, String> {
    let client = client_from(kubeconfig).await;
    let req = axum::http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    client.request_text(req).await.map_err(|e| e.to_string())
}

/// How kube-apiserver was started, to start it again the same way (same etcd, certificates,
/// port and flags).
struct ApiserverSpec {
    bin: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    admin: PathBuf,
    dir: PathBuf,
}

impl ApiserverSpec {
    /// Spawns kube-apiserver and waits for `/readyz` (up to [`START_TIMEOUT`]); the time it
    /// took. On a failure the child is killed.
    fn spawn_ready(&self, rt: &tokio::runtime::Runtime) -> Result<(Child, Duration), String> {
        let spawned = Instant::now();
        let mut child = spawn_server(&self.bin, &self.args, &self.log, &self.dir)?;
        loop {
            if rt.block_on(readyz(&self.admin)).is_ok_and(|r| r == "ok") {
                return Ok((child, spawned.elapsed()));
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "kube-apiserver exited ({status}):\n{}",
                    tail(&self.log, 30)
                ));
            }
            if spawned.elapsed() > START_TIMEOUT {
                let verbose = rt
                    .block_on(async {
                        let client = client_from(&self.admin).await;
                        let req = axum::http::Request::get("/readyz?verbose")
                            .body(Vec::new())
                            .unwrap();
                        client.request_text(req).await
                    })
                    .map_err(|e| e.to_string());
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "kube-apiserver not ready after {START_TIMEOUT:?} ({verbose:?}):\n{}",
                    tail(&self.log, 30)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn start_apiserver(
    bin_dir: &Path,
    dir: &Path,
    etcd_url: &str,
) -> Result<(Child, String, Duration, ApiserverSpec), String> {
    let bin = bin_dir.join("kube-apiserver");
    let pki = dir.join("pki");
    let p = |f: &str| pki.join(f).display().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut last = String::new();
    for attempt in 1..=3 {
        let [port] = free_ports::<1>();
        let server = format!("https://127.0.0.1:{port}");
        let args = vec![
            format!("--etcd-servers={etcd_url}"),
            // One etcd per control plane; the prefix only keeps a rerun on the same data apart.
            format!("--etcd-prefix=/registry-{attempt}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", pki.display()),
            format!("--tls-cert-file={}", p("apiserver.crt")),
            format!("--tls-private-key-file={}", p("apiserver.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-issuer={server}"),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            // No kube-controller-manager makes `default` ServiceAccounts.
            "--disable-admission-plugins=ServiceAccount".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            "--endpoint-reconciler-type=none".into(),
        ];
        let log = dir.join("kube-apiserver.log");
        let admin = dir.join("admin.kubeconfig");
        std::fs::write(
            &admin,
            kubeconfig_text(
                &server,
                &pki.join("ca.crt"),
                "admin",
                "default",
                &format!(
                    "      client-certificate: {}\n      client-key: {}",
                    p("admin.crt"),
                    p("admin.key")
                ),
            ),
        )
        .map_err(|e| e.to_string())?;
        let spec = ApiserverSpec {
            bin: bin.clone(),
            args,
            log,
            admin,
            dir: dir.to_path_buf(),
        };
        match spec.spawn_ready(&rt) {
            Ok((child, ready_after)) => return Ok((child, server, ready_after, spec)),
            // Most likely the port taken between picking and binding: try another.
            Err(e) if e.starts_with("kube-apiserver exited") => last = e,
            Err(e) => return Err(e),
        }
        eprintln!("realapi: kube-apiserver start attempt {attempt} failed; retrying");
    }
    Err(last)
}

fn start() -> Result<(ControlPlane, Processes), String> {
    let t0 = Instant::now();
    let bin_dir = kube_bin_dir()?;
    let dir = tempfile::Builder::new()
        .prefix("vsphere-provider-realapi.")
        .tempdir()
        .map_err(|e| format!("creating the state directory: {e}"))?
        .keep();

    // The watchdog first, so that whatever is started below is cleaned up whatever happens.
    let mut watchdog = Command::new("sh")
        .arg("-c")
        .arg(WATCHDOG)
        .arg("realapi-watchdog")
        .arg(&dir)
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the watchdog (sh): {e}"))?;
    let watchdog_stdin = watchdog.stdin.take().expect("piped stdin");

    let pki = dir.join("pki");
    make_pki(&pki)?;
    let (etcd, etcd_url) = start_etcd(&bin_dir, &dir)?;
    let (apiserver, server, apiserver_ready_after, apiserver_spec) =
        start_apiserver(&bin_dir, &dir, &etcd_url)?;
    let (control_tx, control) = mpsc::channel();

    let mut cp = ControlPlane {
        bin_dir,
        admin_kubeconfig: dir.join("admin.kubeconfig"),
        controller_kubeconfig: dir.join(format!("{SA_NAME}.kubeconfig")),
        ca_cert: pki.join("ca.crt"),
        server,
        etcd_url,
        apiserver_pid: apiserver.id(),
        etcd_pid: etcd.id(),
        apiserver_ready_after,
        started_after: Duration::ZERO,
        conversion_port: 0,
        dir,
        namespaces: AtomicUsize::new(0),
        control: Mutex::new(control_tx),
    };

    // As a user installs the provider. The namespace first: it lives in
    // config/manager/namespace.yaml, not in config/rbac, so `kubectl apply -k config/rbac` alone
    // fails on a fresh cluster with `namespaces "vsphere-provider-system" not found` (the
    // ServiceAccount, Role and RoleBinding are namespaced).
    cp.kubectl(&Identity::Admin, &["create", "namespace", SA_NAMESPACE])
        .check()?;
    cp.conversion_port = serve_conversion(&cp)?;
    if PREVIOUS_RELEASE.load(Ordering::SeqCst) {
        cp.apply_crds("tests/fixtures/crds/previous")?;
    } else {
        cp.install_crds()?;
    }
    cp.kubectl(&Identity::Admin, &["apply", "-k", "config/rbac"])
        .check()?;
    let kubeconfig = cp.service_account_kubeconfig(SA_NAMESPACE, SA_NAME)?;
    debug_assert_eq!(kubeconfig, cp.controller_kubeconfig);

    cp.started_after = t0.elapsed();
    eprintln!(
        "realapi: kube-apiserver ready at {} in {:.2?} (spawn → /readyz); control plane with CRDs, \
         RBAC and token in {:.2?}; state in {}",
        cp.server,
        cp.apiserver_ready_after,
        cp.started_after,
        cp.dir.display()
    );
    Ok((
        cp,
        Processes {
            etcd,
            apiserver,
            apiserver_spec,
            control,
            _watchdog: watchdog,
            _watchdog_stdin: watchdog_stdin,
        },
    ))
}

// --- kubectl ----------------------------------------------------------------------------------

/// What a kubectl run printed.
#[derive(Debug, Clone)]
pub struct Kubectl {
    pub command: String,
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    /// Ok(self) when kubectl exited 0, else an error with everything it printed.
    pub fn check(self) -> Result<Self, String> {
        if self.success {
            Ok(self)
        } else {
            Err(format!(
                "`{}` failed:\n{}{}",
                self.command, self.stdout, self.stderr
            ))
        }
    }

    /// Panics unless kubectl exited 0.
    pub fn ok(self) -> Self {
        self.check().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Panics if kubectl exited 0; returns stderr.
    pub fn err(self) -> String {
        assert!(
            !self.success,
            "`{}` succeeded, expected it to fail:\n{}",
            self.command, self.stdout
        );
        self.stderr
    }

    /// stdout as JSON (`-o json`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("`{}`: not JSON ({e}):\n{}", self.command, self.stdout))
    }
}

impl ControlPlane {
    pub fn kubeconfig(&self, id: &Identity) -> PathBuf {
        match id {
            Identity::Admin => self.admin_kubeconfig.clone(),
            Identity::Controller => self.controller_kubeconfig.clone(),
            Identity::Kubeconfig(p) => p.clone(),
        }
    }

    /// Runs kubectl as `id` in the repository root (blocking).
    pub fn kubectl(&self, id: &Identity, args: &[&str]) -> Kubectl {
        self.kubectl_stdin(id, args, None)
    }

    /// Runs kubectl as `id` with `input` on stdin (e.g. `apply -f -`).
    pub fn kubectl_stdin(&self, id: &Identity, args: &[&str], input: Option<&str>) -> Kubectl {
        let kubeconfig = self.kubeconfig(id);
        let cache = self.dir.join("kubectl-cache");
        let mut cmd = Command::new(kubectl_bin());
        cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--cache-dir={}", cache.display()))
            .args(args)
            .current_dir(repo())
            .env_remove("KUBECONFIG")
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let command = format!("kubectl {}", args.join(" "));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", kubectl_bin()));
        if let Some(input) = input {
            let mut stdin = child.stdin.take().unwrap();
            let input = input.to_string();
            // A thread, so a large input cannot deadlock against kubectl's output.
            std::thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
        }
        let out = child.wait_with_output().expect("waiting for kubectl");
        Kubectl {
            command,
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `kubectl apply` of a path as a user would: `-k` for a directory with a
    /// kustomization.yaml, `-f` otherwise; `-n namespace` when given.
    pub fn apply(&self, id: &Identity, path: &str, namespace: Option<&str>) -> Kubectl {
        let full = if Path::new(path).is_absolute() {
            PathBuf::from(path)
        } else {
            repo().join(path)
        };
        let flag = if full.is_dir() && full.join("kustomization.yaml").is_file() {
            "-k"
        } else {
            "-f"
        };
        let mut args = vec!["apply", flag, path];
        if let Some(ns) = namespace {
            args.extend(["-n", ns]);
        }
        self.kubectl(id, &args)
    }

    /// `kubectl apply -f -` of a YAML/JSON text.
    pub fn apply_text(&self, id: &Identity, text: &str, namespace: Option<&str>) -> Kubectl {
        let mut args = vec!["apply", "-f", "-"];
        if let Some(ns) = namespace {
            args.extend(["-n", ns]);
        }
        self.kubectl_stdin(id, &args, Some(text))
    }

    /// A new namespace for one test, `PREFIX-N` (unique in this control plane), where the
    /// manager may read Secrets: config/rbac binds its Secret ClusterRole in its own namespace
    /// only, so this binds it here as an admin does for each tenant namespace it serves
    /// (config/rbac/secrets_role_binding.yaml). Never deleted: without kube-controller-manager
    /// it would stay Terminating.
    pub fn namespace(&self, prefix: &str) -> String {
        let name = self.namespace_unbound(prefix);
        self.bind_secrets(&name);
        name
    }

    /// The manager's Secret ClusterRole bound in the existing namespace `ns` (a RoleBinding for
    /// its ServiceAccount), as an admin opens a tenant namespace to it.
    pub fn bind_secrets(&self, ns: &str) {
        self.kubectl(
            &Identity::Admin,
            &[
                "create",
                "rolebinding",
                "vsphere-provider-secrets",
                "-n",
                ns,
                "--clusterrole=vsphere-provider-secrets",
                &format!("--serviceaccount={SA_NAMESPACE}:{SA_NAME}"),
            ],
        )
        .ok();
    }

    /// [`ControlPlane::namespace`] without the manager's Secret binding: a namespace the admin
    /// has not opened to it.
    pub fn namespace_unbound(&self, prefix: &str) -> String {
        let n = self.namespaces.fetch_add(1, Ordering::SeqCst);
        let name = format!("{prefix}-{n}");
        self.kubectl(&Identity::Admin, &["create", "namespace", &name])
            .ok();
        name
    }

    /// Waits (up to 60 s) until the named CRDs (`plural.group`) are Established.
    pub fn wait_established(&self, crds: &[&str]) {
        let mut args = vec!["wait", "--for=condition=Established", "--timeout=60s"];
        let names: Vec<String> = crds.iter().map(|c| format!("crd/{c}")).collect();
        args.extend(names.iter().map(String::as_str));
        self.kubectl(&Identity::Admin, &args).ok();
    }

    /// A kubeconfig for ServiceAccount `ns/name` (created if missing), holding a TokenRequest
    /// token valid 24 h: `DIR/NAME.kubeconfig`. Binds nothing.
    pub fn service_account_kubeconfig(&self, ns: &str, name: &str) -> Result<PathBuf, String> {
        let exists = self
            .kubectl(
                &Identity::Admin,
                &["get", "serviceaccount", name, "-n", ns, "-o", "name"],
            )
            .success;
        if !exists {
            self.kubectl(
                &Identity::Admin,
                &["create", "serviceaccount", name, "-n", ns],
            )
            .check()?;
        }
        let token = self
            .kubectl(
                &Identity::Admin,
                &["create", "token", name, "-n", ns, "--duration=24h"],
            )
            .check()?
            .stdout
            .trim()
            .to_string();
        let path = self.dir.join(format!("{name}.kubeconfig"));
        std::fs::write(
            &path,
            kubeconfig_text(
                &self.server,
                &self.ca_cert,
                &format!("system:serviceaccount:{ns}:{name}"),
                ns,
                &format!("      token: {token}"),
            ),
        )
        .map_err(|e| e.to_string())?;
        Ok(path)
    }

    /// A kube-rs client as `id`.
    pub async fn client(&self, id: &Identity) -> kube::Client {
        client_from(&self.kubeconfig(id)).await
    }

    /// `kubectl apply -f crds/` and our conversion webhook wired into every infrastructure CRD
    /// (what `kubectl apply -k config/crd` and cert-manager's CA injection make of them).
    pub fn install_crds(&self) -> Result<(), String> {
        self.apply_crds("crds")?;
        self.conversion_to(self.conversion_port)
    }

    /// Points every infrastructure CRD's conversion at `https://127.0.0.1:PORT/convert`, signed
    /// by the harness's CA: this process's webhook ([`ControlPlane::conversion_port`]) or a
    /// manager's.
    pub fn conversion_to(&self, port: u16) -> Result<(), String> {
        use base64::Engine;
        let ca = base64::engine::general_purpose::STANDARD
            .encode(std::fs::read(&self.ca_cert).map_err(|e| format!("the CA: {e}"))?);
        let conversion = serde_json::json!({"spec": {"conversion": {
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/convert"), "caBundle": ca},
            },
        }}});
        self.patch_infrastructure_crds("merge", &conversion.to_string())
    }

    /// Sets our CRDs' conversion back to `None`, before an installer that brings its own webhook
    /// Service (clusterctl's release manifests) applies them: a CRD whose conversion had both a
    /// `url` and a `service` would be refused. Only while no object of our kinds exists; the
    /// installer's manager then converts ([`ControlPlane::conversion_to`] its port).
    #[allow(dead_code)]
    pub fn conversion_to_installer(&self) -> Result<(), String> {
        self.patch_infrastructure_crds(
            "json",
            r#"[{"op":"replace","path":"/spec/conversion","value":{"strategy":"None"}}]"#,
        )
    }

    /// `kubectl patch crd NAME --type=TYPE -p PATCH` of every infrastructure CRD of ours.
    fn patch_infrastructure_crds(&self, patch_type: &str, patch: &str) -> Result<(), String> {
        let patch_type = format!("--type={patch_type}");
        for kind in vsphere_provider::api::Kind::ALL {
            if !kind
                .api_version()
                .starts_with(vsphere_provider::api::INFRA_GROUP)
            {
                continue;
            }
            let name = format!("{}.{}", kind.plural(), vsphere_provider::api::INFRA_GROUP);
            self.kubectl(
                &Identity::Admin,
                &["patch", "crd", &name, &patch_type, "-p", patch],
            )
            .check()?;
        }
        Ok(())
    }

    /// `kubectl apply -f DIR` (relative to the repository) and waits for every CRD to be
    /// Established.
    pub fn apply_crds(&self, dir: &str) -> Result<(), String> {
        self.kubectl(
            &Identity::Admin,
            &["apply", "-f", &repo().join(dir).to_string_lossy()],
        )
        .check()?;
        self.kubectl(
            &Identity::Admin,
            &[
                "wait",
                "--for=condition=Established",
                "crd",
                "--all",
                "--timeout=60s",
            ],
        )
        .check()
        .map(|_| ())
    }

    /// A serving certificate signed by this control plane's CA (so the CA is its `caBundle`):
    /// `(cert.pem, key.pem)` in `dir`, with the given subjectAltNames (`IP:127.0.0.1`, ...).
    pub fn issue_certificate(&self, dir: &Path, name: &str, sans: &[&str]) -> (PathBuf, PathBuf) {
        std::fs::create_dir_all(dir).unwrap();
        let pki = self.dir.join("pki");
        let ext = format!(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
             extendedKeyUsage=serverAuth\nsubjectAltName={}\n",
            sans.join(",")
        );
        // Signed in pki/ (the CA's serial file lives there), then moved out; one at a time.
        static SIGNING: Mutex<()> = Mutex::new(());
        let _one = SIGNING.lock().unwrap_or_else(|e| e.into_inner());
        sign(&pki, name, &format!("/CN={name}"), &ext).unwrap_or_else(|e| panic!("{e}"));
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        std::fs::rename(pki.join(format!("{name}.crt")), &cert).unwrap();
        std::fs::rename(pki.join(format!("{name}.key")), &key).unwrap();
        (cert, key)
    }

    /// Stops kube-apiserver (SIGTERM, as in a rolling restart; SIGKILL after 60 s) and returns
    /// once it has exited; etcd keeps running. Tests sharing this control plane see it down:
    /// a test that stops it holds whatever lock keeps the binary's tests apart.
    pub fn stop_apiserver(&self) {
        let (tx, rx) = mpsc::channel();
        self.control
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Control::Stop(tx))
            .expect("the realapi supervisor thread is gone");
        rx.recv()
            .expect("the realapi supervisor thread is gone")
            .unwrap_or_else(|e| panic!("stopping kube-apiserver: {e}"));
    }

    /// Starts kube-apiserver again, as it was: same etcd (so every object is still there), same
    /// certificates and ServiceAccount keys (so every kubeconfig and token still works), same
    /// port. Returns once `/readyz` is ok, with how long that took.
    pub fn start_apiserver(&self) -> Duration {
        let (tx, rx) = mpsc::channel();
        self.control
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Control::Start(tx))
            .expect("the realapi supervisor thread is gone");
        rx.recv()
            .expect("the realapi supervisor thread is gone")
            .unwrap_or_else(|e| panic!("starting kube-apiserver again: {e}"))
    }

    /// The last lines of kube-apiserver's log (for failure messages).
    pub fn apiserver_log_tail(&self, lines: usize) -> String {
        tail(&self.dir.join("kube-apiserver.log"), lines)
    }
}

/// A kube-rs client from a kubeconfig file.
pub async fn client_from(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap_or_else(|e| panic!("kubeconfig {}: {e}", kubeconfig.display()));
    kube::Client::try_from(config).expect("building a kube client")
}

/// Our webhook server (the library's, conversion among its endpoints) on 127.0.0.1, TLS with a
/// certificate of the harness's CA, in a thread of its own for the binary's life; its port.
fn serve_conversion(cp: &ControlPlane) -> Result<u16, String> {
    let (cert, key) = cp.issue_certificate(
        &cp.dir.join("conversion-webhook"),
        "conversion-webhook",
        &["IP:127.0.0.1"],
    );
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("conversion webhook: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("conversion webhook: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    std::thread::Builder::new()
        .name("realapi-conversion-webhook".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime for the conversion webhook");
            rt.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                let tls = vsphere_provider::webhook::server::TlsFiles { cert, key };
                if let Err(e) = vsphere_provider::webhook::server::serve_listener(
                    listener,
                    Some(tls),
                    std::future::pending(),
                )
                .await
                {
                    eprintln!("realapi: the conversion webhook stopped: {e}");
                }
            });
        })
        .map_err(|e| format!("conversion webhook thread: {e}"))?;
    Ok(port)
}
