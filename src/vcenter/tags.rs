//! A snapshot of the tag categories and tags a reconcile cares about, with name lookups.
//!
//! vAPI has no "find tag by name": names cost one `get` per category and per tag. The catalog
//! first reads the tags found attached to the objects being reconciled (and their categories);
//! only names still unknown after that cost a category list and a tag list of the categories
//! concerned. It is kept between reconciles: an id is dropped when a change involving it fails,
//! and a tag re-created under the same name replaces the old entry.
use std::collections::{BTreeMap, BTreeSet};

use super::client::Client;
use super::error::RestErrorKind;
use super::error::{Error, Result};
use super::rest::{Category, Tag};

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

fn ignore_not_found<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        // Deleted between list and get.
        Err(Error::Rest {
            kind: RestErrorKind::NotFound,
            ..
        }) => Ok(None),
        Err(e) => Err(e),
    }
}

impl Client {
    /// Make sure `catalog` can answer for every `(category, tag)` name pair in `wanted` and for
    /// every tag id in `tag_ids` (the tags attached to the objects of interest), reading only
    /// what it does not know yet. With everything cached this costs no round trip; a name still
    /// missing after the attached tags are known costs one list (plus a get per id never seen),
    /// so tags created outside us are found on the next reconcile.
    pub async fn fill_tag_catalog(
        &self,
        catalog: &mut TagCatalog,
        wanted: &BTreeSet<(String, String)>,
        tag_ids: &BTreeSet<String>,
    ) -> Result<()> {
        // The gets are independent: each batch below goes out concurrently
        // ([`Client::read_all`]), so a cold catalog costs a few round-trip latencies, not one
        // per name. The requests are the same as one at a time: every id read once.
        //
        // Tags found attached first: usually they are the wanted ones, and reading them (and
        // their categories) costs less than listing every category and its tags. The first tag
        // of a category not known yet reads the category right after itself, as the loop did,
        // so the categories cost no wave of their own.
        let unknown: Vec<&str> = tag_ids
            .iter()
            .filter(|id| !catalog.tags.contains_key(*id))
            .map(String::as_str)
            .collect();
        let known = &catalog.categories;
        let claimed = std::sync::Mutex::new(BTreeSet::<String>::new());
        let claimed = &claimed;
        let found = self
            .read_all(unknown, |id| async move {
                let Some(t) = ignore_not_found(self.get_tag(id).await)? else {
                    return Ok(None);
                };
                let first = !known.contains_key(&t.category_id)
                    && claimed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(t.category_id.clone());
                let category = if first {
                    ignore_not_found(self.get_category(&t.category_id).await)?
                } else {
                    None
                };
                Ok(Some((t, category)))
            })
            .await?;
        for (t, category) in found.into_iter().flatten() {
            if let Some(c) = category {
                catalog.insert_category(c);
            }
            catalog.insert_tag(t);
        }

        if wanted.iter().any(|(c, _)| catalog.category(c).is_none()) {
            let ids = self.list_categories().await?;
            let unknown: Vec<&str> = ids
                .iter()
                .filter(|id| !catalog.categories.contains_key(*id))
                .map(String::as_str)
                .collect();
            self.read_categories(catalog, unknown).await?;
        }
        let stale: BTreeSet<String> = wanted
            .iter()
            .filter(|(c, t)| catalog.tag(c, t).is_none())
            .filter_map(|(c, _)| catalog.category(c).map(|c| c.id.clone()))
            .collect();
        let lists = self
            .read_all(&stale, |cat_id| self.list_tags_for_category(cat_id))
            .await?;
        let mut unknown: Vec<&String> = Vec::new();
        for id in lists.iter().flatten() {
            if !catalog.tags.contains_key(id) && !unknown.contains(&id) {
                unknown.push(id);
            }
        }
        let found = self
            .get_each(unknown.iter().map(|id| id.as_str()), |id| self.get_tag(id))
            .await?;
        found.into_iter().for_each(|t| catalog.insert_tag(t));
        catalog.complete.extend(stale);
        Ok(())
    }

    /// Read these categories concurrently into the catalog.
    async fn read_categories(&self, catalog: &mut TagCatalog, ids: Vec<&str>) -> Result<()> {
        let found = self.get_each(ids, |id| self.get_category(id)).await?;
        found.into_iter().for_each(|c| catalog.insert_category(c));
        Ok(())
    }

    /// `get` each id, concurrently ([`Client::read_all`]); one deleted since it was listed is
    /// skipped.
    async fn get_each<'a, T, Fut>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
        get: impl Fn(&'a str) -> Fut,
    ) -> Result<Vec<T>>
    where
        Fut: std::future::Future<Output = Result<T>>,
    {
        let found = self
            .read_all(ids, |id| {
                let read = get(id);
                async move { ignore_not_found(read.await) }
            })
            .await?;
        Ok(found.into_iter().flatten().collect())
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
}
