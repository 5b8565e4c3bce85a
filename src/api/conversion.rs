//! Conversion between the served versions of one kind: what the CRD conversion webhook
//! (`POST /convert`, [`crate::webhook::conversion`]) answers the API server with.
//!
//! VSphereFailureDomain and VSphereDeploymentZone are served as v1beta1 (storage) and v1beta2,
//! and their schemas differ: v1beta1's `autoConfigure` has no place in v1beta2, v1beta2's
//! `topology.template` none in v1beta1 (a zone's `thumbprint` and `identityRef` are fields of
//! both: they decide whose credentials verify it). With the CRD's conversion
//! strategy `None` the server only rewrites `apiVersion` and prunes, so reading an object
//! through kubectl's default version (the newest, v1beta2) and writing it back silently turned
//! `autoConfigure` off. Here a conversion is lossless as Cluster API's are: the spec fields the
//! target version cannot hold are kept in the annotation [`CONVERSION_DATA`], keyed by the
//! version they came from, and put back when the object is converted to that version again
//! (where the object does not already say otherwise). The annotation is dropped once nothing
//! is held in it, so an object that never left its version never carries one.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Kind, v1beta2};

/// The annotation that keeps, per source `apiVersion`, the spec fields (by JSON pointer) the
/// object's current version cannot hold.
pub const CONVERSION_DATA: &str = "vsphere-provider.io/conversion-data";

/// Why an object could not be converted; each names the object.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConversionError {
    /// The object's `apiVersion`/`kind` is not one this provider serves.
    #[error("{object}: {api_version} {kind} is not served by vsphere-provider")]
    NotServed {
        /// `kind/name` of the object.
        object: String,
        /// Its `apiVersion`.
        api_version: String,
        /// Its `kind`.
        kind: String,
    },
    /// The kind is not served at the desired version.
    #[error("{object}: {kind} is not served as {desired}")]
    NoSuchVersion {
        /// `kind/name` of the object.
        object: String,
        /// The kind.
        kind: String,
        /// The desired `apiVersion`.
        desired: String,
    },
    /// The conversion-data annotation is not what this module writes.
    #[error("{object}: annotation {CONVERSION_DATA} is not valid: {cause}")]
    BadAnnotation {
        /// `kind/name` of the object.
        object: String,
        /// What is wrong with it.
        cause: String,
    },
}

/// Converts `object` to `desired` (a `group/version`), keeping what the target version cannot
/// hold in [`CONVERSION_DATA`] and restoring what an earlier conversion kept there.
pub fn convert(object: &Value, desired: &str) -> Result<Value, ConversionError> {
    let text = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or_default();
    let (from, kind_name) = (text("apiVersion"), text("kind"));
    let label = format!(
        "{kind_name}/{}",
        object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("<unnamed>")
    );
    let kind = Kind::from_type(from, kind_name).ok_or_else(|| ConversionError::NotServed {
        object: label.clone(),
        api_version: from.to_string(),
        kind: kind_name.to_string(),
    })?;
    if !kind.api_versions().contains(&desired) {
        return Err(ConversionError::NoSuchVersion {
            object: label,
            kind: kind_name.to_string(),
            desired: desired.to_string(),
        });
    }
    if from == desired {
        return Ok(object.clone());
    }
    let mut converted = if desired == v1beta2::API_VERSION {
        v1beta2::to_v1beta2(object)
    } else {
        v1beta2::to_v1beta1(object)
    };
    converted["apiVersion"] = Value::String(desired.to_string());

    let mut kept = read_kept(object).map_err(|cause| ConversionError::BadAnnotation {
        object: label,
        cause,
    })?;
    if let Some(held) = kept.remove(desired) {
        for (pointer, value) in held {
            restore(&mut converted, &pointer, value);
        }
    }
    let mut lost = BTreeMap::new();
    if let Some(spec) = object.get("spec") {
        let target = kind.schema_for(desired);
        unrepresentable(spec, &target["properties"]["spec"], "/spec", &mut lost);
    }
    for pointer in lost.keys() {
        remove(&mut converted, pointer);
    }
    if lost.is_empty() {
        kept.remove(from);
    } else {
        kept.insert(from.to_string(), lost);
    }
    write_kept(&mut converted, &kept);
    Ok(converted)
}

