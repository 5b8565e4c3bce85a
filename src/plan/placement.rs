//! Where a Machine's VM goes: its provider spec's `workspace`, `template` and network devices
//! resolved against one inventory snapshot, and the workspace a deployment zone implies.
//!
//! Both are pure. A zone fills a workspace with absolute inventory paths (resolved in the scope
//! the zone itself was verified in: the pool within the compute cluster, the folder and the
//! datastore within the datacenter), so a machine placed by zone name never meets the
//! ambiguities a bare name can have in a datacenter with several clusters (CAPV #1913). The
//! control plane machine set injects the same workspace, so "is this machine in its domain" is a
//! plain comparison.
use std::fmt;

use super::vm_size::{self, VmSize};
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::{FailureDomainType, VSphereFailureDomain};
use crate::api::machine::{
    CloneMode, Machine, NetworkDeviceSpec, ProvisioningMode, VSphereMachineProviderSpec, Workspace,
};
use crate::vcenter::model::inventory::{Inventory, LookupError, Wanted};
use crate::vcenter::model::moref::MoRef;

/// The label naming the VSphereDeploymentZone a Machine is placed in (also accepted as an
/// annotation; and the `machine.openshift.io/zone` label when it names a deployment zone). The
/// zone controller counts a machine so labelled as using the zone.
pub use super::zone_status::ZONE_LABEL as DEPLOYMENT_ZONE_LABEL;

/// The deployment zone a Machine names itself, by label or annotation, if any.
pub fn named_zone(machine: &Machine) -> Option<&String> {
    let meta = &machine.metadata;
    meta.labels
        .as_ref()
        .and_then(|l| l.get(DEPLOYMENT_ZONE_LABEL))
        .or_else(|| meta.annotations.as_ref()?.get(DEPLOYMENT_ZONE_LABEL))
}

/// Why a machine's configuration cannot be acted on: the field and the cause. The machine goes
/// `Failed` with `InvalidConfiguration`; nothing is created in vCenter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The field path, `spec.providerSpec.value.workspace.resourcePool`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for ConfigError {}

fn err(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.to_string(),
        message: message.into(),
    }
}

const PS: &str = "spec.providerSpec.value";

fn ps(field: &str) -> String {
    format!("{PS}.{field}")
}

fn lookup(field: &str, e: LookupError) -> ConfigError {
    err(&ps(field), e.to_string())
}

/// The deployment zone a Machine asks for: [`named_zone`], else the `machine.openshift.io/zone`
/// label when a zone of that name exists.
pub fn requested_zone<'z>(
    machine: &Machine,
    zones: impl IntoIterator<Item = &'z VSphereDeploymentZone> + Clone,
) -> Option<String> {
    let meta = &machine.metadata;
    if let Some(z) = named_zone(machine) {
        return Some(z.clone());
    }
    let label = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(crate::api::machine::ZONE_LABEL))?;
    zones
        .into_iter()
        .any(|z| z.metadata.name.as_deref() == Some(label.as_str()))
        .then(|| label.clone())
}

/// What a deployment zone implies for the machines placed in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneFill {
    pub workspace: Workspace,
    /// Network names for `network.devices[i].networkName`, in order.
    pub networks: Vec<String>,
    /// The template's name, when the domain says one (an OpenShift `Infrastructure` domain's
    /// `topology.template`); None keeps the machine's own.
    pub template: Option<String>,
    /// `machine.openshift.io/region` and `/zone` label values (the failure domain's tag names).
    pub region: String,
    pub zone: String,
}

