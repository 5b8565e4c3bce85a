//! The real-apiserver harness itself (tests/support/realapi.rs): Kubernetes' own kube-apiserver
//! v1.37.2 and etcd v3.7.0 built from source (hack/kube/), with no kube-controller-manager (no
//! garbage collection, no namespace deletion). Checks who each identity is, and that the
//! processes and the state directory do not outlive a test binary that is SIGKILLed.
#[path = "support/realapi.rs"]
mod realapi;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use realapi::{Identity, SA_NAME, SA_NAMESPACE, control_plane};

#[test]
fn the_server_is_kubernetes_1_37_and_each_identity_is_who_it_says() {
    let cp = control_plane();
    let version = cp
        .kubectl(&Identity::Admin, &["get", "--raw", "/version"])
        .ok()
        .json();
    assert_eq!(version["gitVersion"], "v1.37.2", "{version}");

    let whoami = |id: &Identity| {
        cp.kubectl(id, &["auth", "whoami", "-o", "json"])
            .ok()
            .json()["status"]["userInfo"]
            .clone()
    };
    let admin = whoami(&Identity::Admin);
    assert_eq!(admin["username"], "admin");
    assert!(
        admin["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == "system:masters"),
        "{admin}"
    );
    let sa = whoami(&Identity::Controller);
    assert_eq!(
        sa["username"],
        format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}")
    );
    // RBAC is enforced: the controller may not list Secrets (config/rbac grants `get` only).
    let denied = cp
        .kubectl(
            &Identity::Controller,
            &["get", "secrets", "-n", SA_NAMESPACE],
        )
        .err();
    assert!(denied.contains("Forbidden"), "{denied}");
}

/// Run by [`processes_and_state_do_not_outlive_a_killed_test_binary`] as a child process of this
/// same test binary (with `REALAPI_CHILD=1`): starts the control plane, prints its pids and state
/// directory, and waits to be killed. A no-op otherwise.
#[test]
fn child_holding_a_control_plane() {
    if std::env::var_os("REALAPI_CHILD").is_none() {
        return;
    }
    let cp = control_plane();
    println!(
        "REALAPI {} {} {}",
        cp.apiserver_pid,
        cp.etcd_pid,
        cp.dir.display()
    );
    // Killed by the parent test long before this ends.
    std::thread::sleep(Duration::from_secs(120));
}

fn running(pid: u32, exe: &Path) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe)
}

#[test]
fn processes_and_state_do_not_outlive_a_killed_test_binary() {
    let bin_dir = realapi::kube_bin_dir().unwrap();
    /// Kills the child if an assertion below fails first.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holding_a_control_plane",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("REALAPI_CHILD", "1")
        .env("KUBE_BIN_DIR", &bin_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stdout = BufReader::new(child.0.stdout.take().unwrap());
    // libtest prints `test child_holding_a_control_plane ... ` on the same line first.
    let line = stdout
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.split_once("REALAPI ").map(|(_, rest)| rest.to_string()))
        .expect("the child printed no pids");
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (apiserver, etcd, dir) = (
        fields[0].parse::<u32>().unwrap(),
        fields[1].parse::<u32>().unwrap(),
        PathBuf::from(fields[2]),
    );
    let apiserver_exe = bin_dir.join("kube-apiserver");
    let etcd_exe = bin_dir.join("etcd");
    assert!(running(apiserver, &apiserver_exe) && running(etcd, &etcd_exe));
    assert!(dir.is_dir());

    // SIGKILL: no destructor, no atexit, nothing of the test binary runs.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(20);
    while (running(apiserver, &apiserver_exe) || running(etcd, &etcd_exe) || dir.exists())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !running(apiserver, &apiserver_exe),
        "kube-apiserver (pid {apiserver}) outlived the killed test binary"
    );
    assert!(
        !running(etcd, &etcd_exe),
        "etcd (pid {etcd}) outlived the killed test binary"
    );
    assert!(
        !dir.exists(),
        "{} outlived the killed test binary",
        dir.display()
    );
    eprintln!(
        "realapi: after SIGKILL of the test binary, servers gone and state removed in {:.2?}",
        killed.elapsed()
    );
}
