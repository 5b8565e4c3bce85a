//! An OpenShift `Infrastructure` vSphere failure domain as a [`ZoneFill`]: what a control plane
//! machine set injects into the provider spec of a machine in that domain when the domain's name
//! is no VSphereDeploymentZone (reference cpms-mhc-lifecycle.md §1, "Injecting a domain into
//! the providerSpec", from CPMSO @ 85f92f79; the domain type is openshift/api @ 2a3d7391
//! `config/v1/types_infrastructure.go` `VSpherePlatformFailureDomainSpec`).
//!
//! Pure: every path is resolved against one inventory snapshot into an absolute inventory path,
//! so "is this machine in its domain" stays a plain comparison (`plan::cpms::spec::domain_of`).
//! A failure names the Infrastructure field and, when nothing matched, the candidates.
use crate::api::machine::Workspace;
use crate::api::openshift_config::v1::infrastructure::{
    Infrastructure, VSpherePlatformFailureDomainSpec,
};
use crate::plan::cpms::spec::clean_path;
use crate::plan::placement::{ConfigError, ZoneFill};
use crate::vcenter::model::inventory::{Entity, Inventory, LookupError, Wanted};
use crate::vcenter::model::moref::MoRef;

/// A domain's fill and what the reader should know about it (a default taken instead of
/// upstream's, e.g. no `status.infrastructureName`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfraFill {
    pub fill: ZoneFill,
    pub notes: Vec<String>,
}

fn basename(p: &str) -> &str {
    p.trim_end_matches('/').rsplit('/').next().unwrap_or(p)
}

fn given(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

/// Installer paths carry `//` at times (`path.Clean` upstream); bare names stay as they are.
fn cleaned(p: &str) -> String {
    if p.starts_with('/') {
        clean_path(p)
    } else {
        p.to_string()
    }
}

struct Ctx<'a> {
    infra: String,
    index: usize,
    /// How many vSphere failure domains the Infrastructure has.
    domains: usize,
    inv: &'a Inventory,
}

impl Ctx<'_> {
    fn field(&self, f: &str) -> String {
        format!(
            "Infrastructure {} spec.platformSpec.vsphere.failureDomains[{}].{f}",
            self.infra, self.index
        )
    }

    fn err(&self, f: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            field: self.field(f),
            message: message.into(),
        }
    }

    /// `find`, with the candidates of the wanted kind in scope when nothing matched.
    fn find(
        &self,
        f: &str,
        wanted: Wanted,
        query: &str,
        scope: Option<&MoRef>,
    ) -> Result<&Entity, ConfigError> {
        self.inv
            .find(wanted, &cleaned(query), scope)
            .map_err(|e| match e {
                LookupError::NotFound { .. } => {
                    let mut c: Vec<&str> = self
                        .inv
                        .all(wanted, scope)
                        .into_iter()
                        .map(|e| e.path.as_str())
                        .collect();
                    c.sort_unstable();
                    let c = if c.is_empty() {
                        "none".to_string()
                    } else {
                        c.join(", ")
                    };
                    self.err(f, format!("{e} (candidates: {c})"))
                }
                e => self.err(f, e.to_string()),
            })
    }
}

/// The fill of the Infrastructure failure domain `name`: `Ok(None)` when the Infrastructure has
/// no domain of that name.
///
/// | provider spec field | value |
/// |---|---|
/// | `workspace.server`, `datacenter`, `datastore` | the domain's |
/// | `workspace.resourcePool` | `topology.resourcePool`, else `<computeCluster>/Resources` |
/// | `workspace.folder` | `topology.folder`, else `/<dc>/vm/<status.infrastructureName>`, else (no infrastructure name) `/<dc>/vm`, noted |
/// | `workspace.vmGroup` | `zoneAffinity.hostGroup.vmGroup` |
/// | `network.devices[i].networkName` | `topology.networks[i]` |
/// | `template` | basename of `topology.template`; else, with more than one domain and a `status.infrastructureName`, `<infrastructureName>-rhcos-<region>-<zone>` (the installer's import); else the CPMS template's is kept |
/// | labels `machine.openshift.io/region`, `/zone` | `region`, `zone` |
pub fn infra_domain_fill(
    infra: &Infrastructure,
    name: &str,
    inv: &Inventory,
) -> Result<Option<InfraFill>, ConfigError> {
    let Some((index, d)) = infra
        .vsphere_failure_domains()
        .iter()
        .enumerate()
        .find(|(_, d)| d.name == name)
    else {
        return Ok(None);
    };
    let cx = Ctx {
        infra: infra.metadata.name.clone().unwrap_or_default(),
        index,
        domains: infra.vsphere_failure_domains().len(),
        inv,
    };
    domain_fill(&cx, d, infra.infrastructure_name()).map(Some)
}