/// The workspace of a zone, every path absolute. Fails, naming the zone's field, when the zone
/// does not resolve (the zone's own status says so too).
pub fn zone_fill(
    zone: &VSphereDeploymentZone,
    fd: Option<&VSphereFailureDomain>,
    inv: &Inventory,
) -> Result<ZoneFill, ConfigError> {
    let zname = zone.metadata.name.clone().unwrap_or_default();
    let zfield = |f: &str| format!("VSphereDeploymentZone {zname} {f}");
    let fd_name = zone.spec.failure_domain.clone();
    let Some(fd) = fd else {
        return Err(err(
            &zfield("spec.failureDomain"),
            format!("VSphereFailureDomain {fd_name:?} not found"),
        ));
    };
    let ffield = |f: &str| format!("VSphereFailureDomain {fd_name} {f}");
    let topo = &fd.spec.topology;
    let dc = inv
        .find(Wanted::Datacenter, &topo.datacenter, None)
        .map_err(|e| err(&ffield("spec.topology.datacenter"), e.to_string()))?;
    let cluster = match &topo.compute_cluster {
        Some(c) if !c.is_empty() => Some(
            inv.find(Wanted::ComputeResource, c, Some(&dc.moref))
                .map_err(|e| err(&ffield("spec.topology.computeCluster"), e.to_string()))?,
        ),
        _ => None,
    };
    let pool = match (zone.spec.resource_pool(), cluster) {
        (Some(p), scope) if !p.is_empty() => inv
            .find(
                Wanted::ResourcePool,
                p,
                Some(scope.map_or(&dc.moref, |c| &c.moref)),
            )
            .map_err(|e| {
                err(
                    &zfield("spec.placementConstraint.resourcePool"),
                    e.to_string(),
                )
            })?
            .path
            .clone(),
        (_, Some(c)) => inv
            .root_pool_of(&c.moref)
            .map(|p| p.path.clone())
            .ok_or_else(|| {
                err(
                    &ffield("spec.topology.computeCluster"),
                    format!("{} has no root resource pool", c.path),
                )
            })?,
        (_, None) => {
            return Err(err(
                &zfield("spec.placementConstraint.resourcePool"),
                "required when the failure domain names no compute cluster",
            ));
        }
    };
    let folder = match zone.spec.folder() {
        Some(f) if !f.is_empty() => inv
            .find(Wanted::Folder, f, Some(&dc.moref))
            .map_err(|e| err(&zfield("spec.placementConstraint.folder"), e.to_string()))?
            .path
            .clone(),
        _ => format!("{}/vm", dc.path),
    };
    let datastore = match &topo.datastore {
        Some(d) if !d.is_empty() => Some(
            inv.find(Wanted::Datastore, d, Some(&dc.moref))
                .map_err(|e| err(&ffield("spec.topology.datastore"), e.to_string()))?
                .path
                .clone(),
        ),
        _ => None,
    };
    let mut networks = Vec::new();
    for (i, n) in fd.spec.network_names().into_iter().enumerate() {
        let e = inv.find(Wanted::Network, n, Some(&dc.moref)).map_err(|e| {
            err(
                &ffield(&format!("spec.topology.networks[{i}]")),
                e.to_string(),
            )
        })?;
        networks.push(e.path.clone());
    }
    let vm_group = (fd.spec.zone.type_ == FailureDomainType::HostGroup)
        .then(|| topo.hosts.as_ref().map(|h| h.vm_group_name.clone()))
        .flatten()
        .filter(|g| !g.is_empty());
    Ok(ZoneFill {
        workspace: Workspace {
            server: zone.spec.server.clone(),
            datacenter: Some(dc.path.clone()),
            folder: Some(folder),
            datastore,
            resource_pool: Some(pool),
            vm_group,
        },
        networks,
        template: None,
        region: fd.spec.region.name.clone(),
        zone: fd.spec.zone.name.clone(),
    })
}

/// The provider spec with the zone's workspace and networks filled in where the machine leaves
/// them empty (what the machine says itself wins).
pub fn with_zone(spec: &VSphereMachineProviderSpec, fill: &ZoneFill) -> VSphereMachineProviderSpec {
    let mut out = spec.clone();
    let ws = out.workspace.get_or_insert_with(Workspace::default);
    let pick = |own: &mut Option<String>, zone: &Option<String>| {
        if own.as_deref().is_none_or(str::is_empty) {
            own.clone_from(zone);
        }
    };
    pick(&mut ws.server, &fill.workspace.server);
    pick(&mut ws.datacenter, &fill.workspace.datacenter);
    pick(&mut ws.folder, &fill.workspace.folder);
    pick(&mut ws.datastore, &fill.workspace.datastore);
    pick(&mut ws.resource_pool, &fill.workspace.resource_pool);
    pick(&mut ws.vm_group, &fill.workspace.vm_group);
    if out.network.devices.is_empty() {
        out.network.devices = fill
            .networks
            .iter()
            .map(|n| NetworkDeviceSpec {
                network_name: Some(n.clone()),
                ..NetworkDeviceSpec::default()
            })
            .collect();
    } else {
        for (d, n) in out.network.devices.iter_mut().zip(&fill.networks) {
            if d.network_name.as_deref().is_none_or(str::is_empty) {
                d.network_name = Some(n.clone());
            }
        }
    }
    out
}

