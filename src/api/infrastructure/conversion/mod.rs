//! Conversion between the served versions of one kind: what the CRD conversion webhook
//! (`POST /convert`, [`crate::webhook::conversion`]) answers the API server with, and what
//! admission and the manifest loader use to see a v1beta2 object in the storage version.
//!
//! Every `infrastructure.cluster.x-k8s.io` kind is served as v1beta1 (storage) and v1beta2, and
//! the schemas differ (reference/capi-v1beta2.md §3). A conversion is two steps:
//!
//! 1. the canonical mapping of the kind ([`zones`], [`cluster`], [`machine`]): the v1beta2
//!    contract's renames and moves (`status.ready` ↔ `status.initialization.provisioned`,
//!    conditions ↔ `status.deprecated.v1beta1`, the failure-domain map ↔ sorted list, the
//!    soft power-off Duration ↔ seconds, …), then pruning to the target schema;
//! 2. keeping the difference: the object is mapped back at once, and wherever that would not
//!    give the object as it was (a field the target cannot hold, `"5m"` that comes back as
//!    `"5m0s"`, a `status.ready` next to an `initialization` v1beta1 also has), the original
//!    value is written into the annotation [`CONVERSION_DATA`] under the source version, with
//!    what the mapping would produce there instead.
//!
//! When the object comes back to that version, each kept value is put back only where the
//! mapping still produces what it produced then: an object changed in the other version
//! meanwhile keeps the change. And only where it changes nothing the object's current version
//! shows: whoever may update an object may write its annotations, so the annotation is never an
//! input, only a record ([`forged_entries`] is what admission refuses of it). So a round trip through either version returns the object as
//! it was, by construction rather than by a table per field, and the annotation is dropped once
//! nothing is held in it (an object that never left its version never carries one).
//!
//! The annotation name is Cluster API's (CAPV uses it for the same purpose); the value is this
//! provider's format. Objects written by earlier versions of this provider carry
//! [`LEGACY_CONVERSION_DATA`], which is still read; an upstream value (a snapshot of the hub
//! object) is read as "restore what the other version lacks".

mod cluster;
mod duration;
mod machine;
mod zones;

pub use machine::power_off_timeout_seconds;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{V1BETA1, v1beta2::API_VERSION as V1BETA2};
use crate::api::Kind;

/// The annotation that keeps, per source `apiVersion`, what the object's current version
/// cannot hold.
pub const CONVERSION_DATA: &str = "cluster.x-k8s.io/conversion-data";

/// The annotation earlier versions of this provider wrote (`{apiVersion: {pointer: value}}`):
/// read, never written.
pub const LEGACY_CONVERSION_DATA: &str = "vsphere-provider.io/conversion-data";

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
    #[error("{object}: annotation {annotation} is not valid: {cause}")]
    BadAnnotation {
        /// `kind/name` of the object.
        object: String,
        /// Which annotation.
        annotation: &'static str,
        /// What is wrong with it.
        cause: String,
    },
    /// A field's value has no counterpart in the desired version.
    #[error("{object}: {field}: {cause}")]
    Field {
        /// `kind/name` of the object.
        object: String,
        /// The field, as a dotted path.
        field: String,
        /// Why it cannot be converted.
        cause: String,
    },
}

/// Which way a canonical mapping goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    /// v1beta1 → v1beta2.
    Up,
    /// v1beta2 → v1beta1.
    Down,
}

/// A field the canonical mapping cannot convert: `(dotted path, why)`; [`convert`] adds the
/// object's name.
type FieldError = (String, String);

/// `object` at the version of its kind's Rust type ([`Kind::api_version`]), for the edges that
/// decode what a user or another version wrote (admission rules, the manifest loader). Objects
/// of kinds not served here come back unchanged, and so does one that cannot be converted:
/// decoding it then says what is wrong ([`convert`] names the field).
pub fn to_typed(object: &Value) -> Value {
    let text = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or_default();
    match Kind::from_type(text("apiVersion"), text("kind")) {
        Some(kind) if text("apiVersion") != kind.api_version() => {
            convert(object, kind.api_version()).unwrap_or_else(|_| object.clone())
        }
        _ => object.clone(),
    }
}

