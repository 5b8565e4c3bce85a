//! The device changes of a clone, decided from the template's devices: the template's NICs
//! out and one vmxnet3 per `network.devices[]` in (the template's NICs stay when the machine
//! names no network); the template's disk grown to `diskGiB` — never shrunk: a smaller size
//! is an invalid configuration, as upstream — unless the clone is linked; one new disk per
//! `dataDisks[]` on the controller of the template's first disk, at the lowest free units; and
//! for a linked clone, the template's snapshot it is linked to.
use std::collections::BTreeMap;

use super::super::placement::{DataDisk, LinkedClone, Placement};
use crate::api::machine::ProvisioningMode;
use crate::vcenter::model::inventory::Inventory;
use crate::vcenter::model::moref::MoRef;
use crate::vcenter::model::vm::{
    DiskInfo, NewDisk, NicBacking, NicChange, Snapshots, TemplateDevices,
};

/// Units a controller offers to disks: 0 to 29 (upstream's `maxUnitNumber`).
pub const CONTROLLER_UNITS: i32 = 30;
/// The unit a SCSI controller takes itself when it does not say (`scsiCtlrUnitNumber`).
pub const DEFAULT_CONTROLLER_UNIT: i32 = 7;
/// The first placeholder key of a new disk, as govmomi's `VirtualDeviceList.NewKey()` gives it
/// for a device list of real (positive) keys; the next disks count down from it. NICs count
/// down from -100, so the two never meet.
pub const FIRST_NEW_DISK_KEY: i32 = -201;

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
    /// The new data disks, in `dataDisks[]` order.
    pub data_disks: Vec<NewDisk>,
    /// The template's snapshot a linked clone is made from.
    pub snapshot: Option<MoRef>,
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
    if let Some(linked) = &p.linked_clone {
        let no_snapshot = template
            .and_then(|t| t.snapshots.as_ref())
            .is_some_and(|s| s.current.is_none() && s.all.is_empty());
        if !(linked.or_full_clone && linked.snapshot.is_none() && no_snapshot) {
            out.snapshot = Some(linked_snapshot(p, inv, template, linked)?);
        }
    }
    out.data_disks = data_disks(p, inv, template)?;
    // A linked clone's disks are children of the snapshot's: they keep its size (upstream skips
    // the resize too; admission warns that diskGiB is ignored).
    if let Some(gib) = p.disk_gib.filter(|_| out.snapshot.is_none()) {
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

const PS: &str = "spec.providerSpec.value";

/// The template as the messages name it: its inventory path, else its reference.
fn template_name(p: &Placement, inv: &Inventory) -> String {
    inv.get(&p.template)
        .map_or_else(|| p.template.to_string(), |e| e.path.clone())
}

/// The snapshot a linked clone is made from: the one `snapshot` names (by name, by path from
/// the root, or by reference, as govmomi's `FindSnapshot`), else the template's current one.
/// A name that matches nothing, or several, is an invalid configuration naming it (upstream
/// falls back to a full clone), and so is a template without snapshots.
fn linked_snapshot(
    p: &Placement,
    inv: &Inventory,
    template: Option<&TemplateDevices>,
    linked: &LinkedClone,
) -> Result<MoRef, DeviceError> {
    let snapshots: &Snapshots = template.and_then(|t| t.snapshots.as_ref()).ok_or_else(|| {
        DeviceError::Unreadable(format!(
            "the snapshots of template {} were not read",
            p.template
        ))
    })?;
    let t = template_name(p, inv);
    let Some(wanted) = &linked.snapshot else {
        return snapshots.current.clone().ok_or_else(|| {
            DeviceError::Invalid(format!(
                "{PS}.cloneMode: linkedClone clones from a snapshot of the template, and template {t} has none (take one, name one in snapshot, or use fullClone)"
            ))
        });
    };
    let mut found: Vec<&MoRef> = snapshots
        .all
        .iter()
        .filter(|s| &s.name == wanted || &s.path == wanted || &s.snapshot.value == wanted)
        .map(|s| &s.snapshot)
        .collect();
    found.sort();
    found.dedup();
    match found.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            let have: Vec<&str> = snapshots.all.iter().map(|s| s.path.as_str()).collect();
            Err(DeviceError::Invalid(format!(
                "{PS}.snapshot: template {t} has no snapshot {wanted:?} ({})",
                if have.is_empty() {
                    "it has no snapshots".to_string()
                } else {
                    format!("its snapshots: {}", have.join(", "))
                }
            )))
        }
        many => {
            let paths: Vec<&str> = snapshots
                .all
                .iter()
                .filter(|s| many.contains(&&s.snapshot))
                .map(|s| s.path.as_str())
                .collect();
            Err(DeviceError::Invalid(format!(
                "{PS}.snapshot: {wanted:?} names {} snapshots of template {t} ({}); name one by its path",
                many.len(),
                paths.join(", ")
            )))
        }
    }
}

