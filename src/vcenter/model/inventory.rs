//! The inventory snapshot and in-memory path resolution.
//!
//! The snapshot is built from one bulk read (`vcenter::inventory`: every entity's name, type and
//! parent, plus the VM properties controllers need, whatever the inventory size). Paths and
//! names are then resolved here, in memory, scoped to a datacenter or a compute cluster, so N
//! lookups cost no round trips (govmomi's finder spends one call per path component per lookup).
use std::collections::{BTreeMap, HashMap};

use super::moref::MoRef;

/// What we know about a VM from the snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VmInfo {
    pub instance_uuid: Option<String>,
    pub bios_uuid: Option<String>,
    pub template: bool,
    pub power_state: Option<String>,
    pub host: Option<MoRef>,
    pub resource_pool: Option<MoRef>,
    /// The guest's primary IP address (VMware Tools), for the Machine's addresses.
    pub ip_address: Option<String>,
    /// Whose VM this is: the machine identity written at clone time
    /// ([`MACHINE_IDENTITY_KEY`] in its extraConfig), if any.
    pub machine: Option<String>,
    /// The host name whose cloud-init metadata was written into its `guestinfo.metadata`
    /// ([`GUEST_METADATA_KEY`]), for a Cluster API machine's VM.
    pub guest_metadata: Option<String>,
}

/// The extraConfig key a cloned VM carries its Machine's identity under. Not `guestinfo.*`, so
/// the guest cannot read or change it; unlike the instance UUID (the Machine's UID) it survives
/// a Machine re-created from the same manifest, and unlike the VM's name it says whose VM it is.
pub const MACHINE_IDENTITY_KEY: &str = "vsphere-provider.machine";

/// The extraConfig key written together with `guestinfo.metadata` (the host name it names):
/// the metadata is written once, after the clone (it matches the clone's MACs) and before the
/// first power-on, and this says it was. Not `guestinfo.*`, so the guest cannot change it.
pub const GUEST_METADATA_KEY: &str = "vsphere-provider.guest-metadata";

/// One entity as read from vCenter: what a snapshot is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub moref: MoRef,
    pub name: String,
    /// `parent` (or `parentVApp` for a VM in a vApp); none for the root folder.
    pub parent: Option<MoRef>,
    /// VM properties, for a `VirtualMachine`.
    pub vm: Option<VmInfo>,
}

/// One inventory entity.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Entity {
    pub moref: MoRef,
    pub name: String,
    pub parent: Option<MoRef>,
    /// The inventory path, `/DC0/host/DC0_C0/Resources/DC0_C0_RP1`.
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm: Option<VmInfo>,
}

impl Entity {
    pub fn kind(&self) -> &str {
        &self.moref.kind
    }
}

/// Why a lookup failed. Messages name what was looked for, where, and the candidates.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("{what} {query:?} not found{}", scope_suffix(.scope))]
    NotFound {
        what: String,
        query: String,
        scope: Option<String>,
    },
    #[error("{what} {query:?} is ambiguous{}: it matches {}", scope_suffix(.scope), .candidates.join(", "))]
    Ambiguous {
        what: String,
        query: String,
        scope: Option<String>,
        candidates: Vec<String>,
    },
    #[error("{query:?} is a {actual}, not a {what}")]
    WrongType {
        what: String,
        query: String,
        actual: String,
    },
}

fn scope_suffix(scope: &Option<String>) -> String {
    scope
        .as_ref()
        .map(|s| format!(" in {s}"))
        .unwrap_or_default()
}

/// The kinds of object a lookup can ask for, with the managed object types each accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    Datacenter,
    ComputeCluster,
    /// A cluster or a standalone host's compute resource.
    ComputeResource,
    Host,
    ResourcePool,
    Folder,
    Datastore,
    Network,
    VirtualMachine,
}

