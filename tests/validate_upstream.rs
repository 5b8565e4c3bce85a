//! Upstream manifests and upstream CRD test suites, run through our admission
//! (`tests/fixtures/manifests/upstream/`, see SOURCES.md there).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use vsphere_provider::api::manifest::{self, ObjectType};
use vsphere_provider::webhook::Ctx;
use vsphere_provider::webhook::admission::{Layers, admit, admit_layers, admit_loaded};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/manifests/upstream")
        .join(name)
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

const TEMPLATE_CTX: Ctx = Ctx {
    allow_placeholders: true,
};

#[test]
fn complete_upstream_objects_pass_unchanged() {
    for file in [
        "capv-01-e2e-failure-domains.v1beta1.yaml",
        "capv-02-e2e-failure-domains.v1beta2.yaml",
        "capv-03-e2e-vspherecluster-failuredomainselector.v1beta1.yaml",
        "cpms-01-cpms-vsphere-3fd-static-ip.yaml",
        "cpms-04-machine-vsphere-master-0.yaml",
        "cpms-05-mhc-mapi-termination-handler.yaml",
    ] {
        let (objects, errors) = manifest::load_paths(&[fixture(file)]);
        assert!(errors.is_empty(), "{file}: {errors:?}");
        assert!(!objects.is_empty(), "{file}");
        for obj in objects {
            let out = admit_loaded(&obj, &TEMPLATE_CTX);
            assert!(matches!(out.object_type, ObjectType::Served(_)), "{file}");
            assert!(out.allowed(), "{}: {:?}", obj.source, out.errors);
        }
    }
}

#[test]
fn capv_e2e_defaults_match_upstream_webhooks() {
    let (objects, _) = manifest::load_paths(&[fixture("capv-01-e2e-failure-domains.v1beta1.yaml")]);
    let fd = admit_loaded(&objects[0], &TEMPLATE_CTX);
    assert_eq!(
        fd.defaulted,
        ["spec.region.autoConfigure", "spec.zone.autoConfigure"]
    );
    assert_eq!(fd.object["spec"]["region"]["autoConfigure"], false);
    let zone = admit_loaded(&objects[1], &TEMPLATE_CTX);
    assert_eq!(zone.defaulted, ["spec.controlPlane"]);
    assert_eq!(zone.object["spec"]["controlPlane"], true);
}

#[test]
fn placeholders_are_only_strings_when_allowed() {
    let (objects, _) = manifest::load_paths(&[fixture("capv-01-e2e-failure-domains.v1beta1.yaml")]);
    // `server: ${VSPHERE_SERVER}` is not a host name: strict mode rejects the zone.
    let zone = admit_loaded(&objects[1], &Ctx::default());
    assert!(!zone.allowed());
    assert_eq!(zone.errors[0].path, "spec.server");
}

#[test]
fn other_api_versions_and_groups_are_reported_not_passed() {
    // CAPI's v1beta2 MachineHealthCheck is a different kind in another group.
    let (objects, _) =
        manifest::load_paths(&[fixture("cpms-07-mhc-capi-v1beta2-kcp-remediation.yaml")]);
    let out = admit_loaded(&objects[0], &TEMPLATE_CTX);
    assert_eq!(out.object_type, ObjectType::Unknown);
    assert!(!out.allowed());
}

/// One case of an openshift/api CRD test suite.
struct Case {
    name: String,
    initial: Value,
    updated: Option<Value>,
    expected: Option<Value>,
    expected_error: Option<String>,
}

fn suite(file: &str) -> Vec<Case> {
    let text = std::fs::read_to_string(fixture(file)).unwrap();
    let doc = yaml(&text);
    let mut cases = Vec::new();
    for phase in ["onCreate", "onUpdate"] {
        for c in doc["tests"][phase].as_array().into_iter().flatten() {
            let field = |k: &str| c.get(k).and_then(Value::as_str).map(yaml);
            cases.push(Case {
                name: format!("{phase}: {}", c["name"].as_str().unwrap()),
                initial: field("initial").unwrap(),
                updated: field("updated"),
                expected: field("expected"),
                expected_error: c
                    .get("expectedError")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            });
        }
    }
    cases
}

/// The test harness gives objects a name (and the suite's namespace-less objects a namespace).
fn named(mut v: Value) -> Value {
    // The CPMS webhook only admits the name `cluster` (one per cluster, as upstream).
    let name = if v["kind"] == "ControlPlaneMachineSet" {
        "cluster"
    } else {
        "test"
    };
    v.as_object_mut()
        .unwrap()
        .entry("metadata")
        .or_insert(json!({"name": name, "namespace": "default"}));
    v
}

