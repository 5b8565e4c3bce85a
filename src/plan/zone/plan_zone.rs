//! The decision for one zone: datacenter first (every other lookup is scoped to it), then the
//! compute cluster, the placement constraint, the region and zone tags, the datastore and
//! networks, and the hosts of a HostGroup zone.
use crate::api::conditions::{zone, zone_ours, zone_v1beta1};
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::vcenter::model::inventory::{Entity, LookupError, Wanted};

use super::context::FdContext;
use super::reasons::FdProblem;
use super::steps::dedup_steps;
use super::verdict::{Check, ZonePlacement, ZoneVerdict};
use crate::plan::failure::Failure;
use crate::plan::view::VcenterView;

/// Decide one zone. `vcenter` is the gathered view of the zone's server, or why there is no
/// connection to gather it with (no credentials, an invalid address) — a message without
/// secrets, taken as a failure no retry fixes. [`plan_zone_against`] takes a typed failure.
pub fn plan_zone(
    dz: &VSphereDeploymentZone,
    fd: Option<&VSphereFailureDomain>,
    vcenter: Result<&VcenterView, &str>,
) -> ZoneVerdict {
    match vcenter {
        Ok(view) => plan_zone_against(dz, fd, Ok(view)),
        Err(message) => plan_zone_against(dz, fd, Err(&Failure::config(message))),
    }
}

