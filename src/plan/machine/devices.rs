//! The device changes of a clone, decided from the template's devices: the template's NICs
//! out and one vmxnet3 per `network.devices[]` in (the template's NICs stay when the machine
//! names no network), and the template's disk grown to `diskGiB` — never shrunk: a smaller size
//! is an invalid configuration, as upstream.
use std::collections::BTreeMap;

use super::super::placement::Placement;
use crate::vcenter::model::inventory::Inventory;
use crate::vcenter::model::moref::MoRef;
use crate::vcenter::model::vm::{DiskInfo, NicBacking, NicChange, TemplateDevices};

/// What the clones of a sweep need to know, read once per sweep.
#[derive(Clone, Debug, Default)]
pub struct DeviceFacts {
    pub templates: BTreeMap<MoRef, TemplateDevices>,
    /// Distributed port group → its switch's UUID.
    pub switch_uuids: BTreeMap<MoRef, String>,
}

/// The device part of a clone spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceChanges {
    pub nics: Vec<NicChange>,
    /// The disk to grow and its new size in KiB.
    pub disk: Option<(DiskInfo, i64)>,
}

/// Why the devices cannot be decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// The machine asks for something impossible (the machine goes `Failed`).
    Invalid(String),
    /// What is needed could not be read (retried).
    Unreadable(String),
}

/// Decide the device changes of one clone.
pub fn device_changes(
    p: &Placement,
    inv: &Inventory,
    facts: &DeviceFacts,
) -> Result<DeviceChanges, DeviceError> {
    let mut out = DeviceChanges::default();
    let template = facts.templates.get(&p.template);
    if let Some(gib) = p.disk_gib {
        let disk = template.and_then(|t| t.disk.clone()).ok_or_else(|| {
            DeviceError::Invalid(format!(
                "spec.providerSpec.value.diskGiB: template {} has no virtual disk to size",
                p.template
            ))
        })?;
        let want_kb = i64::from(gib) * 1024 * 1024;
        if want_kb < disk.capacity_kb {
            return Err(DeviceError::Invalid(format!(
                "spec.providerSpec.value.diskGiB: {gib} GiB is smaller than the template's disk ({} GiB); disks cannot shrink",
                disk.capacity_kb / (1024 * 1024)
            )));
        }
        if want_kb > disk.capacity_kb {
            out.disk = Some((disk, want_kb));
        }
    }
    if p.networks.is_empty() {
        return Ok(out);
    }
    out.nics = template
        .map(|t| t.nics.as_slice())
        .unwrap_or(&[])
        .iter()
        .map(|(device_type, key)| NicChange::Remove {
            device_type: device_type.clone(),
            key: *key,
        })
        .collect();
    for n in &p.networks {
        let backing = if n.kind == "DistributedVirtualPortgroup" {
            NicBacking::PortGroup {
                switch_uuid: facts.switch_uuids.get(n).cloned().ok_or_else(|| {
                    DeviceError::Unreadable(format!(
                        "the distributed switch of port group {n} cannot be read"
                    ))
                })?,
                portgroup_key: n.value.clone(),
            }
        } else {
            NicBacking::Network {
                name: inv.get(n).map(|e| e.name.clone()).unwrap_or_default(),
                network: n.clone(),
            }
        };
        out.nics.push(NicChange::Add(backing));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::machine::tests::placement;

    fn facts(capacity_gib: i64) -> DeviceFacts {
        let t = TemplateDevices {
            nics: vec![("VirtualE1000".into(), 4000)],
            disk: Some(DiskInfo {
                key: 2000,
                label: "Hard disk 1".into(),
                controller_key: Some(1000),
                unit_number: Some(0),
                capacity_kb: capacity_gib * 1024 * 1024,
                backing_type: "VirtualDiskFlatVer2BackingInfo".into(),
                file_name: "[ds] t/t.vmdk".into(),
                disk_mode: None,
            }),
        };
        DeviceFacts {
            templates: [(MoRef::new("VirtualMachine", "vm-t"), t)].into(),
            switch_uuids: [(
                MoRef::new("DistributedVirtualPortgroup", "dvpg-1"),
                "50 2a".to_string(),
            )]
            .into(),
        }
    }

    #[test]
    fn disks_grow_never_shrink_and_an_equal_size_changes_nothing() {
        let mut p = placement(None);
        p.disk_gib = Some(120);
        let d = device_changes(&p, &Inventory::default(), &facts(16)).unwrap();
        assert_eq!(d.disk.unwrap().1, 120 * 1024 * 1024);
        p.disk_gib = Some(16);
        assert_eq!(
            device_changes(&p, &Inventory::default(), &facts(16))
                .unwrap()
                .disk,
            None
        );
        p.disk_gib = Some(8);
        match device_changes(&p, &Inventory::default(), &facts(16)) {
            Err(DeviceError::Invalid(m)) => assert!(
                m.starts_with("spec.providerSpec.value.diskGiB: 8 GiB is smaller"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn template_nics_are_replaced_only_when_networks_are_named() {
        let mut p = placement(None);
        assert!(
            device_changes(&p, &Inventory::default(), &facts(16))
                .unwrap()
                .nics
                .is_empty()
        );
        p.networks = vec![MoRef::new("DistributedVirtualPortgroup", "dvpg-1")];
        let d = device_changes(&p, &Inventory::default(), &facts(16)).unwrap();
        assert_eq!(
            d.nics,
            [
                NicChange::Remove {
                    device_type: "VirtualE1000".into(),
                    key: 4000
                },
                NicChange::Add(NicBacking::PortGroup {
                    switch_uuid: "50 2a".into(),
                    portgroup_key: "dvpg-1".into()
                }),
            ]
        );
        p.networks = vec![MoRef::new("DistributedVirtualPortgroup", "dvpg-9")];
        assert!(matches!(
            device_changes(&p, &Inventory::default(), &facts(16)),
            Err(DeviceError::Unreadable(_))
        ));
    }
}
