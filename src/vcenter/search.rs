//! SearchIndex lookups. Misses are `None` (vCenter answers an empty response, not a fault).
use super::client::Client;
use super::model::error::Result;
use super::model::moref::MoRef;
use super::soap::Xml;
use super::stats::CallKind;

impl Client {
    /// `FindByInventoryPath` (`DC0/host/DC0_C0`; a leading `/` is ignored by vCenter).
    pub async fn find_by_inventory_path(&self, path: &str) -> Result<Option<MoRef>> {
        let si = self.service_content().await?.search_index.clone();
        let mut x = Xml::request("FindByInventoryPath", &si);
        x.text("inventoryPath", path.trim_start_matches('/'));
        let node = self
            .call(
                "FindByInventoryPath",
                CallKind::Read,
                &x.finish("FindByInventoryPath"),
            )
            .await?;
        Ok(node.child("returnval").and_then(MoRef::from_node))
    }

    /// `FindByUuid` for a VM by instance UUID (or BIOS UUID when `instance` is false).
    pub async fn find_vm_by_uuid(&self, uuid: &str, instance: bool) -> Result<Option<MoRef>> {
        let si = self.service_content().await?.search_index.clone();
        let mut x = Xml::request("FindByUuid", &si);
        x.text("uuid", uuid);
        x.text("vmSearch", "true");
        x.text("instanceUuid", if instance { "true" } else { "false" });
        let node = self
            .call("FindByUuid", CallKind::Read, &x.finish("FindByUuid"))
            .await?;
        Ok(node.child("returnval").and_then(MoRef::from_node))
    }

    /// `FindAllByUuid`: every VM with this UUID (real vCenter only; vcsim lacks the method, so
    /// callers fall back to [`Client::find_vm_by_uuid`] on `MethodNotFound`).
    pub async fn find_all_vms_by_uuid(&self, uuid: &str, instance: bool) -> Result<Vec<MoRef>> {
        let si = self.service_content().await?.search_index.clone();
        let mut x = Xml::request("FindAllByUuid", &si);
        x.text("uuid", uuid);
        x.text("vmSearch", "true");
        x.text("instanceUuid", if instance { "true" } else { "false" });
        let node = self
            .call("FindAllByUuid", CallKind::Read, &x.finish("FindAllByUuid"))
            .await?;
        Ok(node
            .children_named("returnval")
            .filter_map(MoRef::from_node)
            .collect())
    }
}
