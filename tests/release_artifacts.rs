//! The clusterctl release artifacts as `hack/release.sh` writes them (the script itself runs,
//! with the real kubectl kustomize): the local repository layout clusterctl reads, and the
//! provider contract of `infrastructure-components.yaml` (clusterctl book, "clusterctl provider
//! contract"): one Namespace holding every namespaced object, the provider label on every object,
//! the credentials as clusterctl variables, the image set. Whether clusterctl then installs it is
//! tests/capi_clusterctl.rs. Next to them, the SBOM of the binary (`sbom.cdx.json`, CycloneDX),
//! checked against `cargo tree` and Cargo.lock.
//!
//! kubectl: `$KUBECTL`, else `$KUBE_BIN_DIR/kubectl`, else the one `hack/kube/build.sh` builds.

#[path = "support/realapi.rs"]
mod realapi;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";
const PROVIDER: &str = "infrastructure-vsphere-provider";
/// Kinds without a namespace among what config/ renders (CRDs, RBAC and webhook configurations).
const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

fn kubectl() -> PathBuf {
    if let Some(k) = std::env::var_os("KUBECTL").filter(|v| !v.is_empty()) {
        return PathBuf::from(k);
    }
    realapi::kube_bin_dir()
        .unwrap_or_else(|e| panic!("no kubectl: {e}"))
        .join("kubectl")
}

fn release(out: &Path, args: &[&str]) -> Output {
    Command::new(realapi::repo().join("hack/release.sh"))
        .arg("--out")
        .arg(out)
        .args(args)
        .env("KUBECTL", kubectl())
        .output()
        .expect("running hack/release.sh")
}

fn release_ok(out: &Path, args: &[&str]) {
    let o = release(out, args);
    assert!(
        o.status.success(),
        "hack/release.sh {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        stdout.lines().last().map(str::trim),
        Some(out.to_str().unwrap()),
        "the last line names the repository"
    );
}

fn cargo_version() -> String {
    format!("v{}", env!("CARGO_PKG_VERSION"))
}

