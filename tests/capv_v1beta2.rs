//! `infrastructure.cluster.x-k8s.io/v1beta2` against CAPV v1.17: our generated v1beta2 schemas
//! field by field against CAPV's CRDs (tests/fixtures/crds/capv/v1.17), and CAPV's own
//! templates (v1beta2) and the v1.13.1 ones (v1beta1) through the conversion and admission,
//! unchanged.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};
use vsphere_provider::api::conversion::{CONVERSION_DATA, convert};
use vsphere_provider::api::manifest;
use vsphere_provider::api::{INFRA_GROUP, Kind};
use vsphere_provider::webhook::Ctx;
use vsphere_provider::webhook::admission::admit;

const V1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const V2: &str = "infrastructure.cluster.x-k8s.io/v1beta2";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn infrastructure_kinds() -> Vec<Kind> {
    Kind::ALL
        .into_iter()
        .filter(|k| k.api_version().starts_with(INFRA_GROUP))
        .collect()
}

fn capv_version(kind: Kind, version: &str) -> Value {
    let path = root().join(format!(
        "tests/fixtures/crds/capv/v1.17/infrastructure.cluster.x-k8s.io_{}.yaml",
        kind.plural()
    ));
    let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    served(&crd, version)
}

fn our_version(kind: Kind, version: &str) -> Value {
    served(&serde_json::to_value(kind.crd()).unwrap(), version)
}

fn served(crd: &Value, version: &str) -> Value {
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .cloned()
        .unwrap()
}

/// What the apiserver enforces of a schema node, by path.
fn constraints(schema: &Value, at: &str, required: bool, out: &mut BTreeMap<String, Value>) {
    const KEYS: [&str; 13] = [
        "type",
        "format",
        "enum",
        "default",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "minItems",
        "maxItems",
        "minProperties",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
    ];
    let mut here: serde_json::Map<String, Value> = KEYS
        .iter()
        .filter_map(|k| schema.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    // controller-gen writes 1 where schemars writes 1.0.
    for v in here.values_mut() {
        if let Some(f) = v.as_f64().filter(|f| f.fract() == 0.0) {
            *v = json!(f as i64);
        }
    }
    if required {
        here.insert("required".into(), json!(true));
    }
    out.insert(at.to_string(), Value::Object(here));
    let req: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for (k, v) in schema["properties"].as_object().into_iter().flatten() {
        constraints(v, &format!("{at}.{k}"), req.contains(&k.as_str()), out);
    }
    if schema["items"].is_object() {
        constraints(&schema["items"], &format!("{at}[]"), false, out);
    }
    if schema["additionalProperties"].is_object() {
        constraints(
            &schema["additionalProperties"],
            &format!("{at}{{}}"),
            false,
            out,
        );
    }
}

/// Where ours differs from CAPV v1.17's v1beta2 on purpose, or where k8s-openapi's schemas of
/// Kubernetes types carry less than controller-gen's (the apiserver checks those values anyway).
fn known_difference(path: &str) -> bool {
    path.ends_with(".autoConfigure") // kept in our v1beta2: this provider implements it
        || path.starts_with(".status.actuatorState") // the shared actuator's state (VSphereVM)
        || path.ends_with("spec.network") // optional: a failure domain may supply the devices
        || path.contains("conditions[].") // metav1.Condition from k8s-openapi: no enum/pattern
        || path.contains("failureDomainSelector") // LabelSelector from k8s-openapi
        || path.contains("allowedNamespaces.selector")
        || path.contains(".resources.") // Quantity from k8s-openapi: no pattern
}

#[test]
fn every_capv_v1beta2_field_is_served_with_its_constraints() {
    for kind in infrastructure_kinds() {
        let (mut theirs, mut ours) = (BTreeMap::new(), BTreeMap::new());
        constraints(
            &capv_version(kind, "v1beta2")["schema"]["openAPIV3Schema"],
            "",
            false,
            &mut theirs,
        );
        constraints(
            &our_version(kind, "v1beta2")["schema"]["openAPIV3Schema"],
            "",
            false,
            &mut ours,
        );
        let mut differences = Vec::new();
        for path in theirs.keys().chain(ours.keys()) {
            if path.starts_with(".metadata") || known_difference(path) {
                continue;
            }
            // A zone's own credentials: ours, not CAPV's (zones never act as a tenant's).
            if kind.to_string() == "VSphereDeploymentZone"
                && (path.starts_with(".spec.identityRef") || path.starts_with(".spec.thumbprint"))
            {
                continue;
            }
            if theirs.get(path) != ours.get(path) {
                differences.push(format!(
                    "{path}: CAPV {:?}, ours {:?}",
                    theirs.get(path),
                    ours.get(path)
                ));
            }
        }
        differences.dedup();
        assert!(
            differences.is_empty(),
            "{kind}:\n{}",
            differences.join("\n")
        );
    }
}

/// CAPV's printer columns (the v1beta2 contract's Provisioned and Paused), for the kinds CAPV
/// gives any; FD and DZ keep ours (CAPV has none for them).
#[test]
fn v1beta2_printer_columns_are_capvs() {
    let columns = |v: &Value| -> Vec<(Value, Value, Value)> {
        v["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["name"].clone(),
                    c["jsonPath"].clone(),
                    c["priority"].clone(),
                )
            })
            .collect()
    };
    for kind in infrastructure_kinds() {
        let theirs = columns(&capv_version(kind, "v1beta2"));
        if !theirs.is_empty() {
            assert_eq!(columns(&our_version(kind, "v1beta2")), theirs, "{kind}");
        }
    }
}

