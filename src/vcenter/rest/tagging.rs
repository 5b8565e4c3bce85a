//! Tag categories, tags and their attachment to inventory objects (vAPI `cis.tagging`): the
//! calls; the requests they send are `requests`.
pub(crate) mod requests;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::vcenter::client::Client;
use crate::vcenter::model::error::{Error, Result};
use crate::vcenter::model::moref::MoRef;
use crate::vcenter::model::tag_id::{is_tag_id, tag_id_error};
use crate::vcenter::model::tags::{Category, CategorySpec, Tag, null_as_empty};
use requests::Association;

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
        let req = requests::list_categories();
        let op = req.op;
        parse(self, op, self.rest(req).await?)
    }

    pub async fn get_category(&self, id: &str) -> Result<Category> {
        let req = requests::get_category(id);
        let op = req.op;
        parse(self, op, self.rest(req).await?)
    }

    /// Create a category; returns its id.
    pub async fn create_category(&self, spec: &CategorySpec) -> Result<String> {
        let req = requests::create_category(spec);
        let op = req.op;
        parse(self, op, self.rest(req).await?)
    }

    /// Replace the associable types of a category (vCenter only allows widening them).
    pub async fn update_category_types(&self, id: &str, associable_types: &[String]) -> Result<()> {
        self.rest(requests::update_category_types(id, associable_types))
            .await
            .map(drop)
    }

    pub async fn list_tags_for_category(&self, category_id: &str) -> Result<Vec<String>> {
        let req = requests::list_tags_for_category(category_id);
        let op = req.op;
        parse(self, op, self.rest(req).await?)
    }

    pub async fn get_tag(&self, id: &str) -> Result<Tag> {
        let req = requests::get_tag(id);
        let op = req.op;
        self.check_tag_id(op, id)?;
        parse(self, op, self.rest(req).await?)
    }

    /// Create a tag in a category; returns its id.
    pub async fn create_tag(
        &self,
        name: &str,
        category_id: &str,
        description: &str,
    ) -> Result<String> {
        let req = requests::create_tag(name, category_id, description);
        let op = req.op;
        parse(self, op, self.rest(req).await?)
    }

    /// Attach a tag; a no-op when already attached.
    pub async fn attach_tag(&self, tag_id: &str, obj: &MoRef) -> Result<()> {
        self.association(Association::Attach, tag_id, obj).await
    }

    /// Detach a tag; a no-op when not attached.
    pub async fn detach_tag(&self, tag_id: &str, obj: &MoRef) -> Result<()> {
        self.association(Association::Detach, tag_id, obj).await
    }

    async fn association(&self, which: Association, tag_id: &str, obj: &MoRef) -> Result<()> {
        let req = requests::association(which, tag_id, obj);
        self.check_tag_id(req.op, tag_id)?;
        self.rest(req).await.map(drop)
    }

    /// Tag ids attached to one object.
    pub async fn list_attached_tags(&self, obj: &MoRef) -> Result<Vec<String>> {
        let req = requests::list_attached_tags(obj);
        let op = req.op;
        parse(self, op, self.rest(req).await?)
    }

    /// Objects a tag is attached to.
    pub async fn list_attached_objects(&self, tag_id: &str) -> Result<Vec<MoRef>> {
        let req = requests::list_attached_objects(tag_id);
        let op = req.op;
        self.check_tag_id(op, tag_id)?;
        let list: Vec<ObjectId> = parse(self, op, self.rest(req).await?)?;
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
        let req = requests::list_attached_tags_on_objects(objects);
        let op = req.op;
        let entries: Vec<TagsOnObject> = parse(self, op, self.rest(req).await?)?;
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
        let req = requests::list_attached_objects_on_tags(tag_ids);
        let op = req.op;
        let entries: Vec<ObjectsOnTag> = parse(self, op, self.rest(req).await?)?;
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

    /// A tag ID the client puts in a URL must be one (the webhooks check tenants' `tagIDs`
    /// already; this holds for local mode, objects admitted before the rule, and any caller).
    fn check_tag_id(&self, op: &str, id: &str) -> Result<()> {
        if is_tag_id(id) {
            return Ok(());
        }
        Err(Error::InvalidRequest {
            server: self.server(),
            method: op.to_string(),
            reason: tag_id_error(id),
        })
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
