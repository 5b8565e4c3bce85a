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
    dry_run: false,
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
    /// `expectedError`, or `expectedStatusError` (a status update upstream rejects).
    expected_error: Option<String>,
}

fn suite(file: &str) -> Vec<Case> {
    let text = std::fs::read_to_string(fixture(file)).unwrap();
    let doc = yaml(&text);
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
                expected_error: text("expectedError").or_else(|| text("expectedStatusError")),
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

/// Where a suite's expectations are not ours, on purpose (docs/differences.md).
struct Known<'a> {
    /// Cases we decide differently: a prefix of the case name (after `onCreate: ` /
    /// `onUpdate: `) and the reason. We only ever differ by admitting: each such case must be
    /// admitted, and must really differ (so the list shrinks when we come to agree).
    differences: &'a [(&'a str, &'a str)],
    /// Fields (JSON pointers) a feature-gated upstream CRD defaults and the ungated CRD served
    /// here does not: removed from a case's expected object when its input does not set them.
    gated_defaults: &'a [&'a str],
}

const AS_UPSTREAM: Known = Known {
    differences: &[],
    gated_defaults: &[],
};

/// `MachineAPIMigration`'s default for `authoritativeAPI`, in a Machine and a CPMS template.
const AUTHORITATIVE_API_DEFAULTS: &[&str] = &[
    "/spec/authoritativeAPI",
    "/spec/template/machines_v1beta1_machine_openshift_io/spec/authoritativeAPI",
];

/// Removes `pointer` from `expected` unless `input` sets it.
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

/// Runs a suite through the given admission layers (upstream runs these against the CRD alone).
/// Returns the number of cases.
fn run_suite(file: &str, layers: Layers, known: &Known) -> usize {
    let differences = known.differences;
    let admit = |new: &Value, old: Option<&Value>| admit_layers(new, old, &Ctx::default(), layers);
    let cases = suite(file);
    assert!(!cases.is_empty());
    let mut differing = 0;
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
        let inputs: Vec<&Value> = std::iter::once(&case.initial)
            .chain(case.updated.as_ref())
            .collect();
        let expected = case
            .expected
            .clone()
            .map(|e| without_gated_defaults(e, &inputs, known.gated_defaults));
        let agrees = match (&case.expected_error, &expected) {
            (Some(want), _) => text.iter().any(|t| t.contains(want.as_str())),
            (None, Some(expected)) => {
                outcome.allowed()
                    && ["apiVersion", "kind", "spec"]
                        .iter()
                        .all(|k| outcome.object[k] == expected[k])
            }
            (None, None) => outcome.allowed(),
        };
        let short = case.name.split_once(": ").map_or("", |(_, n)| n);
        if let Some((_, why)) = differences.iter().find(|(n, _)| short.starts_with(n)) {
            differing += 1;
            assert!(
                outcome.allowed(),
                "{}: listed as a difference ({why}) but rejected: {text:?}",
                case.name
            );
            assert!(
                !agrees,
                "{}: listed as a difference ({why}) but agrees with upstream now",
                case.name
            );
            continue;
        }
        match (&case.expected_error, &expected) {
            (Some(want), _) => assert!(
                agrees,
                "{}: want an error containing\n  {want}\ngot\n  {}",
                case.name,
                text.join("\n  ")
            ),
            (None, Some(expected)) => {
                assert!(outcome.allowed(), "{}: {text:?}", case.name);
                for k in ["apiVersion", "kind", "spec"] {
                    assert_eq!(outcome.object[k], expected[k], "{}: {k}", case.name);
                }
            }
            (None, None) => assert!(outcome.allowed(), "{}: {text:?}", case.name),
        }
    }
    let listed: Vec<&str> = differences.iter().map(|(n, _)| *n).collect();
    assert!(
        differing >= listed.len(),
        "{file}: some listed differences match no case: {listed:?}"
    );
    cases.len()
}

#[test]
fn openshift_api_cpms_crd_suite() {
    let file = "cpms-03-cpms-crd-validation-testsuite.openshift-api.yaml";
    assert_eq!(run_suite(file, Layers::Crd, &AS_UPSTREAM), 20);
    // Our webhooks reject nothing the CRD accepts here, and keep every expected error.
    assert_eq!(run_suite(file, Layers::CrdAndWebhooks, &AS_UPSTREAM), 20);
}

