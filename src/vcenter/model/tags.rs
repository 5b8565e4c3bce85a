//! Tag categories and tags (vAPI `cis.tagging`), and a catalog of the ones a reconcile cares
//! about with name lookups. Read and written by `vcenter::rest::tagging`; the catalog is filled
//! by `vcenter::tags`.
//!
//! vAPI has no "find tag by name": names cost one `get` per category and per tag, so the
//! catalog is kept between reconciles: an id is dropped when a change involving it fails, and a
//! tag re-created under the same name replaces the old entry.
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Category {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// `SINGLE` or `MULTIPLE`.
    #[serde(default)]
    pub cardinality: String,
    /// Empty means every type.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub associable_types: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tag {
    pub id: String,
    pub name: String,
    pub category_id: String,
    #[serde(default)]
    pub description: String,
}

/// What to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CategorySpec {
    pub name: String,
    pub description: String,
    pub cardinality: String,
    pub associable_types: Vec<String>,
}

pub(crate) fn null_as_empty<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// Categories and tags by id, with name indexes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagCatalog {
    categories: BTreeMap<String, Category>,
    tags: BTreeMap<String, Tag>,
    /// Categories whose tag list was read completely.
    complete: BTreeSet<String>,
}

impl TagCatalog {
    pub fn category(&self, name: &str) -> Option<&Category> {
        self.categories.values().find(|c| c.name == name)
    }

    pub fn category_by_id(&self, id: &str) -> Option<&Category> {
        self.categories.get(id)
    }

    pub fn tag_by_id(&self, id: &str) -> Option<&Tag> {
        self.tags.get(id)
    }

    /// The tag named `tag` in the category named `category`.
    pub fn tag(&self, category: &str, tag: &str) -> Option<&Tag> {
        let cat = self.category(category)?;
        self.tags
            .values()
            .find(|t| t.category_id == cat.id && t.name == tag)
    }

    /// Whether the tag list of this category is known completely, so "not found" is definite.
    pub fn is_complete(&self, category: &str) -> bool {
        self.category(category)
            .is_some_and(|c| self.complete.contains(&c.id))
    }

    /// Whether the tag with this id is known.
    pub fn has_tag(&self, id: &str) -> bool {
        self.tags.contains_key(id)
    }

    /// Whether the category with this id is known.
    pub fn has_category(&self, id: &str) -> bool {
        self.categories.contains_key(id)
    }

    /// Record that the tag lists of these categories (by id) were read completely.
    pub fn mark_complete(&mut self, category_ids: impl IntoIterator<Item = String>) {
        self.complete.extend(category_ids);
    }

    pub fn insert_category(&mut self, c: Category) {
        self.categories.insert(c.id.clone(), c);
    }

    /// Record a category created by us: it has no tags yet.
    pub fn insert_new_category(&mut self, c: Category) {
        self.complete.insert(c.id.clone());
        self.insert_category(c);
    }

    /// Add a tag; an older entry with the same name in the same category (deleted and
    /// re-created outside us, so a new id) is dropped.
    pub fn insert_tag(&mut self, t: Tag) {
        self.tags.retain(|id, old| {
            *id == t.id || old.category_id != t.category_id || old.name != t.name
        });
        self.tags.insert(t.id.clone(), t);
    }

    pub fn categories(&self) -> impl Iterator<Item = &Category> {
        self.categories.values()
    }

    pub fn tags(&self) -> impl Iterator<Item = &Tag> {
        self.tags.values()
    }
}

impl TagCatalog {
    /// Forget a tag or category vCenter says is gone, so the next fill reads it again.
    pub fn forget(&mut self, id: &str) {
        self.tags.remove(id);
        if self.categories.remove(id).is_some() {
            self.complete.remove(id);
            self.tags.retain(|_, t| t.category_id != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat(id: &str, name: &str) -> Category {
        Category {
            id: id.into(),
            name: name.into(),
            description: String::new(),
            cardinality: "MULTIPLE".into(),
            associable_types: vec![],
        }
    }

    fn tag(id: &str, name: &str, category: &str) -> Tag {
        Tag {
            id: id.into(),
            name: name.into(),
            category_id: category.into(),
            description: String::new(),
        }
    }

    #[test]
    fn tags_are_found_only_in_their_own_category() {
        let mut c = TagCatalog::default();
        c.insert_category(cat("c1", "k8s-zone"));
        c.insert_category(cat("c2", "other"));
        c.insert_tag(tag("t1", "zone-a", "c2"));
        assert!(c.tag("k8s-zone", "zone-a").is_none());
        assert_eq!(c.tag("other", "zone-a").unwrap().id, "t1");
        assert!(!c.is_complete("k8s-zone"));
        c.insert_new_category(cat("c3", "fresh"));
        assert!(c.is_complete("fresh"));
    }

    #[test]
    fn categories_decode_with_missing_optional_fields() {
        // vcsim omits an empty description and used_by.
        let c: Category = serde_json::from_str(
            r#"{"id":"urn:c","name":"k8s-zone","cardinality":"SINGLE","associable_types":["ClusterComputeResource"]}"#,
        )
        .unwrap();
        assert_eq!(c.description, "");
        assert_eq!(c.associable_types, vec!["ClusterComputeResource"]);
        let c: Category =
            serde_json::from_str(r#"{"id":"urn:c","name":"x","associable_types":null}"#).unwrap();
        assert!(c.associable_types.is_empty());
    }
}
