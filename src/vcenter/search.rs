//! SearchIndex lookups. Misses are `None` (vCenter answers an empty response, not a fault).
use super::client::Client;
use super::model::error::Result;
use super::model::moref::MoRef;
use super::soap::decode::Malformed;
use super::soap::{Node, Xml};
use super::stats::CallKind;

impl Client {
    /// `FindByInventoryPath` (`DC0/host/DC0_C0`; a leading `/` is ignored by vCenter).
    pub async fn find_by_inventory_path(&self, path: &str) -> Result<Option<MoRef>> {
        let si = self.service_content().await?.search_index.clone();
        let body = find_by_inventory_path_body(&si, path);
        let node = self
            .call("FindByInventoryPath", CallKind::Read, &body)
            .await?;
        found(&node, "FindByInventoryPath")
            .map_err(|m| m.into_error(self.server(), "FindByInventoryPath"))
    }

    /// `FindByUuid` for a VM by instance UUID (or BIOS UUID when `instance` is false).
    pub async fn find_vm_by_uuid(&self, uuid: &str, instance: bool) -> Result<Option<MoRef>> {
        let si = self.service_content().await?.search_index.clone();
        let body = find_vm_by_uuid_body("FindByUuid", &si, uuid, instance);
        let node = self.call("FindByUuid", CallKind::Read, &body).await?;
        found(&node, "FindByUuid").map_err(|m| m.into_error(self.server(), "FindByUuid"))
    }

    /// `FindAllByUuid`: every VM with this UUID (real vCenter only; vcsim lacks the method, so
    /// callers fall back to [`Client::find_vm_by_uuid`] on `MethodNotFound`).
    pub async fn find_all_vms_by_uuid(&self, uuid: &str, instance: bool) -> Result<Vec<MoRef>> {
        let si = self.service_content().await?.search_index.clone();
        let body = find_vm_by_uuid_body("FindAllByUuid", &si, uuid, instance);
        let node = self.call("FindAllByUuid", CallKind::Read, &body).await?;
        node.children_named("returnval")
            .map(|r| MoRef::decode(r, "FindAllByUuid returnval"))
            .collect::<Result<_, Malformed>>()
            .map_err(|m| m.into_error(self.server(), "FindAllByUuid"))
    }
}

/// The `FindByInventoryPath` request (`DC0/host/DC0_C0`, a leading `/` dropped).
pub(crate) fn find_by_inventory_path_body(search_index: &MoRef, path: &str) -> String {
    let mut x = Xml::request("FindByInventoryPath", search_index);
    x.text("inventoryPath", path.trim_start_matches('/'));
    x.finish("FindByInventoryPath")
}

/// The `FindByUuid` or `FindAllByUuid` (`method`) request for a VM.
pub(crate) fn find_vm_by_uuid_body(
    method: &str,
    search_index: &MoRef,
    uuid: &str,
    instance: bool,
) -> String {
    let mut x = Xml::request(method, search_index);
    x.text("uuid", uuid);
    x.text("vmSearch", "true");
    x.text("instanceUuid", if instance { "true" } else { "false" });
    x.finish(method)
}

/// A search answer: no `returnval` is a miss; one that is not a moref is an error, not a miss.
fn found(response: &Node, method: &str) -> Result<Option<MoRef>, Malformed> {
    response
        .child("returnval")
        .map(|r| MoRef::decode(r, &format!("{method} returnval")))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::soap::xml::parse;

    #[test]
    fn a_returnval_that_is_not_a_moref_is_an_error_not_a_miss() {
        let hit = parse(r#"<R><returnval type="Folder">group-v3</returnval></R>"#).unwrap();
        assert_eq!(
            found(&hit, "FindByInventoryPath").unwrap(),
            Some(MoRef::new("Folder", "group-v3"))
        );
        assert_eq!(found(&parse("<R/>").unwrap(), "FindByUuid").unwrap(), None);
        let bad = parse("<R><returnval>group-v3</returnval></R>").unwrap();
        assert_eq!(
            found(&bad, "FindByUuid").unwrap_err().to_string(),
            "FindByUuid returnval is not a managed object reference (no type)"
        );
    }
}
