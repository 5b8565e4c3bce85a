//! The CRDs of crds/ in a real API server: Kubernetes' own kube-apiserver v1.37.2 and etcd v3.7.0,
//! built from source (hack/kube/, harness in tests/support/realapi.rs). It lacks
//! kube-controller-manager, so there is no garbage collection and no namespace deletion; nothing
//! here needs either.
//!
//! * every CRD is accepted and Established: structural schema, every served version listed in
//!   discovery and in the published OpenAPI, the stored schema exactly ours (nothing pruned);
//! * every CEL rule (`x-kubernetes-validations`, enumerated from the files) rejects one object
//!   that breaks it, applied with kubectl, with the rule's message and path in kubectl's stderr;
//! * config/crd (kustomize) is the same as crds/, and config/samples is accepted.
//!
//! Upstream manifests and upstream's CRD test suites are in tests/realapi_upstream.rs.
#[path = "support/realapi.rs"]
mod realapi;

use std::path::PathBuf;

use realapi::{Identity, control_plane, repo};
use serde_json::{Value, json};
use vsphere_provider::webhook::Ctx;
use vsphere_provider::webhook::admission::{Layers, admit_layers};

const ADMIN: &Identity = &Identity::Admin;

/// Every CRD document of crds/*.yaml, with its file name.
fn crds() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("crds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for d in docs.into_iter().filter(|d| !d.is_null()) {
            assert_eq!(d["kind"], "CustomResourceDefinition", "{}", f.display());
            out.push((f.file_name().unwrap().to_string_lossy().into_owned(), d));
        }
    }
    assert_eq!(
        out.len(),
        vsphere_provider::api::Kind::ALL.len(),
        "crds/ holds one CRD per served kind"
    );
    out
}

/// Numbers compared by value (YAML `0.0` and the server's `0` are the same schema).
fn normalized(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), normalized(v))).collect())
        }
        other => other.clone(),
    }
}