fn domain_fill(
    cx: &Ctx<'_>,
    d: &VSpherePlatformFailureDomainSpec,
    infra_name: Option<&str>,
) -> Result<InfraFill, ConfigError> {
    let topo = &d.topology;
    let mut notes = Vec::new();
    let server = given(Some(&d.server)).ok_or_else(|| cx.err("server", "required"))?;
    let dc_name =
        given(Some(&topo.datacenter)).ok_or_else(|| cx.err("topology.datacenter", "required"))?;
    let dc = cx.find("topology.datacenter", Wanted::Datacenter, dc_name, None)?;
    let cluster = match given(Some(&topo.compute_cluster)) {
        Some(c) => Some(cx.find(
            "topology.computeCluster",
            Wanted::ComputeResource,
            c,
            Some(&dc.moref),
        )?),
        None => None,
    };
    // workspace.resourcePool: topology.resourcePool, else <computeCluster>/Resources.
    let pool = match (given(topo.resource_pool.as_deref()), cluster) {
        (Some(p), scope) => cx
            .find(
                "topology.resourcePool",
                Wanted::ResourcePool,
                p,
                Some(scope.map_or(&dc.moref, |c| &c.moref)),
            )?
            .path
            .clone(),
        (None, Some(c)) => cx
            .inv
            .root_pool_of(&c.moref)
            .map(|p| p.path.clone())
            .ok_or_else(|| {
                cx.err(
                    "topology.computeCluster",
                    format!("{} has no root resource pool", c.path),
                )
            })?,
        (None, None) => {
            return Err(cx.err(
                "topology.computeCluster",
                "required when topology.resourcePool is not set",
            ));
        }
    };
    // workspace.folder: topology.folder, else /<dc>/vm/<infraName>.
    let folder = match (given(topo.folder.as_deref()), infra_name) {
        (Some(f), _) => cx
            .find("topology.folder", Wanted::Folder, f, Some(&dc.moref))?
            .path
            .clone(),
        (None, Some(n)) => {
            let path = format!("{}/vm/{n}", dc.path);
            match cx.inv.at_path(&path) {
                Some(e) if e.kind() == "Folder" => e.path.clone(),
                _ => {
                    return Err(ConfigError {
                        field: format!("Infrastructure {} status.infrastructureName", cx.infra),
                        message: format!(
                            "folder {path} (the default when topology.folder of failure domain {:?} is not set) not found",
                            d.name
                        ),
                    });
                }
            }
        }
        (None, None) => {
            let path = format!("{}/vm", dc.path);
            notes.push(format!(
                "Infrastructure {} has no status.infrastructureName and failure domain {:?} no topology.folder: its VMs go to {path} (upstream: {path}/<infrastructureName>)",
                cx.infra, d.name
            ));
            path
        }
    };
    let datastore = match given(Some(&topo.datastore)) {
        Some(ds) => Some(
            cx.find("topology.datastore", Wanted::Datastore, ds, Some(&dc.moref))?
                .path
                .clone(),
        ),
        None => None,
    };
    let mut networks = Vec::new();
    for (i, n) in topo.networks.iter().enumerate() {
        networks.push(
            cx.find(
                &format!("topology.networks[{i}]"),
                Wanted::Network,
                n,
                Some(&dc.moref),
            )?
            .path
            .clone(),
        );
    }
    // template: the basename of topology.template (the provider spec names templates by name,
    // found in the datacenter); it must name the same VM the path does.
    let template = match given(topo.template.as_deref()) {
        Some(t) => {
            let by_path = cx.find(
                "topology.template",
                Wanted::VirtualMachine,
                t,
                Some(&dc.moref),
            )?;
            let base = basename(t);
            let by_name = cx.find(
                "topology.template",
                Wanted::VirtualMachine,
                base,
                Some(&dc.moref),
            )?;
            if by_name.moref != by_path.moref {
                return Err(cx.err(
                    "topology.template",
                    format!(
                        "{base:?} (the name a provider spec uses) is {} in {}, not {}",
                        by_name.path, dc.path, by_path.path
                    ),
                ));
            }
            Some(base.to_string())
        }
        // The installer's name for the template it imported into each domain (CPMSO, with
        // more than one domain; one domain keeps the machine's own template).
        None => match infra_name {
            Some(n) if cx.domains > 1 => Some(format!("{n}-rhcos-{}-{}", d.region, d.zone)),
            _ => None,
        },
    };
    let vm_group = d
        .zone_affinity
        .as_ref()
        .and_then(|z| z.host_group.as_ref())
        .and_then(|h| given(h.vm_group.as_deref()))
        .map(str::to_string);
    if vm_group.is_some() && cluster.is_none_or(|c| c.kind() != "ClusterComputeResource") {
        return Err(cx.err(
            "zoneAffinity.hostGroup.vmGroup",
            "a VM group needs topology.computeCluster to name a compute cluster",
        ));
    }
    Ok(InfraFill {
        fill: ZoneFill {
            workspace: Workspace {
                server: Some(server.to_string()),
                datacenter: Some(dc.path.clone()),
                folder: Some(folder),
                datastore,
                resource_pool: Some(pool),
                vm_group,
            },
            networks,
            template,
            region: d.region.clone(),
            zone: d.zone.clone(),
        },
        notes,
    })
}

#[cfg(test)]
mod tests;
