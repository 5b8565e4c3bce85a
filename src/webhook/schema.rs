//! Structural defaulting and OpenAPI v3 validation driven by the generated CRD schemas, so the
//! offline checks cannot drift from the types: what the apiserver does before admission webhooks
//! run (defaults, types, enums, required, unknown fields, patterns, lengths, bounds, list-map key
//! uniqueness). CEL rules (`x-kubernetes-validations`) are implemented per kind in Rust.
//!
//! Messages follow the apiserver's (`spec.x: Invalid value: "foo": spec.x in body should match
//! '…'`), so ported upstream test expectations match.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use serde_json::{Map, Value};

use super::{
    Ctx, FieldError, child, index, is_dns1123_label, is_label_value, is_qualified_name, key,
};
use crate::api::manifest::{has_placeholder, json_type};

/// Applies the schema's `default`s to `value` as the apiserver does: a missing property with a
/// default is set (inside objects that exist), then defaults inside it apply. Every defaulted path
/// is appended to `defaulted`.
pub fn apply_defaults(schema: &Value, value: &mut Value, path: &str, defaulted: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, prop) in props {
                    let p = child(path, name);
                    if !map.contains_key(name)
                        && let Some(d) = prop.get("default")
                    {
                        map.insert(name.clone(), d.clone());
                        defaulted.push(p.clone());
                    }
                    if let Some(v) = map.get_mut(name) {
                        apply_defaults(prop, v, &p, defaulted);
                    }
                }
            }
            if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, v) in map.iter_mut() {
                    apply_defaults(ap, v, &key(path, k), defaulted);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    apply_defaults(item_schema, v, &index(path, i), defaulted);
                }
            }
        }
        _ => {}
    }
}

static REGEX_CACHE: LazyLock<Mutex<HashMap<String, Option<Regex>>>> =
    LazyLock::new(Default::default);

fn pattern_matches(pattern: &str, s: &str) -> bool {
    let mut cache = REGEX_CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let re = cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok());
    // An uncompilable pattern cannot reject anything (the apiserver would not have accepted the CRD).
    re.as_ref().is_none_or(|re| re.is_match(s))
}

fn type_error(path: &str, want: &str, value: &Value) -> FieldError {
    let have = json_type(value);
    FieldError::invalid_type(
        path,
        have,
        format!("{path} in body must be of type {want}: {have:?}"),
    )
}

fn type_matches(want: &str, value: &Value) -> bool {
    match want {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "number" => value.is_number(),
        _ => true,
    }
}

/// Validates `value` against `schema`, appending every error.
pub fn validate(
    schema: &Value,
    value: &Value,
    path: &str,
    ctx: &Ctx,
    errors: &mut Vec<FieldError>,
) {
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let ty = schema.get("type").and_then(Value::as_str);

    if value.is_null() {
        if schema.get("nullable") == Some(&Value::Bool(true)) || (preserve && ty.is_none()) {
            return;
        }
        errors.push(type_error(path, ty.unwrap_or("object"), value));
        return;
    }
    if int_or_string {
        if !(value.is_string() || type_matches("integer", value)) {
            errors.push(type_error(path, "integer or string", value));
            return;
        }
    } else if let Some(t) = ty
        && !type_matches(t, value)
    {
        // `replicas: ${REPLICAS}` in a template is a string standing for a number.
        let placeholder = value.as_str().is_some_and(|s| ctx.exempt(s));
        if !placeholder {
            errors.push(type_error(path, t, value));
        }
        return;
    }

    match value {
        Value::String(s) => check_string(schema, s, value, path, ctx, errors),
        Value::Number(_) => check_number(schema, value, path, errors),
        Value::Bool(_) => check_enum(schema, value, path, errors),
        Value::Array(items) => check_array(schema, items, path, ctx, errors),
        Value::Object(map) => check_object(schema, map, path, preserve, ctx, errors),
        Value::Null => {}
    }
}

fn check_enum(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        let found = allowed
            .iter()
            .any(|a| a == value || (a.as_f64().is_some() && a.as_f64() == value.as_f64()));
        if !found {
            errors.push(FieldError::not_supported(path, value, allowed));
        }
    }
}

