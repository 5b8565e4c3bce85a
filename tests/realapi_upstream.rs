//! Upstream manifests, unchanged, in a real API server with our CRDs: Kubernetes' own
//! kube-apiserver v1.37.2 and etcd v3.7.0, built from source (hack/kube/, harness in
//! tests/support/realapi.rs). It lacks kube-controller-manager (no garbage collection, no
//! namespace deletion) and runs none of our webhooks: this is the CRD layer alone, as
//! openshift/api's own CRD test suites test theirs.
//!
//! * CAPV's failure-domain manifests (the v1beta1 VSphereFailureDomain + VSphereDeploymentZone
//!   pair of the e2e suite, then the same as v1beta2) applied with kubectl;
//! * OpenShift's ControlPlaneMachineSet, Machine and MachineHealthCheck manifests
//!   (tests/fixtures/manifests/upstream/cpms-01, -04, -05) applied with kubectl;
//! * OpenShift's Infrastructure: its CRD from openshift/api (test-only,
//!   tests/fixtures/crds/, see SOURCES.md there) and fixture cpms-02's fragments in whole objects;
//! * openshift/api's CRD test suites for our kinds (cpms-03, -06, -09, -10), case by case against
//!   the server, as upstream runs them against theirs: every expected error and default.
//!
//! Test data: tests/fixtures/manifests/upstream/SOURCES.md (byte-identical to
//! /work/shared/fixtures/anchors/{capv,cpms}/).
#[path = "support/realapi.rs"]
mod realapi;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use realapi::{Identity, control_plane, repo};
use serde_json::{Value, json};

const ADMIN: &Identity = &Identity::Admin;
const UPSTREAM: &str = "tests/fixtures/manifests/upstream";

fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(repo().join(UPSTREAM).join(name)).unwrap()
}

