//! Virtual machine lifecycle: clone, power, destroy. Each returns a [`TaskRef`] at once. The
//! clone spec and template devices are `model::vm`.
use super::CallKind;
use super::client::Client;
use super::model::error::Result;
use super::model::moref::MoRef;
use super::model::task::TaskRef;
use super::model::vm::{
    CloneSpec, DeviceSlot, DiskInfo, NewDisk, NicBacking, NicChange, SnapshotEntry, Snapshots,
    TemplateDevices,
};
use super::property::PropertyFilter;
use super::soap::decode::{Malformed, number, optional_number, required};
use super::soap::{Node, Xml};

/// The first virtual disk of a `config.hardware.device` value. Its `key` is required and the
/// numbers must decode: a misread disk would be resized wrongly or not at all.
pub fn parse_disk(devices: &Node) -> Result<Option<DiskInfo>, Malformed> {
    let Some(d) = devices
        .children
        .iter()
        .find(|d| d.xsi_type.as_deref() == Some("VirtualDisk"))
    else {
        return Ok(None);
    };
    let backing = d.child("backing");
    Ok(Some(DiskInfo {
        key: number(required(d, "key", "VirtualDisk")?, "VirtualDisk key")?,
        label: d
            .child("deviceInfo")
            .and_then(|i| i.child_text("label"))
            .unwrap_or("Hard disk 1")
            .to_string(),
        controller_key: optional_number(d, "controllerKey", "VirtualDisk controllerKey")?,
        unit_number: optional_number(d, "unitNumber", "VirtualDisk unitNumber")?,
        capacity_kb: optional_number(d, "capacityInKB", "VirtualDisk capacityInKB")?.unwrap_or(0),
        backing_type: backing
            .and_then(|b| b.xsi_type.clone())
            .unwrap_or_else(|| "VirtualDiskFlatVer2BackingInfo".into()),
        file_name: backing
            .and_then(|b| b.child_text("fileName"))
            .unwrap_or_default()
            .to_string(),
        disk_mode: backing
            .and_then(|b| b.child_text("diskMode"))
            .map(str::to_string),
    }))
}

fn write_disk_resize(x: &mut Xml, d: &DiskInfo, capacity_kb: i64) {
    // VirtualDisk order: key, deviceInfo, backing, connectable, slotInfo, controllerKey,
    // unitNumber, numaNode, deviceGroupInfo, capacityInKB, capacityInBytes.
    x.open("deviceChange");
    x.text("operation", "edit");
    x.open_typed("device", "VirtualDisk");
    x.text("key", &d.key.to_string());
    // Real vCenter identifies the disk by key; vcsim also dereferences deviceInfo on an edit
    // (a nil pointer panics its handler), so it is always sent.
    x.open("deviceInfo");
    x.text("label", &d.label);
    x.text("summary", "");
    x.close("deviceInfo");
    x.open_typed("backing", &d.backing_type);
    x.text("fileName", &d.file_name);
    if let Some(m) = &d.disk_mode {
        x.text("diskMode", m);
    }
    x.close("backing");
    if let Some(c) = d.controller_key {
        x.text("controllerKey", &c.to_string());
    }
    if let Some(u) = d.unit_number {
        x.text("unitNumber", &u.to_string());
    }
    x.text("capacityInKB", &capacity_kb.to_string());
    // The size comes from the spec (diskGiB), not the wire; saturate rather than overflow.
    x.text(
        "capacityInBytes",
        &capacity_kb.saturating_mul(1024).to_string(),
    );
    x.close("device");
    x.close("deviceChange");
}

/// Every device of a `config.hardware.device` value: its key, type, controller and unit, and a
/// SCSI controller's own unit. The numbers must decode: a misread unit would put a data disk on
/// a unit already taken.
pub fn parse_slots(devices: &Node) -> Result<Vec<DeviceSlot>, Malformed> {
    devices
        .children
        .iter()
        .map(|d| {
            Ok(DeviceSlot {
                key: optional_number(d, "key", "device key")?,
                device_type: d.xsi_type.clone().unwrap_or_default(),
                controller_key: optional_number(d, "controllerKey", "device controllerKey")?,
                unit_number: optional_number(d, "unitNumber", "device unitNumber")?,
                scsi_ctlr_unit: optional_number(
                    d,
                    "scsiCtlrUnitNumber",
                    "SCSI controller scsiCtlrUnitNumber",
                )?,
            })
        })
        .collect()
}

