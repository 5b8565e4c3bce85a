//! What an admin does by hand (govc, the vSphere client) before zones can verify, done with
//! this crate's vCenter client: the tests' setup, never what they assert.
#![allow(dead_code)]

use vsphere_provider::vcenter::Client;
use vsphere_provider::vcenter::model::cluster::{ClusterGroup, GroupChange};
use vsphere_provider::vcenter::model::tags::CategorySpec;

/// What an admin does by hand before zones can verify: categories, tags, attachments.
pub async fn tag(c: &Client, category: &str, tag: &str, types: &[&str], objects: &[&str]) {
    let mut existing = None;
    for id in c.list_categories().await.unwrap() {
        if c.get_category(&id).await.unwrap().name == category {
            existing = Some(id);
        }
    }
    let cat = match existing {
        Some(id) => id,
        None => c
            .create_category(&CategorySpec {
                name: category.into(),
                description: String::new(),
                cardinality: "MULTIPLE".into(),
                associable_types: types.iter().map(|s| s.to_string()).collect(),
            })
            .await
            .unwrap(),
    };
    let tag_id = c.create_tag(tag, &cat, "").await.unwrap();
    attach_id(c, &tag_id, objects).await;
}

/// Attaches the existing tag `tag` of category `category` (made by hand or by autoConfigure) to
/// the objects at `objects` (inventory paths).
pub async fn attach(c: &Client, category: &str, tag: &str, objects: &[&str]) {
    for cid in c.list_categories().await.unwrap() {
        if c.get_category(&cid).await.unwrap().name != category {
            continue;
        }
        for id in c.list_tags_for_category(&cid).await.unwrap() {
            if c.get_tag(&id).await.unwrap().name == tag {
                return attach_id(c, &id, objects).await;
            }
        }
    }
    panic!("no tag {tag} in category {category}");
}

async fn attach_id(c: &Client, tag_id: &str, objects: &[&str]) {
    let inv = c.inventory().await.unwrap();
    for path in objects {
        let e = inv
            .at_path(path)
            .unwrap_or_else(|| panic!("{path} not in inventory"));
        c.attach_tag(tag_id, &e.moref).await.unwrap();
    }
}

/// A host group `name` in the compute cluster at `cluster` (an inventory path) holding the hosts
/// at `hosts`.
pub async fn host_group(c: &Client, cluster: &str, name: &str, hosts: &[&str]) {
    let inv = c.inventory().await.unwrap();
    let moref = |path: &str| {
        inv.at_path(path)
            .unwrap_or_else(|| panic!("{path} not in inventory"))
            .moref
            .clone()
    };
    let t = c
        .reconfigure_cluster(
            &moref(cluster),
            &[],
            &[GroupChange::Add(ClusterGroup::Host {
                name: name.into(),
                hosts: hosts.iter().map(|h| moref(h)).collect(),
            })],
        )
        .await
        .unwrap();
    c.wait_task(&t, std::time::Duration::from_secs(10))
        .await
        .unwrap();
}