/// The new data disks: on the controller of the template's first disk (which takes every data
/// disk, as upstream), each at the lowest unit below [`CONTROLLER_UNITS`] that neither a device
/// of the template nor the controller itself (its `scsiCtlrUnitNumber`, else
/// [`DEFAULT_CONTROLLER_UNIT`]) takes, nor an earlier data disk.
fn data_disks(
    p: &Placement,
    inv: &Inventory,
    template: Option<&TemplateDevices>,
) -> Result<Vec<NewDisk>, DeviceError> {
    if p.data_disks.is_empty() {
        return Ok(Vec::new());
    }
    let template = template.ok_or_else(|| {
        DeviceError::Unreadable(format!(
            "the devices of template {} were not read",
            p.template
        ))
    })?;
    let t = template_name(p, inv);
    let disk = template.disk.as_ref().ok_or_else(|| {
        DeviceError::Invalid(format!(
            "{PS}.dataDisks: template {t} has no virtual disk, and data disks go on the controller of its first disk"
        ))
    })?;
    let (controller_key, controller) = disk
        .controller_key
        .and_then(|k| Some((k, template.slots.iter().find(|s| s.key == Some(k))?)))
        .ok_or_else(|| {
            DeviceError::Invalid(format!(
                "{PS}.dataDisks: the controller of template {t}'s first disk ({}) is not among its devices",
                disk.controller_key
                    .map_or_else(|| "none named".to_string(), |k| format!("key {k}"))
            ))
        })?;
    let own_unit = controller.scsi_ctlr_unit.unwrap_or(DEFAULT_CONTROLLER_UNIT);
    let mut taken = [false; CONTROLLER_UNITS as usize];
    let in_use = template
        .slots
        .iter()
        .filter(|s| s.controller_key == Some(controller_key))
        .filter_map(|s| s.unit_number)
        .chain([own_unit]);
    for u in in_use {
        if let Some(slot) = usize::try_from(u).ok().and_then(|u| taken.get_mut(u)) {
            *slot = true;
        }
    }
    let free = taken.iter().filter(|t| !**t).count();
    let mut out = Vec::new();
    for (i, d) in p.data_disks.iter().enumerate() {
        let Some(unit) = taken.iter().position(|t| !t) else {
            return Err(DeviceError::Invalid(format!(
                "{PS}.dataDisks[{i}]: no free unit for data disk {:?}: the controller of template {t}'s first disk ({} key {controller_key}) has {free} free units (0-{} less its own unit {own_unit} and those in use) for {} data disks",
                d.name,
                controller.device_type,
                CONTROLLER_UNITS - 1,
                p.data_disks.len()
            )));
        };
        taken[unit] = true;
        out.push(new_disk(d, i, controller_key, unit as i32));
    }
    Ok(out)
}

