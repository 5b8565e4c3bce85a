//! `hack/kube/up.sh --background` and the `down.sh` it writes, on the real etcd and
//! kube-apiserver: down.sh stops what up.sh started however `--bin-dir` was spelled (a trailing
//! slash, a symlink), and never removes etcd's data while a process still uses it.
//!
//! Needs the binaries of `$KUBE_BIN_DIR` (hack/test.sh sets it; by hand:
//! `KUBE_BIN_DIR=$(hack/kube/build.sh | tail -n1)`), plus openssl and curl as up.sh does.
//! Without `KUBE_BIN_DIR` each test says SKIPPED on stderr and passes: building the binaries
//! takes minutes, and the realapi_* tests are the ones that build them.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `$KUBE_BIN_DIR`, or `None` after saying why the test is skipped.
fn kube_bin_dir(test: &str) -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("KUBE_BIN_DIR").filter(|v| !v.is_empty()) else {
        eprintln!(
            "SKIPPED {test}: KUBE_BIN_DIR is not set (hack/test.sh sets it; or run \
             KUBE_BIN_DIR=$(hack/kube/build.sh | tail -n1) cargo test --test kube_up_down)"
        );
        return None;
    };
    let dir = PathBuf::from(dir);
    for b in ["etcd", "kube-apiserver"] {
        assert!(
            dir.join(b).is_file(),
            "KUBE_BIN_DIR={} has no {b}; unset it or run hack/kube/build.sh",
            dir.display()
        );
    }
    Some(dir)
}

/// Alive and not a zombie (where nobody reaps orphans, an exited server stays one).
fn running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .unwrap_or("");
    !matches!(state, "Z" | "X" | "")
}

fn exe(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What one `up.sh --background` started: killed and removed when the test ends, whatever
/// down.sh did, so a failing test leaves no server behind.
struct Servers {
    dir: tempfile::TempDir,
    etcd: u32,
    apiserver: u32,
    data: PathBuf,
    /// The canonical binaries: a pid is killed at the end only while it still runs one of them.
    exes: Vec<PathBuf>,
}

impl Servers {
    /// Runs up.sh with `--bin-dir` spelled `bin_dir_arg`.
    fn start(bin_dir: &Path, bin_dir_arg: &str) -> Servers {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(repo().join("hack/kube/up.sh"))
            .args(["--background", "--timeout", "180", "--dir"])
            .arg(dir.path())
            .args(["--bin-dir", bin_dir_arg])
            .env_remove("KUBE_BIN_DIR")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "up.sh --bin-dir {bin_dir_arg} failed ({}):\n{}",
            out.status,
            stderr(&out)
        );
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        let pid = |name: &str| -> u32 {
            read(name)
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let exes = ["etcd", "kube-apiserver"]
            .iter()
            .map(|b| bin_dir.join(b).canonicalize().unwrap())
            .collect();
        Servers {
            etcd: pid("etcd.pid"),
            apiserver: pid("kube-apiserver.pid"),
            data: PathBuf::from(read("etcd-data-dir").trim()),
            exes,
            dir,
        }
    }

    fn down_sh(&self) -> PathBuf {
        self.dir.path().join("down.sh")
    }

    fn down(&self) -> Output {
        Command::new(self.down_sh())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs down.sh, which must succeed; what it said.
    fn down_ok(&self) -> String {
        let out = self.down();
        let err = stderr(&out);
        assert!(
            out.status.success(),
            "down.sh failed ({}):\n{err}",
            out.status
        );
        err
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for pid in [self.apiserver, self.etcd] {
            if running(pid) && exe(pid).is_some_and(|e| self.exes.contains(&e)) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
        for _ in 0..50 {
            if !running(self.etcd) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

/// A child of the test, killed and reaped however the test ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn down_sh_stops_what_up_sh_started_from_a_bin_dir_with_a_trailing_slash() {
    let Some(bin) =
        kube_bin_dir("down_sh_stops_what_up_sh_started_from_a_bin_dir_with_a_trailing_slash")
    else {
        return;
    };
    // A symlink to the binaries, given with a trailing slash: neither is what /proc/PID/exe says.
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("kube-bin");
    std::os::unix::fs::symlink(&bin, &link).unwrap();
    let s = Servers::start(&bin, &format!("{}/", link.display()));
    assert!(running(s.etcd) && running(s.apiserver));
    assert!(s.data.is_dir(), "{}", s.data.display());
    let script = std::fs::read_to_string(s.down_sh()).unwrap();
    // It names the binaries as /proc/PID/exe will: canonical, no `//`, not the symlink.
    assert!(!script.contains("//"), "{script}");
    for e in &s.exes {
        assert!(script.contains(&format!("={}\n", e.display())), "{script}");
    }

    let err = s.down_ok();
    assert!(
        !running(s.apiserver),
        "kube-apiserver (pid {}) still runs:\n{err}",
        s.apiserver
    );
    assert!(!running(s.etcd), "etcd (pid {}) still runs:\n{err}", s.etcd);
    assert!(
        err.contains(&format!("stopped kube-apiserver (pid {})", s.apiserver)),
        "{err}"
    );
    assert!(
        err.contains(&format!("stopped etcd (pid {})", s.etcd)),
        "{err}"
    );
    assert!(
        !s.data.exists(),
        "etcd data {} kept:\n{err}",
        s.data.display()
    );
    for gone in ["etcd.pid", "kube-apiserver.pid", "down.sh"] {
        assert!(!s.dir.path().join(gone).exists(), "{gone} kept");
    }
    // The directory (certificates, logs) stays.
    assert!(s.dir.path().join("admin.kubeconfig").is_file());
}

#[test]
fn down_sh_keeps_the_data_and_itself_while_a_process_it_cannot_stop_runs() {
    let Some(bin) =
        kube_bin_dir("down_sh_keeps_the_data_and_itself_while_a_process_it_cannot_stop_runs")
    else {
        return;
    };
    let s = Servers::start(&bin, &format!("{}/", bin.display()));
    // etcd.pid names another program (a reused pid): it is not stopped, and etcd, still
    // running from that data directory, keeps it.
    let other = KillOnDrop(Command::new("sleep").arg("300").spawn().unwrap());
    let other_pid = other.0.id();
    let etcd_pid_file = s.dir.path().join("etcd.pid");
    std::fs::write(&etcd_pid_file, format!("{}\n", other_pid)).unwrap();

    let out = s.down();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "pid {} (from {}) runs",
            other_pid,
            etcd_pid_file.display()
        )) && err.contains(&format!("not {}", s.exes[0].display())),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "pid {} ({}) still uses {}",
            s.etcd,
            s.exes[0].display(),
            s.data.display()
        )),
        "{err}"
    );
    assert!(
        running(other_pid),
        "down.sh killed a process it did not start"
    );
    assert!(running(s.etcd));
    assert!(s.data.is_dir(), "etcd's live data was removed:\n{err}");
    assert!(s.down_sh().is_file(), "down.sh removed itself:\n{err}");
    // What it could stop, it stopped.
    assert!(!running(s.apiserver), "{err}");
    drop(other);

    // The pid file fixed, the next run finishes the job.
    std::fs::write(&etcd_pid_file, format!("{}\n", s.etcd)).unwrap();
    let err = s.down_ok();
    assert!(!running(s.etcd), "{err}");
    assert!(!s.data.exists(), "{err}");
    assert!(!s.down_sh().exists(), "{err}");
}