/// A machine's vCenter targets, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub datacenter: MoRef,
    pub template: MoRef,
    pub folder: MoRef,
    pub pool: MoRef,
    /// The compute cluster owning the pool (VM groups live there).
    pub cluster: Option<MoRef>,
    pub datastore: Option<MoRef>,
    /// One network per device, in order.
    pub networks: Vec<MoRef>,
    pub vm_group: Option<String>,
    /// The sizes to ask for; None keeps the template's (a 0 in the spec, `plan::vm_size`).
    pub num_cpus: Option<i32>,
    pub num_cores_per_socket: Option<i32>,
    pub memory_mib: Option<i64>,
    /// The size of the template's disk after the clone (never smaller than the template's).
    pub disk_gib: Option<i32>,
    /// New empty disks (`dataDisks[]`), in order.
    pub data_disks: Vec<DataDisk>,
    /// `cloneMode: linkedClone`: clone from a snapshot of the template. None: a full clone.
    pub linked_clone: Option<LinkedClone>,
}

/// A data disk a clone gets (`dataDisks[i]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataDisk {
    pub name: String,
    pub size_gib: i32,
    /// None leaves thin or thick to the storage policy.
    pub mode: Option<ProvisioningMode>,
}

/// A linked clone (`cloneMode: linkedClone`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkedClone {
    /// The template's snapshot by name or path (`snapshot`); None: its current snapshot.
    pub snapshot: Option<String>,
    /// A template without snapshots (and none named) is cloned in full instead of refused
    /// (CAPV's behaviour, for Cluster API machines; `plan::capi_machine::actuated`).
    pub or_full_clone: bool,
}

/// The data disks of a provider spec, checked as far as the spec alone can tell: a size of at
/// least 1 GiB and a known provisioning mode (admission says the same; a Machine stored before
/// it, or offline, gets here too).
fn data_disks(spec: &VSphereMachineProviderSpec) -> Result<Vec<DataDisk>, ConfigError> {
    let mut out = Vec::new();
    for (i, d) in spec.data_disks.iter().flatten().enumerate() {
        let field = |f: &str| ps(&format!("dataDisks[{i}].{f}"));
        if d.size_gib < 1 {
            return Err(err(
                &field("sizeGiB"),
                format!("{} GiB: a data disk needs at least 1 GiB", d.size_gib),
            ));
        }
        let mode = match d.provisioning_mode.as_deref().map(str::trim) {
            None | Some("") => None,
            Some("Thin") => Some(ProvisioningMode::Thin),
            Some("Thick") => Some(ProvisioningMode::Thick),
            Some("EagerlyZeroed") => Some(ProvisioningMode::EagerlyZeroed),
            Some(other) => {
                return Err(err(
                    &field("provisioningMode"),
                    format!("{other:?} is not Thin, Thick or EagerlyZeroed"),
                ));
            }
        };
        out.push(DataDisk {
            name: d.name.clone(),
            size_gib: d.size_gib,
            mode,
        });
    }
    Ok(out)
}

fn given(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

fn looks_like_uuid(s: &str) -> bool {
    let hex = |p: &str, n: usize| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit());
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && hex(parts[0], 8)
        && hex(parts[1], 4)
        && hex(parts[2], 4)
        && hex(parts[3], 4)
        && hex(parts[4], 12)
}

