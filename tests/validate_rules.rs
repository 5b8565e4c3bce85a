//! Admission rules checked through `admit` (schema + CEL + webhook), each with a rejected object
//! naming its field path and the accepted good neighbour. The per-kind unit tests in
//! `src/webhook/*` cover the typed rules one by one; these cover what only the whole pipeline
//! does (schema enums, defaults, CEL on raw objects).

use serde_json::{Value, json};
use vsphere_provider::webhook::Ctx;
use vsphere_provider::webhook::admission::{AdmissionOutcome, admit};

fn cpms() -> Value {
    json!({
        "apiVersion": "machine.openshift.io/v1",
        "kind": "ControlPlaneMachineSet",
        "metadata": {"name": "cluster", "namespace": "default"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {
                "machine.openshift.io/cluster-api-machine-role": "master",
                "machine.openshift.io/cluster-api-machine-type": "master"}},
            "template": {
                "machineType": "machines_v1beta1_machine_openshift_io",
                "machines_v1beta1_machine_openshift_io": {
                    "failureDomains": {"platform": "VSphere", "vsphere": [{"name": "zone-a"}, {"name": "zone-b"}, {"name": "zone-c"}]},
                    "metadata": {"labels": {
                        "machine.openshift.io/cluster-api-cluster": "demo",
                        "machine.openshift.io/cluster-api-machine-role": "master",
                        "machine.openshift.io/cluster-api-machine-type": "master"}},
                    "spec": {"providerSpec": {"value": {
                        "apiVersion": "machine.openshift.io/v1beta1", "kind": "VSphereMachineProviderSpec",
                        "template": "/DC0/vm/DC0_C0_RP0_VM0", "network": {"devices": []}, "workspace": {}}}}
                }
            }
        }
    })
}

fn run(obj: &Value, old: Option<&Value>) -> AdmissionOutcome {
    admit(obj, old, &Ctx::default())
}

fn texts(out: &AdmissionOutcome) -> Vec<String> {
    out.errors.iter().map(ToString::to_string).collect()
}

fn assert_rejected_at(out: &AdmissionOutcome, path: &str, contains: &str) {
    assert!(
        out.errors
            .iter()
            .any(|e| e.path == path && e.to_string().contains(contains)),
        "want an error at {path} containing {contains:?}, got {:?}",
        texts(out)
    );
}

const T: &str = "spec.template.machines_v1beta1_machine_openshift_io";

#[test]
fn cpms_good_neighbour_and_defaults() {
    let out = run(&cpms(), None);
    assert!(out.allowed(), "{:?}", texts(&out));
    assert_eq!(out.defaulted, ["spec.state", "spec.strategy"]);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
}

#[test]
fn cpms_replicas_three_or_five() {
    for (n, ok) in [(3, true), (5, true), (4, false), (1, false)] {
        let mut c = cpms();
        c["spec"]["replicas"] = json!(n);
        let out = run(&c, None);
        assert_eq!(out.allowed(), ok, "{n}: {:?}", texts(&out));
        if !ok {
            assert_rejected_at(&out, "spec.replicas", "Unsupported value");
        }
    }
}

#[test]
fn cpms_replicas_immutable() {
    let old = run(&cpms(), None).object;
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(5);
    assert_rejected_at(
        &run(&new, Some(&old)),
        "spec.replicas",
        "replicas is immutable",
    );
    assert!(run(&old, Some(&old)).allowed());
}

#[test]
fn cpms_active_never_back_to_inactive() {
    let mut active = cpms();
    active["spec"]["state"] = json!("Active");
    let stored = run(&active, None).object;
    let mut inactive = stored.clone();
    inactive["spec"]["state"] = json!("Inactive");
    assert_rejected_at(
        &run(&inactive, Some(&stored)),
        "spec.state",
        "state cannot be changed once Active",
    );
    // Inactive → Active is fine.
    let stored_inactive = run(&cpms(), None).object;
    assert!(run(&stored, Some(&stored_inactive)).allowed());
}