fn docs(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .expect("the components parse as YAML")
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn name_of(o: &Value) -> String {
    format!(
        "{} {}",
        o["kind"].as_str().unwrap_or("?"),
        o["metadata"]["name"].as_str().unwrap_or("?")
    )
}

#[test]
fn components_follow_the_clusterctl_provider_contract() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("repo");
    let image = "registry.example.com/team/vsphere-provider:v9.8.7";
    release_ok(&out, &["--image", image]);

    let dir = out
        .join("infrastructure-vsphere-provider")
        .join(cargo_version());
    let text = std::fs::read_to_string(dir.join("infrastructure-components.yaml")).expect(
        "infrastructure-components.yaml in <repo>/infrastructure-vsphere-provider/<version>/",
    );
    let objects = docs(&text);
    assert!(objects.len() > 10, "only {} objects", objects.len());

    // Every object carries the provider label clusterctl uses to find what belongs to us.
    for o in &objects {
        assert_eq!(
            o["metadata"]["labels"][PROVIDER_LABEL].as_str(),
            Some(PROVIDER),
            "{} lacks the label {PROVIDER_LABEL}: {PROVIDER}",
            name_of(o)
        );
    }

    // Exactly one Namespace, and every namespaced object in it (clusterctl --target-namespace
    // rewrites that one namespace).
    let namespaces: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Namespace")
        .collect();
    assert_eq!(namespaces.len(), 1, "exactly one Namespace");
    let ns = namespaces[0]["metadata"]["name"].as_str().unwrap();
    assert_eq!(ns, "vsphere-provider-system");
    for o in &objects {
        let kind = o["kind"].as_str().unwrap();
        let obj_ns = o["metadata"]["namespace"].as_str();
        if CLUSTER_SCOPED.contains(&kind) {
            assert_eq!(obj_ns, None, "{} is cluster-scoped", name_of(o));
        } else {
            assert_eq!(obj_ns, Some(ns), "{} is not in {ns}", name_of(o));
        }
    }
    // References into the namespace point at the same one.
    for o in &objects {
        for s in o["subjects"].as_array().into_iter().flatten() {
            assert_eq!(s["namespace"].as_str(), Some(ns), "{} subject", name_of(o));
        }
        for w in o["webhooks"].as_array().into_iter().flatten() {
            assert_eq!(
                w["clientConfig"]["service"]["namespace"].as_str(),
                Some(ns),
                "{} webhook {}",
                name_of(o),
                w["name"]
            );
        }
    }

    // The credentials and the servers they may go to are clusterctl variables, and the only ones.
    let vars: BTreeSet<String> = regex::Regex::new(r"\$\{([A-Za-z0-9_]+)")
        .unwrap()
        .captures_iter(&text)
        .map(|c| c[1].to_string())
        .collect();
    assert_eq!(
        vars,
        BTreeSet::from([
            "VSPHERE_PASSWORD".to_string(),
            "VSPHERE_SERVER".to_string(),
            "VSPHERE_USERNAME".to_string()
        ]),
        "the components' clusterctl variables"
    );
    let secret = objects
        .iter()
        .find(|o| o["kind"] == "Secret")
        .expect("a credentials Secret");
    let secret_name = secret["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        secret["stringData"]["username"].as_str(),
        Some("${VSPHERE_USERNAME}")
    );
    assert_eq!(
        secret["stringData"]["password"].as_str(),
        Some("${VSPHERE_PASSWORD}")
    );
    assert_eq!(
        secret["stringData"]["servers"].as_str(),
        Some("${VSPHERE_SERVER}")
    );

    // The manager: the image asked for, in the container clusterctl expects (`manager`), with the
    // Secret's keys as the environment variables `vsphere-provider run` reads.
    let deployments: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .collect();
    assert_eq!(deployments.len(), 1, "one Deployment");
    let containers = deployments[0]["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    let manager = containers
        .iter()
        .find(|c| c["name"] == "manager")
        .expect("a container named manager");
    assert_eq!(manager["image"].as_str(), Some(image));
    for (var, key) in [
        ("VSPHERE_USERNAME", "username"),
        ("VSPHERE_PASSWORD", "password"),
        ("VSPHERE_SERVER", "servers"),
    ] {
        let env = manager["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == var)
            .unwrap_or_else(|| panic!("manager env {var}"));
        assert_eq!(
            env["valueFrom"]["secretKeyRef"]["name"].as_str(),
            Some(secret_name)
        );
        assert_eq!(env["valueFrom"]["secretKeyRef"]["key"].as_str(), Some(key));
    }
    // config/default's placeholder (config/manager/kustomization.yaml) is what it replaced.
    assert!(
        !text.contains("registry.invalid/")
            && !text.contains("vsphere-provider:latest")
            && !text.contains("image: controller"),
        "no placeholder image left"
    );

    // metadata.yaml maps this release series to the v1beta1 contract.
    let metadata: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("metadata.yaml")).unwrap())
            .unwrap();
    assert_eq!(
        metadata["apiVersion"],
        "clusterctl.cluster.x-k8s.io/v1alpha3"
    );
    assert_eq!(metadata["kind"], "Metadata");
    let (major, minor) = {
        let mut p = env!("CARGO_PKG_VERSION").split('.');
        (
            p.next().unwrap().parse::<u64>().unwrap(),
            p.next().unwrap().parse::<u64>().unwrap(),
        )
    };
    let series = metadata["releaseSeries"].as_array().unwrap();
    assert!(
        series
            .iter()
            .any(|s| s["major"] == major && s["minor"] == minor && s["contract"] == "v1beta2"),
        "releaseSeries has no {major}.{minor} -> v1beta2: {series:?}"
    );
}

#[test]
fn clusterctl_config_names_the_repository_once() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("repo");
    // Another script's entries (hack/capi/repository.sh writes CAPI's) survive, ours is replaced.
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join("clusterctl.yaml"),
        "providers:\n  - name: cluster-api\n    type: CoreProvider\n    url: /x/cluster-api/v1.14.2/core-components.yaml\ncert-manager:\n  url: /x/cert-manager/v1.21.1/cert-manager.yaml\n  version: v1.21.1\n",
    )
    .unwrap();
    release_ok(&out, &[]);
    release_ok(&out, &[]);
    let config: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(out.join("clusterctl.yaml")).unwrap())
            .unwrap();
    let providers = config["providers"].as_array().unwrap();
    let ours: Vec<&Value> = providers
        .iter()
        .filter(|p| p["name"] == "vsphere-provider")
        .collect();
    assert_eq!(ours.len(), 1, "one vsphere-provider entry: {providers:?}");
    assert_eq!(ours[0]["type"], "InfrastructureProvider");
    let url = ours[0]["url"].as_str().unwrap();
    // clusterctl's local repository: absolute {basepath}/{label}/{version}/{file}.
    let expected = out
        .join("infrastructure-vsphere-provider")
        .join(cargo_version())
        .join("infrastructure-components.yaml");
    assert_eq!(Path::new(url), expected);
    assert!(expected.is_file());
    assert!(
        providers.iter().any(|p| p["name"] == "cluster-api"),
        "the other entries are kept: {providers:?}"
    );
    assert_eq!(config["cert-manager"]["version"], "v1.21.1");
}