impl Wanted {
    pub fn label(self) -> &'static str {
        match self {
            Wanted::Datacenter => "datacenter",
            Wanted::ComputeCluster => "compute cluster",
            Wanted::ComputeResource => "compute resource",
            Wanted::Host => "host",
            Wanted::ResourcePool => "resource pool",
            Wanted::Folder => "folder",
            Wanted::Datastore => "datastore",
            Wanted::Network => "network",
            Wanted::VirtualMachine => "virtual machine",
        }
    }

    pub fn accepts(self, kind: &str) -> bool {
        match self {
            Wanted::Datacenter => kind == "Datacenter",
            Wanted::ComputeCluster => kind == "ClusterComputeResource",
            Wanted::ComputeResource => matches!(kind, "ClusterComputeResource" | "ComputeResource"),
            Wanted::Host => kind == "HostSystem",
            Wanted::ResourcePool => matches!(kind, "ResourcePool" | "VirtualApp"),
            Wanted::Folder => kind == "Folder",
            // A datastore cluster (StoragePod) is not a valid clone location.
            Wanted::Datastore => kind == "Datastore",
            Wanted::Network => matches!(
                kind,
                "Network" | "DistributedVirtualPortgroup" | "OpaqueNetwork"
            ),
            Wanted::VirtualMachine => kind == "VirtualMachine",
        }
    }
}

/// The whole inventory at one moment.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    entities: HashMap<MoRef, Entity>,
    /// Several objects can share a path (same-named port groups of two switches, NSX segments):
    /// all are kept, and a lookup that hits more than one is ambiguous.
    by_path: BTreeMap<String, Vec<MoRef>>,
    children: HashMap<MoRef, Vec<MoRef>>,
}

impl Inventory {
    /// Build from the records of one read. The root folder (the entity without a parent) has
    /// the empty path; everything else hangs below it.
    pub fn from_records(records: Vec<Record>) -> Self {
        let raw: Raw = records
            .into_iter()
            .map(|r| (r.moref, (r.name, r.parent, r.vm)))
            .collect();
        let mut inv = Inventory::default();
        let mut paths: HashMap<MoRef, String> = HashMap::new();
        let keys: Vec<MoRef> = raw.keys().cloned().collect();
        for m in &keys {
            path_of(m, &raw, &mut paths, 0);
        }
        for (m, (name, parent, vm)) in raw {
            let path = paths.get(&m).cloned().unwrap_or_default();
            if let Some(p) = &parent {
                inv.children.entry(p.clone()).or_default().push(m.clone());
            }
            if !path.is_empty() {
                inv.by_path.entry(path.clone()).or_default().push(m.clone());
            }
            inv.entities.insert(
                m.clone(),
                Entity {
                    moref: m,
                    name,
                    parent,
                    path,
                    vm,
                },
            );
        }
        for v in inv.children.values_mut() {
            v.sort();
        }
        for v in inv.by_path.values_mut() {
            v.sort();
        }
        inv
    }

