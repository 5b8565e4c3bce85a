//! `tagIDs` of the Cluster API machine kinds (VSphereMachine, VSphereVM, VSphereMachineTemplate),
//! which CAPV does not validate at all: each must be a tag ID in the one form vCenter uses
//! ([`crate::vcenter::model::tag_id`]), because the client puts it in a REST path. The
//! OpenShift provider spec checks its own `tagIDs` with the same rule (`provider_spec`).
//!
//! Read from the JSON rather than the typed object, so the check is one call for every kind and
//! stays apart from the kinds' other rules. On update only a changed list is judged: an object
//! admitted before this rule keeps working (the controllers' own writes, a finalizer removal).

use serde_json::Value;

use super::{Ctx, FieldError, index};
use crate::api::Kind;
use crate::vcenter::model::tag_id::{TAG_ID_FORMAT, is_tag_id};

/// Where a kind keeps its `tagIDs`: JSON pointer and field path; `None` for kinds without.
fn location(kind: Kind) -> Option<(&'static str, &'static str)> {
    match kind {
        Kind::VSphereMachine | Kind::VSphereVM => Some(("/spec/tagIDs", "spec.tagIDs")),
        Kind::VSphereMachineTemplate => {
            Some(("/spec/template/spec/tagIDs", "spec.template.spec.tagIDs"))
        }
        _ => None,
    }
}

/// Errors for the `tagIDs` of `new` (an update when `old` is given), each naming the field path
/// and index.
pub fn validate(kind: Kind, new: &Value, old: Option<&Value>, ctx: &Ctx) -> Vec<FieldError> {
    let Some((pointer, path)) = location(kind) else {
        return Vec::new();
    };
    let tags = new.pointer(pointer);
    if old.is_some_and(|o| o.pointer(pointer) == tags) {
        return Vec::new();
    }
    let Some(tags) = tags.and_then(Value::as_array) else {
        return Vec::new();
    };
    tags.iter()
        .enumerate()
        // A non-string is the schema's to report.
        .filter_map(|(i, t)| t.as_str().map(|s| (i, s)))
        .filter(|(_, s)| !ctx.exempt(s) && !is_tag_id(s))
        .map(|(i, s)| {
            FieldError::invalid_str(
                index(path, i),
                s,
                format!("tag ID must be in the format of {TAG_ID_FORMAT}"),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const GOOD: &str = "urn:vmomi:InventoryServiceTag:bd0346ac-2b03-4125-8ad6-2ddb3d0ec350:GLOBAL";

    fn paths(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(|e| e.path.clone()).collect()
    }

    #[test]
    fn every_bad_tag_is_named_by_field_path_and_index() {
        let evil = format!("{GOOD}/../../vcenter/vm/vm-42/power?action=stop&x=");
        let machine = json!({"spec": {"tagIDs": [GOOD, evil, "tag-1"]}});
        let errors = validate(Kind::VSphereMachine, &machine, None, &Ctx::default());
        assert_eq!(paths(&errors), ["spec.tagIDs[1]", "spec.tagIDs[2]"]);
        assert!(
            errors[0].to_string().ends_with(
                "tag ID must be in the format of urn:vmomi:InventoryServiceTag:<UUID>:GLOBAL"
            ),
            "{}",
            errors[0]
        );
        let vm = json!({"spec": {"tagIDs": ["a b"]}});
        assert_eq!(
            paths(&validate(Kind::VSphereVM, &vm, None, &Ctx::default())),
            ["spec.tagIDs[0]"]
        );
        let template = json!({"spec": {"template": {"spec": {"tagIDs": [GOOD, "x?y"]}}}});
        assert_eq!(
            paths(&validate(
                Kind::VSphereMachineTemplate,
                &template,
                None,
                &Ctx::default()
            )),
            ["spec.template.spec.tagIDs[1]"]
        );
    }

    #[test]
    fn good_missing_and_unchanged_lists_pass() {
        let ctx = Ctx::default();
        let good = json!({"spec": {"tagIDs": [GOOD]}});
        assert!(validate(Kind::VSphereMachine, &good, None, &ctx).is_empty());
        assert!(validate(Kind::VSphereMachine, &json!({"spec": {}}), None, &ctx).is_empty());
        // Other kinds have no tagIDs of their own (Machines: the provider spec's rules).
        let bad = json!({"spec": {"tagIDs": ["x/y"]}});
        assert!(validate(Kind::Machine, &bad, None, &ctx).is_empty());
        // An object admitted before the rule may still be updated if its tags stay as they were.
        assert!(validate(Kind::VSphereMachine, &bad, Some(&bad), &ctx).is_empty());
        let changed = json!({"spec": {"tagIDs": ["x/y", "z"]}});
        assert_eq!(
            paths(&validate(Kind::VSphereMachine, &changed, Some(&bad), &ctx)),
            ["spec.tagIDs[0]", "spec.tagIDs[1]"]
        );
    }

    #[test]
    fn placeholders_pass_only_where_the_context_allows_them() {
        let templated = json!({"spec": {"tagIDs": ["${TAG}"]}});
        let lenient = Ctx {
            allow_placeholders: true,
            ..Ctx::default()
        };
        assert!(validate(Kind::VSphereVM, &templated, None, &lenient).is_empty());
        assert_eq!(
            validate(Kind::VSphereVM, &templated, None, &Ctx::default()).len(),
            1
        );
    }
}
