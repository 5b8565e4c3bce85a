//! The tagging requests in both dialects, as values (no I/O): what `Client`'s tagging calls send,
//! kept apart so the property tests can build every one of them from arbitrary ids.
use reqwest::Method;
use serde_json::{Value, json};

use crate::vcenter::model::moref::MoRef;
use crate::vcenter::model::tags::CategorySpec;
use crate::vcenter::rest::RestRequest;
use crate::vcenter::rest::path::RestPath;
use crate::vcenter::stats::CallKind;

const CATEGORY: &str = "cis/tagging/category";
const TAG: &str = "cis/tagging/tag";
const ASSOCIATION: &str = "cis/tagging/tag-association";

fn object_id(obj: &MoRef) -> Value {
    json!({"type": obj.kind, "id": obj.value})
}

/// `/rest` names an object by an `id:<id>` segment, `/api` by the bare id.
fn rest_id(id: &str) -> String {
    let mut segment = String::from("id:");
    segment.push_str(id);
    segment
}

/// A request whose body is the same in both dialects.
fn same_body(
    op: &'static str,
    kind: CallKind,
    method: Method,
    api: RestPath,
    rest: RestPath,
    body: Option<Value>,
) -> RestRequest {
    RestRequest {
        op,
        kind,
        method,
        api,
        api_body: body.clone(),
        rest,
        rest_body: body,
    }
}

pub(crate) fn list_categories() -> RestRequest {
    same_body(
        "rest:tagging.category.list",
        CallKind::Read,
        Method::GET,
        RestPath::new(CATEGORY),
        RestPath::new(CATEGORY),
        None,
    )
}

pub(crate) fn get_category(id: &str) -> RestRequest {
    same_body(
        "rest:tagging.category.get",
        CallKind::Read,
        Method::GET,
        RestPath::new(CATEGORY).value(id),
        RestPath::new(CATEGORY).value(rest_id(id)),
        None,
    )
}

/// `/rest` wraps the spec in `create_spec`.
pub(crate) fn create_category(spec: &CategorySpec) -> RestRequest {
    let body = json!({
        "name": spec.name,
        "description": spec.description,
        "cardinality": spec.cardinality,
        "associable_types": spec.associable_types,
    });
    RestRequest {
        op: "rest:tagging.category.create",
        kind: CallKind::Write,
        method: Method::POST,
        api: RestPath::new(CATEGORY),
        api_body: Some(body.clone()),
        rest: RestPath::new(CATEGORY),
        rest_body: Some(json!({ "create_spec": body })),
    }
}

/// `/rest` wraps the change in `update_spec`.
pub(crate) fn update_category_types(id: &str, associable_types: &[String]) -> RestRequest {
    let body = json!({ "associable_types": associable_types });
    RestRequest {
        op: "rest:tagging.category.update",
        kind: CallKind::Write,
        method: Method::PATCH,
        api: RestPath::new(CATEGORY).value(id),
        api_body: Some(body.clone()),
        rest: RestPath::new(CATEGORY).value(rest_id(id)),
        rest_body: Some(json!({ "update_spec": body })),
    }
}

/// Always the `id:` form on `/rest`: without it vcsim creates an empty-named tag.
pub(crate) fn list_tags_for_category(category_id: &str) -> RestRequest {
    same_body(
        "rest:tagging.tag.list-for-category",
        CallKind::Read,
        Method::POST,
        RestPath::new(TAG).query("action", "list-tags-for-category"),
        RestPath::new(TAG)
            .value(rest_id(category_id))
            .query("~action", "list-tags-for-category"),
        Some(json!({ "category_id": category_id })),
    )
}

pub(crate) fn get_tag(id: &str) -> RestRequest {
    same_body(
        "rest:tagging.tag.get",
        CallKind::Read,
        Method::GET,
        RestPath::new(TAG).value(id),
        RestPath::new(TAG).value(rest_id(id)),
        None,
    )
}

/// `/rest` wraps the spec in `create_spec`.
pub(crate) fn create_tag(name: &str, category_id: &str, description: &str) -> RestRequest {
    let body = json!({ "name": name, "description": description, "category_id": category_id });
    RestRequest {
        op: "rest:tagging.tag.create",
        kind: CallKind::Write,
        method: Method::POST,
        api: RestPath::new(TAG),
        api_body: Some(body.clone()),
        rest: RestPath::new(TAG),
        rest_body: Some(json!({ "create_spec": body })),
    }
}

/// Attach or detach one tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Association {
    Attach,
    Detach,
}

pub(crate) fn association(which: Association, tag_id: &str, obj: &MoRef) -> RestRequest {
    let (op, api_action, rest_action) = match which {
        Association::Attach => (
            "rest:tagging.association.attach",
            ("action", "attach"),
            ("~action", "attach"),
        ),
        Association::Detach => (
            "rest:tagging.association.detach",
            ("action", "detach"),
            ("~action", "detach"),
        ),
    };
    same_body(
        op,
        CallKind::Write,
        Method::POST,
        RestPath::new(ASSOCIATION)
            .value(tag_id)
            .query(api_action.0, api_action.1),
        RestPath::new(ASSOCIATION)
            .value(rest_id(tag_id))
            .query(rest_action.0, rest_action.1),
        Some(json!({ "object_id": object_id(obj) })),
    )
}

pub(crate) fn list_attached_tags(obj: &MoRef) -> RestRequest {
    same_body(
        "rest:tagging.association.list-attached-tags",
        CallKind::Read,
        Method::POST,
        RestPath::new(ASSOCIATION).query("action", "list-attached-tags"),
        RestPath::new(ASSOCIATION).query("~action", "list-attached-tags"),
        Some(json!({ "object_id": object_id(obj) })),
    )
}

/// vcsim requires a JSON body on `/rest`.
pub(crate) fn list_attached_objects(tag_id: &str) -> RestRequest {
    RestRequest {
        op: "rest:tagging.association.list-attached-objects",
        kind: CallKind::Read,
        method: Method::POST,
        api: RestPath::new(ASSOCIATION)
            .value(tag_id)
            .query("action", "list-attached-objects"),
        api_body: None,
        rest: RestPath::new(ASSOCIATION)
            .value(rest_id(tag_id))
            .query("~action", "list-attached-objects"),
        rest_body: Some(json!({})),
    }
}

pub(crate) fn list_attached_tags_on_objects(objects: &[MoRef]) -> RestRequest {
    let ids: Vec<Value> = objects.iter().map(object_id).collect();
    same_body(
        "rest:tagging.association.list-attached-tags-on-objects",
        CallKind::Read,
        Method::POST,
        RestPath::new(ASSOCIATION).query("action", "list-attached-tags-on-objects"),
        RestPath::new(ASSOCIATION).query("~action", "list-attached-tags-on-objects"),
        Some(json!({ "object_ids": ids })),
    )
}

pub(crate) fn list_attached_objects_on_tags(tag_ids: &[String]) -> RestRequest {
    same_body(
        "rest:tagging.association.list-attached-objects-on-tags",
        CallKind::Read,
        Method::POST,
        RestPath::new(ASSOCIATION).query("action", "list-attached-objects-on-tags"),
        RestPath::new(ASSOCIATION).query("~action", "list-attached-objects-on-tags"),
        Some(json!({ "tag_ids": tag_ids })),
    )
}
