//! `config/`: every kustomize base builds, the samples cover every kind and pass admission, and
//! RBAC grants what the served kinds need.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use vsphere_provider::api::Kind;
use vsphere_provider::api::manifest::{self, ObjectType};
use vsphere_provider::webhook::Ctx;
use vsphere_provider::webhook::admission::admit_loaded;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `$KUBECTL` (hack/test.sh sets it), else `kubectl` from PATH.
fn kubectl() -> String {
    std::env::var("KUBECTL")
        .ok()
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| "kubectl".into())
}

fn kustomize(base: &str) -> Option<Vec<Value>> {
    let out = match Command::new(kubectl())
        .args(["kustomize", base])
        .current_dir(root())
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("skipping `kubectl kustomize {base}`: kubectl not available: {e}");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "kubectl kustomize {base}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    Some(serde_saphyr::from_multiple(&text).unwrap())
}

#[test]
fn every_base_builds() {
    for base in [
        "config/crd",
        "config/rbac",
        "config/manager",
        "config/webhook",
        "config/default",
        "config/samples",
    ] {
        if let Some(objects) = kustomize(base) {
            assert!(!objects.is_empty(), "{base}");
        }
    }
}

#[test]
fn default_contains_every_crd_and_the_manager() {
    let Some(objects) = kustomize("config/default") else {
        return;
    };
    let crds: BTreeSet<String> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    let want: BTreeSet<String> = Kind::ALL
        .iter()
        .map(|k| {
            format!(
                "{}.{}",
                k.plural(),
                k.api_version().split('/').next().unwrap()
            )
        })
        .collect();
    assert_eq!(crds, want);
    assert!(objects.iter().any(|o| o["kind"] == "Deployment"));
    assert!(
        objects
            .iter()
            .any(|o| o["kind"] == "ValidatingWebhookConfiguration")
    );
}

/// The kinds no user writes: Cluster API's MachineSet (or KubeadmControlPlane) stamps
/// VSphereMachines from a template, and our VSphereMachine controller makes the VSphereVM. They
/// are shown in docs/examples, not in config/samples, which must be valid for every path that
/// uses it (`reconcile -f` refuses a VSphereVM: local mode makes its own).
const MADE_FOR_THE_USER: [Kind; 2] = [Kind::VSphereMachine, Kind::VSphereVM];

#[test]
fn samples_cover_every_kind_a_user_writes_and_pass_admission() {
    let kinds = admitted_kinds("config/samples");
    let want: BTreeSet<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| !MADE_FOR_THE_USER.contains(k))
        .collect();
    assert_eq!(kinds, want);
}

#[test]
fn docs_examples_show_the_kinds_the_samples_leave_out() {
    let kinds = admitted_kinds("docs/examples");
    for k in MADE_FOR_THE_USER {
        assert!(kinds.contains(&k), "docs/examples has no {k:?}");
    }
}

/// Loads every manifest under `dir`, asserts each passes admission with no warning but
/// upstream's size advice and that a Secret is among them (samples are complete), and returns
/// the served kinds found.
fn admitted_kinds(dir: &str) -> BTreeSet<Kind> {
    let (objects, errors) = manifest::load_paths(&[root().join(dir)]);
    assert!(errors.is_empty(), "{errors:?}");
    let mut kinds = BTreeSet::new();
    for obj in &objects {
        // Samples are concrete: no placeholders allowed.
        let out = admit_loaded(obj, &Ctx::default());
        assert!(out.allowed(), "{}: {:?}", obj.source, out.errors);
        // The samples fit vcsim's small templates; upstream's advice for production sizes
        // (machine-api-operator's recommended minimums) is the only warning they may draw.
        let other: Vec<&String> = out
            .warnings
            .iter()
            .filter(|w| !w.contains("is missing or less than the recommended minimum"))
            .collect();
        assert!(other.is_empty(), "{}: {:?}", obj.source, other);
        if let ObjectType::Served(k) = out.object_type {
            kinds.insert(k);
        }
    }
    if dir == "config/samples" {
        assert!(
            objects
                .iter()
                .any(|o| o.object_type() == ObjectType::Secret)
        );
    }
    kinds
}