/// Runs a suite through the given admission layers (upstream runs these against the CRD alone).
fn run_suite(file: &str, layers: Layers) -> usize {
    let admit = |new: &Value, old: Option<&Value>| admit_layers(new, old, &Ctx::default(), layers);
    let cases = suite(file);
    assert!(!cases.is_empty());
    for case in &cases {
        let initial = named(case.initial.clone());
        let outcome = match &case.updated {
            None => admit(&initial, None),
            Some(updated) => {
                let stored = admit(&initial, None);
                assert!(
                    stored.allowed(),
                    "{}: initial rejected: {:?}",
                    case.name,
                    stored.errors
                );
                admit(&named(updated.clone()), Some(&stored.object))
            }
        };
        let text: Vec<String> = outcome.errors.iter().map(ToString::to_string).collect();
        match (&case.expected_error, &case.expected) {
            (Some(want), _) => {
                assert!(
                    text.iter().any(|t| t.contains(want.as_str())),
                    "{}: want an error containing\n  {want}\ngot\n  {}",
                    case.name,
                    text.join("\n  ")
                );
            }
            (None, Some(expected)) => {
                assert!(outcome.allowed(), "{}: {text:?}", case.name);
                assert_eq!(
                    outcome.object["apiVersion"], expected["apiVersion"],
                    "{}",
                    case.name
                );
                assert_eq!(outcome.object["kind"], expected["kind"], "{}", case.name);
                assert_eq!(outcome.object["spec"], expected["spec"], "{}", case.name);
            }
            (None, None) => assert!(outcome.allowed(), "{}: {text:?}", case.name),
        }
    }
    cases.len()
}

#[test]
fn openshift_api_cpms_crd_suite() {
    let file = "cpms-03-cpms-crd-validation-testsuite.openshift-api.yaml";
    assert_eq!(run_suite(file, Layers::Crd), 20);
    // Our webhooks reject nothing the CRD accepts here, and keep every expected error.
    assert_eq!(run_suite(file, Layers::CrdAndWebhooks), 20);
}

#[test]
fn openshift_api_mhc_defaults_suite() {
    let file = "cpms-06-mhc-defaults-testsuite.openshift-api.yaml";
    assert_eq!(run_suite(file, Layers::Crd), 1);
    // The webhook adds a rule upstream lacks: at least one unhealthy condition.
    let minimal = named(suite(file)[0].initial.clone());
    let out = admit(&minimal, None, &Ctx::default());
    let text: Vec<String> = out.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        ["spec.unhealthyConditions: Required value: at least one unhealthy condition is required"]
    );
    assert_eq!(out.object["spec"]["maxUnhealthy"], "100%");
}

#[test]
fn lifecycle_hooks_fragment_in_a_machine() {
    let text =
        std::fs::read_to_string(fixture("cpms-08-machine-lifecyclehooks.fragment.yaml")).unwrap();
    let hooks = yaml(&text)["lifecycleHooks"].clone();
    let (objects, _) = manifest::load_paths(&[fixture("cpms-04-machine-vsphere-master-0.yaml")]);
    let mut machine = objects[0].value.clone();
    machine["spec"]["lifecycleHooks"] = hooks;
    let out = admit(&machine, None, &TEMPLATE_CTX);
    assert!(out.allowed(), "{:?}", out.errors);

    // Once deleting: removing a hook is fine, adding one is not.
    let mut old = machine.clone();
    old["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
    let mut removed = old.clone();
    removed["spec"]["lifecycleHooks"]["preTerminate"]
        .as_array_mut()
        .unwrap()
        .pop();
    assert!(admit(&removed, Some(&old), &TEMPLATE_CTX).allowed());
    let mut added = old.clone();
    added["spec"]["lifecycleHooks"]["preDrain"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "EtcdQuorumOperator", "owner": "clusteroperator/etcd"}));
    let out = admit(&added, Some(&old), &TEMPLATE_CTX);
    assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
    assert_eq!(out.errors[0].path, "spec.lifecycleHooks.preDrain");
}

#[test]
fn cpms_failure_domain_fragment_in_a_cpms() {
    let text = std::fs::read_to_string(fixture(
        "cpms-02-vsphere-failuredomains-infra-and-cpms.fragments.yaml",
    ))
    .unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let template_fragment = docs[1]["template"].clone();
    let (objects, _) = manifest::load_paths(&[fixture("cpms-01-cpms-vsphere-3fd-static-ip.yaml")]);
    let mut cpms = objects[0].value.clone();
    cpms["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["failureDomains"] =
        template_fragment["machines_v1beta1_machine_openshift_io"]["failureDomains"].clone();
    let out = admit(&cpms, None, &TEMPLATE_CTX);
    assert!(out.allowed(), "{:?}", out.errors);
    // The same list with a duplicate is rejected at the duplicate.
    cpms["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["failureDomains"]["vsphere"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "us-east-1"}));
    let out = admit(&cpms, None, &TEMPLATE_CTX);
    let text: Vec<String> = out.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "spec.template.machines_v1beta1_machine_openshift_io.failureDomains.vsphere[2]: Duplicate value: {\"name\":\"us-east-1\"}"
        ]
    );
}