fn docs(name: &str) -> Vec<Value> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&fixture_text(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// `wanted` is part of `stored`: every field it sets, with the same value (numbers by value;
/// lists element by element). What the server adds (defaults, metadata) is not compared.
fn contained(wanted: &Value, stored: &Value, at: &str) -> Result<(), String> {
    match (wanted, stored) {
        (Value::Object(w), Value::Object(s)) => {
            for (k, v) in w {
                // A null is stored as no field at all (`creationTimestamp: null`).
                if v.is_null() && s.get(k).is_none_or(Value::is_null) {
                    continue;
                }
                let there = s
                    .get(k)
                    .ok_or_else(|| format!("{at}.{k}: missing in the stored object"))?;
                contained(v, there, &format!("{at}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(w), Value::Array(s)) if w.len() == s.len() => {
            for (i, (a, b)) in w.iter().zip(s).enumerate() {
                contained(a, b, &format!("{at}[{i}]"))?;
            }
            Ok(())
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => Ok(()),
        (a, b) if a == b => Ok(()),
        (a, b) => Err(format!("{at}: sent {a}, stored {b}")),
    }
}

/// Reads `kind name` (in `ns`) back as JSON.
fn get(resource: &str, name: &str, ns: Option<&str>) -> Value {
    let cp = control_plane();
    let mut args = vec!["get", resource, name, "-o", "json"];
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    cp.kubectl(ADMIN, &args).ok().json()
}

/// Each object of the file is stored with everything it said (spec, labels, annotations).
fn assert_stored_as_sent(file: &str, resource_of: impl Fn(&str) -> String) {
    for doc in docs(file) {
        let kind = doc["kind"].as_str().unwrap();
        let name = doc["metadata"]["name"].as_str().unwrap();
        let ns = doc["metadata"]["namespace"].as_str();
        let stored = get(&resource_of(kind), name, ns);
        assert_eq!(
            stored["apiVersion"], doc["apiVersion"],
            "{file} {kind}/{name}"
        );
        contained(&doc["spec"], &stored["spec"], "spec")
            .unwrap_or_else(|e| panic!("{file} {kind}/{name}: {e}"));
        for m in ["labels", "annotations"] {
            if doc["metadata"].get(m).is_some() {
                contained(&doc["metadata"][m], &stored["metadata"][m], m)
                    .unwrap_or_else(|e| panic!("{file} {kind}/{name}: {e}"));
            }
        }
    }
}

fn resource(kind: &str) -> String {
    match kind {
        "VSphereFailureDomain" => "vspherefailuredomains.infrastructure.cluster.x-k8s.io",
        "VSphereDeploymentZone" => "vspheredeploymentzones.infrastructure.cluster.x-k8s.io",
        "ControlPlaneMachineSet" => "controlplanemachinesets.machine.openshift.io",
        "Machine" => "machines.machine.openshift.io",
        "MachineHealthCheck" => "machinehealthchecks.machine.openshift.io",
        "Infrastructure" => "infrastructures.config.openshift.io",
        other => panic!("no resource for {other}"),
    }
    .to_string()
}

/// CAPV's e2e failure-domain manifests (`${...}` placeholders left in, as in
/// validate_upstream.rs): the v1beta1 pair, then the v1beta2 pair, each as a user applies it.
/// (capv-03 is a strategic-merge patch whose `metadata.name` is `${CLUSTER_NAME}`: not an
/// object a server can store.)
#[test]
fn capv_failure_domain_manifests_apply_unchanged() {
    let cp = control_plane();
    for (file, version) in [
        ("capv-01-e2e-failure-domains.v1beta1.yaml", "v1beta1"),
        ("capv-02-e2e-failure-domains.v1beta2.yaml", "v1beta2"),
    ] {
        let path = format!("{UPSTREAM}/{file}");
        let out = cp.apply(ADMIN, &path, None).ok();
        assert_eq!(
            out.stdout.trim(),
            "vspherefailuredomain.infrastructure.cluster.x-k8s.io/ownerrefs-finalizers created\n\
             vspheredeploymentzone.infrastructure.cluster.x-k8s.io/ownerrefs-finalizers created",
            "{file}"
        );
        assert_stored_as_sent(file, |kind| {
            format!("{}.{version}.infrastructure.cluster.x-k8s.io", {
                let r = resource(kind);
                r.split_once('.').unwrap().0.to_string()
            })
        });
        // Nothing holds them (no controller runs here): a user's delete removes them.
        cp.kubectl(ADMIN, &["delete", "-f", &path, "--wait=true"])
            .ok();
    }
}

/// OpenShift's ControlPlaneMachineSet (installer-generated, 3 failure domains, static IPs),
/// vSphere control-plane Machine and MachineHealthCheck, each as shipped.
#[test]
fn openshift_machine_api_manifests_apply_unchanged() {
    let cp = control_plane();
    cp.kubectl(ADMIN, &["create", "namespace", "openshift-machine-api"])
        .ok();
    for file in [
        "cpms-01-cpms-vsphere-3fd-static-ip.yaml",
        "cpms-04-machine-vsphere-master-0.yaml",
        "cpms-05-mhc-mapi-termination-handler.yaml",
    ] {
        cp.apply(ADMIN, &format!("{UPSTREAM}/{file}"), None).ok();
        assert_stored_as_sent(file, resource);
    }
    // The CRD's defaults: `strategy: {}` becomes RollingUpdate.
    let cpms = get(
        &resource("ControlPlaneMachineSet"),
        "cluster",
        Some("openshift-machine-api"),
    );
    assert_eq!(cpms["spec"]["strategy"]["type"], "RollingUpdate");
}

/// OpenShift's Infrastructure CRD (openshift/api, Default feature set) installs next to ours;
/// fixture cpms-02's Infrastructure `spec` fragment in the object `cluster` is accepted by it
/// once its second failure domain has the `zone` the documentation left out, and its CPMS
/// `failureDomains` fragment in cpms-01 by ours. The controller may read the
/// Infrastructure by name (config/rbac: `get` only).
#[test]
fn openshift_infrastructure_crd_and_fixture_02_fragments() {
    let cp = control_plane();
    let crd = "tests/fixtures/crds/config.openshift.io_infrastructures-Default.crd.yaml";
    // Server-side: the CRD is too large for kubectl's last-applied annotation.
    cp.kubectl(ADMIN, &["apply", "--server-side", "-f", crd])
        .ok();
    cp.wait_established(&["infrastructures.config.openshift.io"]);

    let fragments = docs("cpms-02-vsphere-failuredomains-infra-and-cpms.fragments.yaml");
    let mut infra = json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "spec": fragments[0]["spec"],
    });
    // The fragment as documented (CPMSO docs/user/failure-domains.md) gives `us-east-2` no
    // `zone`, which OpenShift's own CRD requires: a real cluster refuses it as written.
    let refused = cp.apply_text(ADMIN, &infra.to_string(), None).err();
    assert!(
        refused.contains("spec.platformSpec.vsphere.failureDomains[1].zone: Required value"),
        "{refused}"
    );
    let second = &mut infra["spec"]["platformSpec"]["vsphere"]["failureDomains"][1];
    assert_eq!(second["name"], "us-east-2");
    assert!(second.get("zone").is_none());
    second["zone"] = json!("us-east-2a");
    cp.apply_text(ADMIN, &infra.to_string(), None).ok();
    let stored = get(&resource("Infrastructure"), "cluster", None);
    contained(&infra["spec"], &stored["spec"], "spec").unwrap();

    let as_controller = cp
        .kubectl(
            &Identity::Controller,
            &["get", &resource("Infrastructure"), "cluster", "-o", "json"],
        )
        .ok()
        .json();
    assert_eq!(as_controller["metadata"]["name"], "cluster");

    let ns = cp.namespace("fixture-02");
    let mut cpms = docs("cpms-01-cpms-vsphere-3fd-static-ip.yaml")[0].clone();
    cpms["metadata"]["namespace"] = json!(ns);
    let fd = "/spec/template/machines_v1beta1_machine_openshift_io/failureDomains";
    *cpms.pointer_mut(fd).unwrap() = fragments[1]["template"]
        .pointer("/machines_v1beta1_machine_openshift_io/failureDomains")
        .unwrap()
        .clone();
    cp.apply_text(ADMIN, &cpms.to_string(), None).ok();
    let stored = get(&resource("ControlPlaneMachineSet"), "cluster", Some(&ns));
    assert_eq!(
        stored.pointer(fd).unwrap(),
        cpms.pointer(fd).unwrap(),
        "the failure domains of fixture 02"
    );
}

// --- openshift/api's CRD test suites ------------------------------------------------------------

struct Case {
    name: String,
    initial: Value,
    updated: Option<Value>,
    expected: Option<Value>,
    expected_error: Option<String>,
    expected_status_error: Option<String>,
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn suite(file: &str) -> Vec<Case> {
    let doc = yaml(&fixture_text(file));
    let mut cases = Vec::new();
    for phase in ["onCreate", "onUpdate"] {
        for c in doc["tests"][phase].as_array().into_iter().flatten() {
            let field = |k: &str| c.get(k).and_then(Value::as_str).map(yaml);
            let text = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_string);
            cases.push(Case {
                name: format!("{phase}: {}", c["name"].as_str().unwrap()),
                initial: field("initial").unwrap(),
                updated: field("updated"),
                expected: field("expected"),
                expected_error: text("expectedError"),
                expected_status_error: text("expectedStatusError"),
            });
        }
    }
    cases
}

/// `MachineAPIMigration`'s default for `authoritativeAPI`: the gated upstream CRD sets it, the
/// ungated CRD served here does not (as tests/validate_upstream.rs, docs/differences.md).
const AUTHORITATIVE_API_DEFAULTS: &[&str] = &[
    "/spec/authoritativeAPI",
    "/spec/template/machines_v1beta1_machine_openshift_io/spec/authoritativeAPI",
];

fn without_gated_defaults(mut expected: Value, inputs: &[&Value], pointers: &[&str]) -> Value {
    for p in pointers {
        if inputs.iter().any(|i| i.pointer(p).is_some()) {
            continue;
        }
        let (parent, field) = p.rsplit_once('/').unwrap();
        if let Some(obj) = expected.pointer_mut(parent).and_then(Value::as_object_mut) {
            obj.remove(field);
        }
    }
    expected
}

fn api_for(client: &kube::Client, ns: &str, object: &Value) -> Api<DynamicObject> {
    let (group, version) = object["apiVersion"]
        .as_str()
        .unwrap()
        .split_once('/')
        .unwrap();
    let kind = object["kind"].as_str().unwrap();
    let plural = resource(kind).split_once('.').unwrap().0.to_string();
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural);
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn dynamic(mut v: Value, name: &str, ns: &str, resource_version: Option<&str>) -> DynamicObject {
    v["metadata"] = json!({"name": name, "namespace": ns});
    if let Some(rv) = resource_version {
        v["metadata"]["resourceVersion"] = json!(rv);
    }
    serde_json::from_value(v).unwrap()
}

/// Field errors with the value left out: kube-apiserver 1.37 renders a failed CEL rule's value
/// as the value itself for scalars (`Invalid value: 5: replicas is immutable`) and not at all for
/// objects and arrays (`Invalid value: selector is immutable`; apiextensions-apiserver v0.37.2
/// `pkg/apiserver/schema/cel/validation.go`, `field.OmitValueType{}`), where openshift/api's
/// suites (written against older servers) expect the schema type (`Invalid value: "integer":`,
/// `Invalid value: "object":`). The rule, the path and the message must still match.
fn without_values(text: &str) -> String {
    static VALUE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    VALUE
        .get_or_init(|| {
            regex::Regex::new(
                r#"Invalid value: (?:"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null): "#,
            )
            .unwrap()
        })
        .replace_all(text, "Invalid value: ")
        .into_owned()
}

/// `got` says what `want` says, up to the rendering of the invalid value.
fn says(got: &str, want: &str) -> bool {
    got.contains(want) || without_values(got).contains(&without_values(want))
}

fn message(r: Result<DynamicObject, kube::Error>) -> Result<DynamicObject, String> {
    r.map_err(|e| match e {
        kube::Error::Api(s) => s.message,
        other => other.to_string(),
    })
}

/// Runs one suite against the server (each case on its own object); returns the failures.
async fn run_suite(file: &str, gated_defaults: &[&str]) -> (usize, Vec<String>) {
    let cp = control_plane();
    let client = cp.client(ADMIN).await;
    let ns = cp.namespace("suite");
    let pp = PostParams::default();
    let cases = suite(file);
    assert!(!cases.is_empty(), "{file}");
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let name = format!("case-{i}");
        let api = api_for(&client, &ns, &case.initial);
        let fail = |why: String| format!("{file}: {}: {why}", case.name);
        let mut outcome = message(
            api.create(&pp, &dynamic(case.initial.clone(), &name, &ns, None))
                .await,
        );
        let mut status_error = None;
        if let Some(updated) = &case.updated {
            let created = match outcome {
                Ok(o) => o,
                Err(e) => {
                    failures.push(fail(format!("initial rejected: {e}")));
                    continue;
                }
            };
            if let Some(status) = case.initial.get("status") {
                let mut with_status = serde_json::to_value(&created).unwrap();
                with_status["status"] = status.clone();
                let with_status: DynamicObject = serde_json::from_value(with_status).unwrap();
                let r = api.replace_status(&name, &pp, &with_status).await;
                if let Err(e) = message(r) {
                    failures.push(fail(format!("initial status rejected: {e}")));
                    continue;
                }
            }
            let current = api.get(&name).await.unwrap();
            let rv = current.metadata.resource_version.clone();
            outcome = message(
                api.replace(
                    &name,
                    &pp,
                    &dynamic(updated.clone(), &name, &ns, rv.as_deref()),
                )
                .await,
            );
            if let (Ok(replaced), Some(status)) = (&outcome, updated.get("status")) {
                let mut with_status = serde_json::to_value(replaced).unwrap();
                with_status["status"] = status.clone();
                let with_status: DynamicObject = serde_json::from_value(with_status).unwrap();
                let r = message(api.replace_status(&name, &pp, &with_status).await);
                match r {
                    Ok(o) => outcome = Ok(o),
                    Err(e) => status_error = Some(e),
                }
            }
        }
        match (&case.expected_error, &case.expected_status_error) {
            (Some(want), _) => match &outcome {
                Err(got) if says(got, want) => {}
                Err(got) => failures.push(fail(format!(
                    "want an error containing\n  {want}\ngot\n  {got}"
                ))),
                Ok(_) => failures.push(fail(format!(
                    "accepted; want an error containing\n  {want}"
                ))),
            },
            (None, Some(want)) => match &status_error {
                Some(got) if says(got, want) => {}
                Some(got) => failures.push(fail(format!(
                    "want a status error containing\n  {want}\ngot\n  {got}"
                ))),
                None => failures.push(fail(format!(
                    "status accepted ({outcome:?}); want an error containing\n  {want}"
                ))),
            },
            (None, None) => {
                if let Some(e) = &status_error {
                    failures.push(fail(format!("status rejected: {e}")));
                    continue;
                }
                let stored = match &outcome {
                    Ok(o) => serde_json::to_value(o).unwrap(),
                    Err(e) => {
                        failures.push(fail(format!("rejected: {e}")));
                        continue;
                    }
                };
                let Some(expected) = &case.expected else {
                    continue;
                };
                let inputs: Vec<&Value> = std::iter::once(&case.initial)
                    .chain(case.updated.as_ref())
                    .collect();
                let expected = without_gated_defaults(expected.clone(), &inputs, gated_defaults);
                for k in ["apiVersion", "kind", "spec", "status"] {
                    if k == "status" && expected.get(k).is_none() {
                        continue;
                    }
                    let (a, b) = (&expected[k], &stored[k]);
                    if contained(a, b, k).is_err() || contained(b, a, k).is_err() {
                        failures.push(fail(format!("{k}: want\n  {a}\ngot\n  {b}")));
                    }
                }
            }
        }
    }
    (cases.len(), failures)
}

#[tokio::test]
async fn openshift_api_crd_test_suites_pass_against_our_crds() {
    let suites: [(&str, &[&str], usize); 4] = [
        (
            "cpms-03-cpms-crd-validation-testsuite.openshift-api.yaml",
            &[],
            20,
        ),
        ("cpms-06-mhc-defaults-testsuite.openshift-api.yaml", &[], 1),
        ("cpms-09-machine-crd-testsuite.openshift-api.yaml", &[], 1),
        (
            "cpms-10-machine-machineapimigration-testsuite.openshift-api.yaml",
            AUTHORITATIVE_API_DEFAULTS,
            23,
        ),
    ];
    let mut failures = Vec::new();
    for (file, gated, count) in suites {
        let (n, f) = run_suite(file, gated).await;
        assert_eq!(n, count, "{file}");
        failures.extend(f);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// CAPV's VSphereMachineTemplates (its `templates/*.yaml`, the ones `clusterctl generate
/// cluster` renders) with the `${VAR}` placeholders filled as clusterctl would, one namespace per
/// file; plus a VSphereMachine and a VSphereVM made from the first one's spec, as CAPI's
/// MachineSet and CAPV's machine controller would make them. Stored with everything they said,
/// and the CRD defaults CAPV's schema has (`powerOffMode: hard`).
#[test]
fn capv_machine_templates_apply_unchanged() {
    let cp = control_plane();
    let placeholder = regex::Regex::new(r"\$\{([A-Z0-9_]+)(:[=-][^}]*)?\}").unwrap();
    let mut first_spec = None;
    for file in [
        "capv-04-cluster-template.yaml",
        "capv-05-cluster-template-ignition.yaml",
        "capv-06-cluster-template-node-ipam.yaml",
        "capv-07-clusterclass-template.yaml",
    ] {
        let ns = cp.namespace("capv-templates");
        let raw = fixture_text(file);
        let text = placeholder.replace_all(&raw, |c: &regex::Captures| match &c[1] {
            "NAMESPACE" => ns.clone(),
            "CLUSTER_NAME" | "CLUSTER_CLASS_NAME" => "demo".to_string(),
            var => var.to_lowercase().replace('_', "-"),
        });
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        let templates: Vec<&Value> = docs
            .iter()
            .filter(|d| d["kind"] == "VSphereMachineTemplate")
            .collect();
        assert!(!templates.is_empty(), "{file}");
        for doc in templates {
            let name = doc["metadata"]["name"].as_str().unwrap();
            cp.apply_text(ADMIN, &doc.to_string(), Some(&ns)).ok();
            let stored = get(
                "vspheremachinetemplates.infrastructure.cluster.x-k8s.io",
                name,
                Some(&ns),
            );
            contained(&doc["spec"], &stored["spec"], "spec")
                .unwrap_or_else(|e| panic!("{file} {name}: {e}"));
            first_spec.get_or_insert_with(|| (ns.clone(), doc["spec"]["template"]["spec"].clone()));
        }
    }
    let (ns, spec) = first_spec.unwrap();
    let mut bare = spec.clone();
    bare.as_object_mut().unwrap().remove("powerOffMode");
    for (kind, resource) in [
        (
            "VSphereMachine",
            "vspheremachines.infrastructure.cluster.x-k8s.io",
        ),
        ("VSphereVM", "vspherevms.infrastructure.cluster.x-k8s.io"),
    ] {
        let obj = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": kind,
            "metadata": {"name": "demo-0", "namespace": ns}, "spec": bare});
        cp.apply_text(ADMIN, &obj.to_string(), Some(&ns)).ok();
        let stored = get(resource, "demo-0", Some(&ns));
        contained(&bare, &stored["spec"], "spec").unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(stored["spec"]["powerOffMode"], "hard", "{kind}");
    }
    // The CRD's own rules hold: an empty template name is refused by the server.
    let mut empty = spec;
    empty["template"] = "".into();
    let refused = cp
        .apply_text(
            ADMIN,
            &json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereMachine",
                "metadata": {"name": "demo-1", "namespace": ns}, "spec": empty})
            .to_string(),
            Some(&ns),
        )
        .err();
    assert!(refused.contains("spec.template"), "{refused}");
}