/// Resolve a provider spec against the inventory. Every failure names the field, what was
/// looked for, where, and the candidates when the name is ambiguous.
pub fn resolve(
    spec: &VSphereMachineProviderSpec,
    inv: &Inventory,
) -> Result<Placement, ConfigError> {
    let size = VmSize::from(spec);
    if let Some((field, n)) = size.negative().first() {
        return Err(err(&ps(field), format!("{n}: {}", vm_size::NEGATIVE)));
    }
    let size = size.asked();
    let ws = spec.workspace.clone().unwrap_or_default();
    let dc = match given(&ws.datacenter) {
        Some(d) => inv
            .find(Wanted::Datacenter, d, None)
            .map_err(|e| lookup("workspace.datacenter", e))?,
        None => match inv.all(Wanted::Datacenter, None).as_slice() {
            [one] => *one,
            [] => {
                return Err(err(
                    &ps("workspace.datacenter"),
                    "vCenter has no datacenter",
                ));
            }
            many => {
                return Err(err(
                    &ps("workspace.datacenter"),
                    format!(
                        "required: vCenter has several datacenters ({})",
                        many.iter()
                            .map(|e| e.path.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        },
    };
    let scope = Some(&dc.moref);
    let template = spec.template.trim();
    if template.is_empty() {
        return Err(err(&ps("template"), "required"));
    }
    let template = if looks_like_uuid(template) {
        inv.vm_by_instance_uuid(template)
            .filter(|e| inv.is_within(&e.moref, &dc.moref))
            .ok_or_else(|| {
                err(
                    &ps("template"),
                    format!(
                        "no virtual machine with instance UUID {template} in {}",
                        dc.path
                    ),
                )
            })?
    } else {
        inv.find(Wanted::VirtualMachine, template, scope)
            .map_err(|e| lookup("template", e))?
    };
    let pool = match given(&ws.resource_pool) {
        Some(p) => inv
            .find(Wanted::ResourcePool, p, scope)
            .map_err(|e| lookup("workspace.resourcePool", e))?,
        None => {
            let roots: Vec<_> = inv
                .all(Wanted::ComputeResource, scope)
                .into_iter()
                .filter_map(|c| inv.root_pool_of(&c.moref))
                .collect();
            match roots.as_slice() {
                [one] => *one,
                [] => {
                    return Err(err(
                        &ps("workspace.resourcePool"),
                        format!("{} has no compute resource", dc.path),
                    ));
                }
                many => {
                    return Err(err(
                        &ps("workspace.resourcePool"),
                        format!(
                            "required: {} has several compute resources ({})",
                            dc.path,
                            many.iter()
                                .map(|e| e.path.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
            }
        }
    };
    let folder = match given(&ws.folder) {
        Some(f) => inv
            .find(Wanted::Folder, f, scope)
            .map_err(|e| lookup("workspace.folder", e))?,
        None => inv.at_path(&format!("{}/vm", dc.path)).ok_or_else(|| {
            err(
                &ps("workspace.folder"),
                format!("{} has no vm folder", dc.path),
            )
        })?,
    };
    let datastore = match given(&ws.datastore) {
        Some(d) => Some(
            inv.find(Wanted::Datastore, d, scope)
                .map_err(|e| lookup("workspace.datastore", e))?
                .moref
                .clone(),
        ),
        None => None,
    };
    let cluster = inv
        .ancestor(&pool.moref, Wanted::ComputeCluster)
        .map(|c| c.moref.clone());
    let vm_group = given(&ws.vm_group).map(str::to_string);
    if vm_group.is_some() && cluster.is_none() {
        return Err(err(
            &ps("workspace.vmGroup"),
            format!(
                "resource pool {} is not in a compute cluster, so it has no VM groups",
                pool.path
            ),
        ));
    }
    let mut networks = Vec::new();
    for (i, d) in spec.network.devices.iter().enumerate() {
        let field = format!("network.devices[{i}].networkName");
        let name = given(&d.network_name).ok_or_else(|| err(&ps(&field), "required"))?;
        networks.push(
            inv.find(Wanted::Network, name, scope)
                .map_err(|e| lookup(&field, e))?
                .moref
                .clone(),
        );
    }
    Ok(Placement {
        datacenter: dc.moref.clone(),
        template: template.moref.clone(),
        folder: folder.moref.clone(),
        pool: pool.moref.clone(),
        cluster,
        datastore,
        networks,
        vm_group,
        num_cpus: size.num_cpus,
        num_cores_per_socket: size.num_cores_per_socket,
        memory_mib: size.memory_mib,
        disk_gib: size.disk_gib,
        data_disks: data_disks(spec)?,
        linked_clone: (spec.clone_mode() == CloneMode::LinkedClone).then(|| LinkedClone {
            snapshot: given(&spec.snapshot).map(str::to_string),
            or_full_clone: false,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deployment_zone::{PlacementConstraint, VSphereDeploymentZoneSpec};
    use crate::api::failure_domain::{
        FailureDomain, FailureDomainHosts, Topology, VSphereFailureDomainSpec,
    };
    use crate::vcenter::model::inventory::tests::{record, sample_records};

    /// The shared sample (two clusters each with a pool `rp0`) plus a template, a datastore and
    /// networks.
    fn inv() -> Inventory {
        let mut c = sample_records();
        c.push(record(
            "Folder",
            "f-ds",
            "datastore",
            Some(("Datacenter", "dc-1")),
        ));
        c.push(record(
            "Datastore",
            "ds-1",
            "LocalDS_0",
            Some(("Folder", "f-ds")),
        ));
        c.push(record(
            "Folder",
            "f-net",
            "network",
            Some(("Datacenter", "dc-1")),
        ));
        c.push(record(
            "Network",
            "net-1",
            "VM Network",
            Some(("Folder", "f-net")),
        ));
        c.push(record(
            "VirtualMachine",
            "vm-t",
            "rhcos",
            Some(("Folder", "f-vm")),
        ));
        Inventory::from_records(c)
    }

    fn fd(kind: FailureDomainType, cluster: Option<&str>) -> VSphereFailureDomain {
        VSphereFailureDomain::new(
            "fd-a",
            VSphereFailureDomainSpec {
                region: FailureDomain {
                    name: "region-a".into(),
                    type_: FailureDomainType::Datacenter,
                    tag_category: "k8s-region".into(),
                    auto_configure: None,
                },
                zone: FailureDomain {
                    name: "zone-a".into(),
                    type_: kind,
                    tag_category: "k8s-zone".into(),
                    auto_configure: None,
                },
                topology: Topology {
                    datacenter: "DC0".into(),
                    compute_cluster: cluster.map(str::to_string),
                    hosts: (kind == FailureDomainType::HostGroup).then(|| FailureDomainHosts {
                        vm_group_name: "vms-a".into(),
                        host_group_name: "hosts-a".into(),
                    }),
                    networks: Some(vec!["VM Network".into()]),
                    network_configurations: None,
                    datastore: Some("LocalDS_0".into()),
                },
            },
        )
    }

    fn zone(pool: Option<&str>, folder: Option<&str>) -> VSphereDeploymentZone {
        VSphereDeploymentZone::new(
            "dz-a",
            VSphereDeploymentZoneSpec {
                thumbprint: None,
                identity_ref: None,
                server: Some("vc.example.com".into()),
                failure_domain: "fd-a".into(),
                control_plane: None,
                placement_constraint: Some(PlacementConstraint {
                    resource_pool: pool.map(str::to_string),
                    folder: folder.map(str::to_string),
                }),
            },
        )
    }

    #[test]
    fn a_zone_fills_absolute_paths_scoped_like_its_verification() {
        // rp0 exists in both clusters: the zone's compute cluster decides, as in zone checks.
        let fill = zone_fill(
            &zone(Some("rp0"), Some("capi")),
            Some(&fd(FailureDomainType::ComputeCluster, Some("C1"))),
            &inv(),
        )
        .unwrap();
        assert_eq!(
            fill.workspace,
            Workspace {
                server: Some("vc.example.com".into()),
                datacenter: Some("/DC0".into()),
                folder: Some("/DC0/vm/capi".into()),
                datastore: Some("/DC0/datastore/LocalDS_0".into()),
                resource_pool: Some("/DC0/host/C1/Resources/rp0".into()),
                vm_group: None,
            }
        );
        assert_eq!(fill.networks, ["/DC0/network/VM Network"]);
        assert_eq!(
            (fill.region.as_str(), fill.zone.as_str()),
            ("region-a", "zone-a")
        );
    }

    #[test]
    fn without_a_placement_constraint_the_root_pool_and_vm_folder_are_used() {
        let fill = zone_fill(
            &zone(None, None),
            Some(&fd(FailureDomainType::HostGroup, Some("C0"))),
            &inv(),
        )
        .unwrap();
        assert_eq!(
            fill.workspace.resource_pool.as_deref(),
            Some("/DC0/host/C0/Resources")
        );
        assert_eq!(fill.workspace.folder.as_deref(), Some("/DC0/vm"));
        assert_eq!(
            fill.workspace.vm_group.as_deref(),
            Some("vms-a"),
            "HostGroup zones only"
        );
    }

    #[test]
    fn a_zone_that_does_not_resolve_names_its_field() {
        let e = zone_fill(
            &zone(Some("nope"), None),
            Some(&fd(FailureDomainType::ComputeCluster, Some("C0"))),
            &inv(),
        )
        .unwrap_err();
        assert_eq!(
            e.field,
            "VSphereDeploymentZone dz-a spec.placementConstraint.resourcePool"
        );
        assert!(
            e.message.contains("\"nope\" not found in /DC0/host/C0"),
            "{e}"
        );
        let e = zone_fill(&zone(None, None), None, &inv()).unwrap_err();
        assert!(
            e.to_string()
                .contains("VSphereFailureDomain \"fd-a\" not found"),
            "{e}"
        );
    }

    fn spec(ws: Workspace) -> VSphereMachineProviderSpec {
        VSphereMachineProviderSpec {
            template: "rhcos".into(),
            workspace: Some(ws),
            ..VSphereMachineProviderSpec::default()
        }
    }

    #[test]
    fn a_machine_resolves_to_morefs_and_its_pools_cluster() {
        let fill = zone_fill(
            &zone(Some("rp0"), None),
            Some(&fd(FailureDomainType::HostGroup, Some("C1"))),
            &inv(),
        )
        .unwrap();
        let s = with_zone(&spec(Workspace::default()), &fill);
        let p = resolve(&s, &inv()).unwrap();
        assert_eq!(p.pool, MoRef::new("ResourcePool", "rp-1a"));
        assert_eq!(p.cluster, Some(MoRef::new("ClusterComputeResource", "c-1")));
        assert_eq!(p.folder, MoRef::new("Folder", "f-vm"));
        assert_eq!(p.template, MoRef::new("VirtualMachine", "vm-t"));
        assert_eq!(p.datastore, Some(MoRef::new("Datastore", "ds-1")));
        assert_eq!(p.networks, [MoRef::new("Network", "net-1")]);
        assert_eq!(p.vm_group.as_deref(), Some("vms-a"));
    }

    #[test]
    fn what_the_machine_says_wins_over_its_zone() {
        let fill = zone_fill(
            &zone(None, None),
            Some(&fd(FailureDomainType::ComputeCluster, Some("C0"))),
            &inv(),
        )
        .unwrap();
        let own = Workspace {
            folder: Some("capi".into()),
            ..Workspace::default()
        };
        let s = with_zone(&spec(own), &fill);
        let ws = s.workspace.unwrap();
        assert_eq!(ws.folder.as_deref(), Some("capi"));
        assert_eq!(ws.resource_pool.as_deref(), Some("/DC0/host/C0/Resources"));
    }

    #[test]
    fn bad_names_fail_naming_the_field_and_the_candidates() {
        let e = resolve(
            &spec(Workspace {
                resource_pool: Some("rp0".into()),
                ..Workspace::default()
            }),
            &inv(),
        )
        .unwrap_err();
        assert_eq!(e.field, "spec.providerSpec.value.workspace.resourcePool");
        assert!(
            e.message.contains("/DC0/host/C0/Resources/rp0")
                && e.message.contains("/DC0/host/C1/Resources/rp0"),
            "{e}"
        );
        let mut s = spec(Workspace {
            resource_pool: Some("C0/Resources".into()),
            ..Workspace::default()
        });
        s.template = "no-such-template".into();
        let e = resolve(&s, &inv()).unwrap_err();
        assert_eq!(e.field, "spec.providerSpec.value.template");
        assert!(
            e.message.contains("\"no-such-template\" not found in /DC0"),
            "{e}"
        );
        // No pool and several clusters: the pool is required, with the candidates.
        let e = resolve(&spec(Workspace::default()), &inv()).unwrap_err();
        assert!(e.message.contains("several compute resources"), "{e}");
        let mut s = spec(Workspace {
            resource_pool: Some("C0/Resources".into()),
            ..Workspace::default()
        });
        s.network.devices = vec![NetworkDeviceSpec::default()];
        let e = resolve(&s, &inv()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.providerSpec.value.network.devices[0].networkName: required"
        );
    }

    /// Data disks and the clone mode come through from the spec; what the spec alone shows
    /// to be wrong fails naming the field.
    #[test]
    fn data_disks_and_the_clone_mode_resolve_from_the_spec() {
        use crate::api::machine::VSphereDisk;
        let mut s = spec(Workspace {
            resource_pool: Some("C0/Resources".into()),
            ..Workspace::default()
        });
        let disk = |name: &str, size_gib: i32, mode: Option<&str>| VSphereDisk {
            name: name.into(),
            size_gib,
            provisioning_mode: mode.map(str::to_string),
        };
        s.data_disks = Some(vec![
            disk("a", 1, Some("Thin")),
            disk("b", 2, Some("EagerlyZeroed")),
            disk("c", 3, Some("")),
        ]);
        s.snapshot = Some("base".into());
        let p = resolve(&s, &inv()).unwrap();
        assert_eq!(
            p.data_disks,
            [
                DataDisk {
                    name: "a".into(),
                    size_gib: 1,
                    mode: Some(ProvisioningMode::Thin)
                },
                DataDisk {
                    name: "b".into(),
                    size_gib: 2,
                    mode: Some(ProvisioningMode::EagerlyZeroed)
                },
                DataDisk {
                    name: "c".into(),
                    size_gib: 3,
                    mode: None
                },
            ]
        );
        assert_eq!(p.linked_clone, None, "a snapshot alone is no linked clone");
        s.clone_mode = Some("linkedClone".into());
        assert_eq!(
            resolve(&s, &inv()).unwrap().linked_clone,
            Some(LinkedClone {
                snapshot: Some("base".into()),
                or_full_clone: false
            })
        );
        s.snapshot = Some(" ".into());
        assert_eq!(
            resolve(&s, &inv()).unwrap().linked_clone,
            Some(LinkedClone {
                snapshot: None,
                or_full_clone: false
            })
        );
        s.data_disks = Some(vec![disk("a", 1, Some("thin"))]);
        assert_eq!(
            resolve(&s, &inv()).unwrap_err().to_string(),
            "spec.providerSpec.value.dataDisks[0].provisioningMode: \"thin\" is not Thin, Thick or EagerlyZeroed"
        );
        s.data_disks = Some(vec![disk("a", 1, None), disk("b", 0, None)]);
        assert_eq!(
            resolve(&s, &inv()).unwrap_err().to_string(),
            "spec.providerSpec.value.dataDisks[1].sizeGiB: 0 GiB: a data disk needs at least 1 GiB"
        );
    }

    #[test]
    fn a_datacenter_is_required_only_when_there_are_several() {
        let e = resolve(&spec(Workspace::default()), &Inventory::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.providerSpec.value.workspace.datacenter: vCenter has no datacenter"
        );
    }

    #[test]
    fn the_zone_is_named_by_annotation_or_by_a_label_naming_a_zone() {
        let zones = [zone(None, None)];
        let mut m = Machine::new("m", Default::default());
        assert_eq!(requested_zone(&m, &zones), None);
        m.metadata.labels = Some(
            [(
                crate::api::machine::ZONE_LABEL.to_string(),
                "us-east-1a".to_string(),
            )]
            .into(),
        );
        assert_eq!(
            requested_zone(&m, &zones),
            None,
            "a zone label naming no deployment zone"
        );
        m.metadata.labels = Some(
            [(
                crate::api::machine::ZONE_LABEL.to_string(),
                "dz-a".to_string(),
            )]
            .into(),
        );
        assert_eq!(requested_zone(&m, &zones).as_deref(), Some("dz-a"));
        m.metadata.annotations =
            Some([(DEPLOYMENT_ZONE_LABEL.to_string(), "dz-b".to_string())].into());
        assert_eq!(
            requested_zone(&m, &zones).as_deref(),
            Some("dz-b"),
            "the annotation wins"
        );
    }
}