/// One data disk's device: its placeholder key, place, size and provisioning flags.
fn new_disk(d: &DataDisk, i: usize, controller_key: i32, unit_number: i32) -> NewDisk {
    let (thin_provisioned, eagerly_scrub) = match d.mode {
        Some(ProvisioningMode::Thin) => (Some(true), None),
        Some(ProvisioningMode::Thick) => (Some(false), None),
        Some(ProvisioningMode::EagerlyZeroed) => (Some(false), Some(true)),
        None => (None, None),
    };
    NewDisk {
        key: FIRST_NEW_DISK_KEY - i as i32,
        controller_key,
        unit_number,
        capacity_kb: i64::from(d.size_gib) * 1024 * 1024,
        thin_provisioned,
        eagerly_scrub,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::machine::tests::placement;
    use crate::vcenter::model::vm::{DeviceSlot, SnapshotEntry};

    fn slot(
        key: i32,
        device_type: &str,
        controller_key: Option<i32>,
        unit_number: Option<i32>,
        scsi_ctlr_unit: Option<i32>,
    ) -> DeviceSlot {
        DeviceSlot {
            key: Some(key),
            device_type: device_type.into(),
            controller_key,
            unit_number,
            scsi_ctlr_unit,
        }
    }

    fn template(f: &mut DeviceFacts) -> &mut TemplateDevices {
        f.templates
            .get_mut(&MoRef::new("VirtualMachine", "vm-t"))
            .unwrap()
    }

    fn disks(n: usize) -> Vec<DataDisk> {
        (0..n)
            .map(|i| DataDisk {
                name: format!("d{i}"),
                size_gib: 10,
                mode: None,
            })
            .collect()
    }

    fn invalid(r: Result<DeviceChanges, DeviceError>) -> String {
        match r {
            Err(DeviceError::Invalid(m)) => m,
            other => panic!("{other:?}"),
        }
    }

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
            slots: vec![
                slot(1000, "ParaVirtualSCSIController", None, None, Some(7)),
                slot(2000, "VirtualDisk", Some(1000), Some(0), None),
                slot(4000, "VirtualE1000", Some(100), Some(7), None),
            ],
            snapshots: None,
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

    /// Data disks go on the controller of the template's first disk, at the lowest units the
    /// template's devices on that controller and the controller itself leave free, in order,
    /// with keys -201, -202, ...; devices on other controllers do not count.
    #[test]
    fn data_disks_take_the_lowest_free_units_of_the_first_disks_controller() {
        let mut f = facts(16);
        // A second disk on the same controller at unit 2, a CD-ROM at unit 1 of an IDE
        // controller, a first disk on SCSI 1000 (unit 0), and the controller's own unit 7.
        template(&mut f).slots.extend([
            slot(2001, "VirtualDisk", Some(1000), Some(2), None),
            slot(200, "VirtualIDEController", None, None, None),
            slot(3000, "VirtualCdrom", Some(200), Some(1), None),
            slot(1001, "ParaVirtualSCSIController", None, None, Some(7)),
            slot(2002, "VirtualDisk", Some(1001), Some(1), None),
        ]);
        let mut p = placement(None);
        p.data_disks = disks(8);
        let d = device_changes(&p, &Inventory::default(), &f).unwrap();
        let placed: Vec<(i32, i32, i32)> = d
            .data_disks
            .iter()
            .map(|n| (n.key, n.controller_key, n.unit_number))
            .collect();
        assert_eq!(
            placed,
            [
                (-201, 1000, 1),
                (-202, 1000, 3),
                (-203, 1000, 4),
                (-204, 1000, 5),
                (-205, 1000, 6),
                (-206, 1000, 8),
                (-207, 1000, 9),
                (-208, 1000, 10),
            ]
        );
        assert!(
            d.data_disks
                .iter()
                .all(|n| n.capacity_kb == 10 * 1024 * 1024)
        );
        // The controller's own unit comes from scsiCtlrUnitNumber when it says one.
        template(&mut f).slots[0].scsi_ctlr_unit = Some(15);
        p.data_disks = disks(7);
        let units: Vec<i32> = device_changes(&p, &Inventory::default(), &f)
            .unwrap()
            .data_disks
            .iter()
            .map(|n| n.unit_number)
            .collect();
        assert_eq!(units, [1, 3, 4, 5, 6, 7, 8]);
    }

    /// The controller is the first disk's, not the first controller's: a template whose first
    /// disk sits on a second SCSI controller gets its data disks there.
    #[test]
    fn the_first_disks_controller_takes_the_data_disks() {
        let mut f = facts(16);
        let t = template(&mut f);
        t.slots.insert(
            0,
            slot(1001, "VirtualLsiLogicController", None, None, Some(7)),
        );
        t.disk.as_mut().unwrap().controller_key = Some(1001);
        t.slots
            .push(slot(2001, "VirtualDisk", Some(1001), Some(0), None));
        let mut p = placement(None);
        p.data_disks = disks(1);
        let d = device_changes(&p, &Inventory::default(), &f).unwrap();
        assert_eq!(
            (d.data_disks[0].controller_key, d.data_disks[0].unit_number),
            (1001, 1)
        );
    }

    #[test]
    fn provisioning_modes_set_the_thin_and_eager_flags_and_none_sets_neither() {
        let f = facts(16);
        let mut p = placement(None);
        p.data_disks = [
            Some(ProvisioningMode::Thin),
            Some(ProvisioningMode::Thick),
            Some(ProvisioningMode::EagerlyZeroed),
            None,
        ]
        .into_iter()
        .enumerate()
        .map(|(i, mode)| DataDisk {
            name: format!("d{i}"),
            size_gib: 16384,
            mode,
        })
        .collect();
        let d = device_changes(&p, &Inventory::default(), &f).unwrap();
        let flags: Vec<(Option<bool>, Option<bool>)> = d
            .data_disks
            .iter()
            .map(|n| (n.thin_provisioned, n.eagerly_scrub))
            .collect();
        assert_eq!(
            flags,
            [
                (Some(true), None),
                (Some(false), None),
                (Some(false), Some(true)),
                (None, None)
            ]
        );
        assert_eq!(d.data_disks[0].capacity_kb, 16384 * 1024 * 1024);
    }

    /// 30 units less the first disk's and the controller's leave 28: the 29th data disk (which
    /// admission allows) fails the machine, naming it, before anything is cloned.
    #[test]
    fn more_data_disks_than_free_units_is_invalid_naming_the_first_that_does_not_fit() {
        let f = facts(16);
        let mut p = placement(None);
        p.data_disks = disks(28);
        let d = device_changes(&p, &Inventory::default(), &f).unwrap();
        assert_eq!(d.data_disks.last().unwrap().unit_number, 29);
        assert!(
            d.data_disks
                .iter()
                .all(|n| n.unit_number != 7 && n.unit_number != 0)
        );
        p.data_disks = disks(29);
        let m = invalid(device_changes(&p, &Inventory::default(), &f));
        assert!(
            m.starts_with(
                "spec.providerSpec.value.dataDisks[28]: no free unit for data disk \"d28\""
            ),
            "{m}"
        );
        assert!(
            m.contains("ParaVirtualSCSIController key 1000) has 28 free units"),
            "{m}"
        );
    }

    #[test]
    fn data_disks_need_a_template_disk_and_its_controller() {
        let mut p = placement(None);
        p.data_disks = disks(1);
        let mut f = facts(16);
        template(&mut f).disk = None;
        let m = invalid(device_changes(&p, &Inventory::default(), &f));
        assert!(
            m.starts_with("spec.providerSpec.value.dataDisks: template VirtualMachine:vm-t has no virtual disk"),
            "{m}"
        );
        let mut f = facts(16);
        template(&mut f).slots.remove(0);
        let m = invalid(device_changes(&p, &Inventory::default(), &f));
        assert!(
            m.starts_with("spec.providerSpec.value.dataDisks: the controller of template"),
            "{m}"
        );
        // Devices not read (a template missing from the read) are retried, not a verdict.
        assert!(matches!(
            device_changes(&p, &Inventory::default(), &DeviceFacts::default()),
            Err(DeviceError::Unreadable(_))
        ));
        // No data disks: nothing is needed of the template.
        p.data_disks.clear();
        assert!(device_changes(&p, &Inventory::default(), &DeviceFacts::default()).is_ok());
    }

    fn snapshots() -> Snapshots {
        let e = |id: &str, name: &str, path: &str| SnapshotEntry {
            snapshot: MoRef::new("VirtualMachineSnapshot", id),
            name: name.into(),
            path: path.into(),
        };
        Snapshots {
            current: Some(MoRef::new("VirtualMachineSnapshot", "snapshot-2")),
            all: vec![
                e("snapshot-1", "base", "base"),
                e("snapshot-2", "patched", "base/patched"),
                e("snapshot-3", "other", "other"),
                e("snapshot-4", "patched", "other/patched"),
            ],
        }
    }

    fn linked(snapshot: Option<&str>) -> Placement {
        let mut p = placement(None);
        p.linked_clone = Some(LinkedClone {
            snapshot: snapshot.map(str::to_string),
            or_full_clone: false,
        });
        p
    }

    /// A linked clone is made from the named snapshot (by name, path or reference), else the
    /// current one; its disk is never resized (so a smaller diskGiB is no error either).
    #[test]
    fn linked_clones_use_the_named_or_current_snapshot_and_skip_the_resize() {
        let mut f = facts(16);
        template(&mut f).snapshots = Some(snapshots());
        let inv = Inventory::default();
        let snap = |p: &Placement| device_changes(p, &inv, &f).unwrap().snapshot.unwrap().value;
        assert_eq!(snap(&linked(None)), "snapshot-2");
        assert_eq!(snap(&linked(Some("base"))), "snapshot-1");
        assert_eq!(snap(&linked(Some("other/patched"))), "snapshot-4");
        assert_eq!(snap(&linked(Some("snapshot-3"))), "snapshot-3");
        let mut p = linked(None);
        p.disk_gib = Some(120);
        let d = device_changes(&p, &inv, &f).unwrap();
        assert_eq!(d.disk, None);
        p.disk_gib = Some(8);
        assert!(device_changes(&p, &inv, &f).is_ok());
        // Data disks still come with a linked clone.
        p.data_disks = disks(1);
        assert_eq!(device_changes(&p, &inv, &f).unwrap().data_disks.len(), 1);
        // A full clone has no snapshot and is resized.
        let mut p = placement(None);
        p.disk_gib = Some(120);
        let d = device_changes(&p, &inv, &f).unwrap();
        assert_eq!((d.snapshot, d.disk.is_some()), (None, true));
    }

    /// A Cluster API machine's linked clone from a template without snapshots is a full clone
    /// (resized), as CAPV does; a snapshot it names and the template lacks is still refused.
    #[test]
    fn capv_linked_clones_fall_back_to_full_without_a_snapshot() {
        let mut f = facts(16);
        template(&mut f).snapshots = Some(Snapshots::default());
        let inv = Inventory::default();
        let mut p = linked(None);
        p.linked_clone.as_mut().unwrap().or_full_clone = true;
        p.disk_gib = Some(120);
        let d = device_changes(&p, &inv, &f).unwrap();
        assert_eq!((d.snapshot, d.disk.is_some()), (None, true));
        let mut named = linked(Some("golden"));
        named.linked_clone.as_mut().unwrap().or_full_clone = true;
        assert!(invalid(device_changes(&named, &inv, &f)).contains("no snapshot \"golden\""));
        // With a snapshot it is a linked clone.
        template(&mut f).snapshots = Some(snapshots());
        assert!(device_changes(&p, &inv, &f).unwrap().snapshot.is_some());
    }

    /// Upstream falls back to a full clone when the snapshot is not found; here the machine
    /// fails naming it, as it does for an ambiguous name or a template without snapshots.
    #[test]
    fn a_snapshot_that_is_missing_or_ambiguous_is_invalid_naming_it() {
        let mut f = facts(16);
        template(&mut f).snapshots = Some(snapshots());
        let inv = Inventory::default();
        let m = invalid(device_changes(&linked(Some("golden")), &inv, &f));
        assert_eq!(
            m,
            "spec.providerSpec.value.snapshot: template VirtualMachine:vm-t has no snapshot \"golden\" (its snapshots: base, base/patched, other, other/patched)"
        );
        let m = invalid(device_changes(&linked(Some("patched")), &inv, &f));
        assert_eq!(
            m,
            "spec.providerSpec.value.snapshot: \"patched\" names 2 snapshots of template VirtualMachine:vm-t (base/patched, other/patched); name one by its path"
        );
        template(&mut f).snapshots = Some(Snapshots::default());
        let m = invalid(device_changes(&linked(Some("golden")), &inv, &f));
        assert!(
            m.ends_with("has no snapshot \"golden\" (it has no snapshots)"),
            "{m}"
        );
        let m = invalid(device_changes(&linked(None), &inv, &f));
        assert!(
            m.starts_with("spec.providerSpec.value.cloneMode: linkedClone clones from a snapshot of the template, and template VirtualMachine:vm-t has none"),
            "{m}"
        );
        // Snapshots not read: retried.
        template(&mut f).snapshots = None;
        assert!(matches!(
            device_changes(&linked(None), &inv, &f),
            Err(DeviceError::Unreadable(_))
        ));
    }
}
