//! What a clone is asked to do (placement, identity, sizing, NICs, disks, linked clone) and what
//! it needs to know of its template's devices and snapshots: planned by `plan::machine`, sent by
//! `vcenter::vm`.
use super::moref::MoRef;

/// Where and how to clone. Its `Debug` shows extraConfig keys, never their values (the Ignition
/// payload is user data, with secrets in it).
#[derive(Clone, PartialEq, Eq)]
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
    /// The template's disk grown to this many KiB (`diskGiB`).
    pub disk_resize: Option<(DiskInfo, i64)>,
    /// New empty disks (`dataDisks[]`), in order.
    pub data_disks: Vec<NewDisk>,
    /// A linked clone of this snapshot of the source (`cloneMode: linkedClone`): the clone's
    /// disks are new child disks of the snapshot's (`diskMoveType=createNewChildDiskBacking`).
    /// None: a full clone.
    pub linked_clone: Option<MoRef>,
    pub power_on: bool,
}

impl std::fmt::Debug for CloneSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.extra_config.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("CloneSpec")
            .field("name", &self.name)
            .field("folder", &self.folder)
            .field("datastore", &self.datastore)
            .field("pool", &self.pool)
            .field("host", &self.host)
            .field("instance_uuid", &self.instance_uuid)
            .field("annotation", &self.annotation)
            .field("num_cpus", &self.num_cpus)
            .field("num_cores_per_socket", &self.num_cores_per_socket)
            .field("memory_mb", &self.memory_mb)
            .field("extra_config_keys", &keys)
            .field("nics", &self.nics)
            .field("disk_resize", &self.disk_resize)
            .field("data_disks", &self.data_disks)
            .field("linked_clone", &self.linked_clone)
            .field("power_on", &self.power_on)
            .finish()
    }
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

/// A template's first virtual disk, as much of it as an `edit` needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskInfo {
    pub key: i32,
    /// `deviceInfo.label` ("Hard disk 1").
    pub label: String,
    pub controller_key: Option<i32>,
    pub unit_number: Option<i32>,
    pub capacity_kb: i64,
    pub backing_type: String,
    pub file_name: String,
    pub disk_mode: Option<String>,
}

/// A new, empty virtual disk added to a clone (`dataDisks[i]`): created beside the VM
/// (`fileOperation: create`, an empty `fileName`, so vCenter names it `<vm>_N.vmdk`), flat and
/// persistent, at a free unit of a controller of the template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewDisk {
    /// A negative placeholder key, unique within the clone spec; vCenter assigns the real one.
    pub key: i32,
    pub controller_key: i32,
    pub unit_number: i32,
    pub capacity_kb: i64,
    /// `backing.thinProvisioned`; None leaves it to the storage policy.
    pub thin_provisioned: Option<bool>,
    /// `backing.eagerlyScrub`; None leaves it unset.
    pub eagerly_scrub: Option<bool>,
}

/// One device of a template, as much as placing new disks on its controllers needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceSlot {
    pub key: Option<i32>,
    /// The `xsi:type` (`ParaVirtualSCSIController`, `VirtualDisk`, ...).
    pub device_type: String,
    pub controller_key: Option<i32>,
    pub unit_number: Option<i32>,
    /// `scsiCtlrUnitNumber`: the unit a SCSI controller takes on its own bus.
    pub scsi_ctlr_unit: Option<i32>,
}

/// One snapshot of a VM's snapshot tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    pub snapshot: MoRef,
    pub name: String,
    /// The names from the root down, joined with `/` (`base/patched`).
    pub path: String,
}

/// A VM's snapshots (its `snapshot` property).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshots {
    /// `currentSnapshot`.
    pub current: Option<MoRef>,
    /// Every snapshot of the tree, parents before their children.
    pub all: Vec<SnapshotEntry>,
}

/// What a clone needs to know of its template's devices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TemplateDevices {
    /// (device type, key) of each NIC.
    pub nics: Vec<(String, i32)>,
    /// The first virtual disk (the one `diskGiB` sizes, whose controller takes the data disks).
    pub disk: Option<DiskInfo>,
    /// Every device: the units in use and the controllers' own units.
    pub slots: Vec<DeviceSlot>,
    /// The snapshot tree, when it was read (linked clones only); None when it was not.
    pub snapshots: Option<Snapshots>,
}
