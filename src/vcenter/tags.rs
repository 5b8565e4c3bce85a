//! Filling a [`TagCatalog`] (`model::tags`) with what a reconcile needs, reading only what it
//! does not know yet: the tags found attached to the objects being reconciled (and their
//! categories) first; only names still unknown after that cost a category list and a tag list
//! of the categories concerned.
use std::collections::BTreeSet;

use super::client::Client;
use super::model::error::{Error, RestErrorKind, Result};
use super::model::tags::TagCatalog;

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
            .filter(|id| !catalog.has_tag(id))
            .map(String::as_str)
            .collect();
        let known = &*catalog;
        let claimed = std::sync::Mutex::new(BTreeSet::<String>::new());
        let claimed = &claimed;
        let found = self
            .read_all(unknown, |id| async move {
                let Some(t) = ignore_not_found(self.get_tag(id).await)? else {
                    return Ok(None);
                };
                let first = !known.has_category(&t.category_id)
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
                .filter(|id| !catalog.has_category(id))
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
            if !catalog.has_tag(id) && !unknown.contains(&id) {
                unknown.push(id);
            }
        }
        let found = self
            .get_each(unknown.iter().map(|id| id.as_str()), |id| self.get_tag(id))
            .await?;
        found.into_iter().for_each(|t| catalog.insert_tag(t));
        catalog.mark_complete(stale);
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
