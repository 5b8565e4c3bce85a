//! The OCI image `hack/image.sh` builds with umoci (no container daemon, no base image): its
//! config (entrypoint, a non-root user, OCI labels), and its root filesystem actually running the
//! binary. The image is unpacked with `umoci unpack` and the binary run in a chroot of that
//! rootfs (`chroot --userspec=65532:65532` as root, else `unshare --map-root-user --root`), so
//! only the image's own libraries, CA bundle, nsswitch.conf and /etc/hosts are visible to it:
//! * `--version` runs (the dynamic loader and libraries the image holds are enough);
//! * a TLS login to vcsim at `https://localhost:PORT` with the default trust (no --ca-file,
//!   --thumbprint or --insecure) succeeds in an image built with vcsim's certificate as
//!   `--extra-ca`, and fails with a certificate error in one built without it: the binary reads
//!   the image's /etc/ssl/certs/ca-certificates.crt, and `localhost` resolves through the
//!   image's nsswitch.conf and /etc/hosts (glibc's `files` service). DNS itself is not exercised
//!   (no name server here).
//!
//! Needs umoci (hack/setup.sh installs it) and the binary cargo built for the tests (same
//! linkage as a release build).
#[path = "support/vcsim.rs"]
mod vcsim;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use vcsim::Vcsim;

const ENTRYPOINT: &str = "/usr/local/bin/vsphere-provider";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `hack/image.sh` into `layout:tag`, with the given extra CA files.
fn build_image(layout: &Path, tag: &str, extra_ca: &[&Path]) {
    let mut cmd = Command::new(repo().join("hack/image.sh"));
    cmd.arg("--binary")
        .arg(env!("CARGO_BIN_EXE_vsphere-provider"))
        .arg("--layout")
        .arg(layout)
        .args(["--tag", tag]);
    for ca in extra_ca {
        cmd.arg("--extra-ca").arg(ca);
    }
    let o = cmd.output().expect("running hack/image.sh");
    assert!(o.status.success(), "hack/image.sh failed:\n{}", text(&o));
    let last = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert_eq!(last, format!("{}:{tag}", layout.display()));
}

fn blob(layout: &Path, digest: &str) -> Value {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    serde_json::from_slice(&std::fs::read(layout.join("blobs/sha256").join(hex)).unwrap()).unwrap()
}

/// The manifest of `tag` in the layout's index.
fn manifest(layout: &Path, tag: &str) -> Value {
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let desc = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
        .unwrap_or_else(|| panic!("no tag {tag} in {index}"));
    blob(layout, desc["digest"].as_str().unwrap())
}

fn unpack(layout: &Path, tag: &str, bundle: &Path) -> PathBuf {
    let mut cmd = Command::new("umoci");
    cmd.arg("unpack");
    if !is_root() {
        cmd.arg("--rootless");
    }
    let o = cmd
        .arg("--image")
        .arg(format!("{}:{tag}", layout.display()))
        .arg(bundle)
        .output()
        .unwrap();
    assert!(o.status.success(), "umoci unpack failed:\n{}", text(&o));
    bundle.join("rootfs")
}

/// `name` found in this process's PATH (the child's PATH is the image's, which has no chroot).
fn host_tool(name: &str) -> PathBuf {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found in PATH"))
}

/// Runs the image's entrypoint with `args` confined to `rootfs`, with an empty environment.
fn run_in(rootfs: &Path, args: &[&str]) -> Output {
    let mut cmd = if is_root() {
        let mut c = Command::new(host_tool("chroot"));
        c.arg("--userspec=65532:65532").arg(rootfs);
        c
    } else {
        let mut c = Command::new(host_tool("unshare"));
        c.arg("--map-root-user")
            .arg(format!("--root={}", rootfs.display()));
        c
    };
    cmd.arg(ENTRYPOINT)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin")
        .output()
        .expect("running chroot/unshare")
}

#[tokio::test]
async fn the_image_runs_the_binary_with_its_own_ca_bundle_and_name_service() {
    assert!(
        Command::new("umoci").arg("--version").output().is_ok(),
        "umoci is not installed (hack/setup.sh installs it: apt-get install umoci)"
    );
    let sim = Vcsim::builder().tls(true).start().await;
    let work = tempfile::tempdir().unwrap();
    let cert = work.path().join("vcsim.pem");
    std::fs::write(&cert, sim.cert_pem().expect("vcsim serves TLS")).unwrap();
    let layout = work.path().join("layout");
    build_image(&layout, "plain", &[]);
    build_image(&layout, "vcsim-ca", &[&cert]);

    // The config: entrypoint, a non-root numeric user (runAsNonRoot can check it), labels.
    let m = manifest(&layout, "vcsim-ca");
    assert_eq!(m["layers"].as_array().unwrap().len(), 1, "one layer: {m}");
    let config = blob(&layout, m["config"]["digest"].as_str().unwrap());
    assert_eq!(config["os"], "linux");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!([ENTRYPOINT])
    );
    let user = config["config"]["User"].as_str().unwrap();
    let uid: u32 = user.split(':').next().unwrap().parse().unwrap();
    assert_ne!(uid, 0, "the image runs as root: {user}");
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["org.opencontainers.image.title"], "vsphere-provider");
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");

    let with_ca = unpack(&layout, "vcsim-ca", &work.path().join("bundle-ca"));
    let plain = unpack(&layout, "plain", &work.path().join("bundle-plain"));
    // No base image: no shell, no package manager; the user the config names exists.
    assert!(!with_ca.join("bin/sh").exists(), "the image holds a shell");
    let passwd = std::fs::read_to_string(with_ca.join("etc/passwd")).unwrap();
    assert!(
        passwd.contains(&format!(":{uid}:")),
        "uid {uid} not in /etc/passwd:\n{passwd}"
    );

    let o = run_in(&with_ca, &["--version"]);
    assert!(
        o.status.success(),
        "the binary did not run in the image:\n{}",
        text(&o)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("vsphere-provider {}", env!("CARGO_PKG_VERSION"))
    );

    // vcsim's certificate names localhost; the name resolves only through the image's files.
    let port = sim.host_port().rsplit(':').next().unwrap().to_string();
    let server = format!("https://localhost:{port}/sdk");
    let (user, password) = sim.credentials();
    let args = [
        "inventory",
        "--server",
        &server,
        "--username",
        user,
        "--password",
        password,
    ];
    let o = run_in(&with_ca, &args);
    assert!(
        o.status.success(),
        "inventory through the image's CA bundle failed:\n{}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("/DC0"),
        "no datacenter listed:\n{}",
        text(&o)
    );
    let o = run_in(&plain, &args);
    assert!(
        !o.status.success(),
        "trusted vcsim without its CA:\n{}",
        text(&o)
    );
    let err = text(&o).to_lowercase();
    assert!(
        err.contains("certificate") && err.contains("unknownissuer"),
        "not an unknown-issuer certificate error:\n{err}"
    );
}
