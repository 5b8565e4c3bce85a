use super::*;
use proptest::prelude::*;
use serde_json::json;

const V1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const V2: &str = "infrastructure.cluster.x-k8s.io/v1beta2";

/// Every kind served in both versions.
fn infra() -> Vec<Kind> {
    Kind::ALL
        .into_iter()
        .filter(|k| k.api_versions().contains(&V2))
        .collect()
}

fn round_trip(object: &Value, via: &str) -> Value {
    let from = object["apiVersion"].as_str().unwrap().to_string();
    let there = convert(object, via).unwrap_or_else(|e| panic!("to {via}: {e}\n{object}"));
    assert_eq!(there["apiVersion"], via);
    convert(&there, &from).unwrap_or_else(|e| panic!("back to {from}: {e}\n{there}"))
}

fn kept(object: &Value) -> Held {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(CONVERSION_DATA))
        .and_then(Value::as_str)
        .map(|s| serde_json::from_str(s).unwrap())
        .unwrap_or_default()
}

fn failure_domain(api_version: &str) -> Value {
    json!({"apiVersion": api_version, "kind": "VSphereFailureDomain",
        "metadata": {"name": "fd-a", "labels": {"team": "x"}},
        "spec": {
            "region": {"name": "r", "type": "Datacenter", "tagCategory": "k8s-region", "autoConfigure": true},
            "zone": {"name": "z", "type": "ComputeCluster", "tagCategory": "k8s-zone", "autoConfigure": true},
            "topology": {"datacenter": "DC0", "computeCluster": "DC0_C0", "datastore": "LocalDS_0"}}})
}

fn machine() -> Value {
    json!({"apiVersion": V1, "kind": "VSphereMachine",
        "metadata": {"name": "m-0", "namespace": "ns", "annotations": {"note": "kept"}},
        "spec": {"template": "ubuntu", "failureDomain": "zone-a", "providerID": "vsphere://1",
                 "guestSoftPowerOffTimeout": "5m", "namingStrategy": {"template": "{{ .machine.name }}"},
                 "numCPUs": 0, "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}],
                                           "preferredAPIServerCidr": "10.0.0.0/8"}},
        "status": {"ready": true, "failureReason": "UpdateError", "failureMessage": "boom",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                   "v1beta2": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                               "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}})
}

#[test]
fn auto_configure_is_a_v1beta2_field_here() {
    let read = convert(&failure_domain(V1), V2).unwrap();
    assert_eq!(read["spec"]["region"]["autoConfigure"], true);
    assert!(read["metadata"].get("annotations").is_none(), "{read}");
    assert_eq!(convert(&read, V1).unwrap(), failure_domain(V1));
}

#[test]
fn a_machine_maps_to_the_v1beta2_contract_and_back() {
    let v1 = machine();
    let v2 = convert(&v1, V2).unwrap();
    let spec = &v2["spec"];
    assert_eq!(spec["guestSoftPowerOffTimeoutSeconds"], 300);
    assert_eq!(spec["naming"]["template"], "{{ .machine.name }}");
    assert_eq!(spec["providerID"], "vsphere://1");
    for gone in [
        "failureDomain",
        "guestSoftPowerOffTimeout",
        "namingStrategy",
        "numCPUs",
    ] {
        assert!(spec.get(gone).is_none(), "{gone}: {v2}");
    }
    assert!(spec["network"].get("preferredAPIServerCidr").is_none());
    let status = &v2["status"];
    assert_eq!(status["initialization"], json!({"provisioned": true}));
    assert_eq!(status["conditions"][0]["reason"], "Ready");
    assert_eq!(
        status["deprecated"]["v1beta1"]["conditions"],
        v1["status"]["conditions"]
    );
    assert_eq!(
        status["deprecated"]["v1beta1"]["failureReason"],
        "UpdateError"
    );
    assert!(status.get("ready").is_none() && status.get("v1beta2").is_none());
    assert_eq!(v2["metadata"]["annotations"]["note"], "kept");
    let held = kept(&v2);
    let paths: Vec<&str> = held[V1].iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/spec/failureDomain",
            "/spec/guestSoftPowerOffTimeout",
            "/spec/network/preferredAPIServerCidr",
            "/spec/numCPUs"
        ],
        "5m comes back as Go prints it (5m0s) unless kept"
    );
    assert_eq!(convert(&v2, V1).unwrap(), v1);
}