#[test]
fn samples_match_the_vcsim_topology() {
    let (objects, _) = manifest::load_paths(&[root().join("config/samples")]);
    let text: String = objects.iter().map(|o| o.value.to_string()).collect();
    for name in [
        "DC0_C0",
        "DC0_C1",
        "DC0_C2",
        "DC0_C0_RP1",
        "DC0_C1_RP1",
        "DC0_C2_RP1",
        "LocalDS_0",
        "VM Network",
        "127.0.0.1",
    ] {
        assert!(text.contains(name), "{name} not used by the samples");
    }
}

#[test]
fn rbac_grants_every_served_resource_and_status() {
    // The manager's ClusterRole and the OpenShift one (which config/capi-only leaves out), as
    // one list of rules.
    let mut text = String::new();
    let mut rules = Vec::new();
    for file in ["config/rbac/role.yaml", "config/rbac/openshift_role.yaml"] {
        let t = std::fs::read_to_string(root().join(file)).unwrap();
        let role: Value = serde_saphyr::from_str(&t).unwrap();
        rules.extend(role["rules"].as_array().unwrap().iter().cloned());
        text.push_str(&t);
    }
    let role = serde_json::json!({ "rules": rules });
    let mut granted = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        for g in rule["apiGroups"].as_array().unwrap() {
            for r in rule["resources"].as_array().unwrap() {
                granted.insert(format!("{}/{}", g.as_str().unwrap(), r.as_str().unwrap()));
            }
        }
    }
    for kind in Kind::ALL {
        let group = kind.api_version().split('/').next().unwrap();
        // Templates are read by Cluster API's controllers (with their own RBAC), never by ours;
        // only the storage migration lists and rewrites them (tests/rbac_needed.rs).
        if matches!(
            kind,
            Kind::VSphereMachineTemplate | Kind::VSphereClusterTemplate
        ) {
            let verbs: BTreeSet<String> = role["rules"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| {
                    r["resources"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|x| x == kind.plural())
                })
                .flat_map(|r| r["verbs"].as_array().unwrap().iter())
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            assert_eq!(
                verbs,
                BTreeSet::from(["list".to_string(), "patch".to_string()]),
                "{kind}: only the storage migration touches it"
            );
            continue;
        }
        assert!(
            granted.contains(&format!("{group}/{}", kind.plural())),
            "{kind}"
        );
        // No controller writes the status of a failure domain or of a VSphereClusterIdentity;
        // the templates have no status (as upstream).
        if !matches!(
            kind,
            Kind::VSphereFailureDomain
                | Kind::VSphereClusterIdentity
                | Kind::VSphereMachineTemplate
                | Kind::VSphereClusterTemplate
        ) {
            assert!(
                granted.contains(&format!("{group}/{}/status", kind.plural())),
                "{kind} status"
            );
        }
    }
    // Least privilege: no wildcards; secrets only fetched by name (identityRef), never listed;
    // the OpenShift Infrastructure (the machine set's domains) only read by name.
    assert!(!text.contains('*'));
    assert!(granted.contains("config.openshift.io/infrastructures"));
    for rule in role["rules"].as_array().unwrap() {
        if rule["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "secrets" || r == "infrastructures")
        {
            assert_eq!(rule["verbs"], serde_json::json!(["get"]));
        }
    }
}

/// The manager container of a rendered install.
fn manager<'a>(objects: &'a [Value], base: &str) -> &'a Value {
    let deployments: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .collect();
    assert_eq!(deployments.len(), 1, "{base}: one Deployment");
    deployments[0]["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "manager")
        .unwrap_or_else(|| panic!("{base}: no container named manager"))
}

/// hack/lib.sh's `PLACEHOLDER_IMAGE_NAME`: the one place the scripts take it from.
fn placeholder_image_name() -> String {
    let lib = std::fs::read_to_string(root().join("hack/lib.sh")).unwrap();
    lib.lines()
        .find_map(|l| l.strip_prefix("PLACEHOLDER_IMAGE_NAME="))
        .expect("hack/lib.sh sets PLACEHOLDER_IMAGE_NAME")
        .trim()
        .to_string()
}