#[test]
fn release_refuses_a_version_metadata_does_not_map_and_a_bad_image() {
    let tmp = tempfile::tempdir().unwrap();
    let o = release(tmp.path(), &["--version", "v97.3.0"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("metadata.yaml has no releaseSeries entry for 97.3"),
        "{err}"
    );
    let o = release(
        tmp.path(),
        &["--image", "registry.example.com/vsphere-provider"],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--image") && err.contains("NAME:TAG"), "{err}");
    // clusterctl only parses canonical references: "repository name must be canonical".
    let o = release(tmp.path(), &["--image", "vsphere-provider:v0.1.0"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("must start with a registry host"), "{err}");
    let o = release(tmp.path(), &["--version", "0.1"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a semantic version"));
}

/// The release ships a cluster template for `clusterctl generate cluster --infrastructure
/// vsphere-provider`: CAPV's own (tests/fixtures/capv, unchanged there) plus the one line that
/// makes the cluster take our zones as its failure domains.
#[test]
fn the_release_ships_capvs_cluster_template_with_our_failure_domains() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("repo");
    release_ok(&out, &[]);
    let shipped = std::fs::read_to_string(
        out.join("infrastructure-vsphere-provider")
            .join(cargo_version())
            .join("cluster-template.yaml"),
    )
    .expect("cluster-template.yaml in the version folder");
    let ours =
        std::fs::read_to_string(realapi::repo().join("templates/cluster-template.yaml")).unwrap();
    assert_eq!(shipped, ours);

    let capv =
        std::fs::read_to_string(realapi::repo().join("tests/fixtures/capv/cluster-template.yaml"))
            .unwrap();
    let body: Vec<&str> = ours.lines().skip_while(|l| l.starts_with('#')).collect();
    let added: Vec<&str> = body
        .iter()
        .copied()
        .filter(|l| *l == "  failureDomainSelector: {}")
        .collect();
    assert_eq!(added.len(), 1, "one failureDomainSelector line");
    let without: Vec<&str> = body
        .into_iter()
        .filter(|l| *l != "  failureDomainSelector: {}")
        .collect();
    assert_eq!(
        without,
        capv.lines().collect::<Vec<_>>(),
        "CAPV's template otherwise"
    );

    let objects = docs(&ours);
    let cluster = objects
        .iter()
        .find(|o| o["kind"] == "VSphereCluster")
        .expect("a VSphereCluster");
    assert_eq!(
        cluster["spec"]["failureDomainSelector"],
        serde_json::json!({})
    );
}

/// `--image` takes a digest, alone or after the tag, and the manager runs exactly that reference
/// (kustomize's `digest:`); a digest that is not sha256 with 64 hex digits is refused.
#[test]
fn release_pins_the_image_by_digest() {
    let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
    let manager_image = |out: &Path| {
        let dir = out
            .join("infrastructure-vsphere-provider")
            .join(cargo_version());
        let text = std::fs::read_to_string(dir.join("infrastructure-components.yaml")).unwrap();
        let objects = docs(&text);
        let deployment = objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("a Deployment");
        deployment["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "manager")
            .unwrap()["image"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for image in [
        format!("registry.example.com:5000/team/vsphere-provider@{digest}"),
        format!("registry.example.com/vsphere-provider:v9.8.7@{digest}"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("repo");
        release_ok(&out, &["--image", &image]);
        assert_eq!(manager_image(&out), image);
    }
    let tmp = tempfile::tempdir().unwrap();
    for bad in [
        "registry.example.com/vsphere-provider@sha256:abc".to_string(),
        format!(
            "registry.example.com/vsphere-provider@md5:{}",
            "0".repeat(64)
        ),
        format!(
            "registry.example.com/vsphere-provider@{}",
            digest.to_uppercase()
        ),
    ] {
        let o = release(tmp.path(), &["--image", &bad]);
        assert!(!o.status.success(), "{bad} was accepted");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("NAME@sha256:<64 hex digits>"), "{err}");
    }
}

/// The crates the binary is built from, as cargo resolves them for this platform: normal and
/// build edges (features as the build resolves them), no dev-dependencies.
fn cargo_tree(edges: &str) -> BTreeSet<(String, String)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = Command::new(cargo)
        .current_dir(realapi::repo())
        .args([
            "tree",
            "--locked",
            "-p",
            "vsphere-provider",
            "--prefix",
            "none",
        ])
        .args(["-f", "{p}", "-e", edges])
        .output()
        .expect("running cargo tree");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut parts = l.split(' ');
            let name = parts.next().unwrap().to_string();
            let version = parts.next().unwrap().trim_start_matches('v').to_string();
            (name, version)
        })
        .collect()
}

/// Cargo.lock's `checksum` of each registry crate, by (name, version).
fn lock_checksums() -> std::collections::BTreeMap<(String, String), String> {
    let lock = std::fs::read_to_string(realapi::repo().join("Cargo.lock")).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(&format!("{key} = \""))
                    .and_then(|v| v.strip_suffix('"'))
                    .map(str::to_string)
            })
        };
        if let (Some(n), Some(v), Some(c)) = (field("name"), field("version"), field("checksum")) {
            out.insert((n, v), c);
        }
    }
    out
}

