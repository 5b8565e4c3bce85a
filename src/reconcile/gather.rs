//! Reading what the zone planner needs from one vCenter: one inventory read, one
//! `configurationEx` read for the clusters that have host groups, one batched read of the tags
//! attached to the objects the failure domains name, and only the tag names not yet known.
use std::collections::{BTreeMap, BTreeSet};

use crate::api::failure_domain::VSphereFailureDomain;
use crate::plan::view::{VcenterView, needs};
use crate::vcenter::tags::TagCatalog;
use crate::vcenter::{Client, Result};

/// Gather the view for these failure domains. `tags` is the caller's cache: it is filled and
/// a copy lands in the view.
pub async fn gather<'a>(
    client: &Client,
    fds: impl IntoIterator<Item = &'a VSphereFailureDomain> + Clone,
    tags: &mut TagCatalog,
) -> Result<VcenterView> {
    let inventory = client.inventory_entities().await?;
    let needs = needs(&inventory, fds);
    let clusters: Vec<_> = needs.clusters.iter().cloned().collect();
    let cluster_configs = if clusters.is_empty() {
        BTreeMap::new()
    } else {
        client.cluster_configs(&clusters).await?
    };
    let objects: Vec<_> = needs.tagged_objects.iter().cloned().collect();
    let attached = client.list_attached_tags_on_objects(&objects).await?;
    let mut attachments: BTreeMap<_, BTreeSet<String>> = BTreeMap::new();
    let mut attached_ids = BTreeSet::new();
    for (obj, ids) in attached {
        attached_ids.extend(ids.iter().cloned());
        attachments.entry(obj).or_default().extend(ids);
    }
    client
        .fill_tag_catalog(tags, &needs.tags, &attached_ids)
        .await?;
    let tls_note = (client.endpoint().is_https()
        && *client.tls_policy() == crate::vcenter::TlsPolicy::Insecure)
        .then(|| "TLS certificate verification is disabled (--insecure)".to_string());
    Ok(VcenterView {
        inventory,
        cluster_configs,
        tags: tags.clone(),
        attachments,
        tls_note,
    })
}