/// A VM's `snapshot` value (`VirtualMachineSnapshotInfo`): the current snapshot and the tree,
/// flattened with each snapshot's path. A snapshot's reference and name are required: one
/// skipped could make a named snapshot look missing, or another one match.
pub fn parse_snapshots(info: &Node) -> Result<Snapshots, Malformed> {
    fn walk(
        trees: &Node,
        parent: &str,
        out: &mut Vec<SnapshotEntry>,
        depth: usize,
    ) -> Result<(), Malformed> {
        // vCenter limits a chain to 32 snapshots; a deeper tree is not one it sent.
        if depth > 64 {
            return Err(Malformed::new("snapshot tree deeper than 64"));
        }
        for t in trees.children_named(if depth == 0 {
            "rootSnapshotList"
        } else {
            "childSnapshotList"
        }) {
            let snapshot = MoRef::decode(
                required(t, "snapshot", "snapshot tree")?,
                "snapshot tree snapshot",
            )?;
            let name = required(t, "name", "snapshot tree")?.text.clone();
            let path = if parent.is_empty() {
                name.clone()
            } else {
                format!("{parent}/{name}")
            };
            out.push(SnapshotEntry {
                snapshot,
                name,
                path: path.clone(),
            });
            walk(t, &path, out, depth + 1)?;
        }
        Ok(())
    }
    let current = info
        .child("currentSnapshot")
        .map(|c| MoRef::decode(c, "currentSnapshot"))
        .transpose()?;
    let mut all = Vec::new();
    walk(info, "", &mut all, 0)?;
    Ok(Snapshots { current, all })
}

/// One `dataDisks[]` entry: a new flat, persistent disk created beside the VM.
fn write_new_disk(x: &mut Xml, d: &NewDisk) {
    // VirtualDeviceConfigSpec order: operation, fileOperation, device. VirtualDisk order as in
    // `write_disk_resize`; VirtualDiskFlatVer2BackingInfo: fileName, datastore, diskMode,
    // split, writeThrough, thinProvisioned, eagerlyScrub.
    x.open("deviceChange");
    x.text("operation", "add");
    x.text("fileOperation", "create");
    x.open_typed("device", "VirtualDisk");
    x.text("key", &d.key.to_string());
    x.open_typed("backing", "VirtualDiskFlatVer2BackingInfo");
    // Empty: vCenter names the file after the VM, in the VM's directory.
    x.text("fileName", "");
    x.text("diskMode", "persistent");
    if let Some(t) = d.thin_provisioned {
        x.text("thinProvisioned", if t { "true" } else { "false" });
    }
    if let Some(e) = d.eagerly_scrub {
        x.text("eagerlyScrub", if e { "true" } else { "false" });
    }
    x.close("backing");
    x.text("controllerKey", &d.controller_key.to_string());
    x.text("unitNumber", &d.unit_number.to_string());
    x.text("capacityInKB", &d.capacity_kb.to_string());
    x.close("device");
    x.close("deviceChange");
}

/// A template's NICs: (device type, key), from `config.hardware.device`. A NIC's `key` is
/// required: one skipped would stay on the clone beside its replacement.
pub fn parse_nics(devices: &Node) -> Result<Vec<(String, i32)>, Malformed> {
    devices
        .children
        .iter()
        .filter(|d| d.child("addressType").is_some() || d.child("macAddress").is_some())
        .map(|d| {
            let key = number(required(d, "key", "network card")?, "network card key")?;
            Ok((
                d.xsi_type
                    .clone()
                    .unwrap_or_else(|| "VirtualEthernetCard".into()),
                key,
            ))
        })
        .collect()
}