#[test]
fn cpms_strategy_rolling_update_or_on_delete() {
    for (s, ok) in [
        ("RollingUpdate", true),
        ("OnDelete", true),
        ("Recreate", false),
    ] {
        let mut c = cpms();
        c["spec"]["strategy"] = json!({"type": s});
        let out = run(&c, None);
        assert_eq!(out.allowed(), ok, "{s}");
        if !ok {
            assert_rejected_at(
                &out,
                "spec.strategy.type",
                "Unsupported value: \"Recreate\"",
            );
        }
    }
}

#[test]
fn cpms_vsphere_list_exactly_when_platform_is_vsphere() {
    let fds = format!("{T}.failureDomains");
    let mut no_list = cpms();
    no_list["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["failureDomains"] =
        json!({"platform": "VSphere"});
    assert_rejected_at(
        &run(&no_list, None),
        &fds,
        "vsphere configuration is required when platform is VSphere",
    );
    let mut wrong_platform = cpms();
    wrong_platform["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["failureDomains"]
        ["platform"] = json!("AWS");
    let out = run(&wrong_platform, None);
    assert_rejected_at(
        &out,
        &fds,
        "aws configuration is required when platform is AWS",
    );
    assert_rejected_at(
        &out,
        &fds,
        "vsphere configuration is required when platform is VSphere, and forbidden otherwise",
    );
    let mut empty = cpms();
    empty["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["failureDomains"]["vsphere"] =
        json!([]);
    assert_rejected_at(
        &run(&empty, None),
        &format!("{fds}.vsphere"),
        "at least one VSphereDeploymentZone",
    );
}

#[test]
fn cpms_failure_domain_names_unique_and_zone_names() {
    let list = format!("{T}.failureDomains.vsphere");
    let mut dup = cpms();
    dup["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["failureDomains"]["vsphere"] =
        json!([{"name": "zone-a"}, {"name": "zone-a"}]);
    assert_rejected_at(&run(&dup, None), &format!("{list}[1]"), "Duplicate value");
    let mut bad = cpms();
    bad["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["failureDomains"]["vsphere"] =
        json!([{"name": "Zone_A"}]);
    assert_rejected_at(
        &run(&bad, None),
        &format!("{list}[0].name"),
        "VSphereDeploymentZone",
    );
}

#[test]
fn cpms_selector_must_match_template_labels() {
    let mut c = cpms();
    c["spec"]["selector"]["matchLabels"]["machine.openshift.io/cluster-api-cluster"] =
        json!("other");
    assert_rejected_at(
        &run(&c, None),
        &format!("{T}.metadata.labels"),
        "selector does not match template labels",
    );
    let mut exprs = cpms();
    exprs["spec"]["selector"] = json!({"matchExpressions": [{"key": "machine.openshift.io/cluster-api-machine-role", "operator": "In", "values": ["master"]}]});
    assert!(run(&exprs, None).allowed());
}

#[test]
fn cpms_required_labels() {
    let mut c = cpms();
    c["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("machine.openshift.io/cluster-api-cluster");
    assert_rejected_at(
        &run(&c, None),
        &format!("{T}.metadata.labels"),
        "label 'machine.openshift.io/cluster-api-cluster' is required",
    );
}

#[test]
fn cpms_zone_supplied_fields_forbidden_in_template() {
    let mut c = cpms();
    c["spec"]["template"]["machines_v1beta1_machine_openshift_io"]["spec"]["providerSpec"]["value"]
        ["workspace"] = json!({"datacenter": "DC0"});
    assert_rejected_at(
        &run(&c, None),
        &format!("{T}.spec.providerSpec.value.workspace.datacenter"),
        "Forbidden",
    );
}

#[test]
fn cpms_unknown_field_rejected() {
    let mut c = cpms();
    c["spec"]["replica"] = json!(3);
    assert_rejected_at(&run(&c, None), "spec.replica", "Unknown field");
}

fn mhc(spec: Value) -> Value {
    json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineHealthCheck",
        "metadata": {"name": "mhc", "namespace": "default"}, "spec": spec})
}

#[test]
fn mhc_rules_through_admission() {
    let good = mhc(
        json!({"selector": {"matchLabels": {"a": "b"}}, "unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "300s"}]}),
    );
    let out = run(&good, None);
    assert!(out.allowed(), "{:?}", texts(&out));
    assert_eq!(
        out.defaulted,
        ["spec.maxUnhealthy", "spec.nodeStartupTimeout"]
    );
    assert_eq!(out.object["spec"]["maxUnhealthy"], "100%");
    assert_eq!(out.object["spec"]["nodeStartupTimeout"], "10m");

    let mut bad = good.clone();
    bad["spec"]["maxUnhealthy"] = json!("120%");
    assert_rejected_at(&run(&bad, None), "spec.maxUnhealthy", "should match");
    let mut neg = good.clone();
    neg["spec"]["maxUnhealthy"] = json!(-1);
    assert_rejected_at(&run(&neg, None), "spec.maxUnhealthy", "non-negative");
    // Upstream's loose pattern lets "0abc" through; the duration check does not.
    let mut loose = good.clone();
    loose["spec"]["nodeStartupTimeout"] = json!("0abc");
    assert_rejected_at(&run(&loose, None), "spec.nodeStartupTimeout", "duration");
    let mut zero = good.clone();
    zero["spec"]["nodeStartupTimeout"] = json!("0");
    assert!(run(&zero, None).allowed());
    let mut none = good.clone();
    none["spec"]["unhealthyConditions"] = json!([]);
    assert_rejected_at(
        &run(&none, None),
        "spec.unhealthyConditions",
        "at least 1 items",
    );
}

#[test]
fn failure_domain_wrong_types_and_enums() {
    let fd = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereFailureDomain",
        "metadata": {"name": "fd"},
        "spec": {"region": {"name": "r", "type": "Country", "tagCategory": "k8s-region"},
                 "zone": {"name": "z", "type": "ComputeCluster", "tagCategory": "k8s-zone", "autoConfigure": "yes"},
                 "topology": {"datacenter": "DC0", "computeCluster": "C0", "networks": "VM Network"}}});
    let out = run(&fd, None);
    assert_rejected_at(&out, "spec.region.type", "Unsupported value: \"Country\"");
    assert_rejected_at(&out, "spec.zone.autoConfigure", "must be of type boolean");
    assert_rejected_at(&out, "spec.topology.networks", "must be of type array");
    let mut missing = fd.clone();
    missing["spec"].as_object_mut().unwrap().remove("topology");
    assert_rejected_at(&run(&missing, None), "spec.topology", "Required value");
}

#[test]
fn v1beta2_manifests_use_the_v1beta2_schema_and_our_rules() {
    let fd = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereFailureDomain",
        "metadata": {"name": "fd"},
        "spec": {"region": {"name": "r", "type": "Datacenter", "tagCategory": "k8s-region"},
                 "zone": {"name": "z", "type": "ComputeCluster", "tagCategory": "k8s-zone"},
                 "topology": {"datacenter": "DC0", "computeCluster": "C0"}}});
    let out = run(&fd, None);
    assert!(out.allowed(), "{:?}", texts(&out));
    // Our v1beta2 keeps autoConfigure (CAPV dropped it): defaulted and typed as in v1beta1.
    assert_eq!(
        out.defaulted,
        ["spec.region.autoConfigure", "spec.zone.autoConfigure"]
    );
    let mut auto = fd.clone();
    auto["spec"]["zone"]["autoConfigure"] = json!("yes");
    assert_rejected_at(
        &run(&auto, None),
        "spec.zone.autoConfigure",
        "must be of type boolean",
    );
    let mut empty = fd.clone();
    empty["spec"]["topology"]["computeCluster"] = json!("");
    assert_rejected_at(
        &run(&empty, None),
        "spec.topology.computeCluster",
        "at least 1 chars long",
    );
    // The v1beta1 rules apply after conversion.
    let mut wide = fd.clone();
    wide["spec"]["region"]["type"] = json!("ComputeCluster");
    wide["spec"]["zone"]["type"] = json!("Datacenter");
    assert_rejected_at(&run(&wide, None), "spec.zone.type", "wider than region");

    let zone = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereDeploymentZone",
        "metadata": {"name": "z"}, "spec": {"server": "vc.example.com", "failureDomain": "fd"}});
    assert_rejected_at(
        &run(&zone, None),
        "spec.placementConstraint",
        "must set resourcePool, folder or both",
    );
    let mut ok = zone.clone();
    ok["spec"]["placementConstraint"] = json!({"folder": "vm"});
    let out = run(&ok, None);
    assert!(out.allowed(), "{:?}", texts(&out));
    assert_eq!(out.defaulted, ["spec.controlPlane"]);
}

