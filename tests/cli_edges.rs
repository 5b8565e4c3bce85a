//! The binary's edges as a newcomer meets them, without a vCenter: what `--help` promises (and
//! that the shipped manifests only pass flags it lists), output into a pipe its reader closed,
//! doctor against the wrong protocol or nothing at all, and a `--server` no manifest uses.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_vsphere-provider");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn help(command: &str) -> String {
    let out = Command::new(BIN)
        .args([command, "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{command} --help");
    String::from_utf8(out.stdout).unwrap()
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The YAML files under `dir`, recursively.
fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(p);
        }
    }
}

/// The `--flags` every container of a shipped manifest passes to `vsphere-provider run`.
fn manager_flags() -> Vec<(String, String)> {
    let mut files = Vec::new();
    yaml_files(&root().join("config"), &mut files);
    let mut flags = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for v in docs {
            let containers = v
                .pointer("/spec/template/spec/containers")
                .and_then(|c| c.as_array())
                .cloned()
                .unwrap_or_default();
            for c in containers {
                let args: Vec<&str> = c["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str())
                    .collect();
                if args.first() != Some(&"run") {
                    continue;
                }
                for a in &args[1..] {
                    if let Some(flag) = a.strip_prefix("--") {
                        let name = flag.split('=').next().unwrap();
                        flags.push((f.display().to_string(), format!("--{name}")));
                    }
                }
            }
        }
    }
    flags
}

/// Every flag the shipped manifests pass to the manager is one `run --help` lists, so an admin
/// reading the Deployment finds each in the help (they were hidden aliases).
#[test]
fn every_flag_the_manifests_pass_to_the_manager_is_in_run_help() {
    let flags = manager_flags();
    assert!(
        flags.iter().any(|(_, f)| f == "--metrics-bind-address"),
        "config/manager/manager.yaml is read: {flags:?}"
    );
    let help = help("run");
    let listed = |flag: &str| {
        help.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
            .any(|w| w == flag)
    };
    let missing: Vec<_> = flags.iter().filter(|(_, f)| !listed(f)).collect();
    assert!(missing.is_empty(), "not in run --help: {missing:?}\n{help}");
}

/// Each command's help says what a newcomer has to guess otherwise: how `run` finds its
/// cluster, the exit codes of `validate`, `doctor` (with its checks) and `reconcile`, that
/// `-f` repeats, and what `--no-state` really does (VMs are adopted by identity, not remade).
#[test]
fn help_says_how_the_cluster_is_found_the_checks_and_the_exit_codes() {
    let run = help("run");
    for s in ["KUBECONFIG", "~/.kube/config", "in-cluster", "Exit codes"] {
        assert!(run.contains(s), "run --help lacks {s:?}:\n{run}");
    }
    let validate = help("validate");
    for s in [
        "Exit codes: 0 every object admitted or skipped; 1 some object rejected; 2",
        "skipped",
        "Repeatable",
    ] {
        assert!(
            validate.contains(s),
            "validate --help lacks {s:?}:\n{validate}"
        );
    }
    let doctor = help("doctor");
    for s in [
        "address",
        "connect",
        "vcenter",
        "login",
        "session",
        "tagging",
        "Exit codes: 0",
    ] {
        assert!(doctor.contains(s), "doctor --help lacks {s:?}:\n{doctor}");
    }
    let reconcile = help("reconcile");
    assert!(reconcile.contains("Exit codes: 0"), "{reconcile}");
    assert!(reconcile.contains("Repeatable: `-f"), "{reconcile}");
    assert!(
        !reconcile.contains("hence a new VM"),
        "--no-state does not make new VMs:\n{reconcile}"
    );
    assert!(
        reconcile.contains("finds and adopts the VMs"),
        "{reconcile}"
    );
}

/// Runs `args` with standard output a pipe whose reader is gone before the first write.
fn into_closed_pipe(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("VSPHERE_USERNAME", "u")
        .env("VSPHERE_PASSWORD", "p")
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

fn assert_quiet(what: &str, out: &Output, code: i32) {
    let (_, err) = text(out);
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{what}: {err}"
    );
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
}

/// A reader that stops reading (`| head -1`) ends the output, not the command with a panic
/// (exit 101): each command exits with its own code, as `cat` would.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    assert_quiet("crds", &into_closed_pipe(&["crds"]), 0);
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone.yaml");
    std::fs::write(
        &zone,
        "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata: {name: zone-a}
spec: {server: 127.0.0.1, failureDomain: zone-a, placementConstraint: {resourcePool: rp}}
",
    )
    .unwrap();
    assert_quiet(
        "validate",
        &into_closed_pipe(&["validate", "-f", zone.to_str().unwrap()]),
        0,
    );
    let server = PlainHttp::start();
    assert_quiet(
        "doctor",
        &into_closed_pipe(&["doctor", "--server", &server.https_url()]),
        1,
    );

    // `| head -1` for real: the reader takes one line, then goes.
    let mut child = Command::new(BIN)
        .arg("crds")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    assert_quiet("crds | head", &child.wait_with_output().unwrap(), 0);
}