#[test]
fn openshift_api_mhc_defaults_suite() {
    let file = "cpms-06-mhc-defaults-testsuite.openshift-api.yaml";
    assert_eq!(run_suite(file, Layers::Crd, &AS_UPSTREAM), 1);
    // The webhook admits upstream's minimal check (`spec: {}`, no unhealthy conditions: a
    // startup-only check) with upstream's defaults.
    assert_eq!(run_suite(file, Layers::CrdAndWebhooks, &AS_UPSTREAM), 1);
    let minimal = named(suite(file)[0].initial.clone());
    let out = admit(&minimal, None, &Ctx::default());
    assert!(out.allowed(), "{:?}", out.errors);
    assert_eq!(out.object["spec"]["maxUnhealthy"], "100%");
    assert_eq!(out.object["spec"]["nodeStartupTimeout"], "10m");
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

/// The two fragments of fixture 02 (Infrastructure `spec`, CPMS `template`).
fn fixture_02_docs() -> Vec<Value> {
    let text = std::fs::read_to_string(fixture(
        "cpms-02-vsphere-failuredomains-infra-and-cpms.fragments.yaml",
    ))
    .unwrap();
    serde_saphyr::from_multiple(&text).unwrap()
}

#[test]
fn cpms_failure_domain_fragment_in_a_cpms() {
    let docs = fixture_02_docs();
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

/// In clusters with upstream's `MachineAPIMigration` gate the API server sets `authoritativeAPI`
/// on every Machine (and CPMS template) before webhooks run: such objects must be admitted, keep
/// the field, and survive a round trip through the typed API.
#[test]
fn machine_and_cpms_with_authoritative_api_pass_unchanged() {
    use vsphere_provider::api::{ControlPlaneMachineSet, Machine};
    let (objects, _) = manifest::load_paths(&[fixture("cpms-04-machine-vsphere-master-0.yaml")]);
    let mut machine = objects[0].value.clone();
    machine["spec"]["authoritativeAPI"] = json!("MachineAPI");
    machine["status"] = json!({"authoritativeAPI": "Migrating", "synchronizedGeneration": 3, "synchronizedAPI": "MachineAPI"});
    let out = admit(&machine, None, &Ctx::default());
    assert!(out.allowed(), "{:?}", out.errors);
    assert_eq!(out.object["spec"]["authoritativeAPI"], "MachineAPI");
    assert_eq!(out.object["status"], machine["status"]);
    let typed: Machine = serde_json::from_value(machine.clone()).unwrap();
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(back["spec"]["authoritativeAPI"], "MachineAPI");
    assert_eq!(back["status"], machine["status"]);

    let (objects, _) = manifest::load_paths(&[fixture("cpms-01-cpms-vsphere-3fd-static-ip.yaml")]);
    let mut cpms = objects[0].value.clone();
    let template_spec = "/spec/template/machines_v1beta1_machine_openshift_io/spec";
    cpms.pointer_mut(template_spec).unwrap()["authoritativeAPI"] = json!("ClusterAPI");
    let out = admit(&cpms, None, &Ctx::default());
    assert!(out.allowed(), "{:?}", out.errors);
    assert_eq!(
        out.object.pointer(template_spec).unwrap()["authoritativeAPI"],
        "ClusterAPI"
    );
    let typed: ControlPlaneMachineSet = serde_json::from_value(cpms).unwrap();
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(
        back.pointer(template_spec).unwrap()["authoritativeAPI"],
        "ClusterAPI"
    );

    // The value is still checked against upstream's enum.
    machine["spec"]["authoritativeAPI"] = json!("Migrating");
    let out = admit(&machine, None, &Ctx::default());
    let text: Vec<String> = out.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "spec.authoritativeAPI: Unsupported value: \"Migrating\": supported values: \"MachineAPI\", \"ClusterAPI\""
        ]
    );
}

#[test]
fn openshift_api_machine_crd_suite() {
    let file = "cpms-09-machine-crd-testsuite.openshift-api.yaml";
    assert_eq!(run_suite(file, Layers::Crd, &AS_UPSTREAM), 1);
    assert_eq!(run_suite(file, Layers::CrdAndWebhooks, &AS_UPSTREAM), 1);
}