fn check_string(
    schema: &Value,
    s: &str,
    value: &Value,
    path: &str,
    ctx: &Ctx,
    errors: &mut Vec<FieldError>,
) {
    if ctx.exempt(s) {
        return;
    }
    check_enum(schema, value, path, errors);
    let len = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        errors.push(FieldError::invalid(
            path,
            value,
            format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        errors.push(FieldError::too_long(path, max));
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str)
        && !pattern_matches(p, s)
    {
        errors.push(FieldError::invalid(
            path,
            value,
            format!("{path} in body should match '{p}'"),
        ));
    }
    if schema.get("format").and_then(Value::as_str) == Some("date-time")
        && s.parse::<jiff::Timestamp>().is_err()
    {
        errors.push(FieldError::invalid(
            path,
            value,
            format!("{path} in body must be of type date-time: {s:?}"),
        ));
    }
}

fn check_number(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    check_enum(schema, value, path, errors);
    let Some(n) = value.as_f64() else { return };
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
        && n < min
    {
        errors.push(FieldError::invalid(
            path,
            value,
            format!("{path} in body should be greater than or equal to {min}"),
        ));
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
        && n > max
    {
        errors.push(FieldError::invalid(
            path,
            value,
            format!("{path} in body should be less than or equal to {max}"),
        ));
    }
    let bounds = match schema.get("format").and_then(Value::as_str) {
        Some("int32") => Some((i32::MIN as f64, i32::MAX as f64)),
        Some("int64") => Some((i64::MIN as f64, i64::MAX as f64)),
        _ => None,
    };
    if let Some((lo, hi)) = bounds
        && (n < lo || n > hi)
    {
        errors.push(FieldError::invalid(
            path,
            value,
            format!("{path} in body is out of range"),
        ));
    }
}

fn check_array(
    schema: &Value,
    items: &[Value],
    path: &str,
    ctx: &Ctx,
    errors: &mut Vec<FieldError>,
) {
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && (items.len() as u64) < min
    {
        errors.push(FieldError::invalid(
            path,
            &Value::from(items.len()),
            format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && (items.len() as u64) > max
    {
        errors.push(FieldError::too_many(path, items.len(), max));
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            validate(item_schema, item, &index(path, i), ctx, errors);
        }
    }
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut seen: Vec<Vec<&Value>> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let Some(obj) = item.as_object() else {
                    continue;
                };
                let id: Vec<&Value> = keys
                    .iter()
                    .map(|k| obj.get(*k).unwrap_or(&Value::Null))
                    .collect();
                if seen.contains(&id) {
                    let shown: Map<String, Value> = keys
                        .iter()
                        .zip(&id)
                        .map(|(k, v)| (k.to_string(), (*v).clone()))
                        .collect();
                    errors.push(FieldError::duplicate(index(path, i), &Value::Object(shown)));
                } else {
                    seen.push(id);
                }
            }
        }
        Some("set") => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    errors.push(FieldError::duplicate(index(path, i), item));
                }
            }
        }
        _ => {}
    }
}

fn check_object(
    schema: &Value,
    map: &Map<String, Value>,
    path: &str,
    preserve: bool,
    ctx: &Ctx,
    errors: &mut Vec<FieldError>,
) {
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                errors.push(FieldError::required(child(path, r), ""));
            }
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    for (name, v) in map {
        if path.is_empty() && name == "metadata" {
            // ObjectMeta: checked by `validate_metadata`, not by the CRD schema.
            continue;
        }
        match props.and_then(|p| p.get(name)) {
            Some(prop) => validate(prop, v, &child(path, name), ctx, errors),
            None => match additional {
                Some(ap) if ap.is_object() => validate(ap, v, &key(path, name), ctx, errors),
                Some(Value::Bool(true)) => {}
                _ if preserve => {}
                _ if props.is_none() && schema.get("type").is_none() => {}
                _ => errors.push(FieldError::unknown_field(child(path, name))),
            },
        }
    }
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
        && (map.len() as u64) < min
    {
        errors.push(FieldError::invalid(
            path,
            &Value::from(map.len()),
            format!("{path} in body should have at least {min} properties"),
        ));
    }
}