/// The MACs of the network cards among `devices`, in device order (cards without one yet
/// are skipped).
pub fn parse_macs(devices: &Node) -> Vec<String> {
    devices
        .children
        .iter()
        .filter_map(|d| d.child("macAddress"))
        .map(|m| m.text.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// `ReconfigVM_Task` setting these extraConfig keys (values typed `xsd:string`).
pub fn extra_config_body(vm: &MoRef, keys: &[(String, String)]) -> String {
    let mut x = Xml::request("ReconfigVM_Task", vm);
    x.open("spec");
    for (k, v) in keys {
        x.open("extraConfig");
        x.text("key", k);
        x.typed_text("value", "xsd:string", v);
        x.close("extraConfig");
    }
    x.close("spec");
    x.finish("ReconfigVM_Task")
}

fn write_nic(x: &mut Xml, change: &NicChange, new_key: i32) {
    x.open("deviceChange");
    match change {
        NicChange::Remove { device_type, key } => {
            x.text("operation", "remove");
            x.open_typed("device", device_type);
            x.text("key", &key.to_string());
            x.close("device");
        }
        NicChange::Add(backing) => {
            x.text("operation", "add");
            x.open_typed("device", "VirtualVmxnet3");
            // Negative keys are placeholders the server replaces.
            x.text("key", &new_key.to_string());
            match backing {
                NicBacking::Network { name, network } => {
                    x.open_typed("backing", "VirtualEthernetCardNetworkBackingInfo");
                    x.text("deviceName", name);
                    x.moref("network", network);
                    x.close("backing");
                }
                NicBacking::PortGroup {
                    switch_uuid,
                    portgroup_key,
                } => {
                    x.open_typed(
                        "backing",
                        "VirtualEthernetCardDistributedVirtualPortBackingInfo",
                    );
                    x.open("port");
                    x.text("switchUuid", switch_uuid);
                    x.text("portgroupKey", portgroup_key);
                    x.close("port");
                    x.close("backing");
                }
            }
            x.open("connectable");
            x.text("startConnected", "true");
            x.text("allowGuestControl", "true");
            x.text("connected", "true");
            x.close("connectable");
            x.text("addressType", "generated");
            x.close("device");
        }
    }
    x.close("deviceChange");
}

/// The `PowerOnMultiVM_Task` request: the VMs, then the DRS override option.
pub fn power_on_multi_body(datacenter: &MoRef, vms: &[MoRef]) -> String {
    let mut x = Xml::request("PowerOnMultiVM_Task", datacenter);
    for vm in vms {
        x.moref("vm", vm);
    }
    x.open_typed("option", "OptionValue");
    x.text("key", "OverrideAutomationLevel");
    x.typed_text("value", "xsd:string", "fullyAutomated");
    x.close("option");
    x.finish("PowerOnMultiVM_Task")
}

/// The `CloneVM_Task` body; element order follows the WSDL (`VirtualMachineRelocateSpec`:
/// folder, datastore, diskMoveType, pool, host; `VirtualMachineConfigSpec`: instanceUuid,
/// annotation, numCPUs, numCoresPerSocket, memoryMB, deviceChange, extraConfig;
/// `VirtualMachineCloneSpec`: location, template, config, powerOn, snapshot).
pub fn clone_body(source: &MoRef, spec: &CloneSpec) -> String {
    let mut x = Xml::request("CloneVM_Task", source);
    x.moref("folder", &spec.folder);
    x.text("name", &spec.name);
    x.open("spec");
    x.open("location");
    if let Some(d) = &spec.datastore {
        x.moref("datastore", d);
    }
    if spec.linked_clone.is_some() {
        // The clone's disks become children of the snapshot's: nothing is copied.
        x.text("diskMoveType", "createNewChildDiskBacking");
    }
    if let Some(p) = &spec.pool {
        x.moref("pool", p);
    }
    if let Some(h) = &spec.host {
        x.moref("host", h);
    }
    x.close("location");
    x.text("template", "false");
    let has_config = spec.instance_uuid.is_some()
        || spec.annotation.is_some()
        || spec.num_cpus.is_some()
        || spec.num_cores_per_socket.is_some()
        || spec.memory_mb.is_some()
        || !spec.nics.is_empty()
        || spec.disk_resize.is_some()
        || !spec.data_disks.is_empty()
        || !spec.extra_config.is_empty();
    if has_config {
        x.open("config");
        if let Some(u) = &spec.instance_uuid {
            x.text("instanceUuid", u);
        }
        if let Some(a) = &spec.annotation {
            x.text("annotation", a);
        }
        if let Some(n) = spec.num_cpus {
            x.text("numCPUs", &n.to_string());
        }
        if let Some(n) = spec.num_cores_per_socket {
            x.text("numCoresPerSocket", &n.to_string());
        }
        if let Some(m) = spec.memory_mb {
            x.text("memoryMB", &m.to_string());
        }
        for (i, n) in spec.nics.iter().enumerate() {
            write_nic(&mut x, n, -100 - i as i32);
        }
        if let Some((disk, kb)) = &spec.disk_resize {
            write_disk_resize(&mut x, disk, *kb);
        }
        for d in &spec.data_disks {
            write_new_disk(&mut x, d);
        }
        for (k, v) in &spec.extra_config {
            x.open("extraConfig");
            x.text("key", k);
            x.typed_text("value", "xsd:string", v);
            x.close("extraConfig");
        }
        x.close("config");
    }
    x.text("powerOn", if spec.power_on { "true" } else { "false" });
    if let Some(snapshot) = &spec.linked_clone {
        x.moref("snapshot", snapshot);
    }
    x.close("spec");
    x.finish("CloneVM_Task")
}

impl Client {
    /// The NICs and first disk of several VMs (templates) in one read.
    pub async fn template_devices(
        &self,
        vms: &[MoRef],
    ) -> Result<std::collections::BTreeMap<MoRef, TemplateDevices>> {
        self.template_clone_facts(vms, false).await
    }

    /// The devices of several VMs (templates) and, with `snapshots`, their snapshot trees, in
    /// one read whatever their number. A VM without snapshots gets an empty tree.
    pub async fn template_clone_facts(
        &self,
        vms: &[MoRef],
        snapshots: bool,
    ) -> Result<std::collections::BTreeMap<MoRef, TemplateDevices>> {
        let paths: &[&str] = if snapshots {
            &["config.hardware.device", "snapshot"]
        } else {
            &["config.hardware.device"]
        };
        let contents = self.retrieve_objects(vms, "VirtualMachine", paths).await?;
        contents
            .into_iter()
            .map(|c| {
                let devices = c.props.get("config.hardware.device");
                let tree = match c.props.get("snapshot") {
                    Some(info) => Some(parse_snapshots(info)?),
                    None => snapshots.then(Snapshots::default),
                };
                let t = TemplateDevices {
                    nics: devices.map(parse_nics).transpose()?.unwrap_or_default(),
                    disk: devices.map(parse_disk).transpose()?.flatten(),
                    slots: devices.map(parse_slots).transpose()?.unwrap_or_default(),
                    snapshots: tree,
                };
                Ok((c.obj, t))
            })
            .collect::<Result<_, Malformed>>()
            .map_err(|m| m.into_error(self.server(), "RetrievePropertiesEx"))
    }

    /// The switch UUID of each distributed port group, in two reads (port groups, then their
    /// switches) whatever their number.
    pub async fn portgroup_switch_uuids(
        &self,
        portgroups: &[MoRef],
    ) -> Result<std::collections::BTreeMap<MoRef, String>> {
        let pgs = self
            .retrieve_objects(
                portgroups,
                "DistributedVirtualPortgroup",
                &["config.distributedVirtualSwitch"],
            )
            .await?;
        let mut switch_of: Vec<(MoRef, MoRef)> = Vec::new();
        for c in &pgs {
            let switch = c
                .moref_prop("config.distributedVirtualSwitch")
                .map_err(|m| m.into_error(self.server(), "RetrievePropertiesEx"))?;
            if let Some(s) = switch {
                switch_of.push((c.obj.clone(), s));
            }
        }
        let mut switches: Vec<MoRef> = switch_of.iter().map(|(_, s)| s.clone()).collect();
        switches.sort();
        switches.dedup();
        let mut uuids = std::collections::BTreeMap::new();
        for c in self
            .retrieve(
                &PropertyFilter::new()
                    .props("DistributedVirtualSwitch", &["uuid"])
                    .objects(&switches),
            )
            .await?
        {
            let uuid = c
                .string_prop("uuid", &[])
                .map_err(|m| m.into_error(self.server(), "RetrievePropertiesEx"))?;
            if let Some(u) = uuid {
                uuids.insert(c.obj.clone(), u.to_string());
            }
        }
        Ok(switch_of
            .into_iter()
            .filter_map(|(pg, sw)| Some((pg, uuids.get(&sw)?.clone())))
            .collect())
    }

    pub async fn clone_vm(&self, source: &MoRef, spec: &CloneSpec) -> Result<TaskRef> {
        self.start_task("CloneVM_Task", &clone_body(source, spec))
            .await
    }

    /// The MAC addresses of several VMs' network cards, in device order, in one read whatever
    /// their number (what a guest's network config matches its interfaces by).
    pub async fn vm_macs(
        &self,
        vms: &[MoRef],
    ) -> Result<std::collections::BTreeMap<MoRef, Vec<String>>> {
        let contents = self
            .retrieve_objects(vms, "VirtualMachine", &["config.hardware.device"])
            .await?;
        Ok(contents
            .into_iter()
            .map(|c| {
                let macs = c
                    .props
                    .get("config.hardware.device")
                    .map(parse_macs)
                    .unwrap_or_default();
                (c.obj, macs)
            })
            .collect())
    }

    /// Set extraConfig keys on a VM (`ReconfigVM_Task`).
    pub async fn set_extra_config(&self, vm: &MoRef, keys: &[(String, String)]) -> Result<TaskRef> {
        self.start_task("ReconfigVM_Task", &extra_config_body(vm, keys))
            .await
    }

    pub async fn power_on_vm(&self, vm: &MoRef) -> Result<TaskRef> {
        let body = Xml::request("PowerOnVM_Task", vm).finish("PowerOnVM_Task");
        self.start_task("PowerOnVM_Task", &body).await
    }

    /// Power on `vms` with one task on their datacenter, DRS placing them as a fully automated
    /// cluster would (`OverrideAutomationLevel=fullyAutomated`): upstream's way, so a cluster in
    /// manual or partially automated DRS still applies the VM-host rules. The task's result
    /// names the VMs that were not powered on ([`TaskState::Success::not_attempted`]).
    ///
    /// [`TaskState::Success::not_attempted`]: super::model::task::TaskState::Success
    pub async fn power_on_multi(&self, datacenter: &MoRef, vms: &[MoRef]) -> Result<TaskRef> {
        self.start_task("PowerOnMultiVM_Task", &power_on_multi_body(datacenter, vms))
            .await
    }

    /// Ask the guest OS to shut down (VMware Tools must run in it; `ToolsUnavailable` else).
    /// Not a task: it returns once asked.
    pub async fn shutdown_guest(&self, vm: &MoRef) -> Result<()> {
        let body = Xml::request("ShutdownGuest", vm).finish("ShutdownGuest");
        self.call("ShutdownGuest", CallKind::Write, &body).await?;
        Ok(())
    }

    pub async fn power_off_vm(&self, vm: &MoRef) -> Result<TaskRef> {
        let body = Xml::request("PowerOffVM_Task", vm).finish("PowerOffVM_Task");
        self.start_task("PowerOffVM_Task", &body).await
    }

    /// Destroy a VM (it must be powered off).
    pub async fn destroy(&self, entity: &MoRef) -> Result<TaskRef> {
        let body = Xml::request("Destroy_Task", entity).finish("Destroy_Task");
        self.start_task("Destroy_Task", &body).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clone_bodies_keep_wsdl_order() {
        let body = clone_body(
            &MoRef::new("VirtualMachine", "vm-1"),
            &CloneSpec {
                name: "m-0".into(),
                folder: MoRef::new("Folder", "f-1"),
                datastore: Some(MoRef::new("Datastore", "ds-1")),
                pool: Some(MoRef::new("ResourcePool", "rp-1")),
                host: None,
                instance_uuid: Some("uuid-1".into()),
                extra_config: vec![("guestinfo.x".into(), "a<b".into())],
                power_on: true,
                annotation: None,
                num_cpus: None,
                num_cores_per_socket: None,
                memory_mb: None,
                disk_resize: Some((
                    DiskInfo {
                        key: 2000,
                        label: "Hard disk 1".into(),
                        controller_key: Some(1000),
                        unit_number: Some(0),
                        capacity_kb: 1024,
                        backing_type: "VirtualDiskFlatVer2BackingInfo".into(),
                        file_name: "[LocalDS_0] t/t.vmdk".into(),
                        disk_mode: Some("persistent".into()),
                    },
                    125_829_120,
                )),
                data_disks: Vec::new(),
                linked_clone: None,
                nics: vec![
                    NicChange::Remove {
                        device_type: "VirtualE1000".into(),
                        key: 4000,
                    },
                    NicChange::Add(NicBacking::Network {
                        name: "VM Network".into(),
                        network: MoRef::new("Network", "network-7"),
                    }),
                ],
            },
        );
        let pos = |s: &str| {
            body.find(s)
                .unwrap_or_else(|| panic!("{s} missing in {body}"))
        };
        assert!(pos("<folder") < pos("<name>m-0</name>"));
        assert!(pos("<datastore") < pos("<pool"));
        assert!(pos("</location>") < pos("<template>false</template>"));
        assert!(pos("<template>") < pos("<config>"));
        assert!(pos("<instanceUuid>uuid-1") < pos("<deviceChange>"));
        assert!(pos("<deviceChange>") < pos("<extraConfig>"));
        assert!(body.contains(r#"<operation>edit</operation><device xsi:type="VirtualDisk"><key>2000</key><deviceInfo><label>Hard disk 1</label><summary></summary></deviceInfo><backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName>[LocalDS_0] t/t.vmdk</fileName><diskMode>persistent</diskMode></backing><controllerKey>1000</controllerKey><unitNumber>0</unitNumber><capacityInKB>125829120</capacityInKB>"#), "{body}");
        assert!(body.contains(r#"<operation>remove</operation><device xsi:type="VirtualE1000"><key>4000</key></device>"#), "{body}");
        assert!(body.contains(r#"<device xsi:type="VirtualVmxnet3"><key>-101</key><backing xsi:type="VirtualEthernetCardNetworkBackingInfo"><deviceName>VM Network</deviceName><network type="Network">network-7</network></backing>"#), "{body}");
        assert!(pos("</config>") < pos("<powerOn>true</powerOn>"));
        assert!(body.contains(r#"<value xsi:type="xsd:string">a&lt;b</value>"#));
    }

    fn spec(data_disks: Vec<NewDisk>, linked_clone: Option<MoRef>) -> CloneSpec {
        CloneSpec {
            name: "m-0".into(),
            folder: MoRef::new("Folder", "f-1"),
            datastore: Some(MoRef::new("Datastore", "ds-1")),
            pool: Some(MoRef::new("ResourcePool", "rp-1")),
            host: None,
            instance_uuid: None,
            annotation: None,
            num_cpus: None,
            num_cores_per_socket: None,
            memory_mb: None,
            extra_config: vec![("guestinfo.ignition.config.data".into(), "c2VjcmV0".into())],
            nics: Vec::new(),
            disk_resize: None,
            data_disks,
            linked_clone,
            power_on: false,
        }
    }

    /// Each data disk is an `add` + `create` of a flat persistent disk with an empty file name
    /// (vCenter names it after the VM), its placeholder key, controller, unit and size in KiB,
    /// and the thin/eager flags only when the provisioning mode set them.
    #[test]
    fn data_disks_are_added_and_created_in_wsdl_order() {
        let disk = |key, unit, thin, eager| NewDisk {
            key,
            controller_key: 1000,
            unit_number: unit,
            capacity_kb: 10 * 1024 * 1024,
            thin_provisioned: thin,
            eagerly_scrub: eager,
        };
        let body = clone_body(
            &MoRef::new("VirtualMachine", "vm-1"),
            &spec(
                vec![
                    disk(-201, 1, Some(true), None),
                    disk(-202, 2, Some(false), Some(true)),
                    disk(-203, 3, None, None),
                ],
                None,
            ),
        );
        assert!(body.contains(concat!(
            r#"<deviceChange><operation>add</operation><fileOperation>create</fileOperation>"#,
            r#"<device xsi:type="VirtualDisk"><key>-201</key>"#,
            r#"<backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName></fileName>"#,
            r#"<diskMode>persistent</diskMode><thinProvisioned>true</thinProvisioned></backing>"#,
            r#"<controllerKey>1000</controllerKey><unitNumber>1</unitNumber>"#,
            r#"<capacityInKB>10485760</capacityInKB></device></deviceChange>"#
        )), "{body}");
        assert!(body.contains(concat!(
            r#"<key>-202</key><backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName></fileName>"#,
            r#"<diskMode>persistent</diskMode><thinProvisioned>false</thinProvisioned>"#,
            r#"<eagerlyScrub>true</eagerlyScrub></backing><controllerKey>1000</controllerKey>"#,
            r#"<unitNumber>2</unitNumber>"#
        )), "{body}");
        assert!(body.contains(concat!(
            r#"<key>-203</key><backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName></fileName>"#,
            r#"<diskMode>persistent</diskMode></backing><controllerKey>1000</controllerKey>"#,
            r#"<unitNumber>3</unitNumber>"#
        )), "{body}");
        assert_eq!(body.matches("<deviceChange>").count(), 3, "{body}");
        assert!(body.find("<key>-201</key>") < body.find("<key>-202</key>"));
        // deviceChange before extraConfig (VirtualMachineConfigSpec order).
        assert!(body.rfind("</deviceChange>") < body.find("<extraConfig>"));
        // A full clone: no disk move type, no snapshot.
        assert!(
            !body.contains("diskMoveType") && !body.contains("<snapshot"),
            "{body}"
        );
        // Data disks alone make a config element.
        let mut s = spec(vec![disk(-201, 1, None, None)], None);
        s.extra_config.clear();
        assert!(
            clone_body(&MoRef::new("VirtualMachine", "vm-1"), &s)
                .contains("<config><deviceChange>")
        );
    }

    /// A linked clone says so in the relocate spec (`diskMoveType`, between datastore and pool)
    /// and names the snapshot after `powerOn` (VirtualMachineCloneSpec order).
    #[test]
    fn a_linked_clone_names_its_snapshot_and_child_disk_backing() {
        let body = clone_body(
            &MoRef::new("VirtualMachine", "vm-1"),
            &spec(
                Vec::new(),
                Some(MoRef::new("VirtualMachineSnapshot", "snapshot-7")),
            ),
        );
        assert!(
            body.contains(concat!(
                r#"<location><datastore type="Datastore">ds-1</datastore>"#,
                r#"<diskMoveType>createNewChildDiskBacking</diskMoveType>"#,
                r#"<pool type="ResourcePool">rp-1</pool></location>"#
            )),
            "{body}"
        );
        assert!(
            body.contains(concat!(
                r#"<powerOn>false</powerOn>"#,
                r#"<snapshot type="VirtualMachineSnapshot">snapshot-7</snapshot></spec>"#
            )),
            "{body}"
        );
        assert!(!body.contains("<deviceChange>"), "{body}");
    }

    #[test]
    fn clone_spec_debug_shows_disks_and_snapshot_never_extra_config_values() {
        let s = spec(
            vec![NewDisk {
                key: -201,
                controller_key: 1000,
                unit_number: 1,
                capacity_kb: 1,
                thin_provisioned: None,
                eagerly_scrub: None,
            }],
            Some(MoRef::new("VirtualMachineSnapshot", "snapshot-7")),
        );
        let shown = format!("{s:?}");
        assert!(
            shown.contains("unit_number: 1") && shown.contains("snapshot-7"),
            "{shown}"
        );
        assert!(shown.contains("guestinfo.ignition.config.data"), "{shown}");
        assert!(!shown.contains("c2VjcmV0"), "{shown}");
    }

    fn val(inner: &str, xsi_type: &str) -> Node {
        crate::vcenter::soap::xml::parse(&format!(
            r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="{xsi_type}">{inner}</val>"#
        ))
        .unwrap()
    }

    #[test]
    fn device_slots_keep_controllers_units_and_the_scsi_controllers_own_unit() {
        let devices = val(
            concat!(
                r#"<VirtualDevice xsi:type="ParaVirtualSCSIController"><key>1000</key><busNumber>0</busNumber><device>2000</device><scsiCtlrUnitNumber>7</scsiCtlrUnitNumber></VirtualDevice>"#,
                r#"<VirtualDevice xsi:type="VirtualDisk"><key>2000</key><controllerKey>1000</controllerKey><unitNumber>0</unitNumber></VirtualDevice>"#,
                r#"<VirtualDevice xsi:type="VirtualPCIController"><key>100</key><busNumber>0</busNumber></VirtualDevice>"#
            ),
            "ArrayOfVirtualDevice",
        );
        let slots = parse_slots(&devices).unwrap();
        assert_eq!(
            slots[0],
            DeviceSlot {
                key: Some(1000),
                device_type: "ParaVirtualSCSIController".into(),
                controller_key: None,
                unit_number: None,
                scsi_ctlr_unit: Some(7),
            }
        );
        assert_eq!(
            (slots[1].key, slots[1].controller_key, slots[1].unit_number),
            (Some(2000), Some(1000), Some(0))
        );
        assert_eq!(slots.len(), 3);
        let bad = val(
            r#"<VirtualDevice xsi:type="VirtualDisk"><key>2000</key><unitNumber>one</unitNumber></VirtualDevice>"#,
            "ArrayOfVirtualDevice",
        );
        assert_eq!(
            parse_slots(&bad).unwrap_err().to_string(),
            r#"device unitNumber "one" is not a number in range"#
        );
    }

    #[test]
    fn snapshot_trees_flatten_with_paths_and_the_current_snapshot() {
        let tree = |name: &str, id: &str, children: &str, list: &str| {
            format!(
                r#"<{list}><snapshot type="VirtualMachineSnapshot">{id}</snapshot><vm type="VirtualMachine">vm-1</vm><name>{name}</name><description></description><id>1</id><createTime>2026-01-01T00:00:00Z</createTime><state>poweredOff</state><quiesced>false</quiesced>{children}</{list}>"#
            )
        };
        let inner = tree(
            "base",
            "snapshot-1",
            &tree("patched", "snapshot-2", "", "childSnapshotList"),
            "rootSnapshotList",
        ) + &tree("other", "snapshot-3", "", "rootSnapshotList");
        let info = val(
            &format!(
                r#"<currentSnapshot type="VirtualMachineSnapshot">snapshot-2</currentSnapshot>{inner}"#
            ),
            "VirtualMachineSnapshotInfo",
        );
        let s = parse_snapshots(&info).unwrap();
        assert_eq!(
            s.current,
            Some(MoRef::new("VirtualMachineSnapshot", "snapshot-2"))
        );
        let all: Vec<(&str, &str, &str)> = s
            .all
            .iter()
            .map(|e| (e.snapshot.value.as_str(), e.name.as_str(), e.path.as_str()))
            .collect();
        assert_eq!(
            all,
            [
                ("snapshot-1", "base", "base"),
                ("snapshot-2", "patched", "base/patched"),
                ("snapshot-3", "other", "other"),
            ]
        );
        let nameless = val(
            r#"<rootSnapshotList><snapshot type="VirtualMachineSnapshot">snapshot-1</snapshot></rootSnapshotList>"#,
            "VirtualMachineSnapshotInfo",
        );
        assert_eq!(
            parse_snapshots(&nameless).unwrap_err().to_string(),
            "snapshot tree without name"
        );
        assert_eq!(
            parse_snapshots(&val("", "VirtualMachineSnapshotInfo")).unwrap(),
            Snapshots::default()
        );
    }

    #[test]
    fn malformed_device_lists_are_decode_errors() {
        let devices = |inner: &str| {
            crate::vcenter::soap::xml::parse(&format!(
                r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="ArrayOfVirtualDevice">{inner}</val>"#
            ))
            .unwrap()
        };
        let disk = |inner: &str| parse_disk(&devices(inner)).map_err(|e| e.to_string());
        assert_eq!(
            disk(r#"<VirtualDevice xsi:type="VirtualDisk"><capacityInKB>1</capacityInKB></VirtualDevice>"#)
                .unwrap_err(),
            "VirtualDisk without key"
        );
        assert_eq!(
            disk(r#"<VirtualDevice xsi:type="VirtualDisk"><key>2000x</key></VirtualDevice>"#)
                .unwrap_err(),
            r#"VirtualDisk key "2000x" is not a number in range"#
        );
        assert_eq!(
            disk(r#"<VirtualDevice xsi:type="VirtualDisk"><key>2000</key><capacityInKB>lots</capacityInKB></VirtualDevice>"#)
                .unwrap_err(),
            r#"VirtualDisk capacityInKB "lots" is not a number in range"#
        );
        assert_eq!(disk("").unwrap(), None);
        let d = disk(r#"<VirtualDevice xsi:type="VirtualDisk"><key>2000</key><controllerKey>1000</controllerKey><capacityInKB>1024</capacityInKB></VirtualDevice>"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            (d.key, d.controller_key, d.capacity_kb),
            (2000, Some(1000), 1024)
        );
        let nics = |inner: &str| parse_nics(&devices(inner)).map_err(|e| e.to_string());
        assert_eq!(
            nics(r#"<VirtualDevice xsi:type="VirtualVmxnet3"><key>four</key><addressType>generated</addressType></VirtualDevice>"#)
                .unwrap_err(),
            r#"network card key "four" is not a number in range"#
        );
        assert_eq!(
            nics(r#"<VirtualDevice xsi:type="VirtualE1000"><macAddress>00:50:56:00:00:01</macAddress></VirtualDevice>"#)
                .unwrap_err(),
            "network card without key"
        );
        assert_eq!(
            nics(r#"<VirtualDevice xsi:type="VirtualE1000"><key>4000</key><macAddress>m</macAddress></VirtualDevice>"#)
                .unwrap(),
            vec![("VirtualE1000".to_string(), 4000)]
        );
    }

    /// One task for several VMs, with DRS told to place them as if fully automated.
    #[test]
    fn a_multi_power_on_names_every_vm_and_the_drs_override() {
        let body = power_on_multi_body(
            &MoRef::new("Datacenter", "datacenter-2"),
            &[
                MoRef::new("VirtualMachine", "vm-1"),
                MoRef::new("VirtualMachine", "vm-2"),
            ],
        );
        assert!(
            body.contains(r#"<_this type="Datacenter">datacenter-2</_this>"#),
            "{body}"
        );
        let vm1 = body.find(r#"<vm type="VirtualMachine">vm-1</vm>"#).unwrap();
        let vm2 = body.find(r#"<vm type="VirtualMachine">vm-2</vm>"#).unwrap();
        let opt = body.find("<key>OverrideAutomationLevel</key>").unwrap();
        assert!(vm1 < vm2 && vm2 < opt, "VMs, then the option: {body}");
        assert!(body.contains("fullyAutomated"));
    }
}