    pub fn len(&self) -> usize {
        self.entities.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    pub fn get(&self, m: &MoRef) -> Option<&Entity> {
        self.entities.get(m)
    }

    /// Entities with a path, sorted by path.
    pub fn iter(&self) -> impl Iterator<Item = &Entity> {
        self.by_path
            .values()
            .flatten()
            .filter_map(|m| self.entities.get(m))
    }

    /// The root folder (the one entity without a parent; its path is empty).
    pub fn root(&self) -> Option<&Entity> {
        self.entities
            .values()
            .find(|e| e.parent.is_none() && e.path.is_empty())
    }

    pub fn path(&self, m: &MoRef) -> Option<&str> {
        self.entities.get(m).map(|e| e.path.as_str())
    }

    /// How messages name an object: its inventory path, the name an admin knows and finds in
    /// the vSphere client; its moref when this snapshot predates it (a VM cloned since).
    pub fn describe(&self, m: &MoRef) -> String {
        self.path(m)
            .map(str::to_string)
            .unwrap_or_else(|| m.to_string())
    }

    /// Exact absolute path lookup; None when nothing or more than one object has this path.
    pub fn at_path(&self, path: &str) -> Option<&Entity> {
        match self.all_at_path(path).as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Every object with this absolute path.
    pub fn all_at_path(&self, path: &str) -> Vec<&Entity> {
        self.by_path
            .get(&normalize(path))
            .into_iter()
            .flatten()
            .filter_map(|m| self.entities.get(m))
            .collect()
    }

    pub fn children(&self, m: &MoRef) -> impl Iterator<Item = &Entity> {
        self.children
            .get(m)
            .into_iter()
            .flatten()
            .filter_map(|c| self.entities.get(c))
    }

    /// The nearest ancestor (or self) accepted by `wanted`.
    pub fn ancestor(&self, m: &MoRef, wanted: Wanted) -> Option<&Entity> {
        let mut cur = self.entities.get(m);
        let mut guard = 0;
        while let Some(e) = cur {
            if wanted.accepts(e.kind()) {
                return Some(e);
            }
            guard += 1;
            if guard > 1000 {
                return None;
            }
            cur = e.parent.as_ref().and_then(|p| self.entities.get(p));
        }
        None
    }

    /// Whether `m` is `scope` or below it.
    pub fn is_within(&self, m: &MoRef, scope: &MoRef) -> bool {
        match (self.path(m), self.path(scope)) {
            (Some(p), Some(s)) => p == s || p.starts_with(&format!("{s}/")),
            _ => false,
        }
    }

    /// Entities of a kind below `scope` (or everywhere), sorted by path.
    pub fn all(&self, wanted: Wanted, scope: Option<&MoRef>) -> Vec<&Entity> {
        self.iter()
            .filter(|e| wanted.accepts(e.kind()))
            .filter(|e| scope.is_none_or(|s| self.is_within(&e.moref, s)))
            .collect()
    }

    /// The hosts of a compute resource.
    pub fn hosts_of(&self, compute: &MoRef) -> Vec<&Entity> {
        self.children(compute)
            .filter(|e| e.kind() == "HostSystem")
            .collect()
    }

    /// The root resource pool of a compute resource.
    pub fn root_pool_of(&self, compute: &MoRef) -> Option<&Entity> {
        self.children(compute).find(|e| e.kind() == "ResourcePool")
    }

    /// Resolve a name or path the way admins write them in manifests:
    ///
    /// 1. `/DC0/host/C0/Resources/RP1` — an absolute inventory path;
    /// 2. a path relative to the scope (`Resources/RP1` in a cluster, `vm/capi` in a datacenter);
    /// 3. otherwise the trailing path components (`RP1`, `C0/Resources/RP1`, `capi`) must match
    ///    exactly one object of the wanted kind within the scope; several is an error naming them.
    pub fn find(
        &self,
        wanted: Wanted,
        query: &str,
        scope: Option<&MoRef>,
    ) -> Result<&Entity, LookupError> {
        let scope_path = scope.and_then(|s| self.path(s)).map(str::to_string);
        let not_found = || LookupError::NotFound {
            what: wanted.label().to_string(),
            query: query.to_string(),
            scope: scope_path.clone(),
        };
        let q = query.trim();
        if q.is_empty() || q == "/" {
            return Err(not_found());
        }
        let check = |e: &'_ Entity| -> Result<(), LookupError> {
            if wanted.accepts(e.kind()) {
                Ok(())
            } else {
                Err(LookupError::WrongType {
                    what: wanted.label().to_string(),
                    query: query.to_string(),
                    actual: e.kind().to_string(),
                })
            }
        };
        let ambiguous = |many: Vec<&Entity>| LookupError::Ambiguous {
            what: wanted.label().to_string(),
            query: query.to_string(),
            scope: scope_path.clone(),
            candidates: many
                .iter()
                .map(|e| format!("{} ({})", e.path, e.moref))
                .collect(),
        };
        if q.starts_with('/') {
            let all = self.all_at_path(q);
            let Some(first) = all.first() else {
                return Err(not_found());
            };
            let matching: Vec<&Entity> = all
                .iter()
                .copied()
                .filter(|e| wanted.accepts(e.kind()))
                .collect();
            let e = match matching.as_slice() {
                [] => {
                    check(first)?;
                    return Err(not_found());
                }
                [one] => *one,
                _ => return Err(ambiguous(matching)),
            };
            if let Some(s) = scope
                && !self.is_within(&e.moref, s)
            {
                return Err(not_found());
            }
            return Ok(e);
        }
        let rel = q.trim_end_matches('/');
        if let Some(sp) = &scope_path {
            let here: Vec<&Entity> = self
                .all_at_path(&format!("{sp}/{rel}"))
                .into_iter()
                .filter(|e| wanted.accepts(e.kind()))
                .collect();
            match here.as_slice() {
                [] => {}
                [one] => return Ok(one),
                _ => return Err(ambiguous(here)),
            }
        }
        let suffix = format!("/{rel}");
        let matches: Vec<&Entity> = self
            .all(wanted, scope)
            .into_iter()
            .filter(|e| e.path.ends_with(&suffix))
            .collect();
        match matches.as_slice() {
            [] => Err(not_found()),
            [one] => Ok(one),
            many => Err(ambiguous(many.to_vec())),
        }
    }

    /// VMs by instance UUID (what machines record), case-insensitive.
    pub fn vm_by_instance_uuid(&self, uuid: &str) -> Option<&Entity> {
        self.entities.values().find(|e| {
            e.vm.as_ref()
                .and_then(|v| v.instance_uuid.as_deref())
                .is_some_and(|u| u.eq_ignore_ascii_case(uuid))
        })
    }
}

fn normalize(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    format!("/{}", parts.join("/"))
}

type Raw = HashMap<MoRef, (String, Option<MoRef>, Option<VmInfo>)>;

fn path_of(m: &MoRef, raw: &Raw, memo: &mut HashMap<MoRef, String>, depth: usize) -> String {
    if let Some(p) = memo.get(m) {
        return p.clone();
    }
    let Some((name, parent, _)) = raw.get(m) else {
        return String::new();
    };
    let path = match parent {
        // The root folder: the empty path.
        None => String::new(),
        Some(_) if depth > 256 => String::new(),
        Some(p) => format!("{}/{}", path_of(p, raw, memo, depth + 1), name),
    };
    memo.insert(m.clone(), path.clone());
    path
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(
        kind: &str,
        value: &str,
        name: &str,
        parent: Option<(&str, &str)>,
    ) -> Record {
        Record {
            moref: MoRef::new(kind, value),
            name: name.into(),
            parent: parent.map(|(k, v)| MoRef::new(k, v)),
            vm: None,
        }
    }

    /// Two clusters that both have a pool named `rp0` (upstream #1913).
    pub(crate) fn sample() -> Inventory {
        Inventory::from_records(sample_records())
    }

    /// The objects of [`sample`], for tests that add their own.
    pub(crate) fn sample_records() -> Vec<Record> {
        vec![
            record("Folder", "group-d1", "Datacenters", None),
            record("Datacenter", "dc-1", "DC0", Some(("Folder", "group-d1"))),
            record("Folder", "f-vm", "vm", Some(("Datacenter", "dc-1"))),
            record("Folder", "f-host", "host", Some(("Datacenter", "dc-1"))),
            record("Folder", "f-capi", "capi", Some(("Folder", "f-vm"))),
            record(
                "ClusterComputeResource",
                "c-0",
                "C0",
                Some(("Folder", "f-host")),
            ),
            record(
                "ClusterComputeResource",
                "c-1",
                "C1",
                Some(("Folder", "f-host")),
            ),
            record(
                "ResourcePool",
                "rp-0",
                "Resources",
                Some(("ClusterComputeResource", "c-0")),
            ),
            record(
                "ResourcePool",
                "rp-1",
                "Resources",
                Some(("ClusterComputeResource", "c-1")),
            ),
            record(
                "ResourcePool",
                "rp-0a",
                "rp0",
                Some(("ResourcePool", "rp-0")),
            ),
            record(
                "ResourcePool",
                "rp-1a",
                "rp0",
                Some(("ResourcePool", "rp-1")),
            ),
            record(
                "HostSystem",
                "h-0",
                "h0",
                Some(("ClusterComputeResource", "c-0")),
            ),
        ]
    }

    #[test]
    fn paths_follow_parents_to_the_root() {
        let inv = sample();
        assert_eq!(
            inv.path(&MoRef::new("ResourcePool", "rp-0a")),
            Some("/DC0/host/C0/Resources/rp0")
        );
        assert_eq!(inv.path(&MoRef::new("Folder", "group-d1")), Some(""));
        let listed: Vec<&str> = inv.iter().map(|e| e.path.as_str()).collect();
        let mut sorted = listed.clone();
        sorted.sort();
        assert_eq!(listed, sorted, "iteration is sorted by path");
        assert_eq!(
            listed.len(),
            11,
            "the root folder has no path and is not listed"
        );
    }

    #[test]
    fn names_resolve_within_the_compute_cluster_scope() {
        let inv = sample();
        let c1 = MoRef::new("ClusterComputeResource", "c-1");
        let e = inv.find(Wanted::ResourcePool, "rp0", Some(&c1)).unwrap();
        assert_eq!(e.path, "/DC0/host/C1/Resources/rp0");
        let e = inv
            .find(Wanted::ResourcePool, "Resources", Some(&c1))
            .unwrap();
        assert_eq!(e.moref.value, "rp-1");
    }

    #[test]
    fn ambiguous_names_list_the_candidates() {
        let inv = sample();
        let dc = MoRef::new("Datacenter", "dc-1");
        let err = inv
            .find(Wanted::ResourcePool, "rp0", Some(&dc))
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/DC0/host/C0/Resources/rp0"), "{msg}");
        assert!(msg.contains("/DC0/host/C1/Resources/rp0"), "{msg}");
        assert!(matches!(err, LookupError::Ambiguous { .. }));
    }

    #[test]
    fn absolute_and_relative_paths_resolve() {
        let inv = sample();
        let dc = MoRef::new("Datacenter", "dc-1");
        assert_eq!(
            inv.find(Wanted::Folder, "/DC0/vm/capi", None)
                .unwrap()
                .moref
                .value,
            "f-capi"
        );
        assert_eq!(
            inv.find(Wanted::Folder, "vm/capi", Some(&dc))
                .unwrap()
                .moref
                .value,
            "f-capi"
        );
        assert_eq!(
            inv.find(Wanted::Folder, "capi", Some(&dc))
                .unwrap()
                .moref
                .value,
            "f-capi"
        );
        assert_eq!(
            inv.find(Wanted::Folder, "vm", Some(&dc))
                .unwrap()
                .moref
                .value,
            "f-vm"
        );
        assert_eq!(
            inv.find(Wanted::ResourcePool, "C0/Resources/rp0", None)
                .unwrap()
                .moref
                .value,
            "rp-0a"
        );
    }

    #[test]
    fn wrong_types_and_missing_names_are_explained() {
        let inv = sample();
        let err = inv
            .find(Wanted::ResourcePool, "/DC0/vm/capi", None)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#""/DC0/vm/capi" is a Folder, not a resource pool"#
        );
        let dc = MoRef::new("Datacenter", "dc-1");
        let err = inv
            .find(Wanted::Datastore, "LocalDS_9", Some(&dc))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"datastore "LocalDS_9" not found in /DC0"#
        );
        let c0 = MoRef::new("ClusterComputeResource", "c-0");
        let err = inv
            .find(
                Wanted::ResourcePool,
                "/DC0/host/C1/Resources/rp0",
                Some(&c0),
            )
            .unwrap_err();
        assert!(
            matches!(err, LookupError::NotFound { .. }),
            "outside the scope: {err}"
        );
    }

    #[test]
    fn objects_sharing_a_path_are_ambiguous_not_shadowed() {
        // Two port groups named pg-a (one per distributed switch) both live in /DC0/network.
        let inv = Inventory::from_records(vec![
            record("Folder", "group-d1", "Datacenters", None),
            record("Datacenter", "dc-1", "DC0", Some(("Folder", "group-d1"))),
            record("Folder", "f-net", "network", Some(("Datacenter", "dc-1"))),
            record(
                "DistributedVirtualPortgroup",
                "dvpg-1",
                "pg-a",
                Some(("Folder", "f-net")),
            ),
            record(
                "DistributedVirtualPortgroup",
                "dvpg-2",
                "pg-a",
                Some(("Folder", "f-net")),
            ),
        ]);
        assert_eq!(
            inv.iter().filter(|e| e.name == "pg-a").count(),
            2,
            "both are listed"
        );
        for q in ["pg-a", "/DC0/network/pg-a", "network/pg-a"] {
            let dc = MoRef::new("Datacenter", "dc-1");
            let err = inv.find(Wanted::Network, q, Some(&dc)).unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("dvpg-1") && msg.contains("dvpg-2"),
                "{q}: {msg}"
            );
        }
        assert!(inv.at_path("/DC0/network/pg-a").is_none());
    }

    #[test]
    fn ancestors_find_the_cluster_and_datacenter() {
        let inv = sample();
        let rp = MoRef::new("ResourcePool", "rp-0a");
        assert_eq!(
            inv.ancestor(&rp, Wanted::ComputeCluster).unwrap().name,
            "C0"
        );
        assert_eq!(inv.ancestor(&rp, Wanted::Datacenter).unwrap().name, "DC0");
        assert_eq!(
            inv.hosts_of(&MoRef::new("ClusterComputeResource", "c-0"))
                .len(),
            1
        );
        assert_eq!(
            inv.root_pool_of(&MoRef::new("ClusterComputeResource", "c-1"))
                .unwrap()
                .moref
                .value,
            "rp-1"
        );
    }
}
