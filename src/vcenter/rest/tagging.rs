//! Tag categories, tags and their attachment to inventory objects (vAPI `cis.tagging`).
use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use super::RestRequest;
use crate::vcenter::client::Client;
use crate::vcenter::model::error::{Error, Result};
use crate::vcenter::model::moref::MoRef;
use crate::vcenter::model::tags::{Category, CategorySpec, Tag, null_as_empty};
use crate::vcenter::stats::CallKind;

fn object_id(obj: &MoRef) -> Value {
    json!({"type": obj.kind, "id": obj.value})
}

fn parse<T: serde::de::DeserializeOwned>(client: &Client, op: &str, v: Value) -> Result<T> {
    decode(v).map_err(|e| Error::Decode {
        server: client.server(),
        method: op.to_string(),
        reason: e.to_string(),
    })
}

/// Decode an unwrapped answer (`null` is an empty list: vcsim answers one so).
pub(crate) fn decode<T: serde::de::DeserializeOwned>(v: Value) -> serde_json::Result<T> {
    let v = if v.is_null() { json!([]) } else { v };
    serde_json::from_value(v)
}

impl Client {
    pub async fn list_categories(&self) -> Result<Vec<String>> {
        let op = "rest:tagging.category.list";
        let v = self
            .rest(RestRequest {
                op,
                kind: CallKind::Read,
                method: Method::GET,
                api_path: "cis/tagging/category".into(),
                api_body: None,
                rest_path: "cis/tagging/category".into(),
                rest_body: None,
            })
            .await?;
        parse(self, op, v)
    }

    pub async fn get_category(&self, id: &str) -> Result<Category> {
        let op = "rest:tagging.category.get";
        let v = self
            .rest(RestRequest {
                op,
                kind: CallKind::Read,
                method: Method::GET,
                api_path: format!("cis/tagging/category/{id}"),
                api_body: None,
                rest_path: format!("cis/tagging/category/id:{id}"),
                rest_body: None,
            })
            .await?;
        parse(self, op, v)
    }

    /// Create a category; returns its id.
    pub async fn create_category(&self, spec: &CategorySpec) -> Result<String> {
        let op = "rest:tagging.category.create";
        let body = json!({
            "name": spec.name,
            "description": spec.description,
            "cardinality": spec.cardinality,
            "associable_types": spec.associable_types,
        });
        let v = self
            .rest(RestRequest {
                op,
                kind: CallKind::Write,
                method: Method::POST,
                api_path: "cis/tagging/category".into(),
                api_body: Some(body.clone()),
                rest_path: "cis/tagging/category".into(),
                rest_body: Some(json!({ "create_spec": body })),
            })
            .await?;
        parse(self, op, v)
    }

    /// Replace the associable types of a category (vCenter only allows widening them).
    pub async fn update_category_types(&self, id: &str, associable_types: &[String]) -> Result<()> {
        let body = json!({ "associable_types": associable_types });
        self.rest(RestRequest {
            op: "rest:tagging.category.update",
            kind: CallKind::Write,
            method: Method::PATCH,
            api_path: format!("cis/tagging/category/{id}"),
            api_body: Some(body.clone()),
            rest_path: format!("cis/tagging/category/id:{id}"),
            rest_body: Some(json!({ "update_spec": body })),
        })
        .await
        .map(drop)
    }

    pub async fn list_tags_for_category(&self, category_id: &str) -> Result<Vec<String>> {
        let op = "rest:tagging.tag.list-for-category";
        // Always the `id:` form on /rest: without it vcsim creates an empty-named tag.
        let v = self
            .rest(RestRequest {
                op,
                kind: CallKind::Read,
                method: Method::POST,
                api_path: "cis/tagging/tag?action=list-tags-for-category".into(),
                api_body: Some(json!({ "category_id": category_id })),
                rest_path: format!(
                    "cis/tagging/tag/id:{category_id}?~action=list-tags-for-category"
                ),
                rest_body: Some(json!({ "category_id": category_id })),
            })
            .await?;
        parse(self, op, v)
    }

    pub async fn get_tag(&self, id: &str) -> Result<Tag> {
        let op = "rest:tagging.tag.get";
        let v = self
            .rest(RestRequest {
                op,
                kind: CallKind::Read,
                method: Method::GET,
                api_path: format!("cis/tagging/tag/{id}"),
                api_body: None,
                rest_path: format!("cis/tagging/tag/id:{id}"),
                rest_body: None,
            })
            .await?;
        parse(self, op, v)
    }

    /// Create a tag in a category; returns its id.
    pub async fn create_tag(
        &self,
        name: &str,
        category_id: &str,
        description: &str,
    ) -> Result<String> {
        let op = "rest:tagging.tag.create";
        let body = json!({ "name": name, "description": description, "category_id": category_id });
        let v = self
            .rest(RestRequest {
                op,
                kind: CallKind::Write,
                method: Method::POST,
                api_path: "cis/tagging/tag".into(),
                api_body: Some(body.clone()),
                rest_path: "cis/tagging/tag".into(),
                rest_body: Some(json!({ "create_spec": body })),
            })
            .await?;
        parse(self, op, v)
    }

    /// Attach a tag; a no-op when already attached.
    pub async fn attach_tag(&self, tag_id: &str, obj: &MoRef) -> Result<()> {
        self.association("rest:tagging.association.attach", "attach", tag_id, obj)
            .await
    }

