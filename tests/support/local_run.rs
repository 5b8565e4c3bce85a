//! Running `vsphere-provider reconcile` as an admin would, for the local-mode tests: against a
//! [`Vcsim`] with its stock credentials, `-o json`, a state file; and reading the `v1` List it
//! prints.
//!
//! ```ignore
//! #[path = "support/vcsim.rs"]
//! mod vcsim;
//! #[path = "support/local_run.rs"]
//! mod local_run;
//! ```
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use secrecy::SecretString;
use serde_json::Value;
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials};

use super::vcsim::Vcsim;

pub const BIN: &str = env!("CARGO_BIN_EXE_vsphere-provider");

/// A client as the admin, to read vCenter back.
pub fn admin(sim: &Vcsim) -> Client {
    Client::new(
        sim.url(),
        Credentials::new("admin", SecretString::from("secret")),
        ClientOptions::default(),
    )
    .unwrap()
}

/// One run: exit code, the printed List, stderr (progress, changes, summary, reasons).
pub struct Run {
    pub code: i32,
    pub list: Value,
    pub stderr: String,
}

impl Run {
    /// The objects of a kind, in printed order.
    pub fn items(&self, kind: &str) -> Vec<&Value> {
        self.list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["kind"] == kind)
            .collect()
    }

    /// The object of a kind by name.
    pub fn object(&self, kind: &str, name: &str) -> Option<&Value> {
        self.items(kind)
            .into_iter()
            .find(|o| o["metadata"]["name"] == name)
    }
}

/// A temporary directory with an empty manifests folder and a state file path in it (both
/// gone when it is dropped).
pub struct Workdir {
    _dir: tempfile::TempDir,
    pub manifests: PathBuf,
    pub state: PathBuf,
}

/// The Ignition config the user-data Secrets hold (a real, minimal one).
#[allow(dead_code)]
pub const IGNITION: &str =
    r#"{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core"}]}}"#;

/// The user-data Secrets an OpenShift installer leaves in `openshift-machine-api`
/// (`worker-user-data`, the provider spec's default, and `master-user-data`), holding
/// [`IGNITION`]: a Machine is not cloned without its user data.
pub const USER_DATA_FILE: &str = "user-data.yaml";

/// A workdir whose manifests hold the user-data Secrets ([`USER_DATA_FILE`]).
pub fn workdir() -> Workdir {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("m");
    std::fs::create_dir(&manifests).unwrap();
    let secret = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: openshift-machine-api}}\nstringData:\n  userData: '{IGNITION}'\n---\n"
        )
    };
    std::fs::write(
        manifests.join(USER_DATA_FILE),
        secret("worker-user-data") + &secret("master-user-data"),
    )
    .unwrap();
    let state = dir.path().join("state.json");
    Workdir {
        _dir: dir,
        manifests,
        state,
    }
}

/// `reconcile -f DIR --server SIM --username … --password … --state STATE`.
pub fn command(sim: &Vcsim, dir: &Path, state: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.args(["reconcile", "-f"])
        .arg(dir)
        .args(["--server", sim.url(), "--username", "admin"])
        .args(["--password", "secret", "--state"])
        .arg(state);
    c
}

/// [`command`] with `-o json` and `extra`, run to its end.
pub fn reconcile(sim: &Vcsim, dir: &Path, state: &Path, extra: &[&str]) -> Run {
    let out = command(sim, dir, state)
        .args(["-o", "json"])
        .args(extra)
        .output()
        .unwrap();
    Run::from(out)
}

/// `reconcile -f DIR --server SIM … --no-state -o json EXTRA`, run to its end.
pub fn reconcile_no_state(sim: &Vcsim, dir: &Path, extra: &[&str]) -> Run {
    let out = Command::new(BIN)
        .args(["reconcile", "-f"])
        .arg(dir)
        .args(["--server", sim.url(), "--username", "admin"])
        .args(["--password", "secret", "--no-state", "-o", "json"])
        .args(extra)
        .output()
        .unwrap();
    Run::from(out)
}

impl From<std::process::Output> for Run {
    fn from(out: std::process::Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            list: serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        }
    }
}

/// A property of the VM at `path`, as vCenter (here vcsim) has it.
pub async fn vm_property(
    sim: &Vcsim,
    path: &str,
    property: &str,
) -> vsphere_provider::vcenter::soap::Node {
    let c = admin(sim);
    let vm = c
        .inventory()
        .await
        .unwrap()
        .at_path(path)
        .unwrap()
        .moref
        .clone();
    let props = c
        .retrieve_objects(&[vm], "VirtualMachine", &[property])
        .await
        .unwrap();
    props[0].props[property].clone()
}

/// The VM's extraConfig at `path`, as vCenter (here vcsim) stores it: key → value.
pub async fn extra_config(sim: &Vcsim, path: &str) -> std::collections::BTreeMap<String, String> {
    vm_property(sim, path, "config.extraConfig")
        .await
        .children
        .iter()
        .filter_map(|o| {
            Some((
                o.child_text("key")?.to_string(),
                o.child_text("value")?.to_string(),
            ))
        })
        .collect()
}

/// Start `reconcile` (with `extra`) `times` times, each killed after a random delay below
/// `max_ms`. Returns the seed (printed with each kill, so a failing schedule can be replayed).
pub async fn kill_runs(
    sim: &Vcsim,
    dir: &Path,
    state: &Path,
    extra: &[&str],
    times: usize,
    max_ms: u64,
) -> u64 {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut rng = Lcg(seed);
    for i in 0..times {
        let delay = rng.next(max_ms);
        let mut child = command(sim, dir, state)
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        let _ = child.kill();
        let _ = child.wait();
        eprintln!("kill {i}: after {delay} ms (seed {seed})");
    }
    seed
}

/// A tiny deterministic generator, so a failing kill schedule can be replayed from its seed.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}