/// A server that answers every connection with a plain HTTP response, as vcsim without TLS
/// does; stopped when dropped.
struct PlainHttp {
    port: u16,
}

impl PlainHttp {
    fn start() -> PlainHttp {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let _ = s.write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            }
        });
        PlainHttp { port }
    }

    fn https_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

/// `doctor --server SERVER` with credentials, run to its end.
fn doctor(server: &str) -> Output {
    Command::new(BIN)
        .args(["doctor", "--server", server])
        .env("VSPHERE_USERNAME", "u")
        .env("VSPHERE_PASSWORD", "p")
        .output()
        .unwrap()
}

/// `https://` against a server that speaks plain HTTP: rustls' "corrupt message of type
/// InvalidContentType" comes with the hint to try `http://` on the same port.
#[test]
fn doctor_hints_at_plain_http_when_tls_meets_an_http_answer() {
    let server = PlainHttp::start();
    let out = doctor(&server.https_url());
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL  tls"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "the server may speak plain http; try --server http://127.0.0.1:{}",
            server.port
        )),
        "{stdout}"
    );
}

/// A refused connection, retried, is no round trip: the last line says the attempts could not
/// connect, and says "round trips" once.
#[test]
fn doctor_counts_refused_attempts_apart_from_round_trips() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let out = doctor(&format!("http://127.0.0.1:{port}"));
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let last = stdout.lines().last().unwrap();
    assert!(
        last.starts_with("0 round trips (0 session, 0 read, 0 write): none; ")
            && last.ends_with(" attempt(s) could not connect"),
        "{stdout}"
    );
    assert_eq!(last.matches("round trips").count(), 1, "{last}");
}

/// `--server` on a host no manifest names is not silently dropped: the run says it is unused,
/// names the servers the manifests use and the `--connect-to` that would use it.
#[test]
fn a_server_no_manifest_names_is_said_to_be_unused() {
    let dir = tempfile::tempdir().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    std::fs::write(
        dir.path().join("zone.yaml"),
        format!(
            "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata: {{name: zone-a}}
spec: {{server: 'http://127.0.0.1:{port}', failureDomain: zone-a, placementConstraint: {{resourcePool: rp}}}}
"
        ),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["reconcile", "--no-state", "--dry-run", "-f"])
        .arg(dir.path())
        .args(["--server", "vcenter.example.com"])
        .env("VSPHERE_USERNAME", "u")
        .env("VSPHERE_PASSWORD", "p")
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains(&format!(
            "warning: --server (or VSPHERE_SERVER) https://vcenter.example.com is not used: no \
             manifest names vcenter.example.com; they name http://127.0.0.1:{port}. To connect to \
             https://vcenter.example.com wherever they name 127.0.0.1, pass --connect-to \
             127.0.0.1=https://vcenter.example.com"
        )),
        "{stderr}"
    );
}

/// `http://` to a host that is not this machine is refused before anything is sent (the
/// password would travel unencrypted to whatever answers there); `--allow-remote-http` is the
/// admin's explicit leave. 192.0.2.1 (TEST-NET-1) answers nothing: without the refusal the
/// command would fail later, with "cannot connect".
#[test]
fn plain_http_to_a_remote_vcenter_is_refused_naming_the_flag() {
    let out = Command::new(BIN)
        .args(["inventory", "--server", "http://192.0.2.1/sdk"])
        .env("VSPHERE_USERNAME", "u")
        .env("VSPHERE_PASSWORD", "secret-pw")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("refusing plain http:// to vCenter http://192.0.2.1")
            && stderr.contains("--allow-remote-http"),
        "{stderr}"
    );
    assert!(!stderr.contains("secret-pw") && !stdout.contains("secret-pw"));
    assert!(!stderr.contains("cannot connect"), "{stderr}");
    let help = help("inventory");
    assert!(help.contains("--allow-remote-http"), "{help}");
}

/// A zone naming plain http elsewhere is not ready, saying why, and nothing is sent: 0 round
/// trips (local mode reports them), no login anywhere.
#[test]
fn a_zone_on_remote_plain_http_says_why_and_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for f in [
        "failure-domains.yaml",
        "deployment-zones.yaml",
        "vsphereclusteridentity.yaml",
    ] {
        let text = std::fs::read_to_string(root().join("config/samples").join(f)).unwrap();
        std::fs::write(
            dir.path().join(f),
            text.replace("server: 127.0.0.1", "server: http://192.0.2.1/sdk"),
        )
        .unwrap();
    }
    let out = Command::new(BIN)
        .args(["reconcile", "--no-state", "-f"])
        .arg(dir.path())
        .env("VSPHERE_USERNAME", "u")
        .env("VSPHERE_PASSWORD", "p")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("zone zone-a is not ready: VCenterUnreachable: refusing plain http:// to vCenter http://192.0.2.1"),
        "{stderr}"
    );
    assert!(
        stdout.contains("0/3 zone(s) ready") && stdout.contains(" 0 round trips"),
        "{stdout}"
    );
}