#[test]
fn cpms_must_be_named_cluster() {
    // Upstream's CPMS webhook: one machine set per cluster, named `cluster`.
    let mut c = cpms();
    c["metadata"]["name"] = serde_json::json!("my-cpms");
    assert_rejected_at(&run(&c, None), "metadata.name", "must be cluster");
    assert!(run(&cpms(), None).errors.is_empty());
}

#[test]
fn mhc_without_unhealthy_conditions_is_a_startup_only_check() {
    let startup_only = mhc(json!({"selector": {"matchLabels": {"a": "b"}}}));
    let out = run(&startup_only, None);
    assert!(out.allowed(), "{:?}", texts(&out));
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let mut idle = startup_only.clone();
    idle["spec"]["nodeStartupTimeout"] = json!("0");
    let out = run(&idle, None);
    assert!(out.allowed(), "{:?}", texts(&out));
    assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
    assert!(out.warnings[0].contains("never finds a machine unhealthy"));
}

/// An object without `spec` is a field error at `spec`, in every served version, never
/// "cannot decode"; kinds whose spec is all optional (Machine, MachineHealthCheck) read it as
/// empty, as upstream's Go zero value.
#[test]
fn missing_spec_is_a_field_error() {
    for (api_version, kind) in [
        (
            "infrastructure.cluster.x-k8s.io/v1beta2",
            "VSphereDeploymentZone",
        ),
        (
            "infrastructure.cluster.x-k8s.io/v1beta2",
            "VSphereFailureDomain",
        ),
        (
            "infrastructure.cluster.x-k8s.io/v1beta1",
            "VSphereDeploymentZone",
        ),
        (
            "infrastructure.cluster.x-k8s.io/v1beta1",
            "VSphereFailureDomain",
        ),
    ] {
        for spec in [None, Some(Value::Null)] {
            let mut obj =
                json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "z"}});
            if let Some(s) = &spec {
                obj["spec"] = s.clone();
            }
            let out = run(&obj, None);
            assert_eq!(
                texts(&out),
                ["spec: Required value"],
                "{api_version} {kind} spec {spec:?}"
            );
        }
    }
    for (api_version, kind) in [
        ("machine.openshift.io/v1beta1", "Machine"),
        ("machine.openshift.io/v1beta1", "MachineHealthCheck"),
    ] {
        let obj = json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": "m", "namespace": "default"}});
        let out = run(&obj, None);
        assert!(out.allowed(), "{kind}: {:?}", texts(&out));
    }
}

/// machine-api-operator's provider-spec rules apply to a CPMS template too (so a bad template is
/// reported once, at the CPMS), except the secrets the Machine defaulter fills in.
#[test]
fn cpms_template_provider_spec_follows_machine_api_operator() {
    let mut c = cpms();
    let value = format!("{T}.spec.providerSpec.value");
    let spec = c
        .pointer_mut("/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value")
        .unwrap();
    spec["tagIDs"] = json!(["not-a-urn"]);
    spec["dataDisks"] = json!([{"name": "Disk1", "sizeGiB": 17000}]);
    let out = run(&c, None);
    assert_eq!(
        texts(&out),
        [
            format!(
                "{value}.tagIDs[0]: Invalid value: \"not-a-urn\": tag ID must be in the format of urn:vmomi:InventoryServiceTag:<UUID>:GLOBAL"
            ),
            format!(
                "{value}.dataDisks[0].sizeGiB: Invalid value: 17000: data disk size (GiB) must not exceed 16384"
            ),
        ]
    );
    // No secrets in the template: fine, each Machine gets the defaults.
    assert!(run(&cpms(), None).allowed());
}
