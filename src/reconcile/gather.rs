//! Reading what the zone planner needs from one vCenter: one inventory read, then at once one
//! `configurationEx` read for the clusters that have host groups and one batched read of the tags
//! attached to the objects the failure domains name, then only the tag names not yet known (read
//! concurrently, [`Client::read_all`](crate::vcenter::Client)).
use std::collections::{BTreeMap, BTreeSet};

use crate::api::failure_domain::VSphereFailureDomain;
use crate::plan::view::{VcenterView, needs};
use crate::vcenter::model::tags::TagCatalog;
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
    let objects: Vec<_> = needs.tagged_objects.iter().cloned().collect();
    // Independent of each other (both need only the inventory): one latency, not two.
    let configs = async {
        if clusters.is_empty() {
            Ok(BTreeMap::new())
        } else {
            client.cluster_configs(&clusters).await
        }
    };
    let (cluster_configs, attached) =
        tokio::try_join!(configs, client.list_attached_tags_on_objects(&objects))?;
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