fn condition<'a>(crd: &'a Value, type_: &str) -> Option<&'a Value> {
    crd["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

#[test]
fn every_crd_is_established_and_every_served_version_is_served() {
    let cp = control_plane();
    let openapi = cp
        .kubectl(ADMIN, &["get", "--raw", "/openapi/v3"])
        .ok()
        .json();
    for (file, crd) in crds() {
        let name = crd["metadata"]["name"].as_str().unwrap();
        let group = crd["spec"]["group"].as_str().unwrap();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap();
        let stored = cp
            .kubectl(ADMIN, &["get", "crd", name, "-o", "json"])
            .ok()
            .json();

        for (type_, status) in [("NamesAccepted", "True"), ("Established", "True")] {
            let c = condition(&stored, type_)
                .unwrap_or_else(|| panic!("{file}: no {type_} condition: {}", stored["status"]));
            assert_eq!(c["status"], status, "{file}: {type_}: {c}");
        }
        // A non-structural schema or a rule that does not compile would show up here (or have
        // failed the apply); so would a Terminating or otherwise unhappy CRD.
        for c in stored["status"]["conditions"].as_array().unwrap() {
            assert!(
                c["type"] == "NamesAccepted" || c["type"] == "Established",
                "{file}: unexpected condition {c}"
            );
        }
        assert_eq!(stored["status"]["acceptedNames"]["kind"], kind, "{file}");

        let versions = crd["spec"]["versions"].as_array().unwrap();
        let storage: Vec<&Value> = versions
            .iter()
            .filter(|v| v["storage"] == true)
            .map(|v| &v["name"])
            .collect();
        assert_eq!(
            stored["status"]["storedVersions"].as_array().unwrap(),
            &storage.into_iter().cloned().collect::<Vec<_>>(),
            "{file}"
        );

        let stored_versions = stored["spec"]["versions"].as_array().unwrap();
        assert_eq!(stored_versions.len(), versions.len(), "{file}");
        for (ours, theirs) in versions.iter().zip(stored_versions) {
            let version = ours["name"].as_str().unwrap();
            // The server keeps the schema exactly as written: nothing dropped or rewritten.
            assert!(
                normalized(&ours["schema"]) == normalized(&theirs["schema"]),
                "{file} {version}: the stored schema differs from crds/"
            );
            assert_eq!(
                normalized(&ours["subresources"]),
                normalized(&theirs["subresources"]),
                "{file} {version}"
            );
            if ours["served"] != true {
                continue;
            }
            // Discovery lists the resource (and its status subresource) in this version.
            let discovery = cp
                .kubectl(
                    ADMIN,
                    &["get", "--raw", &format!("/apis/{group}/{version}")],
                )
                .ok()
                .json();
            let resources: Vec<&str> = discovery["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["name"].as_str().unwrap())
                .collect();
            assert!(
                resources.contains(&plural),
                "{file} {version}: {resources:?}"
            );
            if ours["subresources"].get("status").is_some() {
                let status = format!("{plural}/status");
                assert!(
                    resources.contains(&status.as_str()),
                    "{file} {version}: {resources:?}"
                );
            }
            // Listing works in this version, and the OpenAPI document of the group-version
            // carries the kind.
            let list = cp
                .kubectl(
                    ADMIN,
                    &[
                        "get",
                        &format!("{plural}.{version}.{group}"),
                        "-A",
                        "-o",
                        "json",
                    ],
                )
                .ok()
                .json();
            assert_eq!(list["kind"], "List", "{file} {version}");
            let path = format!("apis/{group}/{version}");
            assert!(
                openapi["paths"].get(&path).is_some(),
                "{file}: /openapi/v3 does not publish {path}"
            );
            let doc = cp
                .kubectl(ADMIN, &["get", "--raw", &format!("/openapi/v3/{path}")])
                .ok()
                .json();
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            assert!(
                schemas.values().any(|s| {
                    s["x-kubernetes-group-version-kind"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|g| g["kind"] == kind && g["version"] == version)
                }),
                "{file} {version}: the OpenAPI v3 document has no {kind}"
            );
        }
    }
}

/// `kubectl kustomize config/crd` (what config/default installs) is crds/ but for the
/// conversion webhook of every infrastructure kind (all served as v1beta1 and v1beta2, stored as
/// v1beta2) and cert-manager's CA injection annotation; and the server accepts those CRDs. (The
/// harness already points these CRDs' conversion at its own webhook by `url`, so they are
/// checked by a server-side dry-run create under another group, not applied over ours.)
#[test]
fn config_crd_is_crds_plus_only_the_conversion_webhook() {
    let cp = control_plane();
    let built = cp.kubectl(ADMIN, &["kustomize", "config/crd"]).ok().stdout;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&built).unwrap();
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    assert_eq!(
        docs.len(),
        vsphere_provider::api::Kind::ALL.len(),
        "{built}"
    );
    for kind in vsphere_provider::api::Kind::ALL {
        let file = repo().join("crds").join(kind.crd_file_name());
        let mut want: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let name = want["metadata"]["name"].clone();
        let mut have = docs
            .iter()
            .find(|d| d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("config/crd has no {name}"))
            .clone();
        let infra = kind
            .api_version()
            .starts_with(vsphere_provider::api::INFRA_GROUP);
        if infra {
            let conversion = have["spec"]
                .as_object_mut()
                .unwrap()
                .remove("conversion")
                .unwrap_or_else(|| panic!("{name}: no conversion webhook"));
            assert_eq!(conversion["strategy"], "Webhook", "{name}");
            assert_eq!(
                conversion["webhook"]["clientConfig"]["service"]["path"],
                vsphere_provider::webhook::conversion::PATH,
                "{name}"
            );
            let annotations = have["metadata"]["annotations"].as_object_mut().unwrap();
            assert!(
                annotations
                    .remove("cert-manager.io/inject-ca-from")
                    .is_some(),
                "{name}: no CA injection"
            );
            if annotations.is_empty() {
                have["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("annotations");
            }
        }
        // What crds/ does not say (the server's defaults) must not differ either.
        if let Some(m) = want["metadata"].as_object_mut() {
            m.remove("annotations");
        }
        if let Some(m) = have["metadata"].as_object_mut() {
            m.remove("annotations");
        }
        // kustomize writes `0.0` as `0`: numbers compare as numbers.
        numbers_as_floats(&mut have);
        numbers_as_floats(&mut want);
        assert_eq!(
            have, want,
            "{name}: config/crd changes more than the conversion"
        );
        if infra {
            // The server takes it: a dry-run create of the same CRD under a group of its own.
            let group = "upgrade-check.example.com";
            let mut copy = docs
                .iter()
                .find(|d| d["metadata"]["name"] == name)
                .unwrap()
                .clone();
            copy["spec"]["group"] = json!(group);
            copy["metadata"] = json!({"name": format!("{}.{group}", kind.plural())});
            let out = cp.kubectl_stdin(
                ADMIN,
                &["create", "--dry-run=server", "-f", "-"],
                Some(&copy.to_string()),
            );
            assert!(out.success, "{name}: {}", out.stderr);
        }
    }
}

fn numbers_as_floats(v: &mut Value) {
    match v {
        Value::Number(n) => *v = json!(n.as_f64().unwrap()),
        Value::Array(a) => a.iter_mut().for_each(numbers_as_floats),
        Value::Object(o) => o.values_mut().for_each(numbers_as_floats),
        _ => {}
    }
}

/// config/samples as a user applies it (`kubectl apply -k config/samples`): accepted, and read
/// back with the CRD defaults.
#[test]
fn config_samples_are_accepted() {
    let cp = control_plane();
    let out = cp.apply(ADMIN, "config/samples", None).ok();
    assert!(out.stdout.lines().count() >= 10, "{}", out.stdout);
    let cpms = cp
        .kubectl(
            ADMIN,
            &[
                "get",
                "controlplanemachinesets",
                "cluster",
                "-n",
                "default",
                "-o",
                "json",
            ],
        )
        .ok()
        .json();
    assert_eq!(cpms["spec"]["replicas"], 3);
    let zone = cp
        .kubectl(
            ADMIN,
            &["get", "vspheredeploymentzones", "zone-a", "-o", "json"],
        )
        .ok()
        .json();
    assert_eq!(zone["spec"]["failureDomain"], "zone-a");
}

// --- CEL rules ----------------------------------------------------------------------------------

/// One `x-kubernetes-validations` entry as found in a CRD.
#[derive(Debug, Clone)]
struct Rule {
    kind: String,
    version: String,
    /// Where the rule sits, as the server names the field: `spec.replicas`.
    path: String,
    rule: String,
    message: String,
    field_path: Option<String>,
}

fn walk(schema: &Value, path: &str, kind: &str, version: &str, out: &mut Vec<Rule>) {
    for r in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let rule = r["rule"].as_str().unwrap().to_string();
        assert!(
            r.get("messageExpression").is_none(),
            "{kind} {path}: messageExpression is not handled by this test"
        );
        let message = r["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("failed rule: {rule}"));
        out.push(Rule {
            kind: kind.into(),
            version: version.into(),
            path: path.into(),
            rule,
            message,
            field_path: r["fieldPath"].as_str().map(str::to_string),
        });
    }
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    for (k, v) in schema["properties"].as_object().into_iter().flatten() {
        walk(v, &join(k), kind, version, out);
    }
    if schema["items"].is_object() {
        walk(&schema["items"], &format!("{path}[*]"), kind, version, out);
    }
    if schema["additionalProperties"].is_object() {
        walk(
            &schema["additionalProperties"],
            &format!("{path}[*]"),
            kind,
            version,
            out,
        );
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        for s in schema[combinator].as_array().into_iter().flatten() {
            walk(s, path, kind, version, out);
        }
    }
}

/// Every rule of every served version of every CRD in crds/.
fn rules() -> Vec<Rule> {
    let mut out = Vec::new();
    for (_, crd) in crds() {
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap();
        for v in crd["spec"]["versions"].as_array().unwrap() {
            if v["served"] == true {
                let version = v["name"].as_str().unwrap();
                walk(&v["schema"]["openAPIV3Schema"], "", kind, version, &mut out);
            }
        }
    }
    out
}

/// How a case breaks its rule.
enum Step {
    /// Creating the edited base breaks it.
    Create(fn(&mut Value)),
    /// The base (edited by the first) is created, then applied again edited by the second.
    Update(fn(&mut Value), fn(&mut Value)),
    /// The base is created, its status set to the first (a merge patch of the status
    /// subresource, with kubectl), then patched with the second.
    Status(fn() -> Value, fn() -> Value),
}

/// The case for one rule, found by kind, path and the rule's text (a changed rule has no case,
/// and fails the test until it gets one).
struct Case {
    kind: &'static str,
    path: &'static str,
    rule: &'static str,
    step: Step,
}

const FD: &str = "/spec/template/machines_v1beta1_machine_openshift_io/failureDomains";
const LABELS: &str = "/spec/template/machines_v1beta1_machine_openshift_io/metadata/labels";

/// The last token of a JSON pointer, unescaped (`~1` is `/`), and its parent.
fn split(pointer: &str) -> (&str, String) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    (parent, key.replace("~1", "/").replace("~0", "~"))
}

fn set(v: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = split(pointer);
    v.pointer_mut(parent).unwrap()[key] = value;
}

fn remove(v: &mut Value, pointer: &str) {
    let (parent, key) = split(pointer);
    let removed = v
        .pointer_mut(parent)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove(&key);
    assert!(removed.is_some(), "{pointer}: nothing to remove");
}

/// A failure domain block for `platform` without that platform's list.
fn platform_without_its_list(v: &mut Value, platform: &str) {
    set(v, FD, json!({ "platform": platform }));
}

fn cases() -> Vec<Case> {
    const CPMS: &str = "ControlPlaneMachineSet";
    const MACHINE: &str = "Machine";
    const FD_PATH: &str = "spec.template.machines_v1beta1_machine_openshift_io.failureDomains";
    const LABELS_PATH: &str = "spec.template.machines_v1beta1_machine_openshift_io.metadata.labels";
    vec![
        Case {
            kind: CPMS,
            path: "spec.machineNamePrefix",
            rule: "!format.dns1123Subdomain().validate(self).hasValue()",
            step: Step::Create(|v| set(v, "/spec/machineNamePrefix", json!("Not_A.Subdomain-"))),
        },
        Case {
            kind: CPMS,
            path: "spec.replicas",
            rule: "self == oldSelf",
            step: Step::Update(|_| {}, |v| set(v, "/spec/replicas", json!(5))),
        },
        Case {
            kind: CPMS,
            path: "spec.selector",
            rule: "self == oldSelf",
            step: Step::Update(
                |_| {},
                |v| set(v, "/spec/selector/matchLabels/extra", json!("label")),
            ),
        },
        Case {
            kind: CPMS,
            path: "spec.state",
            rule: "oldSelf != 'Active' || self == oldSelf",
            step: Step::Update(
                |v| set(v, "/spec/state", json!("Active")),
                |v| set(v, "/spec/state", json!("Inactive")),
            ),
        },
        Case {
            kind: CPMS,
            path: FD_PATH,
            rule: "has(self.platform) && self.platform == 'AWS' ?  has(self.aws) : !has(self.aws)",
            step: Step::Create(|v| platform_without_its_list(v, "AWS")),
        },
        Case {
            kind: CPMS,
            path: FD_PATH,
            rule: "has(self.platform) && self.platform == 'Azure' ?  has(self.azure) : !has(self.azure)",
            step: Step::Create(|v| platform_without_its_list(v, "Azure")),
        },
        Case {
            kind: CPMS,
            path: FD_PATH,
            rule: "has(self.platform) && self.platform == 'GCP' ?  has(self.gcp) : !has(self.gcp)",
            step: Step::Create(|v| platform_without_its_list(v, "GCP")),
        },
        Case {
            kind: CPMS,
            path: FD_PATH,
            rule: "has(self.platform) && self.platform == 'OpenStack' ?  has(self.openstack) : !has(self.openstack)",
            step: Step::Create(|v| platform_without_its_list(v, "OpenStack")),
        },
        Case {
            kind: CPMS,
            path: FD_PATH,
            rule: "has(self.platform) && self.platform == 'VSphere' ?  has(self.vsphere) : !has(self.vsphere)",
            step: Step::Create(|v| platform_without_its_list(v, "VSphere")),
        },
        Case {
            kind: CPMS,
            path: FD_PATH,
            rule: "has(self.platform) && self.platform == 'Nutanix' ?  has(self.nutanix) : !has(self.nutanix)",
            step: Step::Create(|v| platform_without_its_list(v, "Nutanix")),
        },
        Case {
            kind: CPMS,
            path: LABELS_PATH,
            rule: "'machine.openshift.io/cluster-api-machine-role' in self && self['machine.openshift.io/cluster-api-machine-role'] == 'master'",
            step: Step::Create(|v| {
                set(
                    v,
                    &format!("{LABELS}/machine.openshift.io~1cluster-api-machine-role"),
                    json!("worker"),
                )
            }),
        },
        Case {
            kind: CPMS,
            path: LABELS_PATH,
            rule: "'machine.openshift.io/cluster-api-machine-type' in self && self['machine.openshift.io/cluster-api-machine-type'] == 'master'",
            step: Step::Create(|v| {
                remove(
                    v,
                    &format!("{LABELS}/machine.openshift.io~1cluster-api-machine-type"),
                )
            }),
        },
        Case {
            kind: CPMS,
            path: LABELS_PATH,
            rule: "'machine.openshift.io/cluster-api-cluster' in self",
            step: Step::Create(|v| {
                remove(
                    v,
                    &format!("{LABELS}/machine.openshift.io~1cluster-api-cluster"),
                )
            }),
        },
        Case {
            kind: CPMS,
            path: "spec.template",
            rule: "has(self.machineType) && self.machineType == 'machines_v1beta1_machine_openshift_io' ?  has(self.machines_v1beta1_machine_openshift_io) : !has(self.machines_v1beta1_machine_openshift_io)",
            step: Step::Create(|v| {
                remove(v, "/spec/template/machines_v1beta1_machine_openshift_io")
            }),
        },
        // A machine's providerID is immutable once set (security review 2026-11-28, N2).
        Case {
            kind: MACHINE,
            path: "spec",
            rule: PROVIDER_ID_RULE,
            step: Step::Update(
                |v| set(v, "/spec/providerID", json!("vsphere://4211-a")),
                |v| set(v, "/spec/providerID", json!("vsphere://4211-control-plane")),
            ),
        },
        Case {
            kind: "VSphereMachine",
            path: "spec",
            rule: PROVIDER_ID_RULE,
            step: Step::Update(
                |v| set(v, "/spec/providerID", json!("vsphere://4211-a")),
                |v| remove(v, "/spec/providerID"),
            ),
        },
        Case {
            kind: "VSphereMachineTemplate",
            path: "spec.template.spec",
            rule: PROVIDER_ID_RULE,
            step: Step::Update(
                |v| {
                    set(
                        v,
                        "/spec/template/spec/providerID",
                        json!("vsphere://4211-a"),
                    )
                },
                |v| {
                    set(
                        v,
                        "/spec/template/spec/providerID",
                        json!("vsphere://4211-b"),
                    )
                },
            ),
        },
        Case {
            kind: CPMS,
            path: "spec.template.machines_v1beta1_machine_openshift_io.spec",
            rule: PROVIDER_ID_RULE,
            step: Step::Update(
                |v| {
                    set(
                        v,
                        "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerID",
                        json!("vsphere://4211-a"),
                    )
                },
                |v| {
                    set(
                        v,
                        "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerID",
                        json!("vsphere://4211-b"),
                    )
                },
            ),
        },
        Case {
            kind: MACHINE,
            path: "status.authoritativeAPI",
            rule: "self == 'Migrating' || self == oldSelf || oldSelf == 'Migrating'",
            step: Step::Status(
                || json!({"authoritativeAPI": "MachineAPI"}),
                || json!({"authoritativeAPI": "ClusterAPI"}),
            ),
        },
        Case {
            kind: MACHINE,
            path: "status",
            rule: "!has(oldSelf.synchronizedGeneration) || (has(self.synchronizedGeneration) && self.synchronizedGeneration >= oldSelf.synchronizedGeneration) || (oldSelf.authoritativeAPI == 'Migrating' && self.authoritativeAPI != 'Migrating')",
            step: Step::Status(
                || json!({"authoritativeAPI": "MachineAPI", "synchronizedGeneration": 5}),
                || json!({"synchronizedGeneration": 3}),
            ),
        },
        Case {
            kind: MACHINE,
            path: "status",
            rule: "has(self.authoritativeAPI) || !has(oldSelf.authoritativeAPI)",
            step: Step::Status(
                || json!({"authoritativeAPI": "MachineAPI"}),
                || json!({"authoritativeAPI": null}),
            ),
        },
    ]
}

const PROVIDER_ID_RULE: &str = vsphere_provider::api::provider_id_cel::RULE;

/// A valid object of `kind` at `version` (the infrastructure kinds are served at two), named
/// `name` (in the test's namespace): the base every case edits.
fn base_at(kind: &str, version: &str, name: &str) -> Value {
    let api_version = format!("infrastructure.cluster.x-k8s.io/{version}");
    let machine_spec = json!({"template": "ubuntu",
        "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]}});
    match kind {
        "VSphereMachine" => json!({
            "apiVersion": api_version, "kind": kind, "metadata": {"name": name},
            "spec": machine_spec
        }),
        "VSphereMachineTemplate" => json!({
            "apiVersion": api_version, "kind": kind, "metadata": {"name": name},
            "spec": {"template": {"spec": machine_spec}}
        }),
        _ => base(kind, name),
    }
}

/// A valid object of `kind`, named `name` (in the test's namespace): the base every case edits.
fn base(kind: &str, name: &str) -> Value {
    let labels = json!({
        "machine.openshift.io/cluster-api-cluster": "realapi",
        "machine.openshift.io/cluster-api-machine-role": "master",
        "machine.openshift.io/cluster-api-machine-type": "master",
    });
    match kind {
        "ControlPlaneMachineSet" => json!({
            "apiVersion": "machine.openshift.io/v1",
            "kind": "ControlPlaneMachineSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": 3,
                "state": "Inactive",
                "selector": {"matchLabels": labels},
                "template": {
                    "machineType": "machines_v1beta1_machine_openshift_io",
                    "machines_v1beta1_machine_openshift_io": {
                        "failureDomains": {"platform": "VSphere", "vsphere": [{"name": "zone-a"}]},
                        "metadata": {"labels": labels},
                        "spec": {"providerSpec": {"value": {}}}
                    }
                }
            }
        }),
        "Machine" => json!({
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "Machine",
            "metadata": {"name": name},
            "spec": {}
        }),
        other => panic!("no base object for {other}"),
    }
}

fn plural(kind: &str) -> &'static str {
    match kind {
        "ControlPlaneMachineSet" => "controlplanemachinesets.machine.openshift.io",
        "Machine" => "machines.machine.openshift.io",
        "VSphereMachine" => "vspheremachines.infrastructure.cluster.x-k8s.io",
        "VSphereMachineTemplate" => "vspheremachinetemplates.infrastructure.cluster.x-k8s.io",
        other => panic!("no plural for {other}"),
    }
}

#[test]
fn every_cel_rule_rejects_an_object_breaking_it_with_its_message() {
    let cp = control_plane();
    let ns = cp.namespace("cel");
    let rules = rules();
    let cases = cases();
    assert!(!rules.is_empty());

    // Every rule has exactly one case, and every case a rule.
    let mut failures = Vec::new();
    for r in &rules {
        let n = cases
            .iter()
            .filter(|c| c.kind == r.kind && c.path == r.path && c.rule == r.rule)
            .count();
        if n != 1 {
            failures.push(format!(
                "{} {} `{}`: {n} cases (want 1)",
                r.kind, r.path, r.rule
            ));
        }
    }
    for c in &cases {
        if !rules
            .iter()
            .any(|r| c.kind == r.kind && c.path == r.path && c.rule == r.rule)
        {
            failures.push(format!(
                "case {} {} `{}` matches no rule in crds/",
                c.kind, c.path, c.rule
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The base objects themselves are accepted (so a rejection below is the rule's).
    for kind in ["ControlPlaneMachineSet", "Machine"] {
        let name = format!("base-{}", kind.to_lowercase());
        cp.apply_text(ADMIN, &base(kind, &name).to_string(), Some(&ns))
            .ok();
    }

    let mut renderings = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let case = cases
            .iter()
            .find(|c| c.kind == r.kind && c.path == r.path && c.rule == r.rule)
            .unwrap();
        let name = format!("rule-{i}");
        let mut obj = base_at(&r.kind, &r.version, &name);
        obj["metadata"]["namespace"] = json!(ns);
        // The same change through our own CRD layer (what `validate` and `reconcile` apply).
        let in_process;
        let stderr = match &case.step {
            Step::Create(edit) => {
                edit(&mut obj);
                in_process = admit_layers(&obj, None, &Ctx::default(), Layers::Crd);
                cp.apply_text(ADMIN, &obj.to_string(), Some(&ns))
            }
            Step::Update(first, second) => {
                first(&mut obj);
                cp.apply_text(ADMIN, &obj.to_string(), Some(&ns)).ok();
                let old = admit_layers(&obj, None, &Ctx::default(), Layers::Crd).object;
                second(&mut obj);
                in_process = admit_layers(&obj, Some(&old), &Ctx::default(), Layers::Crd);
                cp.apply_text(ADMIN, &obj.to_string(), Some(&ns))
            }
            Step::Status(first, second) => {
                let mut old = admit_layers(&obj, None, &Ctx::default(), Layers::Crd).object;
                json_patch::merge(&mut old, &json!({ "status": first() }));
                let mut new = old.clone();
                json_patch::merge(&mut new, &json!({ "status": second() }));
                in_process = admit_layers(&new, Some(&old), &Ctx::default(), Layers::Crd);
                cp.apply_text(ADMIN, &obj.to_string(), Some(&ns)).ok();
                let patch = |status: Value| {
                    cp.kubectl(
                        ADMIN,
                        &[
                            "patch",
                            plural(&r.kind),
                            &name,
                            "-n",
                            &ns,
                            "--subresource=status",
                            "--type=merge",
                            "-p",
                            &json!({ "status": status }).to_string(),
                        ],
                    )
                };
                patch(first()).ok();
                patch(second())
            }
        };
        let what = format!("{} {} {} `{}`", r.kind, r.version, r.path, r.rule);
        if stderr.success {
            failures.push(format!("{what}: accepted: {}", stderr.stdout));
            continue;
        }
        let field = match &r.field_path {
            Some(fp) => format!("{}{fp}", r.path),
            None => r.path.clone(),
        };
        // kubectl prints `The Kind "name" is invalid: FIELD: Invalid value: …: MESSAGE`.
        let needle = format!("{field}: ");
        let server_line = stderr
            .stderr
            .lines()
            .filter_map(|l| l.find(&needle).map(|i| &l[i..]))
            .find(|l| l.contains(&r.message));
        let Some(server_line) = server_line else {
            failures.push(format!(
                "{what}: want `{field}: …{}` in kubectl's stderr, got:\n{}",
                r.message, stderr.stderr
            ));
            continue;
        };
        // Our CRD layer rejects it too, at the same field with the same message; only the
        // rendering of the invalid value may differ (see `without_values`).
        let ours: Vec<String> = in_process.errors.iter().map(ToString::to_string).collect();
        match ours
            .iter()
            .find(|e| e.starts_with(&needle) && e.contains(&r.message))
        {
            Some(line) if line == server_line => {}
            Some(line) if without_values(line) == without_values(server_line) => {
                renderings.push(format!("  server: {server_line}\n  ours:   {line}"));
            }
            _ => failures.push(format!(
                "{what}: the server says\n  {server_line}\nour CRD layer says\n  {}",
                ours.join("\n  ")
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    eprintln!(
        "{} CEL rules, each rejecting its case with its message, as our CRD layer does; \
         {} rendered differently:\n{}",
        rules.len(),
        renderings.len(),
        renderings.join("\n")
    );
}

/// A field error with its value left out. kube-apiserver 1.37 renders a failed CEL rule's value
/// as the value itself for scalars (`Invalid value: 5: replicas is immutable`) and not at all for
/// objects and arrays (`Invalid value: selector is immutable`; apiextensions-apiserver v0.37.2,
/// `pkg/apiserver/schema/cel/validation.go`, `field.OmitValueType{}`); older servers, and
/// openshift/api's CRD test suites, give the schema type (`Invalid value: "integer": …`).
fn without_values(text: &str) -> String {
    let re = regex::Regex::new(
        r#"Invalid value: (?:"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null): "#,
    )
    .unwrap();
    re.replace_all(text, "Invalid value: ").into_owned()
}

// --- served versions ----------------------------------------------------------------------------

/// With no conversion webhook (`conversion: None`), the server hands an object stored in one
/// version to a client of another by changing `apiVersion` only, and prunes it to the schema of
/// the version it is read or written in, so what one served version has and another lacks, or
/// holds elsewhere, is lost or wrong after a round trip through the other (and kubectl's
/// default version for the group is the highest, v1beta2). So config/crd, what a user installs,
/// gives every kind served in more than one version the manager's conversion webhook;
/// tests/realapi_controller.rs shows the round trip keeping every field on the server.
#[test]
fn kinds_served_in_two_versions_convert_through_the_webhook() {
    let cp = control_plane();
    let rendered = cp.kubectl(ADMIN, &["kustomize", "config/crd"]).ok();
    let crds: Vec<Value> = serde_saphyr::from_multiple(&rendered.stdout).unwrap();
    let mut converted = Vec::new();
    for crd in crds
        .iter()
        .filter(|c| c["kind"] == "CustomResourceDefinition")
    {
        let name = crd["metadata"]["name"].as_str().unwrap();
        let served = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["served"] == true)
            .count();
        if served < 2 {
            continue;
        }
        let conversion = &crd["spec"]["conversion"];
        assert_eq!(conversion["strategy"], "Webhook", "{name}: {conversion}");
        assert_eq!(
            conversion["webhook"]["clientConfig"]["service"]["path"],
            vsphere_provider::webhook::conversion::PATH,
            "{name}"
        );
        assert!(
            conversion["webhook"]["conversionReviewVersions"]
                .as_array()
                .unwrap()
                .contains(&json!("v1")),
            "{name}"
        );
        converted.push(name.to_string());
    }
    converted.sort();
    let mut infrastructure: Vec<String> = vsphere_provider::api::Kind::ALL
        .into_iter()
        .filter(|k| {
            k.api_version()
                .starts_with(vsphere_provider::api::INFRA_GROUP)
        })
        .map(|k| format!("{}.{}", k.plural(), vsphere_provider::api::INFRA_GROUP))
        .collect();
    infrastructure.sort();
    assert_eq!(converted, infrastructure);
}

/// Issue 42 N7 on the real API server: a tenant writes an unreadable conversion-data annotation
/// on its object at the storage version (no conversion on that write). Lists at the other
/// version convert every object in one ConversionReview; the tenant's object no longer fails
/// that list for everyone: it is served converted from its own fields, without the annotation,
/// next to the others unchanged.
#[test]
fn unreadable_conversion_data_on_one_object_does_not_fail_a_list() {
    let cp = control_plane();
    let ns = cp.namespace("convert-list");
    let template = |name: &str| {
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereMachineTemplate",
            "metadata": {"name": name},
            "spec": {"template": {"spec": {"template": "/DC0/vm/DC0_C0_RP1_VM0",
                "numCPUs": 2, "memoryMiB": 4096, "diskGiB": 20,
                "guestSoftPowerOffTimeout": "2m0s"}}}})
    };
    for name in ["good", "forged"] {
        cp.apply_text(ADMIN, &template(name).to_string(), Some(&ns))
            .ok();
    }
    cp.kubectl(
        ADMIN,
        &[
            "patch",
            "vspheremachinetemplates.v1beta2.infrastructure.cluster.x-k8s.io",
            "forged",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"metadata":{"annotations":{"cluster.x-k8s.io/conversion-data":"{","team":"blue"}}}"#,
        ],
    )
    .ok();
    let list = cp
        .kubectl(
            ADMIN,
            &[
                "get",
                "vspheremachinetemplates.v1beta1.infrastructure.cluster.x-k8s.io",
                "-n",
                &ns,
                "-o",
                "json",
            ],
        )
        .ok()
        .json();
    let items = list["items"].as_array().unwrap();
    let by_name = |name: &str| {
        items
            .iter()
            .find(|i| i["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {list}"))
    };
    for name in ["good", "forged"] {
        let item = by_name(name);
        assert_eq!(
            item["apiVersion"],
            "infrastructure.cluster.x-k8s.io/v1beta1"
        );
        assert_eq!(
            item["spec"]["template"]["spec"]["guestSoftPowerOffTimeout"], "2m0s",
            "{item}"
        );
    }
    let forged = &by_name("forged")["metadata"]["annotations"];
    assert_eq!(forged["team"], "blue");
    assert!(
        forged.get("cluster.x-k8s.io/conversion-data").is_none(),
        "{forged}"
    );
}
