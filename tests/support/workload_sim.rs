//! The workload-cluster simulator (hack/workload-sim: Cluster API v1.14.2's in-memory API server
//! and etcd) as a process next to vcsim: a VM the provider powered on with kubeadm's user data
//! "boots" into a Node of a workload cluster served at its control plane endpoint
//! (127.0.0.1:PORT). It stands in for the guests (cloud-init, kubeadm, kubelet, etcd) that vcsim
//! cannot run; its README says what it simulates and what not.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::realapi;

/// `WORKLOAD_SIM_BIN` (hack/test.sh sets it from hack/workload-sim/build.sh), or None.
pub fn bin() -> Option<PathBuf> {
    std::env::var_os("WORKLOAD_SIM_BIN")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
}

pub struct WorkloadSim {
    bin: PathBuf,
    child: Child,
    log_path: PathBuf,
    vcenter: String,
    user: String,
    password: String,
    /// `127.0.0.1:PORT` of its debug API.
    pub debug: String,
}

impl WorkloadSim {
    /// [`WorkloadSim::start`] against the world's vcsim, one control plane endpoint on `port`.
    pub fn start_for(bin: &Path, w: &super::capi_world::World, port: u16) -> WorkloadSim {
        let (user, password) = w.sim.credentials();
        Self::start(
            bin,
            w.home.path(),
            w.sim.url(),
            user,
            password,
            &port.to_string(),
        )
    }

    /// Starts it against vcsim (`vcenter` is its SDK URL) for control plane endpoints on `ports`
    /// (`"P"` or `"P1,P2"`), polling every 500 ms; returns once it printed `ready`.
    pub fn start(
        bin: &Path,
        dir: &Path,
        vcenter: &str,
        user: &str,
        password: &str,
        ports: &str,
    ) -> WorkloadSim {
        let log_path = dir.join("workload-sim.log");
        let out_path = dir.join("workload-sim.out");
        let mut cmd = Command::new(bin);
        cmd.args(["--vcenter", vcenter, "--listen-host", "127.0.0.1"])
            .args([
                "--ports",
                ports,
                "--debug-addr",
                "127.0.0.1:0",
                "--poll",
                "500ms",
            ])
            .env("VSPHERE_USERNAME", user)
            .env("VSPHERE_PASSWORD", password)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::fs::File::create(&log_path).unwrap());
        realapi::kill_when_parent_thread_dies(&mut cmd);
        let mut sim = WorkloadSim {
            bin: bin.to_path_buf(),
            child: cmd.spawn().unwrap(),
            log_path,
            vcenter: vcenter.to_string(),
            user: user.to_string(),
            password: password.to_string(),
            debug: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = std::fs::read_to_string(&out_path).unwrap_or_default();
            if let Some(addr) = out.lines().find_map(|l| l.strip_prefix("ready debug=")) {
                sim.debug = addr.trim().to_string();
                return sim;
            }
            if let Some(status) = sim.child.try_wait().unwrap() {
                panic!("workload-sim exited ({status}):\n{}", sim.log());
            }
            assert!(
                Instant::now() < deadline,
                "workload-sim not ready in 30 s:\n{}",
                sim.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Its own event lines (`workload-sim: …`), without the library's.
    pub fn events(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.starts_with("workload-sim: "))
            .map(str::to_string)
            .collect()
    }

    /// The etcd members and API servers the in-memory server has for workload cluster `name`
    /// (its debug API), or None before the cluster exists.
    pub fn cluster(&self, name: &str) -> Option<serde_json::Value> {
        let out = Command::new("curl")
            .args(["-fsS", "--max-time", "5"])
            .arg(format!(
                "http://{}/namespaces/wsim/clusters/{name}",
                self.debug
            ))
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    /// Powers VM `name` on or off in vcsim, through the simulator's own govmomi client (not this
    /// crate's): what an operator does by hand.
    pub fn power(&self, name: &str, on: bool) {
        let out = Command::new(&self.bin)
            .args(["vm", "--vcenter", &self.vcenter, "--name", name])
            .args(["--power", if on { "on" } else { "off" }])
            .env("VSPHERE_USERNAME", &self.user)
            .env("VSPHERE_PASSWORD", &self.password)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "workload-sim vm --name {name} --power: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for WorkloadSim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The workload cluster as CAPI's controllers see it: kubectl with KCP's kubeconfig Secret.
pub struct Workload {
    pub kubeconfig: PathBuf,
}

impl Workload {
    pub fn kubectl(&self, args: &[&str]) -> Option<Value> {
        let out = Command::new(realapi::kubectl_bin())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--request-timeout", "5s"])
            .args(args)
            .args(["-o", "json"])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    pub fn items(&self, args: &[&str]) -> Option<Vec<Value>> {
        Some(self.kubectl(args)?["items"].as_array()?.clone())
    }

    /// The etcd members that can vote: an etcd static pod not marked removed (MemberRemove)
    /// on a Node that is Ready. None when the workload API server did not answer.
    pub fn healthy_etcd_members(&self) -> Option<BTreeSet<String>> {
        let nodes = self.items(&["get", "nodes"])?;
        let ready: BTreeSet<String> = nodes
            .iter()
            .filter(|n| {
                n["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
            .map(|n| {
                n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        let pods = self.items(&["-n", "kube-system", "get", "pods", "-l", "component=etcd"])?;
        Some(
            pods.iter()
                .filter(|p| {
                    p["metadata"]["annotations"]
                        ["etcd.inmemory.infrastructure.cluster.x-k8s.io/member-removed"]
                        .is_null()
                })
                .filter_map(|p| p["spec"]["nodeName"].as_str())
                .filter(|n| ready.contains(*n))
                .map(str::to_string)
                .collect(),
        )
    }
}