#[test]
fn default_runs_the_documented_placeholder_image_never_latest() {
    let name = placeholder_image_name();
    // A name nothing can pull (RFC 2606's .invalid never resolves): a pod left with it fails,
    // naming it, rather than running whatever a registry serves under that name.
    assert!(
        name.split('/').next().unwrap().ends_with(".invalid"),
        "{name}"
    );
    let Some(objects) = kustomize("config/default") else {
        return;
    };
    let image = manager(&objects, "config/default")["image"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !image.ends_with(":latest") && image.contains(':'),
        "config/default runs {image}: an explicit tag, not latest"
    );
    assert_eq!(
        image,
        format!("{name}:v{}", env!("CARGO_PKG_VERSION")),
        "config/manager/kustomization.yaml ships hack/lib.sh's PLACEHOLDER_IMAGE_NAME tagged \
         v<Cargo.toml version> (hack/image.sh's default tag)"
    );
}

/// A kustomization in a fresh directory under the repository's target/ (kustomize takes other
/// kustomizations by relative path only), rendered.
fn overlay(kustomization: &str) -> Option<Vec<Value>> {
    let target = root().join("target");
    std::fs::create_dir_all(&target).unwrap();
    let dir = tempfile::Builder::new()
        .prefix(".validate_config.")
        .tempdir_in(&target)
        .unwrap();
    std::fs::write(dir.path().join("kustomization.yaml"), kustomization).unwrap();
    kustomize(dir.path().to_str().unwrap())
}

#[test]
fn the_credentials_component_gives_a_kustomize_install_the_manager_credentials() {
    // What config/default's commented `components` does, and an overlay can do.
    let Some(objects) =
        overlay("resources: [../../config/default]\ncomponents: [../../config/credentials]\n")
    else {
        return;
    };
    let env = manager(&objects, "config/default + config/credentials")["env"]
        .as_array()
        .unwrap()
        .clone();
    for (var, key) in [
        ("VSPHERE_USERNAME", "username"),
        ("VSPHERE_PASSWORD", "password"),
        ("VSPHERE_SERVER", "servers"),
    ] {
        let e = env
            .iter()
            .find(|e| e["name"] == var)
            .unwrap_or_else(|| panic!("no {var} in {env:?}"));
        let r = &e["valueFrom"]["secretKeyRef"];
        assert_eq!(
            r["name"], "vsphere-provider-manager-bootstrap-credentials",
            "{e}"
        );
        assert_eq!(r["key"], key, "{e}");
    }
    // The Downward API variable the manager needs stays.
    assert!(env.iter().any(|e| e["name"] == "POD_NAMESPACE"), "{env:?}");
    // No Secret comes with it (credentials stay out of git), and config/default alone has no
    // credentials: it is opt-in.
    assert!(!objects.iter().any(|o| o["kind"] == "Secret"));
    let default = kustomize("config/default").unwrap();
    let plain = manager(&default, "config/default");
    assert!(!plain.to_string().contains("VSPHERE_USERNAME"), "{plain}");
    // It builds alone too (hack/test.sh kustomizes every kustomization.yaml), to nothing.
    assert_eq!(
        kustomize("config/credentials")
            .unwrap()
            .iter()
            .filter(|o| !o.is_null())
            .count(),
        0
    );
}