#[test]
fn cluster_failure_domains_become_a_sorted_list() {
    let v1 = json!({"apiVersion": V1, "kind": "VSphereCluster", "metadata": {"name": "c"},
        "spec": {"server": "vc"},
        "status": {"ready": true, "initialization": {"provisioned": true},
                   "failureDomains": {"zone-b": {"controlPlane": false}, "zone-a": {"controlPlane": true, "attributes": {"k": "v"}}}}});
    let v2 = convert(&v1, V2).unwrap();
    assert_eq!(
        v2["status"]["failureDomains"],
        json!([{"name": "zone-a", "controlPlane": true, "attributes": {"k": "v"}},
               {"name": "zone-b", "controlPlane": false}])
    );
    assert!(v2["metadata"].get("annotations").is_none(), "{v2}");
    assert_eq!(convert(&v2, V1).unwrap(), v1);
}

#[test]
fn what_the_object_says_now_wins_over_what_was_kept() {
    let mut read = convert(&machine(), V2).unwrap();
    // Changed through v1beta2: a new timeout; the kept "5m" no longer applies.
    read["spec"]["guestSoftPowerOffTimeoutSeconds"] = json!(60);
    let written = convert(&read, V1).unwrap();
    assert_eq!(written["spec"]["guestSoftPowerOffTimeout"], "1m0s");
    assert_eq!(written["spec"]["failureDomain"], "zone-a");
}

