//! The bulk inventory read: one `RetrievePropertiesEx` with a traversal from the root folder
//! returns every entity's name, type and parent (plus the VM properties controllers need),
//! whatever the inventory size; real vCenter pages it and [`Client::retrieve`] follows the
//! tokens. The snapshot and its path resolution are `model::inventory`.
use super::client::Client;
use super::model::error::Result;
use super::model::inventory::{Inventory, Record, VmInfo};
use super::property::{ObjectContent, PropertyFilter};
use super::soap::decode::Malformed;

/// Every container → child edge an inventory path can take (vcenter-wire.md §5).
const TRAVERSAL: &str = concat!(
    r#"<selectSet xsi:type="TraversalSpec"><name>folderToChild</name><type>Folder</type><path>childEntity</path><skip>false</skip>"#,
    r#"<selectSet><name>folderToChild</name></selectSet><selectSet><name>dcToVm</name></selectSet><selectSet><name>dcToHost</name></selectSet>"#,
    r#"<selectSet><name>dcToDs</name></selectSet><selectSet><name>dcToNet</name></selectSet><selectSet><name>crToHost</name></selectSet>"#,
    r#"<selectSet><name>crToRp</name></selectSet></selectSet>"#,
    r#"<selectSet xsi:type="TraversalSpec"><name>dcToVm</name><type>Datacenter</type><path>vmFolder</path><skip>false</skip><selectSet><name>folderToChild</name></selectSet></selectSet>"#,
    r#"<selectSet xsi:type="TraversalSpec"><name>dcToHost</name><type>Datacenter</type><path>hostFolder</path><skip>false</skip><selectSet><name>folderToChild</name></selectSet></selectSet>"#,
    r#"<selectSet xsi:type="TraversalSpec"><name>dcToDs</name><type>Datacenter</type><path>datastoreFolder</path><skip>false</skip><selectSet><name>folderToChild</name></selectSet></selectSet>"#,
    r#"<selectSet xsi:type="TraversalSpec"><name>dcToNet</name><type>Datacenter</type><path>networkFolder</path><skip>false</skip><selectSet><name>folderToChild</name></selectSet></selectSet>"#,
    r#"<selectSet xsi:type="TraversalSpec"><name>crToHost</name><type>ComputeResource</type><path>host</path><skip>false</skip></selectSet>"#,
    r#"<selectSet xsi:type="TraversalSpec"><name>crToRp</name><type>ComputeResource</type><path>resourcePool</path><skip>false</skip><selectSet><name>rpToRp</name></selectSet></selectSet>"#,
    r#"<selectSet xsi:type="TraversalSpec"><name>rpToRp</name><type>ResourcePool</type><path>resourcePool</path><skip>false</skip><selectSet><name>rpToRp</name></selectSet></selectSet>"#,
);

/// VM properties every machine reconcile needs, fetched in the same bulk read.
const VM_PATHS: &[&str] = &[
    // One key of extraConfig, not the whole map (it holds the Ignition payload).
    r#"config.extraConfig["vsphere-provider.machine"]"#,
    r#"config.extraConfig["vsphere-provider.guest-metadata"]"#,
    "config.instanceUuid",
    "config.uuid",
    "config.template",
    "runtime.powerState",
    "runtime.host",
    "resourcePool",
    "guest.ipAddress",
];

/// The keyed read of `model::inventory::MACHINE_IDENTITY_KEY` (the first of [`VM_PATHS`]).
const IDENTITY_PATH: &str = r#"config.extraConfig["vsphere-provider.machine"]"#;
/// The keyed read of `model::inventory::GUEST_METADATA_KEY`.
const GUEST_METADATA_PATH: &str = r#"config.extraConfig["vsphere-provider.guest-metadata"]"#;

impl Client {
    /// The whole inventory in one read (plus continuation pages on real vCenter), with the VM
    /// properties machine reconciles need.
    pub async fn inventory(&self) -> Result<Inventory> {
        self.read_inventory(true).await
    }

    /// Names, types and parents only: what zone verification needs (a smaller answer on an
    /// estate with thousands of VMs).
    pub async fn inventory_entities(&self) -> Result<Inventory> {
        self.read_inventory(false).await
    }

    async fn read_inventory(&self, with_vms: bool) -> Result<Inventory> {
        let root = self.service_content().await?.root_folder.clone();
        let mut filter = PropertyFilter::new().props("ManagedEntity", &["name", "parent"]);
        if with_vms {
            filter = filter.props("VirtualMachine", VM_PATHS);
        }
        let filter = filter.traverse(&root, false, TRAVERSAL);
        from_contents(&self.retrieve(&filter).await?)
            .map_err(|m| m.into_error(self.server(), "RetrievePropertiesEx"))
    }
}

/// The snapshot of collected objects (`name`, `parent`, and the VM properties when read). A
/// property of the wrong type (a `parent` that is not a moref, a `config.template` that is not
/// a boolean) is an error: read as absent it would move the object (to the root, out of the
/// templates) without a word.
pub fn from_contents(contents: &[ObjectContent]) -> Result<Inventory, Malformed> {
    Ok(Inventory::from_records(
        contents.iter().map(record).collect::<Result<_, _>>()?,
    ))
}