#[test]
fn the_release_sbom_names_every_crate_of_the_binary_with_version_purl_and_checksum() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("repo");
    release_ok(&out, &[]);
    let path = out
        .join(PROVIDER)
        .join(cargo_version())
        .join("sbom.cdx.json");
    let sbom: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).expect("sbom.cdx.json next to the components"),
    )
    .expect("the SBOM is JSON");
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    assert_eq!(sbom["specVersion"], "1.5");
    let root = &sbom["metadata"]["component"];
    assert_eq!(root["name"], "vsphere-provider");
    assert_eq!(root["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(root["type"], "application");

    let built = cargo_tree("normal,build");
    let checksums = lock_checksums();
    let components = sbom["components"].as_array().expect("components");
    let mut named = BTreeSet::new();
    for c in components {
        let name = c["name"].as_str().expect("name").to_string();
        let version = c["version"].as_str().expect("version").to_string();
        assert_eq!(
            c["purl"].as_str(),
            Some(format!("pkg:cargo/{name}@{version}").as_str()),
            "{name} {version}: purl"
        );
        let want = checksums
            .get(&(name.clone(), version.clone()))
            .unwrap_or_else(|| panic!("{name} {version} is not a registry crate of Cargo.lock"));
        assert_eq!(
            c["hashes"][0]["alg"], "SHA-256",
            "{name} {version}: hash algorithm"
        );
        assert_eq!(
            c["hashes"][0]["content"].as_str(),
            Some(want.as_str()),
            "{name} {version}: the checksum is Cargo.lock's"
        );
        assert!(
            c["licenses"][0]["expression"].is_string(),
            "{name} {version}: no licence"
        );
        assert!(
            named.insert((name.clone(), version.clone())),
            "{name} {version} listed twice"
        );
    }
    named.insert(("vsphere-provider".into(), env!("CARGO_PKG_VERSION").into()));
    let missing: Vec<_> = built.difference(&named).collect();
    let extra: Vec<_> = named.difference(&built).collect();
    assert!(
        missing.is_empty(),
        "crates of the build the SBOM lacks: {missing:?}"
    );
    assert!(extra.is_empty(), "crates the build does not use: {extra:?}");
    // Dev-dependencies never reach the binary.
    for dev in ["proptest", "tempfile"] {
        assert!(
            !named.iter().any(|(n, _)| n == dev),
            "{dev} is a dev-dependency"
        );
    }

    // Linked into the binary ("required") or used only to build it ("excluded"): build scripts'
    // tools and proc macros run on the build machine.
    let scope = |name: &str| {
        components
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))["scope"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    for linked in ["tokio", "rustls", "ring", "kube-client", "quick-xml"] {
        assert_eq!(scope(linked), "required", "{linked}");
    }
    for build_only in ["serde_derive", "cc", "syn"] {
        assert_eq!(scope(build_only), "excluded", "{build_only}");
    }
    let runtime = cargo_tree("normal");
    for c in components.iter().filter(|c| c["scope"] == "required") {
        let key = (
            c["name"].as_str().unwrap().to_string(),
            c["version"].as_str().unwrap().to_string(),
        );
        assert!(
            runtime.contains(&key),
            "{key:?} is required but not a normal dependency"
        );
    }

    // The dependency graph: one entry per crate, every edge between listed crates.
    let refs: BTreeSet<&str> = components
        .iter()
        .chain([root])
        .map(|c| c["bom-ref"].as_str().unwrap())
        .collect();
    let deps = sbom["dependencies"].as_array().expect("dependencies");
    assert_eq!(deps.len(), refs.len());
    for d in deps {
        for on in d["dependsOn"].as_array().unwrap() {
            assert!(
                refs.contains(on.as_str().unwrap()),
                "{on} is not a component"
            );
        }
    }
    let root_deps = &deps
        .iter()
        .find(|d| d["ref"] == root["bom-ref"])
        .expect("the binary's own entry")["dependsOn"];
    assert!(
        root_deps
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().starts_with("pkg:cargo/tokio@")),
        "the binary depends on tokio: {root_deps}"
    );
}
