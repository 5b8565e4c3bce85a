//! The binary's edges as a newcomer meets them, without a vCenter: what `--help` promises (and
//! that the shipped manifests only pass flags it lists), output into a pipe its reader closed,
//! doctor against the wrong protocol or nothing at all, and a `--server` no manifest uses.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_vsphere-provider");

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
