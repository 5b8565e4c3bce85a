//! Virtual machine lifecycle: clone, power, destroy. Each returns a [`TaskRef`] at once.
use super::client::Client;
use super::error::Result;
use super::moref::MoRef;
use super::soap::{Node, Xml};
use super::task::TaskRef;

/// Where and how to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloneSpec {
    pub name: String,
    /// Required by `CloneVM_Task` (vcsim panics without it).
    pub folder: MoRef,
    pub datastore: Option<MoRef>,
    /// Required when the source is a template.
    pub pool: Option<MoRef>,
    pub host: Option<MoRef>,
    /// Set our own instance UUID so a crash between clone and status write can find the VM again.
    pub instance_uuid: Option<String>,
    pub annotation: Option<String>,
    pub num_cpus: Option<i32>,
    pub num_cores_per_socket: Option<i32>,
    pub memory_mb: Option<i64>,
    pub extra_config: Vec<(String, String)>,
    /// The template's NICs removed and one vmxnet3 per `network.devices[]` added.
    pub nics: Vec<NicChange>,
    pub power_on: bool,
}

/// Where a new NIC is plugged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NicBacking {
    /// A standard (or opaque-less) network, by name and reference.
    Network { name: String, network: MoRef },
    /// A distributed port group: its switch's UUID and its key.
    PortGroup {
        switch_uuid: String,
        portgroup_key: String,
    },
}

/// A NIC change in the clone's config spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NicChange {
    /// Remove a template NIC (its device type and key).
    Remove {
        device_type: String,
        key: i32,
    },
    Add(NicBacking),
}

/// A template's NICs: (device type, key), from `config.hardware.device`.
pub fn parse_nics(devices: &Node) -> Vec<(String, i32)> {
    devices
        .children
        .iter()
        .filter(|d| d.child("addressType").is_some() || d.child("macAddress").is_some())
        .filter_map(|d| {
            let key = d.child_text("key")?.trim().parse().ok()?;
            Some((
                d.xsi_type
                    .clone()
                    .unwrap_or_else(|| "VirtualEthernetCard".into()),
                key,
            ))
        })
        .collect()
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

/// The `CloneVM_Task` body; element order follows the WSDL (`VirtualMachineRelocateSpec`:
/// folder, datastore, diskMoveType, pool, host; `VirtualMachineConfigSpec`: instanceUuid,
/// annotation, numCPUs, numCoresPerSocket, memoryMB, extraConfig).
pub fn clone_body(source: &MoRef, spec: &CloneSpec) -> String {
    let mut x = Xml::request("CloneVM_Task", source);
    x.moref("folder", &spec.folder);
    x.text("name", &spec.name);
    x.open("spec");
    x.open("location");
    if let Some(d) = &spec.datastore {
        x.moref("datastore", d);
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
        for (k, v) in &spec.extra_config {
            x.open("extraConfig");
            x.text("key", k);
            x.typed_text("value", "xsd:string", v);
            x.close("extraConfig");
        }
        x.close("config");
    }
    x.text("powerOn", if spec.power_on { "true" } else { "false" });
    x.close("spec");
    x.finish("CloneVM_Task")
}

impl Client {
    /// The NICs of several VMs (templates) in one read.
    pub async fn vm_nics(
        &self,
        vms: &[MoRef],
    ) -> Result<std::collections::BTreeMap<MoRef, Vec<(String, i32)>>> {
        let contents = self
            .retrieve_objects(vms, "VirtualMachine", &["config.hardware.device"])
            .await?;
        Ok(contents
            .into_iter()
            .map(|c| {
                let nics = c
                    .props
                    .get("config.hardware.device")
                    .map(parse_nics)
                    .unwrap_or_default();
                (c.moref().clone(), nics)
            })
            .collect())
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
        let switch_of: Vec<(MoRef, MoRef)> = pgs
            .iter()
            .filter_map(|c| {
                Some((
                    c.moref().clone(),
                    c.moref_prop("config.distributedVirtualSwitch")?,
                ))
            })
            .collect();
        let mut switches: Vec<MoRef> = switch_of.iter().map(|(_, s)| s.clone()).collect();
        switches.sort();
        switches.dedup();
        let mut uuids = std::collections::BTreeMap::new();
        for c in self
            .retrieve(
                &super::property::PropertyFilter::new()
                    .props("DistributedVirtualSwitch", &["uuid"])
                    .objects(&switches),
            )
            .await?
        {
            if let Some(u) = c.text("uuid") {
                uuids.insert(c.moref().clone(), u.to_string());
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

    pub async fn power_on_vm(&self, vm: &MoRef) -> Result<TaskRef> {
        let body = Xml::request("PowerOnVM_Task", vm).finish("PowerOnVM_Task");
        self.start_task("PowerOnVM_Task", &body).await
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
        assert!(body.contains(r#"<operation>remove</operation><device xsi:type="VirtualE1000"><key>4000</key></device>"#), "{body}");
        assert!(body.contains(r#"<device xsi:type="VirtualVmxnet3"><key>-101</key><backing xsi:type="VirtualEthernetCardNetworkBackingInfo"><deviceName>VM Network</deviceName><network type="Network">network-7</network></backing>"#), "{body}");
        assert!(pos("</config>") < pos("<powerOn>true</powerOn>"));
        assert!(body.contains(r#"<value xsi:type="xsd:string">a&lt;b</value>"#));
    }
}
