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

/// `$KUBECTL`, else `kubectl` from PATH, if it runs.
fn kubectl() -> Option<String> {
    let k = std::env::var("KUBECTL")
        .ok()
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| "kubectl".into());
    Command::new(&k)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
        .then_some(k)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Runs a command line as printed, in `dir`.
fn shell(line: &str, dir: &Path) {
    let o = Command::new("bash")
        .args(["-c", line.trim()])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{line}:\n{}", text(&o));
}

/// The manager image `kubectl kustomize dir` renders.
fn rendered_image(kubectl: &str, dir: &Path) -> String {
    let o = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "kubectl kustomize {}:\n{}",
        dir.display(),
        text(&o)
    );
    let objects: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&o.stdout)).unwrap();
    let d = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    d["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .to_string()
}

/// What `kustomize edit set image NAME=REF` does to a kustomization's `images`, for machines
/// without the kustomize binary: the entry `name: NAME` gets REF's name and tag.
fn set_image(kustomization: &Path, name: &str, reference: &str) {
    let mut k: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(kustomization).unwrap()).unwrap();
    let (new_name, new_tag) = reference.rsplit_once(':').unwrap();
    let entry = k["images"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no image {name} in {}", kustomization.display()));
    entry["newName"] = new_name.into();
    entry["newTag"] = new_tag.into();
    // JSON is YAML.
    std::fs::write(kustomization, serde_json::to_string_pretty(&k).unwrap()).unwrap();
}

#[test]
fn image_sh_ends_with_the_commands_that_put_the_image_it_built_into_config_default() {
    let work = tempfile::tempdir().unwrap();
    let layout = work.path().join("layout");
    let o = Command::new(repo().join("hack/image.sh"))
        .current_dir(repo())
        .arg("--binary")
        .arg(env!("CARGO_BIN_EXE_vsphere-provider"))
        .arg("--layout")
        .arg(&layout)
        .args([
            "--tag",
            "v9.8.7",
            "--registry",
            "registry.example.com/team/",
        ])
        .output()
        .expect("running hack/image.sh");
    assert!(o.status.success(), "hack/image.sh failed:\n{}", text(&o));
    let built = format!("{}:v9.8.7", layout.display());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).lines().last(),
        Some(built.as_str()),
        "the last line on stdout is still the image"
    );
    let reference = "registry.example.com/team/vsphere-provider:v9.8.7";
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let next: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("Next:"))
        .collect();
    let edit =
        format!("  (cd config/manager && kustomize edit set image vsphere-provider={reference})");
    for want in [
        format!("  skopeo copy oci:{built} docker://{reference}"),
        edit.clone(),
        "  kubectl apply -k config/default".to_string(),
    ] {
        assert!(next.contains(&want.as_str()), "no {want:?} in:\n{err}");
    }
    assert_eq!(
        next.last().copied(),
        Some(format!("  hack/release.sh --image {reference}").as_str()),
        "{err}"
    );

    // Carried out in a copy of config/, both ways replace the placeholder config/default runs.
    let Some(kubectl) = kubectl() else {
        eprintln!("kubectl not available: the printed commands were not carried out");
        return;
    };
    let edited = work.path().join("edited");
    copy_dir(&repo().join("config"), &edited.join("config"));
    let manager = edited.join("config/manager");
    let kustomize = Command::new("kustomize").arg("version").output();
    if kustomize.is_ok_and(|o| o.status.success()) {
        shell(&edit, &edited);
    } else {
        set_image(
            &manager.join("kustomization.yaml"),
            "vsphere-provider",
            reference,
        );
    }
    assert_eq!(
        rendered_image(&kubectl, &edited.join("config/default")),
        reference
    );

    let overlay = work.path().join("overlay");
    copy_dir(&repo().join("config"), &overlay.join("config"));
    let recipe = next
        .iter()
        .find(|l| l.trim_start().starts_with("mkdir -p deploy &&"))
        .unwrap_or_else(|| panic!("no overlay recipe in:\n{err}"));
    shell(recipe, &overlay);
    assert_eq!(rendered_image(&kubectl, &overlay.join("deploy")), reference);
}