/// The bindings of ClusterRole vsphere-provider-secrets in a rendered install, as
/// `(kind, namespace)`.
fn secrets_bindings(objects: &[Value]) -> Vec<(String, String)> {
    objects
        .iter()
        .filter(|o| o["roleRef"]["name"] == "vsphere-provider-secrets")
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_string(),
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

/// Security review F6/N4: Secret reads are namespaced by default. config/default (and the
/// clusterctl release, which is config/default with credentials) binds the manager's Secret
/// ClusterRole only in its own namespace (a RoleBinding), never cluster-wide, and no other rule
/// of the manager grants Secrets; config/cluster-wide-secrets is the opt-in that binds it
/// everywhere.
#[test]
fn secret_reads_are_bound_in_the_managers_namespace_only_unless_opted_in() {
    for base in ["config/default", "config/clusterctl"] {
        let Some(objects) = kustomize(base) else {
            return;
        };
        assert_eq!(
            secrets_bindings(&objects),
            [(
                "RoleBinding".to_string(),
                "vsphere-provider-system".to_string()
            )],
            "{base}"
        );
        for role in objects
            .iter()
            .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
        {
            let grants_secrets = role["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["resources"].to_string().contains("secrets"));
            assert_eq!(
                grants_secrets,
                role["metadata"]["name"] == "vsphere-provider-secrets",
                "{base}: {role}"
            );
        }
    }
    // The opt-in: the same ClusterRole bound cluster-wide as well.
    let objects = overlay(
        "resources: [../../config/default]\ncomponents: [../../config/cluster-wide-secrets]\n",
    )
    .unwrap();
    let mut bindings = secrets_bindings(&objects);
    bindings.sort();
    assert_eq!(
        bindings,
        [
            ("ClusterRoleBinding".to_string(), String::new()),
            (
                "RoleBinding".to_string(),
                "vsphere-provider-system".to_string()
            )
        ]
    );
    // It builds alone too (hack/test.sh kustomizes every kustomization.yaml).
    assert!(kustomize("config/cluster-wide-secrets").is_some());
}

/// Security review F6: config/capi-only leaves out ClusterRole vsphere-provider-openshift and
/// its binding, so a Cluster API-only install can neither patch nor delete a Node, list pods,
/// evict, nor write OpenShift machine API objects; everything else of config/default stays.
#[test]
fn the_capi_only_component_drops_the_openshift_grants_and_nothing_else() {
    let Some(full) = kustomize("config/default") else {
        return;
    };
    let capi = overlay("resources: [../../config/default]\ncomponents: [../../config/capi-only]\n")
        .unwrap();
    let id = |o: &Value| {
        format!(
            "{} {}",
            o["kind"].as_str().unwrap_or_default(),
            o["metadata"]["name"].as_str().unwrap_or_default()
        )
    };
    let ids = |objects: &[Value]| -> BTreeSet<String> { objects.iter().map(id).collect() };
    let dropped: Vec<String> = ids(&full).difference(&ids(&capi)).cloned().collect();
    assert_eq!(
        dropped,
        [
            "ClusterRole vsphere-provider-openshift",
            "ClusterRoleBinding vsphere-provider-openshift"
        ]
    );
    // What stays grants no write to Nodes, pods or the OpenShift kinds.
    for role in capi.iter().filter(|o| o["kind"] == "ClusterRole") {
        for rule in role["rules"].as_array().into_iter().flatten() {
            let groups = rule["apiGroups"].to_string();
            let resources = rule["resources"].to_string();
            let touchy = groups.contains("openshift.io")
                || (rule["apiGroups"] == serde_json::json!([""])
                    && (resources.contains("nodes") || resources.contains("pods")));
            if touchy {
                assert_eq!(
                    rule["verbs"],
                    serde_json::json!(["list", "watch"]),
                    "{}: {rule}",
                    id(role)
                );
            }
        }
    }
    assert!(kustomize("config/capi-only").is_some());
}

/// The manager's namespace enforces Pod Security "restricted" (and audits and warns it), the
/// Deployment meets that profile, metrics stay on loopback, and the NetworkPolicy lets in only
/// the webhook and probe ports and lets out only DNS, the API server and vCenter.
#[test]
fn the_manager_namespace_is_restricted_and_fenced() {
    let Some(objects) = kustomize("config/default") else {
        return;
    };
    let one = |kind: &str| {
        let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
        assert_eq!(found.len(), 1, "one {kind}");
        found[0]
    };
    let ns = one("Namespace");
    for mode in ["enforce", "audit", "warn"] {
        assert_eq!(
            ns["metadata"]["labels"][format!("pod-security.kubernetes.io/{mode}")],
            "restricted",
            "{mode}"
        );
    }
    let dep = one("Deployment");
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let mut ports = BTreeSet::new();
    for c in pod["containers"].as_array().unwrap() {
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{}", c["name"]);
        assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
        assert!(sc["capabilities"]["add"].is_null());
        assert!(sc["privileged"].is_null() || sc["privileged"] == false);
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let metrics = args
            .iter()
            .find_map(|a| a.split_once('=').filter(|(k, _)| k.contains("metrics")))
            .map(|(_, v)| v)
            .expect("a metrics address");
        assert!(metrics.starts_with("127.0.0.1:"), "metrics on {metrics}");
        for p in c["ports"].as_array().into_iter().flatten() {
            ports.insert(p["containerPort"].as_u64().unwrap());
        }
    }
    assert_eq!(
        ports,
        BTreeSet::from([9443, 8081]),
        "no metrics port is published"
    );
    for v in pod["volumes"].as_array().unwrap() {
        assert!(
            v["secret"].is_object(),
            "restricted allows these volume types: {v}"
        );
    }

    let np = one("NetworkPolicy");
    assert_eq!(np["metadata"]["namespace"], ns["metadata"]["name"]);
    assert_eq!(
        np["spec"]["podSelector"]["matchLabels"],
        dep["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        np["spec"]["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    let port_set = |rules: &Value| -> BTreeSet<(u64, String)> {
        rules
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["ports"].as_array().unwrap().iter())
            .map(|p| {
                (
                    p["port"].as_u64().unwrap(),
                    p["protocol"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let tcp = |p: u64| (p, "TCP".to_string());
    assert_eq!(
        port_set(&np["spec"]["ingress"]),
        BTreeSet::from([tcp(9443), tcp(8081)])
    );
    // Security review F9: each port by a rule of its own, whose sources the admin narrows to
    // the API server's and the nodes' addresses (docs/security.md, tested below); shipped open,
    // as a list that missed a cluster's addresses would time admission out.
    let any = vec!["0.0.0.0/0".to_string(), "::/0".to_string()];
    assert_eq!(ingress_sources(np), [(9443, any.clone()), (8081, any)]);
    assert_eq!(
        port_set(&np["spec"]["egress"]),
        BTreeSet::from([(53, "UDP".into()), tcp(53), tcp(443), tcp(6443)])
    );
}

/// `(port, ipBlock CIDRs)` of each ingress rule of a NetworkPolicy; a rule without `from` (any
/// source) or with another kind of peer fails.
fn ingress_sources(np: &Value) -> Vec<(u64, Vec<String>)> {
    np["spec"]["ingress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| {
            let ports = rule["ports"].as_array().unwrap();
            assert_eq!(ports.len(), 1, "one port per rule: {rule}");
            let from = rule["from"]
                .as_array()
                .filter(|f| !f.is_empty())
                .unwrap_or_else(|| panic!("open to every source: {rule}"));
            let cidrs = from
                .iter()
                .map(|peer| {
                    peer["ipBlock"]["cidr"]
                        .as_str()
                        .unwrap_or_else(|| panic!("not an ipBlock: {peer}"))
                        .to_string()
                })
                .collect();
            (ports[0]["port"].as_u64().unwrap(), cidrs)
        })
        .collect()
}

/// The kustomize patch docs/security.md gives for the NetworkPolicy's sources builds over
/// config/default and sets exactly the webhook's and the probes' sources.
#[test]
fn the_documented_network_policy_patch_sets_both_sources() {
    let doc = std::fs::read_to_string(root().join("docs/security.md")).unwrap();
    let section = doc
        .split("\n## NetworkPolicy")
        .nth(1)
        .expect("docs/security.md has a NetworkPolicy section");
    let block = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a yaml block in the NetworkPolicy section");
    assert!(block.starts_with("patches:"), "{block}");
    let Some(objects) = overlay(&format!("resources: [../../config/default]\n{block}")) else {
        return;
    };
    let np = objects
        .iter()
        .find(|o| o["kind"] == "NetworkPolicy")
        .unwrap();
    assert_eq!(
        ingress_sources(np),
        [
            (9443, vec!["10.0.0.0/28".to_string()]),
            (8081, vec!["10.0.0.0/16".to_string()])
        ]
    );
}