    /// Detach a tag; a no-op when not attached.
    pub async fn detach_tag(&self, tag_id: &str, obj: &MoRef) -> Result<()> {
        self.association("rest:tagging.association.detach", "detach", tag_id, obj)
            .await
    }

    async fn association(
        &self,
        op: &'static str,
        action: &str,
        tag_id: &str,
        obj: &MoRef,
    ) -> Result<()> {
        let body = json!({ "object_id": object_id(obj) });
        self.rest(RestRequest {
            op,
            kind: CallKind::Write,
            method: Method::POST,
            api_path: format!("cis/tagging/tag-association/{tag_id}?action={action}"),
            api_body: Some(body.clone()),
            rest_path: format!("cis/tagging/tag-association/id:{tag_id}?~action={action}"),
            rest_body: Some(body),
        })
        .await
        .map(drop)
    }

    /// Tag ids attached to one object.
    pub async fn list_attached_tags(&self, obj: &MoRef) -> Result<Vec<String>> {
        let op = "rest:tagging.association.list-attached-tags";
        let body = json!({ "object_id": object_id(obj) });
        let v = self
            .rest(RestRequest {
                op,
                kind: CallKind::Read,
                method: Method::POST,
                api_path: "cis/tagging/tag-association?action=list-attached-tags".into(),
                api_body: Some(body.clone()),
                rest_path: "cis/tagging/tag-association?~action=list-attached-tags".into(),
                rest_body: Some(body),
            })
            .await?;
        parse(self, op, v)
    }

    /// Objects a tag is attached to.
    pub async fn list_attached_objects(&self, tag_id: &str) -> Result<Vec<MoRef>> {
        let op = "rest:tagging.association.list-attached-objects";
        let v = self
            .rest(RestRequest {
                op,
                kind: CallKind::Read,
                method: Method::POST,
                api_path: format!(
                    "cis/tagging/tag-association/{tag_id}?action=list-attached-objects"
                ),
                api_body: None,
                // vcsim requires a JSON body here.
                rest_path: format!(
                    "cis/tagging/tag-association/id:{tag_id}?~action=list-attached-objects"
                ),
                rest_body: Some(json!({})),
            })
            .await?;
        let list: Vec<ObjectId> = parse(self, op, v)?;
        Ok(list.into_iter().map(ObjectId::into_moref).collect())
    }

    /// Tags on many objects in one round trip. Objects without tags map to an empty list.
    pub async fn list_attached_tags_on_objects(
        &self,
        objects: &[MoRef],
    ) -> Result<Vec<(MoRef, Vec<String>)>> {
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let op = "rest:tagging.association.list-attached-tags-on-objects";
        let ids: Vec<Value> = objects.iter().map(object_id).collect();
        let body = json!({ "object_ids": ids });
        let v = self
            .rest(RestRequest {
                op,
                kind: CallKind::Read,
                method: Method::POST,
                api_path: "cis/tagging/tag-association?action=list-attached-tags-on-objects".into(),
                api_body: Some(body.clone()),
                rest_path: "cis/tagging/tag-association?~action=list-attached-tags-on-objects"
                    .into(),
                rest_body: Some(body),
            })
            .await?;
        let entries: Vec<TagsOnObject> = parse(self, op, v)?;
        Ok(entries
            .into_iter()
            .map(|e| (e.object_id.into_moref(), e.tag_ids))
            .collect())
    }

    /// Objects of many tags in one round trip.
    pub async fn list_attached_objects_on_tags(
        &self,
        tag_ids: &[String],
    ) -> Result<Vec<(String, Vec<MoRef>)>> {
        if tag_ids.is_empty() {
            return Ok(Vec::new());
        }
        let op = "rest:tagging.association.list-attached-objects-on-tags";
        let body = json!({ "tag_ids": tag_ids });
        let v = self
            .rest(RestRequest {
                op,
                kind: CallKind::Read,
                method: Method::POST,
                api_path: "cis/tagging/tag-association?action=list-attached-objects-on-tags".into(),
                api_body: Some(body.clone()),
                rest_path: "cis/tagging/tag-association?~action=list-attached-objects-on-tags"
                    .into(),
                rest_body: Some(body),
            })
            .await?;
        let entries: Vec<ObjectsOnTag> = parse(self, op, v)?;
        Ok(entries
            .into_iter()
            .map(|e| {
                (
                    e.tag_id,
                    e.object_ids
                        .unwrap_or_default()
                        .into_iter()
                        .map(ObjectId::into_moref)
                        .collect(),
                )
            })
            .collect())
    }
}

/// One entry of `list-attached-tags-on-objects`.
#[derive(Debug, Deserialize)]
pub(crate) struct TagsOnObject {
    object_id: ObjectId,
    #[serde(default, deserialize_with = "null_as_empty")]
    tag_ids: Vec<String>,
}

/// One entry of `list-attached-objects-on-tags`.
#[derive(Debug, Deserialize)]
pub(crate) struct ObjectsOnTag {
    tag_id: String,
    #[serde(default)]
    object_ids: Option<Vec<ObjectId>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ObjectId {
    #[serde(rename = "type")]
    kind: String,
    id: String,
}

impl ObjectId {
    pub(crate) fn into_moref(self) -> MoRef {
        MoRef::new(self.kind, self.id)
    }
}