fn template_objects(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    docs.into_iter()
        .filter(|d| {
            d["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with(INFRA_GROUP))
        })
        .collect()
}

const V1_17: [&str; 6] = [
    "tests/fixtures/capv/v1.17/cluster-template.yaml",
    "tests/fixtures/capv/v1.17/cluster-template-external-loadbalancer.yaml",
    "tests/fixtures/capv/v1.17/cluster-template-ignition.yaml",
    "tests/fixtures/capv/v1.17/cluster-template-node-ipam.yaml",
    "tests/fixtures/capv/v1.17/cluster-template-topology.yaml",
    "tests/fixtures/capv/v1.17/clusterclass-template.yaml",
];

#[test]
fn capv_manifests_convert_and_back_without_loss() {
    let mut seen = BTreeMap::<(String, String), usize>::new();
    let mut files: Vec<&str> = V1_17.to_vec();
    files.push("tests/fixtures/capv/cluster-template.yaml");
    files.push("tests/fixtures/capv/vspherecluster-failuredomainselector.yaml");
    files.push("tests/fixtures/capv-e2e-failure-domains.v1beta1.yaml");
    for file in files {
        for object in template_objects(file) {
            let from = object["apiVersion"].as_str().unwrap();
            let to = if from == V1 { V2 } else { V1 };
            let there = convert(&object, to).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(there["apiVersion"], to);
            let back = convert(&there, from).unwrap();
            assert_eq!(
                back, object,
                "{file}: {} {from} -> {to} -> {from}",
                object["kind"]
            );
            *seen
                .entry((
                    from.to_string(),
                    object["kind"].as_str().unwrap().to_string(),
                ))
                .or_default() += 1;
        }
    }
    let kinds: Vec<String> = seen.keys().map(|(v, k)| format!("{v} {k}")).collect();
    assert_eq!(
        kinds,
        [
            format!("{V1} VSphereCluster"),
            format!("{V1} VSphereDeploymentZone"),
            format!("{V1} VSphereFailureDomain"),
            format!("{V1} VSphereMachineTemplate"),
            format!("{V2} VSphereCluster"),
            format!("{V2} VSphereClusterTemplate"),
            format!("{V2} VSphereMachineTemplate"),
        ]
    );
}

/// CAPV v1.17's VSphereMachineTemplates in v1beta1, as the controllers read them: every spec
/// field where v1beta1 has it, nothing kept aside but what v1beta1 lacks.
#[test]
fn capv_v1beta2_templates_read_as_v1beta1() {
    // clusterctl's defaults for the placeholders typed fields have (the port).
    let defaults = regex::Regex::new(r"\$\{[A-Z0-9_]+:=([0-9]+)\}").unwrap();
    for file in V1_17 {
        for object in template_objects(file) {
            let v1 = convert(&object, V1).unwrap();
            let kept = v1["metadata"]["annotations"][CONVERSION_DATA].as_str();
            assert!(kept.is_none(), "{file}: {} keeps {kept:?}", object["kind"]);
            if object["kind"] == "VSphereMachineTemplate" {
                let spec = &object["spec"]["template"]["spec"];
                let v1_spec = &v1["spec"]["template"]["spec"];
                for (k, v) in spec.as_object().unwrap() {
                    assert_eq!(&v1_spec[k], v, "{file}: {k}");
                }
            }
            let text = defaults
                .replace_all(&serde_json::to_string(&object).unwrap(), "$1")
                .replace("\"6443\"", "6443");
            let loaded = manifest::load_str(Path::new(file), &text)
                .unwrap()
                .remove(0);
            loaded
                .typed()
                .unwrap_or_else(|e| panic!("{file}: {} as v1beta1: {e}", object["kind"]));
        }
    }
}

/// A v1beta2 object is admitted as its v1beta1 conversion is: the same defaults, the same rule
/// violations, reported at the same paths.
#[test]
fn v1beta2_objects_pass_the_v1beta1_rules_after_conversion() {
    let lenient = Ctx {
        allow_placeholders: true,
        ..Ctx::default()
    };
    for file in V1_17 {
        for object in template_objects(file) {
            let out = admit(&object, None, &lenient);
            assert!(out.allowed(), "{file}: {} {:?}", object["kind"], out.errors);
        }
    }
    let machine = |api_version: &str, ip: &str| {
        json!({"apiVersion": api_version, "kind": "VSphereMachine",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {"template": "t", "guestSoftPowerOffTimeoutSeconds": 60, "powerOffMode": "trySoft",
                     "network": {"devices": [{"networkName": "n", "ipAddrs": [ip], "gateway4": "10.0.0.1"}]}}})
    };
    let mut v1 = machine(V1, "10.0.0.5");
    let spec = v1["spec"].as_object_mut().unwrap();
    spec.remove("guestSoftPowerOffTimeoutSeconds");
    spec.insert("guestSoftPowerOffTimeout".into(), json!("1m0s"));
    let v1 = admit(&v1, None, &Ctx::default());
    let v2 = admit(&machine(V2, "10.0.0.5"), None, &Ctx::default());
    assert!(
        !v1.allowed() && !v2.allowed(),
        "{:?} {:?}",
        v1.errors,
        v2.errors
    );
    assert_eq!(v1.errors, v2.errors);
    assert_eq!(v2.errors[0].path, "spec.network.devices[0].ipAddrs[0]");
    let good = admit(&machine(V2, "10.0.0.5/24"), None, &Ctx::default());
    assert!(good.allowed(), "{:?}", good.errors);
    assert_eq!(
        good.defaulted,
        ["spec.datacenter"],
        "as v1beta1: the mutating webhook's"
    );

    // ClusterClass's template: immutable, as CAPV, but for the topology controller's dry run.
    let template = template_objects("tests/fixtures/capv/v1.17/clusterclass-template.yaml")
        .into_iter()
        .find(|o| o["kind"] == "VSphereClusterTemplate")
        .unwrap();
    let mut changed = template.clone();
    changed["spec"]["template"]["spec"]["server"] = json!("other.example.com");
    let out = admit(&changed, Some(&template), &lenient);
    assert!(!out.allowed());
    assert_eq!(out.errors[0].path, "spec.template.spec");
    let dry_run = Ctx {
        dry_run: true,
        ..lenient
    };
    changed["metadata"]["annotations"] = json!({"topology.cluster.x-k8s.io/dry-run": ""});
    assert!(admit(&changed, Some(&template), &dry_run).allowed());
}