#[test]
fn the_legacy_annotation_is_read_and_replaced() {
    // A v1beta1 VSphereMachine's `failureDomain`, which v1beta2 has no place for, held in the
    // legacy form; and a held value that would contradict the hub (its pool is unset there),
    // which a conversion never writes and is not shown.
    let mut vsm = json!({"apiVersion": V2, "kind": "VSphereMachine",
        "metadata": {"name": "m", "namespace": "ns", "annotations": {LEGACY_CONVERSION_DATA:
            json!({V1: {"/spec/failureDomain": "zone-a", "/spec/resourcePool": "rp"}}).to_string()}},
        "spec": {"template": "ubuntu"}});
    let v1 = convert(&vsm, V1).unwrap();
    assert_eq!(v1["spec"]["failureDomain"], "zone-a");
    assert!(v1["spec"].get("resourcePool").is_none(), "{v1}");
    assert!(
        v1["metadata"].get("annotations").is_none(),
        "the legacy annotation is dropped, nothing being left to hold: {v1}"
    );
    let back = convert(&v1, V2).unwrap();
    assert_eq!(
        back["metadata"]["annotations"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        [CONVERSION_DATA],
        "what v1beta2 cannot hold is kept under the upstream name"
    );
    assert_eq!(round_trip(&v1, V2), v1);
    vsm["metadata"]["annotations"] = json!({LEGACY_CONVERSION_DATA: "{"});
    let err = convert(&vsm, V1).unwrap_err().to_string();
    assert!(
        err.starts_with("VSphereMachine/m: annotation vsphere-provider.io/conversion-data"),
        "{err}"
    );
}

/// Our first v1beta2 failure domain had `topology.template` (CAPV main at the time, not v1.17):
/// kept in the legacy annotation of a stored object, it is not put back into a version without
/// the field.
#[test]
fn a_kept_field_the_version_no_longer_has_is_not_restored() {
    let stored = json!({"apiVersion": V1, "kind": "VSphereFailureDomain",
        "metadata": {"name": "fd", "annotations": {LEGACY_CONVERSION_DATA:
            json!({V2: {"/spec/topology/template": "ubuntu"}}).to_string()}},
        "spec": {"region": {"name": "r", "type": "Datacenter", "tagCategory": "k8s-region"},
                 "zone": {"name": "z", "type": "ComputeCluster", "tagCategory": "k8s-zone"},
                 "topology": {"datacenter": "DC0"}}});
    let read = convert(&stored, V2).unwrap();
    assert!(read["spec"]["topology"].get("template").is_none(), "{read}");
    assert!(read["metadata"].get("annotations").is_none(), "{read}");
}

/// A zone's own credentials are fields of both versions (ours in v1beta2, as `autoConfigure`):
/// they decide who verifies the zone, so the storage version must hold them as fields.
#[test]
fn a_zones_identity_and_thumbprint_are_fields_in_both_versions() {
    let zone = json!({"apiVersion": V2, "kind": "VSphereDeploymentZone",
        "metadata": {"name": "z"},
        "spec": {"server": "vc.example.com", "failureDomain": "fd-a", "thumbprint": "AB:CD",
                 "identityRef": {"kind": "VSphereClusterIdentity", "name": "zones"},
                 "placementConstraint": {"resourcePool": "rp"}}});
    let stored = convert(&zone, V1).unwrap();
    assert_eq!(stored["spec"]["thumbprint"], "AB:CD");
    assert_eq!(stored["spec"]["identityRef"]["name"], "zones");
    assert!(stored["metadata"].get("annotations").is_none(), "{stored}");
    assert_eq!(convert(&stored, V2).unwrap(), zone);
}

#[test]
fn an_upstream_hub_snapshot_restores_what_v1beta1_lacks() {
    // CAPV keeps the whole v1beta2 object; here only what v1beta1 cannot hold matters.
    let snapshot = json!({"apiVersion": V2, "kind": "VSphereMachine",
        "spec": {"template": "t", "cryptoKeyID": "key-1"}});
    let v1 = json!({"apiVersion": V1, "kind": "VSphereMachine",
        "metadata": {"name": "m", "annotations": {CONVERSION_DATA: snapshot.to_string()}},
        "spec": {"template": "t"}});
    let v2 = convert(&v1, V2).unwrap();
    assert_eq!(v2["spec"]["cryptoKeyID"], "key-1");
    assert!(v2["metadata"].get("annotations").is_none(), "{v2}");
}

#[test]
fn errors_name_the_object_and_the_field() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    assert_eq!(
        convert(&secret, V1).unwrap_err().to_string(),
        "Secret/s: v1 Secret is not served by vsphere-provider"
    );
    let err = convert(
        &failure_domain(V1),
        "infrastructure.cluster.x-k8s.io/v1alpha4",
    );
    assert!(err.unwrap_err().to_string().contains("not served as"));
    let mut bad = failure_domain(V2);
    bad["metadata"]["annotations"] = json!({CONVERSION_DATA: "{"});
    let err = convert(&bad, V1).unwrap_err().to_string();
    assert!(
        err.starts_with("VSphereFailureDomain/fd-a: annotation cluster.x-k8s.io/conversion-data"),
        "{err}"
    );
    let mut template = json!({"apiVersion": V1, "kind": "VSphereMachineTemplate",
        "metadata": {"name": "t"},
        "spec": {"template": {"spec": {"template": "x", "guestSoftPowerOffTimeout": "soon"}}}});
    assert_eq!(
        convert(&template, V2).unwrap_err().to_string(),
        "VSphereMachineTemplate/t: spec.template.spec.guestSoftPowerOffTimeout: \"soon\" is not a duration (e.g. \"300s\", \"5m\", \"1h30m\")"
    );
    template["spec"]["template"]["spec"]["guestSoftPowerOffTimeout"] = json!("1000000h");
    let err = convert(&template, V2).unwrap_err().to_string();
    assert!(
        err.contains("does not fit guestSoftPowerOffTimeoutSeconds"),
        "{err}"
    );
    let cluster = json!({"apiVersion": V2, "kind": "VSphereCluster", "metadata": {"name": "c"},
        "spec": {"server": "vc"},
        "status": {"failureDomains": [{"name": "a"}, {"name": "a", "controlPlane": true}]}});
    assert_eq!(
        convert(&cluster, V1).unwrap_err().to_string(),
        "VSphereCluster/c: status.failureDomains[1]: a second failure domain named \"a\""
    );
}

/// Every field of either version's schema comes back after a round trip through the other:
/// objects with every property set (from the schema itself) for every kind.
#[test]
fn every_field_of_either_version_survives_a_round_trip() {
    for kind in infra() {
        for (from, to) in [(V1, V2), (V2, V1)] {
            let schema = kind.schema_for(from);
            let mut object = example(&schema, "");
            object["apiVersion"] = json!(from);
            object["kind"] = json!(kind.name());
            object["metadata"] = json!({"name": "full"});
            assert_eq!(
                round_trip(&object, to),
                object,
                "{kind} {from} -> {to} -> {from}"
            );
        }
    }
}