/// Validates `metadata` as the apiserver does for custom resources: a name (or generateName)
/// that is a valid path segment, a DNS-label namespace, well-formed labels and annotations.
/// Returns warnings (e.g. a namespace on a cluster-scoped kind).
pub fn validate_metadata(
    meta: Option<&Value>,
    namespaced: bool,
    ctx: &Ctx,
    errors: &mut Vec<FieldError>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let Some(meta) = meta else {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
        return warnings;
    };
    let Some(m) = meta.as_object() else {
        errors.push(type_error("metadata", "object", meta));
        return warnings;
    };
    let str_field = |name: &str, errors: &mut Vec<FieldError>| -> Option<String> {
        match m.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                errors.push(type_error(&child("metadata", name), "string", other));
                None
            }
        }
    };
    let name = str_field("name", errors);
    let generate_name = str_field("generateName", errors);
    match (&name, &generate_name) {
        (None, None) => errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )),
        (Some(n), _) if n.is_empty() && generate_name.is_none() => errors.push(
            FieldError::required("metadata.name", "name or generateName is required"),
        ),
        _ => {}
    }
    for (field, v) in [("name", &name), ("generateName", &generate_name)] {
        if let Some(v) = v
            && !v.is_empty()
            && !ctx.exempt(v)
            && let Some(reason) = path_segment_problem(v, field == "generateName")
        {
            errors.push(FieldError::invalid_str(child("metadata", field), v, reason));
        }
    }
    if let Some(ns) = str_field("namespace", errors) {
        if !namespaced {
            warnings.push(format!(
                "metadata.namespace {ns:?} is ignored: the kind is cluster-scoped"
            ));
        } else if !ctx.exempt(&ns) && !is_dns1123_label(&ns) {
            errors.push(FieldError::invalid_str(
                "metadata.namespace",
                &ns,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            ));
        }
    }
    for (field, check_values) in [("labels", true), ("annotations", false)] {
        let path = child("metadata", field);
        match m.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(entries)) => {
                for (k, v) in entries {
                    if !ctx.exempt(k) && !is_qualified_name(k) {
                        errors.push(FieldError::invalid_str(
                            &path,
                            k,
                            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (with an optional DNS subdomain prefix and '/')",
                        ));
                    }
                    match v {
                        Value::String(s) => {
                            if check_values && !ctx.exempt(s) && !is_label_value(s) {
                                errors.push(FieldError::invalid_str(
                                    key(&path, k),
                                    s,
                                    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at most 63 characters)",
                                ));
                            }
                        }
                        other => errors.push(type_error(&key(&path, k), "string", other)),
                    }
                }
            }
            Some(other) => errors.push(type_error(&path, "object", other)),
        }
    }
    if let Some(f) = m.get("finalizers")
        && !f.is_null()
    {
        match f.as_array() {
            Some(list) => {
                for (i, item) in list.iter().enumerate() {
                    match item.as_str() {
                        Some(s) if is_qualified_name(s) || ctx.exempt(s) => {}
                        Some(s) => errors.push(FieldError::invalid_str(
                            index("metadata.finalizers", i),
                            s,
                            "a finalizer must be a qualified name",
                        )),
                        None => errors.push(type_error(
                            &index("metadata.finalizers", i),
                            "string",
                            item,
                        )),
                    }
                }
            }
            None => errors.push(type_error("metadata.finalizers", "array", f)),
        }
    }
    warnings
}

