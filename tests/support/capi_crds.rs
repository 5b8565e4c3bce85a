//! Cluster API's own `Cluster` and `Machine` CRDs, unmodified from the `sigs.k8s.io/cluster-api`
//! Go module (`core/config/crd/bases/`, fetched through the Go module proxy by `go mod
//! download`): test-only CRDs for tests that need a Cluster to own a VSphereCluster but run no
//! CAPI controller. They serve v1beta1 and store v1beta2; with no CAPI manager there is no
//! conversion webhook, so such tests write CAPI's objects at v1beta2, as CAPI v1.14 stores them.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use super::realapi::{ControlPlane, Identity};

/// The Cluster API release whose CRDs are installed.
pub const CAPI_MODULE: &str = "sigs.k8s.io/cluster-api@v1.14.2";

/// The directory of the Cluster API module (downloaded through the Go module proxy if the
/// module cache lacks it).
pub fn capi_module_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // The Go toolchain hack/lib.sh uses (hack/kube/build.sh needs it already).
        let root =
            std::env::var("VSPHERE_PROVIDER_GOROOT").unwrap_or_else(|_| "/usr/local/go".into());
        let go = format!("{root}/bin/go");
        let out = Command::new(&go)
            .args(["mod", "download", "-json", CAPI_MODULE])
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod")
            .output()
            .unwrap_or_else(|e| panic!("{go} mod download {CAPI_MODULE}: {e}"));
        assert!(
            out.status.success(),
            "go mod download {CAPI_MODULE}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        PathBuf::from(info["Dir"].as_str().expect("module Dir"))
    })
    .clone()
}

/// The Cluster and Machine CRDs of Cluster API, applied once per process.
pub fn install(cp: &ControlPlane) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let bases = capi_module_dir().join("core/config/crd/bases");
        for file in [
            "cluster.x-k8s.io_clusters.yaml",
            "cluster.x-k8s.io_machines.yaml",
        ] {
            let path = bases.join(file);
            cp.kubectl(
                &Identity::Admin,
                &["apply", "--server-side", "-f", path.to_str().unwrap()],
            )
            .ok();
        }
        cp.wait_established(&["clusters.cluster.x-k8s.io", "machines.cluster.x-k8s.io"]);
    });
}