#[test]
fn openshift_api_machine_api_migration_suite() {
    let file = "cpms-10-machine-machineapimigration-testsuite.openshift-api.yaml";
    let known = Known {
        differences: &[],
        gated_defaults: AUTHORITATIVE_API_DEFAULTS,
    };
    assert_eq!(run_suite(file, Layers::Crd, &known), 23);
    assert_eq!(run_suite(file, Layers::CrdAndWebhooks, &known), 23);
}

#[test]
fn openshift_api_cpms_machine_api_migration_suite() {
    let file = "cpms-11-cpms-machineapimigration-testsuite.openshift-api.yaml";
    let known = Known {
        differences: &[],
        gated_defaults: AUTHORITATIVE_API_DEFAULTS,
    };
    run_suite(file, Layers::CrdAndWebhooks, &known);
}

/// Other platforms' failure domains are kept (preserve-unknown-fields) and ignored with a
/// warning: the platform rules of the CPMS CEL hold, their contents are not validated.
const OTHER_PLATFORM: &str =
    "other platforms' failure domain contents are not validated (docs/differences.md)";

#[test]
fn openshift_api_cpms_platform_suites() {
    let suites: [(&str, &[(&str, &str)]); 8] = [
        (
            "cpms-12-cpms-aws.machineapimigration-testsuite.openshift-api.yaml",
            &[],
        ),
        (
            "cpms-13-cpms-aws.nomachineapimigration-testsuite.openshift-api.yaml",
            &[],
        ),
        (
            "cpms-14-cpms-aws-testsuite.openshift-api.yaml",
            &[(
                "Should reject an AWS failure domain with the subnet",
                OTHER_PLATFORM,
            )],
        ),
        ("cpms-15-cpms-azure-testsuite.openshift-api.yaml", &[]),
        ("cpms-16-cpms-gcp-testsuite.openshift-api.yaml", &[]),
        (
            "cpms-17-cpms-openstack.machineapimigration-testsuite.openshift-api.yaml",
            &[],
        ),
        (
            "cpms-18-cpms-openstack.nomachineapimigration-testsuite.openshift-api.yaml",
            &[],
        ),
        (
            "cpms-19-cpms-openstack-testsuite.openshift-api.yaml",
            &[
                (
                    "Should reject an OpenStack failure domain with",
                    OTHER_PLATFORM,
                ),
                (
                    "Should reject an empty OpenStack failure domain",
                    OTHER_PLATFORM,
                ),
            ],
        ),
    ];
    for (file, differences) in suites {
        let known = Known {
            differences,
            gated_defaults: AUTHORITATIVE_API_DEFAULTS,
        };
        run_suite(file, Layers::CrdAndWebhooks, &known);
    }
}

/// Fixture 02's Infrastructure fragment in a whole object: admitted as OpenShift's (metadata
/// checks only), typed with its vSphere failure domains; only `cluster` is read, another name
/// warns; a missing name is an error.
#[test]
fn infrastructure_from_fixture_02_is_admitted_with_metadata_checks() {
    let docs = fixture_02_docs();
    let infra = json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "spec": docs[0]["spec"],
    });
    let out = admit(&infra, None, &Ctx::default());
    assert!(out.allowed(), "{:?}", out.errors);
    assert_eq!(out.object_type, ObjectType::Infrastructure);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let loaded = manifest::LoadedObject {
        source: manifest::Source {
            file: "infra.yaml".into(),
            document: 0,
            line: 0,
        },
        value: out.object.clone(),
    };
    let manifest::Object::Infrastructure(i) = loaded.typed().unwrap() else {
        panic!("not an Infrastructure");
    };
    let names: Vec<&str> = i
        .vsphere_failure_domains()
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["us-east-1", "us-east-2"]);
    assert_eq!(
        serde_json::to_value(&*i).unwrap(),
        infra,
        "unknown fields kept"
    );

    let mut other = infra.clone();
    other["metadata"]["name"] = "other".into();
    let out = admit(&other, None, &Ctx::default());
    assert!(out.allowed());
    assert!(
        out.warnings.iter().any(|w| w.contains("\"cluster\"")),
        "{:?}",
        out.warnings
    );

    let mut unnamed = infra;
    unnamed["metadata"] = json!({});
    assert!(!admit(&unnamed, None, &Ctx::default()).allowed());
}