/// One collected object as an inventory record.
fn record(c: &ObjectContent) -> Result<Record, Malformed> {
    let moref = c.obj.clone();
    let power_state = &["VirtualMachinePowerState"];
    let vm = if moref.kind == "VirtualMachine" {
        Some(VmInfo {
            instance_uuid: c
                .string_prop("config.instanceUuid", &[])?
                .map(str::to_string),
            bios_uuid: c.string_prop("config.uuid", &[])?.map(str::to_string),
            template: c.bool_prop("config.template")?.unwrap_or(false),
            power_state: c
                .string_prop("runtime.powerState", power_state)?
                .map(str::to_string),
            host: c.moref_prop("runtime.host")?,
            resource_pool: c.moref_prop("resourcePool")?,
            ip_address: c.string_prop("guest.ipAddress", &[])?.map(str::to_string),
            machine: c.option_value_prop(IDENTITY_PATH)?.map(str::to_string),
            guest_metadata: c
                .option_value_prop(GUEST_METADATA_PATH)?
                .map(str::to_string),
        })
    } else {
        None
    };
    let parent = match c.moref_prop("parent")? {
        Some(p) => Some(p),
        None => c.moref_prop("parentVApp")?,
    };
    Ok(Record {
        name: c.string_prop("name", &[])?.unwrap_or_default().to_string(),
        parent,
        moref,
        vm,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::model::moref::MoRef;
    use crate::vcenter::soap::Node;

    fn val(type_attr: Option<&str>, text: &str) -> Node {
        Node {
            name: "val".into(),
            type_attr: type_attr.map(str::to_string),
            text: text.into(),
            ..Node::default()
        }
    }

    #[test]
    fn collected_objects_become_records_with_vm_properties() {
        let mut c = ObjectContent::new(MoRef::new("VirtualMachine", "vm-1"));
        c.props.insert("name".into(), val(None, "m-0"));
        c.props
            .insert("parentVApp".into(), val(Some("VirtualApp"), "vapp-1"));
        c.props
            .insert("config.instanceUuid".into(), val(None, "uuid-1"));
        c.props.insert("config.template".into(), val(None, "true"));
        c.props
            .insert("runtime.host".into(), val(Some("HostSystem"), "host-1"));
        let r = record(&c).unwrap();
        assert_eq!(r.name, "m-0");
        assert_eq!(r.parent, Some(MoRef::new("VirtualApp", "vapp-1")));
        let vm = r.vm.unwrap();
        assert_eq!(vm.instance_uuid.as_deref(), Some("uuid-1"));
        assert!(vm.template);
        assert_eq!(vm.host, Some(MoRef::new("HostSystem", "host-1")));
    }

    #[test]
    fn properties_of_the_wrong_type_fail_the_snapshot() {
        let page = |objects: &str| {
            crate::vcenter::property::tests::read(&crate::vcenter::property::tests::reply(objects))
                .unwrap()
                .objects
        };
        // A parent that is not a moref would have made a second root.
        let bad_parent = page(
            r#"<objects><obj type="Folder">group-d1</obj><propSet><name>name</name><val xsi:type="xsd:string">Datacenters</val></propSet></objects><objects><obj type="Datacenter">dc-1</obj><propSet><name>name</name><val xsi:type="xsd:string">DC0</val></propSet><propSet><name>parent</name><val xsi:type="xsd:string">group-d1</val></propSet></objects>"#,
        );
        assert_eq!(
            from_contents(&bad_parent).unwrap_err().to_string(),
            "parent of Datacenter:dc-1 is a string, not a ManagedObjectReference"
        );
        let bad_template = page(
            r#"<objects><obj type="VirtualMachine">vm-1</obj><propSet><name>config.template</name><val xsi:type="xsd:boolean">maybe</val></propSet></objects>"#,
        );
        assert!(from_contents(&bad_template).is_err());
        let bad_power = page(
            r#"<objects><obj type="VirtualMachine">vm-1</obj><propSet><name>runtime.powerState</name><val xsi:type="ManagedObjectReference" type="HostSystem">host-1</val></propSet></objects>"#,
        );
        assert!(from_contents(&bad_power).is_err());
        let fine = page(
            r#"<objects><obj type="VirtualMachine">vm-1</obj><propSet><name>runtime.powerState</name><val xsi:type="VirtualMachinePowerState">poweredOn</val></propSet><propSet><name>config.template</name><val xsi:type="xsd:boolean">false</val></propSet></objects>"#,
        );
        let inv = from_contents(&fine).unwrap();
        let vm = inv.get(&MoRef::new("VirtualMachine", "vm-1")).unwrap();
        assert_eq!(
            vm.vm.as_ref().unwrap().power_state.as_deref(),
            Some("poweredOn")
        );
    }
}