/// A field path as it reads at `version`, for a path found on the other served version of
/// the kind (`spec.template.spec.guestSoftPowerOffTimeout` at v1beta1 is
/// `…guestSoftPowerOffTimeoutSeconds` at v1beta2, and back): what an error about a request at
/// `version` must name when the rules that found it read the kind's Rust type. Only whole field
/// names are renamed; fields both versions name alike come back unchanged.
pub fn field_path_at(version: &str, path: &str) -> String {
    let to_v1beta2 = version == V1BETA2;
    path.split('.')
        .map(|segment| {
            let (name, rest) = segment.split_at(segment.find('[').unwrap_or(segment.len()));
            let renamed = machine::RENAMED
                .iter()
                .find_map(|(old, new)| match to_v1beta2 {
                    true => (*old == name).then_some(new),
                    false => (*new == name).then_some(old),
                });
            match renamed {
                Some(to) => format!("{to}{rest}"),
                None => segment.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Whether `object` has a conversion annotation (ours or the legacy one): what the typed edges
/// check before serialising an object to read what it holds.
fn holds_anything(object: &impl kube::Resource) -> bool {
    object
        .meta()
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(CONVERSION_DATA) || a.contains_key(LEGACY_CONVERSION_DATA))
}

/// A VSphereMachine's v1beta1 `spec.failureDomain`, which v1beta2 dropped (CAPV v1beta2 places
/// by the Machine's): written at v1beta1, it is held in the conversion annotation for v1beta1
/// readers, and the machine's resolution still falls back on it (CAPV #3575), so a machine
/// written before v1beta2 is placed as it was.
pub fn legacy_failure_domain<T>(vsphere_machine: &T) -> Option<String>
where
    T: kube::Resource + Serialize,
{
    if !holds_anything(vsphere_machine) {
        return None;
    }
    let value = serde_json::to_value(vsphere_machine).ok()?;
    let mut held = read_held(Kind::VSphereMachine, &value).ok()?;
    held.remove(V1BETA1)?
        .into_iter()
        .find(|e| e.path == "/spec/failureDomain")?
        .value?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
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
    let field_error = |(field, cause): FieldError| ConversionError::Field {
        object: label.clone(),
        field,
        cause,
    };

    let mut held =
        read_held(kind, object).map_err(|(annotation, cause)| ConversionError::BadAnnotation {
            object: label.clone(),
            annotation,
            cause,
        })?;
    let restore = held.remove(desired).unwrap_or_default();
    held.remove(from);

    let plain = map(kind, object, from, desired).map_err(field_error)?;
    let (mut converted, _refused) =
        restore_hidden(kind, object, &plain, &restore, desired).map_err(field_error)?;
    // A legacy annotation may hold a field the version no longer has (the `thumbprint` our
    // first v1beta2 zone had): the server would prune it from the answer anyway.
    prune(kind, &mut converted, desired);
    let back = map(kind, &converted, desired, from).map_err(field_error)?;
    let mut keep = Vec::new();
    for (key, value) in object.as_object().into_iter().flatten() {
        if !matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            diff(
                Some(value),
                back.get(key),
                &format!("/{}", escape(key)),
                &mut keep,
            );
        }
    }
    if let Some(back) = back.as_object() {
        for (key, value) in back {
            if object.get(key).is_none() && !matches!(key.as_str(), "apiVersion" | "kind") {
                keep.push(Entry::new(format!("/{}", escape(key)), None, Some(value)));
            }
        }
    }
    if !keep.is_empty() {
        held.insert(from.to_string(), keep);
    }
    write_held(&mut converted, &held);
    Ok(converted)
}

/// `plain` (`object` mapped to `desired`) with the held `entries` for `desired` put back, but
/// only those that show `object`'s own version nothing `object` does not show itself: a kept
/// value restores what `object`'s version cannot hold (a field only `desired` has, `"5m"`
/// beside `"5m0s"`, a v1beta1 `numCPUs: 0` the hub leaves out), so wherever the result, mapped
/// back, differs from `plain` mapped back, it must read as `object` does. The annotation is
/// written by whoever writes the object, so an entry that would make a field read otherwise (a
/// v1beta1 update whose annotation sets the hub's `customVMXKeys`, or moves `server`) is what a
/// writer put there, not what a conversion kept: it is left out, and returned (by path) for
/// admission to refuse.
fn restore_hidden(
    kind: Kind,
    object: &Value,
    plain: &Value,
    entries: &[Entry],
    desired: &str,
) -> Result<(Value, Vec<String>), FieldError> {
    if entries.is_empty() {
        return Ok((plain.clone(), Vec::new()));
    }
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let shown = |v: &Value| -> Result<Value, FieldError> {
        let mut v = v.clone();
        prune(kind, &mut v, desired);
        let mut back = map(kind, &v, desired, from)?;
        if let Some(map) = back.as_object_mut() {
            for meta in ["apiVersion", "kind", "metadata"] {
                map.remove(meta);
            }
        }
        Ok(back)
    };
    let baseline = shown(plain)?;
    // Where `with` reads differently from `plain`, it reads as `object` (and it reads at all:
    // an entry the mapping back cannot take is no kept value either).
    let faithful = |with: &Value| {
        let Ok(shows) = shown(with) else {
            return false;
        };
        let mut changed = Vec::new();
        diff(Some(&shows), Some(&baseline), "", &mut changed);
        changed
            .iter()
            .all(|c| c.value.as_ref() == object.pointer(&c.path))
    };
    let mut all = plain.clone();
    for entry in entries {
        entry.apply(&mut all);
    }
    if faithful(&all) {
        return Ok((all, Vec::new()));
    }
    // Something does not belong: keep entry by entry what reads as the object does.
    let mut kept = plain.clone();
    let mut refused = Vec::new();
    for entry in entries {
        let mut trial = kept.clone();
        entry.apply(&mut trial);
        if trial == kept {
            continue;
        }
        if faithful(&trial) {
            kept = trial;
        } else {
            refused.push(entry.path.clone());
        }
    }
    Ok((kept, refused))
}

/// What the conversion annotation of `object` holds that no conversion of this provider
/// writes, as `(version, JSON pointer)`: entries held for the object's own version (a
/// conversion only keeps what the *other* version cannot hold), and entries for the other
/// version that would change a field the object's version shows ([`restore_hidden`] leaves
/// them out). Admission refuses such an annotation, naming it; the conversion ignores them.
/// An annotation that cannot be read is reported as one entry with an empty path.
pub fn forged_entries(object: &Value) -> Vec<(String, String)> {
    let text = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or_default();
    let from = text("apiVersion");
    let Some(kind) = Kind::from_type(from, text("kind")) else {
        return Vec::new();
    };
    let mut held = match read_held(kind, object) {
        Ok(held) => held,
        Err((_, cause)) => return vec![(from.to_string(), format!("unreadable: {cause}"))],
    };
    let mut forged: Vec<(String, String)> = held
        .remove(from)
        .into_iter()
        .flatten()
        .map(|e| (from.to_string(), e.path))
        .collect();
    for (version, entries) in held {
        if !kind.api_versions().contains(&version.as_str()) {
            continue;
        }
        let Ok(plain) = map(kind, object, from, &version) else {
            continue;
        };
        if let Ok((_, refused)) = restore_hidden(kind, object, &plain, &entries, &version) {
            forged.extend(refused.into_iter().map(|path| (version.clone(), path)));
        }
    }
    forged
}

/// The canonical mapping of `object` from `from` to `to`, pruned to `to`'s schema.
fn map(kind: Kind, object: &Value, from: &str, to: &str) -> Result<Value, FieldError> {
    let mut v = object.clone();
    v["apiVersion"] = Value::String(to.to_string());
    let direction = if from == V1BETA1 && to == V1BETA2 {
        Direction::Up
    } else {
        Direction::Down
    };
    match kind {
        Kind::VSphereFailureDomain | Kind::VSphereDeploymentZone => {
            zones::map(kind, &mut v, direction)
        }
        Kind::VSphereCluster | Kind::VSphereClusterTemplate | Kind::VSphereClusterIdentity => {
            cluster::map(kind, &mut v, direction)?
        }
        Kind::VSphereMachine | Kind::VSphereMachineTemplate | Kind::VSphereVM => {
            machine::map(kind, &mut v, direction)?
        }
        Kind::Machine | Kind::MachineHealthCheck | Kind::ControlPlaneMachineSet => {}
    }
    prune(kind, &mut v, to);
    Ok(v)
}

/// Removes what `version`'s schema has no place for, as the server's pruning would.
fn prune(kind: Kind, object: &mut Value, version: &str) {
    let schema = kind.schema_for(version);
    let mut lost = BTreeMap::new();
    for (key, value) in object.as_object().into_iter().flatten() {
        if key != "metadata" {
            let at = format!("/{}", escape(key));
            match schema["properties"].get(key) {
                Some(s) => unrepresentable(value, s, &at, &mut lost),
                None => {
                    lost.insert(at, value.clone());
                }
            }
        }
    }
    for pointer in lost.keys() {
        remove(object, pointer);
    }
}

/// One kept value: at `path`, put `value` (absent: remove the field) where the mapping back
/// produces `unless` (absent: nothing).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Entry {
    path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unless: Option<Value>,
}

impl Entry {
    fn new(path: String, value: Option<&Value>, unless: Option<&Value>) -> Self {
        Entry {
            path,
            value: value.cloned(),
            unless: unless.cloned(),
        }
    }

    fn apply(&self, object: &mut Value) {
        if object.pointer(&self.path) != self.unless.as_ref() {
            return;
        }
        let Some((parent, last)) = self.path.rsplit_once('/') else {
            return;
        };
        let key = unescape(last);
        match (object.pointer_mut(parent), &self.value) {
            (Some(Value::Object(map)), Some(v)) => {
                map.insert(key, v.clone());
            }
            (Some(Value::Object(map)), None) => {
                map.remove(&key);
            }
            (Some(Value::Array(items)), Some(v)) => match key.parse::<usize>() {
                Ok(i) if i < items.len() => items[i] = v.clone(),
                Ok(i) if i == items.len() => items.push(v.clone()),
                _ => {}
            },
            (Some(Value::Array(items)), None) => {
                if let Ok(i) = key.parse::<usize>()
                    && i < items.len()
                {
                    items.remove(i);
                }
            }
            _ => {}
        }
    }
}

/// The entries that turn `got` into `want`, at the highest points where they differ.
fn diff(want: Option<&Value>, got: Option<&Value>, at: &str, out: &mut Vec<Entry>) {
    match (want, got) {
        (Some(Value::Object(w)), Some(Value::Object(g))) => {
            for (key, value) in w {
                diff(
                    Some(value),
                    g.get(key),
                    &format!("{at}/{}", escape(key)),
                    out,
                );
            }
            for (key, value) in g {
                if !w.contains_key(key) {
                    out.push(Entry::new(
                        format!("{at}/{}", escape(key)),
                        None,
                        Some(value),
                    ));
                }
            }
        }
        (Some(Value::Array(w)), Some(Value::Array(g))) if w.len() == g.len() => {
            for (i, (a, b)) in w.iter().zip(g).enumerate() {
                diff(Some(a), Some(b), &format!("{at}/{i}"), out);
            }
        }
        (w, g) if w == g => {}
        (w, g) => out.push(Entry::new(at.to_string(), w, g)),
    }
}

/// `apiVersion → entries`, as held in the annotation.
type Held = BTreeMap<String, Vec<Entry>>;

/// What the object's annotations hold, in this module's form; an error names the annotation.
fn read_held(kind: Kind, object: &Value) -> Result<Held, (&'static str, String)> {
    let annotations = object.pointer("/metadata/annotations");
    let text = |name: &'static str| match annotations.and_then(|a| a.get(name)) {
        None => Ok(None),
        Some(Value::String(s)) => serde_json::from_str::<Value>(s)
            .map(Some)
            .map_err(|e| (name, e.to_string())),
        Some(other) => Err((name, format!("expected a JSON string, found {other}"))),
    };
    let mut held = Held::new();
    if let Some(legacy) = text(LEGACY_CONVERSION_DATA)? {
        let old: BTreeMap<String, BTreeMap<String, Value>> =
            serde_json::from_value(legacy).map_err(|e| (LEGACY_CONVERSION_DATA, e.to_string()))?;
        for (version, fields) in old {
            held.entry(version).or_default().extend(
                fields
                    .into_iter()
                    .map(|(path, value)| Entry::new(path, Some(&value), None)),
            );
        }
    }
    match text(CONVERSION_DATA)? {
        None => {}
        // Cluster API's form: the hub object as it was, apiVersion, spec and status.
        Some(snapshot) if snapshot.get("apiVersion").is_some_and(Value::is_string) => {
            let version = snapshot["apiVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let other = kind
                .api_versions()
                .iter()
                .find(|v| **v != version)
                .copied()
                .unwrap_or_default();
            let schema = kind.schema_for(other);
            let mut lost = BTreeMap::new();
            for key in ["spec", "status"] {
                if let Some(v) = snapshot.get(key) {
                    unrepresentable(v, &schema["properties"][key], &format!("/{key}"), &mut lost);
                }
            }
            held.entry(version).or_default().extend(
                lost.into_iter()
                    .map(|(path, value)| Entry::new(path, Some(&value), None)),
            );
        }
        Some(ours) => {
            let ours: Held =
                serde_json::from_value(ours).map_err(|e| (CONVERSION_DATA, e.to_string()))?;
            for (version, entries) in ours {
                held.entry(version).or_default().extend(entries);
            }
        }
    }
    Ok(held)
}

fn write_held(object: &mut Value, held: &Held) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(map) = annotations.as_object_mut() else {
        return;
    };
    map.remove(LEGACY_CONVERSION_DATA);
    if held.is_empty() {
        map.remove(CONVERSION_DATA);
    } else {
        let text = serde_json::to_string(held).unwrap_or_default();
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
                    // An empty value the target requires non-empty: v1beta2's value-typed fields
                    // say "unset" by omission (CAPV's `storagePolicyName: ""` of a v1beta1
                    // template, cloned by CAPI at v1beta2, was refused by the schema).
                    Some(s) if empty_where_required(v, s) => {
                        out.insert(here, v.clone());
                    }
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

/// `""` or `[]` where `schema` asks for at least one character or item. (An empty object
/// where one property is required is the kinds' own mapping: `placementConstraint`.)
fn empty_where_required(value: &Value, schema: &Value) -> bool {
    let at_least = |k: &str| schema[k].as_u64().is_some_and(|n| n >= 1);
    match value {
        Value::String(s) => s.is_empty() && at_least("minLength"),
        Value::Array(a) => a.is_empty() && at_least("minItems"),
        _ => false,
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

/// Moves the value at `from` to `to` (both JSON pointers), creating `to`'s parent objects;
/// nothing if `from` is absent. What the canonical mappings are made of.
fn relocate(object: &mut Value, from: &str, to: &str) {
    if let Some(value) = take(object, from) {
        put(object, to, value);
    }
}

/// Removes and returns the value at `pointer`.
fn take(object: &mut Value, pointer: &str) -> Option<Value> {
    let (parent, last) = pointer.rsplit_once('/')?;
    object
        .pointer_mut(parent)?
        .as_object_mut()?
        .remove(&unescape(last))
}

/// Sets `pointer` to `value`, creating missing parent objects (not over a non-object).
fn put(object: &mut Value, pointer: &str, value: Value) {
    let mut here = object;
    let mut keys = pointer.split('/').skip(1).map(unescape).peekable();
    while let Some(key) = keys.next() {
        let Some(map) = here.as_object_mut() else {
            return;
        };
        if keys.peek().is_none() {
            map.insert(key, value);
            return;
        }
        here = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    }
}

/// Removes the object at `pointer` if it has become empty.
fn drop_if_empty(object: &mut Value, pointer: &str) {
    if object
        .pointer(pointer)
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        take(object, pointer);
    }
}

/// The CAPI v1beta1 → v1beta2 status moves every kind with conditions shares: CAPI-style
/// conditions under `deprecated.v1beta1`, the `v1beta2` group's metav1 conditions at the top,
/// the terminal failure fields under `deprecated.v1beta1`.
fn status_conditions(object: &mut Value, direction: Direction) {
    const PAIRS: [(&str, &str); 3] = [
        (
            "/status/conditions",
            "/status/deprecated/v1beta1/conditions",
        ),
        (
            "/status/failureReason",
            "/status/deprecated/v1beta1/failureReason",
        ),
        (
            "/status/failureMessage",
            "/status/deprecated/v1beta1/failureMessage",
        ),
    ];
    match direction {
        Direction::Up => {
            let new = take(object, "/status/v1beta2/conditions");
            for (v1, v2) in PAIRS {
                relocate(object, v1, v2);
            }
            if let Some(c) = new {
                put(object, "/status/conditions", c);
            }
            drop_if_empty(object, "/status/v1beta2");
        }
        Direction::Down => {
            let new = take(object, "/status/conditions");
            for (v1, v2) in PAIRS {
                relocate(object, v2, v1);
            }
            if let Some(c) = new {
                put(object, "/status/v1beta2/conditions", c);
            }
            drop_if_empty(object, "/status/deprecated/v1beta1");
            drop_if_empty(object, "/status/deprecated");
        }
    }
}

#[cfg(test)]
mod tests;