/// `apiVersion → (pointer → value)` as held in the annotation.
type Kept = BTreeMap<String, BTreeMap<String, Value>>;

fn read_kept(object: &Value) -> Result<Kept, String> {
    match object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(CONVERSION_DATA))
    {
        None => Ok(Kept::new()),
        Some(Value::String(s)) => serde_json::from_str(s).map_err(|e| e.to_string()),
        Some(other) => Err(format!("expected a JSON string, found {other}")),
    }
}

fn write_kept(object: &mut Value, kept: &Kept) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(map) = annotations.as_object_mut() else {
        return;
    };
    if kept.is_empty() {
        map.remove(CONVERSION_DATA);
    } else {
        let text = serde_json::to_string(kept).unwrap_or_default();
        map.insert(CONVERSION_DATA.into(), Value::String(text));
    }
    if map.is_empty() {
        metadata.remove("annotations");
    }
}

/// The fields of `value` (at `at`) that `schema` has no property for, by JSON pointer.
/// Free-form parts of a schema (no `properties`, or `x-kubernetes-preserve-unknown-fields`)
/// hold anything and lose nothing.
fn unrepresentable(value: &Value, schema: &Value, at: &str, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(fields) => {
            if schema["x-kubernetes-preserve-unknown-fields"] == true {
                return;
            }
            let properties = schema["properties"].as_object();
            let additional = schema["additionalProperties"].is_object();
            for (key, v) in fields {
                let here = format!("{at}/{}", escape(key));
                match properties.and_then(|p| p.get(key)) {
                    Some(s) => unrepresentable(v, s, &here, out),
                    None if additional => {
                        unrepresentable(v, &schema["additionalProperties"], &here, out)
                    }
                    None if properties.is_some() => {
                        out.insert(here, v.clone());
                    }
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                unrepresentable(v, &schema["items"], &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Puts `value` at `pointer` unless something is there already or its parent is missing (the
/// object was changed in the other version meanwhile: what it says now wins).
fn restore(object: &mut Value, pointer: &str, value: Value) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let key = unescape(last);
    match object.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.entry(key).or_insert(value);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = key.parse::<usize>()
                && i == items.len()
            {
                items.push(value);
            }
        }
        _ => {}
    }
}

/// Takes out what the target version has no place for (the server would prune it anyway).
fn remove(object: &mut Value, pointer: &str) {
    if let Some((parent, last)) = pointer.rsplit_once('/')
        && let Some(Value::Object(map)) = object.pointer_mut(parent)
    {
        map.remove(&unescape(last));
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn unescape(key: &str) -> String {
    key.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const V1: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
    const V2: &str = "infrastructure.cluster.x-k8s.io/v1beta2";

    fn failure_domain(api_version: &str) -> Value {
        json!({"apiVersion": api_version, "kind": "VSphereFailureDomain",
            "metadata": {"name": "fd-a", "labels": {"team": "x"}},
            "spec": {
                "region": {"name": "r", "type": "Datacenter", "tagCategory": "k8s-region", "autoConfigure": true},
                "zone": {"name": "z", "type": "ComputeCluster", "tagCategory": "k8s-zone", "autoConfigure": true},
                "topology": {"datacenter": "DC0", "computeCluster": "DC0_C0", "datastore": "LocalDS_0"}}})
    }

    #[test]
    fn auto_configure_survives_a_round_trip_through_v1beta2() {
        let stored = failure_domain(V1);
        let read = convert(&stored, V2).unwrap();
        assert_eq!(read["apiVersion"], V2);
        assert!(read["spec"]["region"].get("autoConfigure").is_none());
        assert!(
            read["metadata"]["annotations"][CONVERSION_DATA]
                .as_str()
                .unwrap()
                .contains("/spec/region/autoConfigure")
        );
        let written = convert(&read, V1).unwrap();
        assert_eq!(written, stored, "nothing lost, no annotation left behind");
    }

    #[test]
    fn v1beta2_only_fields_survive_storage_in_v1beta1() {
        let mut fd = failure_domain(V2);
        for side in ["region", "zone"] {
            fd["spec"][side]
                .as_object_mut()
                .unwrap()
                .remove("autoConfigure");
        }
        fd["metadata"]["annotations"] = json!({"note": "kept"});
        fd["spec"]["topology"]["template"] = json!("ubuntu-2404");
        let stored = convert(&fd, V1).unwrap();
        assert!(stored["spec"]["topology"].get("template").is_none());
        assert_eq!(stored["metadata"]["annotations"]["note"], "kept");
        assert_eq!(convert(&stored, V2).unwrap(), fd);
    }

    /// A zone's own credentials (CAPV v1beta2) are stored as fields in v1beta1 too: they decide
    /// who acts for the zone, so they must be readable from the storage version, not only from
    /// an annotation.
    #[test]
    fn a_zones_identity_and_thumbprint_are_fields_in_both_versions() {
        let zone = json!({"apiVersion": V2, "kind": "VSphereDeploymentZone",
            "metadata": {"name": "z"},
            "spec": {"server": "vc.example.com", "failureDomain": "fd-a", "thumbprint": "AB:CD",
                     "identityRef": {"kind": "Secret", "name": "creds"},
                     "placementConstraint": {"resourcePool": "rp"}}});
        let stored = convert(&zone, V1).unwrap();
        assert_eq!(stored["spec"]["thumbprint"], "AB:CD");
        assert_eq!(stored["spec"]["identityRef"]["name"], "creds");
        assert!(stored["metadata"].get("annotations").is_none(), "{stored}");
        assert_eq!(convert(&stored, V2).unwrap(), zone);
    }

    #[test]
    fn what_the_object_says_now_wins_over_what_was_kept() {
        let mut read = convert(&failure_domain(V1), V2).unwrap();
        // Written back through v1beta1 by hand with autoConfigure switched off.
        read["apiVersion"] = json!(V1);
        read["spec"]["region"]["autoConfigure"] = json!(false);
        let written = convert(&read, V1).unwrap();
        assert_eq!(written["spec"]["region"]["autoConfigure"], false);
    }

    #[test]
    fn an_object_of_another_kind_or_version_is_refused_by_name() {
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
            err.starts_with("VSphereFailureDomain/fd-a: annotation"),
            "{err}"
        );
    }

    /// Every spec field either version's schema has comes back after a round trip through the
    /// other: objects with every property set (from the schema itself) for both kinds.
    #[test]
    fn every_field_of_either_version_survives_a_round_trip() {
        for kind in [Kind::VSphereFailureDomain, Kind::VSphereDeploymentZone] {
            for (from, to) in [(V1, V2), (V2, V1)] {
                let spec = example(&kind.schema_for(from)["properties"]["spec"]);
                let object = json!({"apiVersion": from, "kind": kind.name(),
                    "metadata": {"name": "full"}, "spec": spec});
                let back = convert(&convert(&object, to).unwrap(), from).unwrap();
                assert_eq!(back, object, "{kind} {from} -> {to} -> {from}");
            }
        }
    }

    /// A value for every property of `schema`, of the schema's type (enums take their first
    /// value, lists one item).
    fn example(schema: &Value) -> Value {
        if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
            return first.clone();
        }
        match schema["type"].as_str() {
            Some("object") => Value::Object(
                schema["properties"]
                    .as_object()
                    .map(|p| p.iter().map(|(k, s)| (k.clone(), example(s))).collect())
                    .unwrap_or_default(),
            ),
            Some("array") => json!([example(&schema["items"])]),
            Some("boolean") => json!(true),
            Some("integer") | Some("number") => json!(1),
            _ => json!("x"),
        }
    }
}