/// A value for every property of `schema`, of the schema's type (enums take their first
/// value, lists one item).
fn example(schema: &Value, at: &str) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("object") => Value::Object(
            schema["properties"]
                .as_object()
                .map(|p| {
                    p.iter()
                        .map(|(k, s)| (k.clone(), example(s, &format!("{at}/{k}"))))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        Some("array") => json!([example(&schema["items"], &format!("{at}/0"))]),
        Some("boolean") => json!(true),
        Some("integer") | Some("number") => json!(1),
        _ if at.ends_with("guestSoftPowerOffTimeout") => json!("90s"),
        _ => json!("x"),
    }
}

/// Objects of a kind as its schema allows them: any subset of the optional fields, small
/// values, lists keyed by `x-kubernetes-list-map-keys` without duplicate keys.
fn arbitrary(schema: &Value, at: String) -> BoxedStrategy<Value> {
    if let Some(values) = schema["enum"].as_array() {
        return proptest::sample::select(values.clone()).boxed();
    }
    if schema["x-kubernetes-int-or-string"] == true {
        return prop_oneof![
            (0..5i64).prop_map(Value::from),
            proptest::sample::select(vec!["1", "500m", "2Gi"]).prop_map(Value::from),
        ]
        .boxed();
    }
    match schema["type"].as_str() {
        Some("object") => {
            if let Some(properties) = schema["properties"].as_object() {
                let required: Vec<&str> = schema["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = properties
                    .iter()
                    .map(|(k, s)| {
                        let key = k.clone();
                        let value =
                            arbitrary(s, format!("{at}/{k}")).prop_map(move |v| (key.clone(), v));
                        if required.contains(&k.as_str()) {
                            value.prop_map(Some).boxed()
                        } else {
                            proptest::option::weighted(0.4, value).boxed()
                        }
                    })
                    .collect();
                fields
                    .prop_map(|f| Value::Object(f.into_iter().flatten().collect()))
                    .boxed()
            } else if schema["additionalProperties"].is_object() {
                proptest::collection::btree_map(
                    "[a-c]{1,2}",
                    arbitrary(&schema["additionalProperties"], format!("{at}/*")),
                    0..3,
                )
                .prop_map(|m| Value::Object(m.into_iter().collect()))
                .boxed()
            } else {
                Just(json!({})).boxed()
            }
        }
        Some("array") => {
            let keys: Vec<String> = schema["x-kubernetes-list-map-keys"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect();
            // Valid objects only: as many items as the schema asks for at least.
            let min = schema["minItems"].as_u64().unwrap_or(0).min(2) as usize;
            proptest::collection::vec(arbitrary(&schema["items"], format!("{at}/*")), min..3)
                .prop_map(move |items| {
                    let mut seen = std::collections::BTreeSet::new();
                    let items = items
                        .into_iter()
                        .filter(|i| {
                            keys.is_empty()
                                || seen.insert(
                                    keys.iter().map(|k| i[k].to_string()).collect::<Vec<_>>(),
                                )
                        })
                        .collect();
                    Value::Array(items)
                })
                .boxed()
        }
        Some("boolean") => any::<bool>().prop_map(Value::from).boxed(),
        Some("integer") | Some("number") => prop_oneof![Just(0i64), -2..4i64, 0..100_000i64]
            .prop_map(Value::from)
            .boxed(),
        _ if at.ends_with("guestSoftPowerOffTimeout") => proptest::sample::select(vec![
            "0", "0s", "5m", "5m0s", "90s", "1h", "1.5s", "300ms", "-10s",
        ])
        .prop_map(Value::from)
        .boxed(),
        _ if schema["format"] == "date-time" => Just(json!("2026-11-26T00:00:00Z")).boxed(),
        // Valid objects only: a string the schema requires non-empty is never "".
        _ if schema["minLength"].as_u64().is_some_and(|n| n >= 1) => {
            "[a-z]{1,2}".prop_map(Value::from).boxed()
        }
        _ => "[a-z]{0,2}".prop_map(Value::from).boxed(),
    }
}

fn objects(kind: Kind, api_version: &'static str) -> impl Strategy<Value = Value> {
    let schema = kind.schema_for(api_version);
    let mut properties = schema.clone();
    if let Some(p) = properties["properties"].as_object_mut() {
        for meta in ["apiVersion", "kind", "metadata"] {
            p.remove(meta);
        }
    }
    arbitrary(&properties, String::new()).prop_map(move |mut v| {
        v["apiVersion"] = json!(api_version);
        v["kind"] = json!(kind.name());
        v["metadata"] = json!({"name": "p", "annotations": {"other": "x"}});
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// v1beta1 → v1beta2 → v1beta1 and v1beta2 → v1beta1 → v1beta2 give the object back, for
    /// every kind, whatever subset of fields it sets.
    #[test]
    fn round_trips_are_lossless(
        v1 in proptest::sample::select(infra()).prop_flat_map(|k| objects(k, V1)),
        v2 in proptest::sample::select(infra()).prop_flat_map(|k| objects(k, V2)),
    ) {
        prop_assert_eq!(round_trip(&v1, V2), v1.clone());
        prop_assert_eq!(round_trip(&v2, V1), v2.clone());
        // And once more: a second round trip through an object that carries an annotation.
        let there = convert(&v1, V2).unwrap();
        prop_assert_eq!(round_trip(&there, V1), there);
    }
}

/// CAPV v1.13.1's template writes `storagePolicyName: ""` (v1beta1 takes any string); v1beta2
/// requires at least one character and says "unset" by omission. CAPI v1.14 clones templates at
/// v1beta2, so the empty value is left out there and comes back on the way down.
#[test]
fn an_empty_value_the_target_requires_non_empty_is_left_out_and_kept() {
    let t = json!({"apiVersion": V1, "kind": "VSphereMachineTemplate",
        "metadata": {"name": "t"},
        "spec": {"template": {"spec": {"template": "ubuntu", "storagePolicyName": "",
                                       "datacenter": "DC0"}}}});
    let up = convert(&t, V2).unwrap();
    assert!(
        up["spec"]["template"]["spec"]
            .get("storagePolicyName")
            .is_none(),
        "{up}"
    );
    assert_eq!(up["spec"]["template"]["spec"]["datacenter"], "DC0");
    assert_eq!(convert(&up, V1).unwrap(), t);
}

#[test]
fn field_paths_are_renamed_where_v1beta2_renamed_the_field() {
    let at = |path: &str| field_path_at(V2, path);
    assert_eq!(
        at("spec.template.spec.guestSoftPowerOffTimeout"),
        "spec.template.spec.guestSoftPowerOffTimeoutSeconds"
    );
    assert_eq!(at("spec.namingStrategy.template"), "spec.naming.template");
    assert_eq!(
        at("spec.network.devices[0].ipAddrs[1]"),
        "spec.network.devices[0].ipAddrs[1]"
    );
    // Only whole field names: a field that merely starts like a renamed one stays.
    assert_eq!(at("spec.namingStrategyX"), "spec.namingStrategyX");
    // And back, for a v1beta1 request judged on a hub type.
    let back = |path: &str| field_path_at(V1, path);
    assert_eq!(
        back("spec.template.spec.guestSoftPowerOffTimeoutSeconds"),
        "spec.template.spec.guestSoftPowerOffTimeout"
    );
    assert_eq!(back("spec.naming.template"), "spec.namingStrategy.template");
    assert_eq!(back("spec.namingX"), "spec.namingX");
}

fn vsphere_vm(api_version: &str, status: Value) -> Value {
    json!({"apiVersion": api_version, "kind": "VSphereVM",
        "metadata": {"name": "m1", "namespace": "ns"},
        "spec": {"template": "tmpl", "server": "vc", "network": {"devices": [{"networkName": "VM Network", "dhcp4": true}]}},
        "status": status})
}

#[test]
fn the_actuator_state_crosses_as_a_field_both_ways() {
    let state =
        json!({"phase": "Running", "providerStatus": {"taskRef": "task-1", "instanceId": "42"}});
    let v1 = vsphere_vm(V1, json!({"ready": true, "actuatorState": state}));
    let v2 = convert(&v1, V2).unwrap();
    assert_eq!(v2["status"]["actuatorState"], state, "{v2}");
    assert!(kept(&v2).is_empty(), "nothing held: {v2}");
    assert_eq!(round_trip(&v1, V2), v1);
    assert_eq!(
        round_trip(&convert(&v1, V2).unwrap(), V1),
        convert(&v1, V2).unwrap()
    );
}

fn with_held(mut object: Value, held: Value) -> Value {
    object["metadata"]["annotations"] = json!({CONVERSION_DATA: held.to_string()});
    object
}

/// The review's status smuggling (N1): a tenant's v1beta2 VSphereVM holding, "for v1beta1", an
/// actuator state that names another VM. Nothing reads it at the hub, and a v1beta1 reader
/// does not get it either: the held entry would change what the hub shows.
#[test]
fn a_forged_held_status_reaches_no_reader() {
    let forged = json!({V1: [{"path": "/status/actuatorState",
        "value": {"providerStatus": {"instanceUUID": "victim-uuid"}}}]});
    let hub = with_held(vsphere_vm(V2, json!({})), forged);
    assert!(hub["status"].get("actuatorState").is_none());
    let v1 = convert(&hub, V1).unwrap();
    assert!(v1["status"].get("actuatorState").is_none(), "{v1}");
    assert_eq!(
        forged_entries(&hub),
        vec![(V1.to_string(), "/status/actuatorState".to_string())]
    );
}

/// The review's spec smuggling (N1): an annotation-only update at v1beta1 that would set the
/// hub's `customVMXKeys` (and move the VM to another server) changes nothing at v1beta2.
#[test]
fn held_entries_never_change_what_the_request_version_shows() {
    let v1 = with_held(
        vsphere_vm(V1, json!({})),
        json!({V2: [
            {"path": "/spec/customVMXKeys", "value": {"guestinfo.smuggled": "1"}},
            {"path": "/spec/server", "value": "evil.example.com", "unless": "vc"}
        ]}),
    );
    let hub = convert(&v1, V2).unwrap();
    assert!(hub["spec"].get("customVMXKeys").is_none(), "{hub}");
    assert_eq!(hub["spec"]["server"], "vc", "{hub}");
    assert_eq!(
        forged_entries(&v1),
        vec![
            (V2.to_string(), "/spec/customVMXKeys".to_string()),
            (V2.to_string(), "/spec/server".to_string())
        ]
    );
}

/// What a conversion keeps is never taken for forged: a v1beta2 object read at v1beta1 and
/// written back carries entries that only restore what v1beta1 cannot show.
#[test]
fn kept_entries_are_not_forged_and_own_version_entries_are() {
    let v1 = convert(&convert(&machine(), V2).unwrap(), V1).unwrap();
    let hub = convert(&machine(), V2).unwrap();
    assert!(
        !kept(&hub).is_empty(),
        "the v1beta1 fields v1beta2 lacks are kept: {hub}"
    );
    assert_eq!(forged_entries(&hub), vec![]);
    assert_eq!(forged_entries(&v1), vec![]);
    // Entries for the object's own version are never written by a conversion.
    let own = with_held(
        vsphere_vm(V2, json!({})),
        json!({V2: [{"path": "/spec/server", "value": "x"}]}),
    );
    assert_eq!(
        forged_entries(&own),
        vec![(V2.to_string(), "/spec/server".to_string())]
    );
    // An annotation that is not this module's format is reported, not skipped.
    let mut garbage = vsphere_vm(V1, json!({}));
    garbage["metadata"]["annotations"] = json!({CONVERSION_DATA: "{not json"});
    assert_eq!(forged_entries(&garbage).len(), 1);
}

/// Leaf JSON pointers of `v` (objects and arrays walked), for the forging property.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(x, format!("{at}/{}", escape(k)), out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                leaves(x, format!("{at}/{i}"), out);
            }
        }
        _ => out.push(at),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever a tenant writes into the annotation, the hub object shows the same fields as
    /// the request: mapped back by the canonical mapping alone, it is what the request maps to.
    #[test]
    fn no_annotation_changes_what_the_request_shows(
        v1 in proptest::sample::select(infra()).prop_flat_map(|k| objects(k, V1)),
        picks in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..6, any::<bool>()), 1..6),
    ) {
        let mut paths = Vec::new();
        leaves(&v1["spec"], "/spec".into(), &mut paths);
        paths.extend(["/spec/customVMXKeys", "/spec/server", "/spec/template",
            "/status/actuatorState", "/status/ready", "/spec/identityRef"].map(String::from));
        let values = [json!("evil"), json!(7), json!(true), json!({"guestinfo.x": "1"}),
            json!(["a"]), Value::Null];
        let entries: Vec<Value> = picks.iter().map(|(i, v, unless)| {
            let mut e = json!({"path": i.get(&paths), "value": values[*v]});
            if *unless {
                e["unless"] = values[(*v + 1) % values.len()].clone();
            }
            e
        }).collect();
        let forged = with_held(v1.clone(), json!({V2: entries}));
        let hub = convert(&forged, V2).unwrap();
        let plain = convert(&v1, V2).unwrap();
        // What the hub shows at v1beta1 by the canonical mapping alone (no annotation).
        let shown = |o: &Value| {
            let mut o = o.clone();
            o.as_object_mut().unwrap().remove("metadata");
            o["metadata"] = json!({"name": "p"});
            let mut back = convert(&o, V1).unwrap();
            back.as_object_mut().unwrap().remove("metadata");
            back
        };
        prop_assert_eq!(shown(&hub), shown(&plain));
    }
}