/// Why a custom resource name is not a valid path segment (the apiserver's only rule for CR names).
fn path_segment_problem(name: &str, prefix: bool) -> Option<String> {
    if !prefix && (name == "." || name == "..") {
        return Some(format!("may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            return Some(format!("may not contain '{bad}'"));
        }
    }
    if name.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    None
}

/// True if any string in `value` holds a placeholder.
pub fn contains_placeholder(value: &Value) -> bool {
    match value {
        Value::String(s) => has_placeholder(s),
        Value::Array(a) => a.iter().any(contains_placeholder),
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| has_placeholder(k) || contains_placeholder(v)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errs(schema: Value, value: Value) -> Vec<String> {
        let mut e = Vec::new();
        validate(&schema, &value, "spec", &Ctx::default(), &mut e);
        e.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn types_enums_required_unknown() {
        let schema = json!({"type": "object", "required": ["a"], "properties": {
            "a": {"type": "string", "enum": ["x", "y"]},
            "n": {"type": "integer", "minimum": 1, "format": "int32"},
            "l": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
                  "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "minItems": 1},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "p": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }});
        assert_eq!(
            errs(schema.clone(), json!({"a": "x", "p": {"any": [1]}})),
            Vec::<String>::new()
        );
        assert_eq!(errs(schema.clone(), json!({})), ["spec.a: Required value"]);
        assert_eq!(
            errs(schema.clone(), json!({"a": "z"})),
            ["spec.a: Unsupported value: \"z\": supported values: \"x\", \"y\""]
        );
        assert_eq!(
            errs(schema.clone(), json!({"a": "x", "b": 1})),
            ["spec.b: Unknown field"]
        );
        assert_eq!(
            errs(schema.clone(), json!({"a": "x", "n": "3"})),
            [
                "spec.n: Invalid value: \"string\": spec.n in body must be of type integer: \"string\""
            ]
        );
        assert_eq!(
            errs(schema.clone(), json!({"a": "x", "n": 0})),
            ["spec.n: Invalid value: 0: spec.n in body should be greater than or equal to 1"]
        );
        assert_eq!(
            errs(
                schema.clone(),
                json!({"a": "x", "l": [{"name": "a"}, {"name": "a"}]})
            ),
            ["spec.l[1]: Duplicate value: {\"name\":\"a\"}"]
        );
        assert_eq!(
            errs(schema.clone(), json!({"a": "x", "l": []})),
            ["spec.l: Invalid value: 0: spec.l in body should have at least 1 items"]
        );
        assert_eq!(
            errs(schema.clone(), json!({"a": "x", "m": {"k": 1}})),
            [
                "spec.m[k]: Invalid value: \"integer\": spec.m[k] in body must be of type string: \"integer\""
            ]
        );
    }

    #[test]
    fn placeholders_skip_formats_only_when_allowed() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "s": {"type": "string", "pattern": "^[a-z]+$"}}});
        let v = json!({"n": "${N}", "s": "${S}"});
        let mut e = Vec::new();
        validate(
            &schema,
            &v,
            "spec",
            &Ctx {
                allow_placeholders: true,
                ..Ctx::default()
            },
            &mut e,
        );
        assert!(e.is_empty(), "{e:?}");
        validate(&schema, &v, "spec", &Ctx::default(), &mut e);
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn defaults_nest() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "strategy": {"type": "object", "default": {}, "properties": {"type": {"type": "string", "default": "RollingUpdate"}}},
            "replicas": {"type": "integer", "default": 3}}}}});
        let mut v = json!({"spec": {}});
        let mut d = Vec::new();
        apply_defaults(&schema, &mut v, "", &mut d);
        assert_eq!(
            v,
            json!({"spec": {"strategy": {"type": "RollingUpdate"}, "replicas": 3}})
        );
        assert_eq!(d, ["spec.replicas", "spec.strategy", "spec.strategy.type"]);
        // No defaults inside a missing parent.
        let mut v = json!({});
        apply_defaults(&schema, &mut v, "", &mut Vec::new());
        assert_eq!(v, json!({}));
    }

    #[test]
    fn metadata_rules() {
        let mut e = Vec::new();
        let w = validate_metadata(
            Some(&json!({"name": "a", "namespace": "x"})),
            false,
            &Ctx::default(),
            &mut e,
        );
        assert!(e.is_empty());
        assert_eq!(w.len(), 1);
        validate_metadata(
            Some(&json!({"namespace": "Bad_NS", "labels": {"a": "-x"}})),
            true,
            &Ctx::default(),
            &mut e,
        );
        let shown: Vec<String> = e.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 3, "{shown:?}");
        assert!(shown[0].starts_with("metadata.name: Required value"));
        let mut e = Vec::new();
        validate_metadata(
            Some(&json!({"name": "${CLUSTER_NAME}", "namespace": "${NAMESPACE}"})),
            true,
            &Ctx {
                allow_placeholders: true,
                ..Ctx::default()
            },
            &mut e,
        );
        assert!(e.is_empty(), "{e:?}");
    }
}