/// Decide one zone against the gathered view of its server, or the typed failure that kept it
/// from being gathered (which decides whether the zone is retrying or failed).
pub fn plan_zone_against(
    dz: &VSphereDeploymentZone,
    fd: Option<&VSphereFailureDomain>,
    vcenter: Result<&VcenterView, &Failure>,
) -> ZoneVerdict {
    let mut v = ZoneVerdict {
        failure_domain_missing: false,
        vcenter: Check::Skipped,
        placement: Check::Skipped,
        failure_domain: Check::Skipped,
        steps: Vec::new(),
        placement_refs: None,
        failures: Vec::new(),
    };
    let fd_name = dz.spec.failure_domain.clone();
    let Some(fd) = fd else {
        v.failure_domain_missing = true;
        v.failure_domain = Check::failed(
            (
                zone_ours::FAILURE_DOMAIN_NOT_FOUND,
                zone_ours::FAILURE_DOMAIN_NOT_FOUND,
            ),
            format!("VSphereFailureDomain {fd_name:?} not found"),
        );
        return v;
    };
    let view = match vcenter {
        Ok(view) => view,
        Err(failure) => {
            v.mark_vcenter_unavailable(failure);
            return v;
        }
    };
    v.vcenter = Check::Ok {
        message: view.tls_note.clone().unwrap_or_default(),
    };
    let inv = &view.inventory;
    let topo = &fd.spec.topology;

    // Datacenter: every other lookup is scoped to it. CAPV sets the finder's datacenter while
    // getting the session, so a missing one is `VCenterAvailable=False/VCenterUnreachable` and
    // nothing else is checked. It is the failure domain's content, not a connection failure: no
    // retry fixes it, and the zone is not ready until someone changes one or the other.
    let dc = match inv.find(Wanted::Datacenter, &topo.datacenter, None) {
        Ok(dc) => dc,
        Err(e) => {
            v.vcenter = Check::failed(
                (zone_v1beta1::VCENTER_UNREACHABLE, zone::VCENTER_UNREACHABLE),
                format!(
                    "vCenter answers, but the failure domain's datacenter {:?} cannot be used: {e}",
                    topo.datacenter
                ),
            );
            return v;
        }
    };

    let mut problems: Vec<(FdProblem, String)> = Vec::new();
    // Compute cluster, scoped to the datacenter.
    let cluster = match &topo.compute_cluster {
        Some(name) if !name.is_empty() => {
            match inv.find(Wanted::ComputeCluster, name, Some(&dc.moref)) {
                Ok(c) => Some(c),
                Err(e) => {
                    problems.push((
                        FdProblem::ComputeClusterNotFound,
                        lookup_message("compute cluster", name, &e),
                    ));
                    None
                }
            }
        }
        _ => None,
    };
    let cluster_missing = topo
        .compute_cluster
        .as_deref()
        .is_some_and(|c| !c.is_empty())
        && cluster.is_none();

    // Placement constraint: pool scoped to the cluster when there is one.
    let mut placement_failures: Vec<(&'static str, &'static str, String)> = Vec::new();
    let mut pool: Option<&Entity> = None;
    if let Some(rp) = dz.spec.resource_pool().filter(|s| !s.is_empty()) {
        let scope = cluster.map(|c| &c.moref).unwrap_or(&dc.moref);
        match inv.find(Wanted::ResourcePool, rp, Some(scope)) {
            Ok(p) => pool = Some(p),
            Err(e) => {
                // Found in the datacenter but outside the cluster: say whose it is.
                let elsewhere =
                    cluster.and_then(|_| inv.find(Wanted::ResourcePool, rp, Some(&dc.moref)).ok());
                let detail = match (elsewhere, cluster) {
                    (Some(p), Some(c)) => {
                        let owner = inv
                            .ancestor(&p.moref, Wanted::ComputeResource)
                            .map(|o| o.path.clone())
                            .unwrap_or_default();
                        problems.push((
                            FdProblem::ResourcePoolNotOwned,
                            format!(
                                "resource pool {} is not owned by compute cluster {} (it belongs to {owner})",
                                p.path, c.path
                            ),
                        ));
                        format!(
                            "resource pool {rp} is misconfigured: not in compute cluster {}",
                            c.path
                        )
                    }
                    _ => format!("resource pool {rp} is misconfigured: {}", detail(&e)),
                };
                if !cluster_missing {
                    placement_failures.push((
                        zone_v1beta1::RESOURCE_POOL_NOT_FOUND,
                        zone::RESOURCE_POOL_NOT_FOUND,
                        detail,
                    ));
                }
            }
        }
    } else if let Some(c) = cluster {
        pool = inv.root_pool_of(&c.moref);
    }
    // VMs live under the datacenter's vm folder: look there, so `capi` cannot match a host or
    // network folder of the same name.
    let vm_folder = inv.at_path(&format!("{}/vm", dc.path));
    let folder_scope = vm_folder.map(|f| &f.moref).unwrap_or(&dc.moref);
    let folder = match dz.spec.folder().filter(|s| !s.is_empty()) {
        // `vm`, `capi`, `vm/capi` and `/DC0/vm/capi` all resolve within the vm folder.
        Some(f) => match inv.find(Wanted::Folder, f, Some(folder_scope)) {
            Ok(folder) => Some(folder),
            Err(e) => {
                placement_failures.push((
                    zone_v1beta1::FOLDER_NOT_FOUND,
                    zone::FOLDER_NOT_FOUND,
                    format!("folder {f} is misconfigured: {}", detail(&e)),
                ));
                None
            }
        },
        None => vm_folder,
    };
    v.placement = match placement_failures.first() {
        // Without the cluster the pool cannot be placed in scope; the failure domain check
        // names the cluster.
        None if cluster_missing => Check::Skipped,
        None => Check::Ok {
            message: String::new(),
        },
        Some((r1, r2, _)) => Check::failed(
            (r1, r2),
            placement_failures
                .iter()
                .map(|(_, _, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };

    // Region, then zone tags.
    let config = cluster.and_then(|c| view.cluster_configs.get(&c.moref));
    let fd_ctx = FdContext {
        inv,
        view,
        dc,
        cluster,
        config,
        host_group: topo.hosts.as_ref().map(|h| h.host_group_name.as_str()),
    };
    for (side, problem) in [
        (&fd.spec.region, FdProblem::Region),
        (&fd.spec.zone, FdProblem::Zone),
    ] {
        fd_ctx.check_tag(side, problem, &mut problems, &mut v.steps);
    }

    // Topology: datastore and networks, scoped to the datacenter.
    let mut datastore = None;
    if let Some(ds) = topo.datastore.as_deref().filter(|s| !s.is_empty()) {
        match inv.find(Wanted::Datastore, ds, Some(&dc.moref)) {
            Ok(d) => datastore = Some(d.moref.clone()),
            Err(e) => problems.push((
                FdProblem::DatastoreNotFound,
                format!("datastore {ds} is misconfigured: {}", detail(&e)),
            )),
        }
    }
    let mut networks = Vec::new();
    for n in fd.spec.network_names() {
        match inv.find(Wanted::Network, n, Some(&dc.moref)) {
            Ok(net) => networks.push(net.moref.clone()),
            Err(e) => problems.push((
                FdProblem::NetworkNotFound,
                format!("network {n} is misconfigured: {}", detail(&e)),
            )),
        }
    }

    // Hosts: VM group, host group and the VM-host rule binding them.
    let mut notes = Vec::new();
    if let (Some(hosts), Some(c)) = (&topo.hosts, cluster) {
        let auto = fd.spec.zone.auto_configure.unwrap_or(false);
        fd_ctx.check_hosts(
            hosts,
            c,
            auto,
            &fd.spec.zone,
            &mut problems,
            &mut notes,
            &mut v.steps,
        );
    }

    v.failure_domain = match problems.first() {
        None => Check::Ok {
            message: notes.join("; "),
        },
        Some((p, _)) => Check::failed(
            p.reasons(),
            problems
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    dedup_steps(&mut v.steps);
    if v.placement.is_ok()
        && let Some(folder) = folder
    {
        v.placement_refs = Some(ZonePlacement {
            datacenter: dc.moref.clone(),
            compute_resource: cluster.map(|c| c.moref.clone()),
            resource_pool: pool.map(|p| p.moref.clone()),
            folder: folder.moref.clone(),
            datastore,
            networks,
            vm_group: topo.hosts.as_ref().map(|h| h.vm_group_name.clone()),
        });
    }
    v
}

/// The part of a lookup error not already said by the message it goes into
/// ("not found in /DC0/host/C0", "ambiguous: it matches …").
fn detail(e: &LookupError) -> String {
    match e {
        LookupError::NotFound { scope, .. } => match scope {
            Some(s) => format!("not found in {s}"),
            None => "not found".into(),
        },
        LookupError::Ambiguous { candidates, .. } => {
            format!("ambiguous: it matches {}", candidates.join(", "))
        }
        LookupError::WrongType { .. } => e.to_string(),
    }
}

fn lookup_message(what: &str, name: &str, e: &LookupError) -> String {
    match e {
        LookupError::NotFound { .. } => format!("{what} {name} {}", detail(e)),
        _ => e.to_string(),
    }
}
