//! The VSphereDeploymentZone decision: is the zone usable, what must change in vCenter for it to
//! be (autoConfigure), and what its status says. Pure: the vCenter view and the clock are inputs.
//!
//! The order and the condition types/reasons follow CAPV (reference/capv-failure-domains.md §3),
//! with its gaps fixed:
//! * a missing VSphereFailureDomain makes the zone not ready with `FailureDomainNotFound` (CAPV
//!   leaves `ready` unset forever, so VSphereClusters wait forever);
//! * every lookup is scoped: the resource pool to the compute cluster, folder, datastore and
//!   networks to the datacenter; an ambiguous name is an error naming the candidates (#1913);
//! * a tag counts only in its own category (CAPV compares names), and a tag of that name in
//!   another category is named (`TagCategoryMismatch`);
//! * the host group and VM group of a HostGroup zone must exist; a disabled affinity rule makes
//!   the zone not ready (`AffinityRuleDisabled`), a non-mandatory one is reported in the message;
//! * independent checks are all evaluated, so one reconcile reports every problem.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::api::conditions::{zone, zone_ours, zone_v1beta1};
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::{FailureDomain, FailureDomainType, VSphereFailureDomain};
use crate::vcenter::cluster::{ClusterConfig, ClusterGroup, VmHostRule};
use crate::vcenter::inventory::{Entity, Inventory, LookupError, Wanted};
use crate::vcenter::moref::MoRef;
use crate::vcenter::tags::TagCatalog;

use super::view::VcenterView;

/// The description CAPV gives categories it creates; kept so existing estates look the same.
pub const CATEGORY_DESCRIPTION: &str = "CAPV generated category for Failure Domain support";

/// A change in vCenter that autoConfigure asks for. Names, not ids: the executor resolves them
/// against the catalog as it goes, so a tag created by an earlier step can be attached by a
/// later one, and re-running after a crash finds what exists instead of creating it twice.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum Step {
    CreateCategory {
        name: String,
        associable_types: Vec<String>,
    },
    /// Add associable types to an existing category (vCenter only allows widening).
    WidenCategory {
        name: String,
        associable_types: Vec<String>,
    },
    CreateTag {
        category: String,
        name: String,
    },
    AttachTag {
        category: String,
        tag: String,
        object: MoRef,
        object_path: String,
    },
    CreateHostGroup {
        cluster: MoRef,
        cluster_path: String,
        name: String,
        hosts: Vec<MoRef>,
    },
    CreateVmGroup {
        cluster: MoRef,
        cluster_path: String,
        name: String,
    },
    CreateVmHostRule {
        cluster: MoRef,
        cluster_path: String,
        name: String,
        vm_group: String,
        host_group: String,
    },
    EnableVmHostRule {
        cluster: MoRef,
        cluster_path: String,
        rule: String,
    },
}

impl Step {
    /// Steps run in this order: categories, tags, attachments, groups, rules.
    pub fn phase(&self) -> u8 {
        match self {
            Step::CreateCategory { .. } | Step::WidenCategory { .. } => 0,
            Step::CreateTag { .. } => 1,
            Step::AttachTag { .. } => 2,
            Step::CreateHostGroup { .. } | Step::CreateVmGroup { .. } => 3,
            Step::CreateVmHostRule { .. } | Step::EnableVmHostRule { .. } => 4,
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::CreateCategory {
                name,
                associable_types,
            } => write!(
                f,
                "create tag category {name} for {}",
                associable_types.join(", ")
            ),
            Step::WidenCategory {
                name,
                associable_types,
            } => write!(
                f,
                "allow tag category {name} on {}",
                associable_types.join(", ")
            ),
            Step::CreateTag { category, name } => {
                write!(f, "create tag {name} in category {category}")
            }
            Step::AttachTag {
                category,
                tag,
                object_path,
                ..
            } => write!(f, "attach tag {tag} ({category}) to {object_path}"),
            Step::CreateHostGroup {
                cluster_path,
                name,
                hosts,
                ..
            } => write!(
                f,
                "create host group {name} in {cluster_path} with {} host(s)",
                hosts.len()
            ),
            Step::CreateVmGroup {
                cluster_path, name, ..
            } => write!(f, "create VM group {name} in {cluster_path}"),
            Step::CreateVmHostRule {
                cluster_path,
                name,
                vm_group,
                host_group,
                ..
            } => write!(
                f,
                "create VM-host rule {name} in {cluster_path}: VMs of {vm_group} must run on hosts of {host_group}"
            ),
            Step::EnableVmHostRule {
                cluster_path, rule, ..
            } => write!(f, "enable VM-host rule {rule} in {cluster_path}"),
        }
    }
}

/// Why the failure domain did not validate. Each maps to CAPV's reasons in both condition styles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdProblem {
    Region,
    Zone,
    TagCategoryMismatch,
    DatacenterNotFound,
    ComputeClusterNotFound,
    ResourcePoolNotOwned,
    DatastoreNotFound,
    NetworkNotFound,
    HostGroupNotFound,
    VmGroupNotFound,
    AffinityRuleMissing,
    AffinityRuleDisabled,
}

impl FdProblem {
    /// (v1beta1 reason, v1beta2 reason).
    pub fn reasons(self) -> (&'static str, &'static str) {
        match self {
            FdProblem::Region => (
                zone_v1beta1::FAILURE_DOMAIN_REGION_MISCONFIGURED,
                zone::REGION_MISCONFIGURED,
            ),
            FdProblem::Zone => (
                zone_v1beta1::FAILURE_DOMAIN_ZONE_MISCONFIGURED,
                zone::ZONE_MISCONFIGURED,
            ),
            FdProblem::TagCategoryMismatch => (
                zone_ours::TAG_CATEGORY_MISMATCH,
                zone_ours::TAG_CATEGORY_MISMATCH,
            ),
            FdProblem::DatacenterNotFound => (
                zone_ours::DATACENTER_NOT_FOUND,
                zone_ours::DATACENTER_NOT_FOUND,
            ),
            FdProblem::ComputeClusterNotFound => (
                zone_v1beta1::COMPUTE_CLUSTER_NOT_FOUND,
                zone::COMPUTE_CLUSTER_NOT_FOUND,
            ),
            FdProblem::ResourcePoolNotOwned => (
                zone_v1beta1::RESOURCE_POOL_NOT_FOUND,
                zone::RESOURCE_POOL_NOT_FOUND,
            ),
            FdProblem::DatastoreNotFound => {
                (zone_v1beta1::DATASTORE_NOT_FOUND, zone::DATASTORE_NOT_FOUND)
            }
            FdProblem::NetworkNotFound => {
                (zone_v1beta1::NETWORK_NOT_FOUND, zone::NETWORK_NOT_FOUND)
            }
            FdProblem::HostGroupNotFound => (
                zone_ours::HOST_GROUP_NOT_FOUND,
                zone_ours::HOST_GROUP_NOT_FOUND,
            ),
            FdProblem::VmGroupNotFound => {
                (zone_ours::VM_GROUP_NOT_FOUND, zone_ours::VM_GROUP_NOT_FOUND)
            }
            FdProblem::AffinityRuleMissing => {
                (zone_v1beta1::HOSTS_MISCONFIGURED, zone::HOSTS_MISCONFIGURED)
            }
            FdProblem::AffinityRuleDisabled => (
                zone_ours::AFFINITY_RULE_DISABLED,
                zone_ours::AFFINITY_RULE_DISABLED,
            ),
        }
    }
}

/// The outcome of one check: ok, or a reason pair and a message naming the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// Not evaluated (an earlier failure made it meaningless).
    Skipped,
    Ok {
        message: String,
    },
    Failed {
        v1beta1_reason: &'static str,
        v1beta2_reason: &'static str,
        message: String,
    },
}

impl Check {
    pub fn is_ok(&self) -> bool {
        matches!(self, Check::Ok { .. })
    }

    fn failed(reasons: (&'static str, &'static str), message: String) -> Self {
        Check::Failed {
            v1beta1_reason: reasons.0,
            v1beta2_reason: reasons.1,
            message,
        }
    }
}

/// What the planner decided for one zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneVerdict {
    /// `VSphereFailureDomain` missing: the only check that ran.
    pub failure_domain_missing: bool,
    pub vcenter: Check,
    pub placement: Check,
    pub failure_domain: Check,
    /// vCenter changes autoConfigure asks for (empty when nothing must change).
    pub steps: Vec<Step>,
    /// Where machines of this zone go, when everything resolved.
    pub placement_refs: Option<ZonePlacement>,
}

impl ZoneVerdict {
    /// Ready: every check passed and nothing is left for autoConfigure to change.
    pub fn ready(&self) -> bool {
        self.steps.is_empty()
            && !self.failure_domain_missing
            && self.vcenter.is_ok()
            && self.placement.is_ok()
            && self.failure_domain.is_ok()
    }

    /// vCenter refused autoConfigure changes: the zone says which and why.
    pub fn mark_auto_configure_failed<'a>(&mut self, errors: impl IntoIterator<Item = &'a str>) {
        let message = errors.into_iter().collect::<Vec<_>>().join("; ");
        self.failure_domain = Check::failed(
            (
                zone_ours::AUTO_CONFIGURE_FAILED,
                zone_ours::AUTO_CONFIGURE_FAILED,
            ),
            format!("autoConfigure failed: {message}"),
        );
    }

    /// Changes are still wanted (dry run, or a run cut short): not ready, saying what is missing.
    pub fn mark_pending(&mut self) {
        if self.steps.is_empty() || !self.failure_domain.is_ok() {
            return;
        }
        let what: Vec<String> = self.steps.iter().map(|s| s.to_string()).collect();
        self.failure_domain = Check::failed(
            (
                zone_ours::AUTO_CONFIGURE_PENDING,
                zone_ours::AUTO_CONFIGURE_PENDING,
            ),
            format!(
                "autoConfigure has {} change(s) to make: {}",
                what.len(),
                what.join("; ")
            ),
        );
    }

    /// The first failing check's message, for one-line summaries.
    pub fn first_problem(&self) -> Option<(&'static str, &str)> {
        [&self.vcenter, &self.placement, &self.failure_domain]
            .into_iter()
            .find_map(|c| match c {
                Check::Failed {
                    v1beta1_reason,
                    message,
                    ..
                } => Some((*v1beta1_reason, message.as_str())),
                _ => None,
            })
    }
}

/// Resolved placement of a ready zone (what the machine actuator clones into).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ZonePlacement {
    pub datacenter: MoRef,
    pub compute_resource: Option<MoRef>,
    pub resource_pool: Option<MoRef>,
    pub folder: MoRef,
    pub datastore: Option<MoRef>,
    pub networks: Vec<MoRef>,
    pub vm_group: Option<String>,
}

/// The associable type a region/zone tag is attached to.
pub fn associable_type(t: FailureDomainType) -> &'static str {
    match t {
        FailureDomainType::Datacenter => "Datacenter",
        FailureDomainType::ComputeCluster => "ClusterComputeResource",
        FailureDomainType::HostGroup => "HostSystem",
    }
}

/// The name we give a VM-host rule we create: the rule binds VM group to host group.
pub fn rule_name(hosts_vm_group: &str, host_group: &str) -> String {
    format!("{hosts_vm_group}-{host_group}-affinity")
}

/// Decide one zone. `vcenter` is the gathered view of the zone's server, or why it could not be
/// gathered (unreachable, TLS, credentials) — a message without secrets.
pub fn plan_zone(
    dz: &VSphereDeploymentZone,
    fd: Option<&VSphereFailureDomain>,
    vcenter: Result<&VcenterView, &str>,
) -> ZoneVerdict {
    let mut v = ZoneVerdict {
        failure_domain_missing: false,
        vcenter: Check::Skipped,
        placement: Check::Skipped,
        failure_domain: Check::Skipped,
        steps: Vec::new(),
        placement_refs: None,
    };
    let fd_name = dz.spec.failure_domain.clone().unwrap_or_default();
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
        Err(message) => {
            v.vcenter = Check::failed(
                (zone_v1beta1::VCENTER_UNREACHABLE, zone::VCENTER_UNREACHABLE),
                message.to_string(),
            );
            return v;
        }
    };
    v.vcenter = Check::Ok {
        message: view.tls_note.clone().unwrap_or_default(),
    };
    let inv = &view.inventory;
    let topo = &fd.spec.topology;

    // Datacenter: every other lookup is scoped to it.
    let dc = match inv.find(Wanted::Datacenter, &topo.datacenter, None) {
        Ok(dc) => dc,
        Err(e) => {
            let msg = format!(
                "datacenter {:?} of the failure domain: {e}",
                topo.datacenter
            );
            v.placement = Check::failed(
                (
                    zone_v1beta1::RESOURCE_POOL_NOT_FOUND,
                    zone::RESOURCE_POOL_NOT_FOUND,
                ),
                format!("cannot place machines: {msg}"),
            );
            v.failure_domain = Check::failed(FdProblem::DatacenterNotFound.reasons(), msg);
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
    let pc = &dz.spec.placement_constraint;
    let mut placement_failures: Vec<(&'static str, &'static str, String)> = Vec::new();
    let mut pool: Option<&Entity> = None;
    if let Some(rp) = pc.resource_pool.as_deref().filter(|s| !s.is_empty()) {
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
    let folder = match pc.folder.as_deref().filter(|s| !s.is_empty()) {
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

/// Keep the first occurrence of each step, ordered by phase.
pub fn dedup_steps(steps: &mut Vec<Step>) {
    merge_category_steps(steps);
    let mut seen = BTreeSet::new();
    steps.retain(|s| seen.insert(s.clone()));
    steps.sort_by_key(Step::phase);
}

/// Zones of different types sharing one tag category each ask for their own associable type:
/// one create (or widen) per category carries them all, in first-seen order, else the second
/// create fails as a duplicate and a later widen drops an earlier one's type.
fn merge_category_steps(steps: &mut [Step]) {
    let mut union: BTreeMap<(bool, String), Vec<String>> = BTreeMap::new();
    for s in steps.iter() {
        if let Step::CreateCategory {
            name,
            associable_types,
        }
        | Step::WidenCategory {
            name,
            associable_types,
        } = s
        {
            let create = matches!(s, Step::CreateCategory { .. });
            let all = union.entry((create, name.clone())).or_default();
            for t in associable_types {
                if !all.contains(t) {
                    all.push(t.clone());
                }
            }
        }
    }
    for s in steps.iter_mut() {
        let create = matches!(s, Step::CreateCategory { .. });
        if let Step::CreateCategory {
            name,
            associable_types,
        }
        | Step::WidenCategory {
            name,
            associable_types,
        } = s
            && let Some(all) = union.get(&(create, name.clone()))
        {
            associable_types.clone_from(all);
        }
    }
}

struct FdContext<'a> {
    inv: &'a Inventory,
    view: &'a VcenterView,
    dc: &'a Entity,
    cluster: Option<&'a Entity>,
    config: Option<&'a ClusterConfig>,
    host_group: Option<&'a str>,
}

impl FdContext<'_> {
    fn catalog(&self) -> &TagCatalog {
        &self.view.tags
    }

    /// The objects a region or zone tag must be on.
    fn taggable(&self, side: &FailureDomain) -> Result<Vec<&Entity>, String> {
        match side.type_ {
            FailureDomainType::Datacenter => Ok(vec![self.dc]),
            FailureDomainType::ComputeCluster => match self.cluster {
                Some(c) => Ok(vec![c]),
                None => Err("unable to find taggable object: no compute cluster".into()),
            },
            FailureDomainType::HostGroup => match self.host_group_members() {
                // A missing group is reported (or built) by check_hosts.
                None => Ok(Vec::new()),
                Some(hosts) if hosts.is_empty() => Err(format!(
                    "unable to find taggable object: host group {} has no hosts",
                    self.host_group.unwrap_or_default()
                )),
                Some(hosts) => Ok(hosts.into_iter().filter_map(|h| self.inv.get(&h)).collect()),
            },
        }
    }

    fn host_group_members(&self) -> Option<Vec<MoRef>> {
        match self.config?.group(self.host_group?)? {
            ClusterGroup::Host { hosts, .. } => Some(hosts.clone()),
            _ => None,
        }
    }

    fn check_tag(
        &self,
        side: &FailureDomain,
        problem: FdProblem,
        problems: &mut Vec<(FdProblem, String)>,
        steps: &mut Vec<Step>,
    ) {
        let label = if problem == FdProblem::Region {
            "region"
        } else {
            "zone"
        };
        let auto = side.auto_configure.unwrap_or(false);
        let objects = match self.taggable(side) {
            Ok(o) => o,
            Err(msg) => {
                problems.push((problem, format!("{label} {}: {msg}", side.name)));
                return;
            }
        };
        let assoc = associable_type(side.type_).to_string();
        let catalog = self.catalog();
        let category = catalog.category(&side.tag_category);
        let tag = catalog.tag(&side.tag_category, &side.name);
        if auto {
            match category {
                None => steps.push(Step::CreateCategory {
                    name: side.tag_category.clone(),
                    associable_types: vec![assoc.clone()],
                }),
                Some(c)
                    if !c.associable_types.is_empty() && !c.associable_types.contains(&assoc) =>
                {
                    // Existing types first, in their order: vCenter only accepts appending.
                    let mut types = c.associable_types.clone();
                    types.push(assoc.clone());
                    steps.push(Step::WidenCategory {
                        name: side.tag_category.clone(),
                        associable_types: types,
                    });
                }
                Some(_) => {}
            }
            if tag.is_none() {
                steps.push(Step::CreateTag {
                    category: side.tag_category.clone(),
                    name: side.name.clone(),
                });
            }
        } else if category.is_none() {
            problems.push((
                problem,
                format!(
                    "{label} tag category {} not found (create it, or set {label}.autoConfigure)",
                    side.tag_category
                ),
            ));
            return;
        } else if tag.is_none() {
            let elsewhere = self.named_elsewhere(&side.name, &side.tag_category);
            match elsewhere {
                Some(other) => problems.push((
                    FdProblem::TagCategoryMismatch,
                    format!(
                        "{label} tag {} is not in category {} (a tag of that name exists in category {other})",
                        side.name, side.tag_category
                    ),
                )),
                None => problems.push((
                    problem,
                    format!("{label} tag {} not found in category {}", side.name, side.tag_category),
                )),
            }
            return;
        }
        let tag_id = tag.map(|t| t.id.clone());
        for obj in objects {
            let attached = self.view.attachments.get(&obj.moref);
            let has = tag_id
                .as_ref()
                .is_some_and(|id| attached.is_some_and(|a| a.contains(id)));
            if has {
                continue;
            }
            if auto {
                steps.push(Step::AttachTag {
                    category: side.tag_category.clone(),
                    tag: side.name.clone(),
                    object: obj.moref.clone(),
                    object_path: obj.path.clone(),
                });
                continue;
            }
            // Same name attached, other category: CAPV would have accepted it.
            let wrong = attached.into_iter().flatten().find_map(|id| {
                let t = self.catalog().tag_by_id(id)?;
                (t.name == side.name).then(|| {
                    self.catalog()
                        .category_by_id(&t.category_id)
                        .map(|c| c.name.clone())
                        .unwrap_or_else(|| t.category_id.clone())
                })
            });
            match wrong {
                Some(other) => problems.push((
                    FdProblem::TagCategoryMismatch,
                    format!(
                        "object {} has tag {} in category {other}, not in category {}",
                        obj.path, side.name, side.tag_category
                    ),
                )),
                None => problems.push((
                    problem,
                    format!(
                        "object {} does not have tag {} (category {})",
                        obj.path, side.name, side.tag_category
                    ),
                )),
            }
        }
    }

    /// A category (other than `category`) holding a tag named `tag`, among those loaded.
    fn named_elsewhere(&self, tag: &str, category: &str) -> Option<String> {
        self.catalog().tags().find_map(|t| {
            let c = self.catalog().category_by_id(&t.category_id)?;
            (t.name == tag && c.name != category).then(|| c.name.clone())
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn check_hosts(
        &self,
        hosts: &crate::api::failure_domain::FailureDomainHosts,
        cluster: &Entity,
        auto: bool,
        zone_side: &FailureDomain,
        problems: &mut Vec<(FdProblem, String)>,
        notes: &mut Vec<String>,
        steps: &mut Vec<Step>,
    ) {
        let empty = ClusterConfig::default();
        let config = self.config.unwrap_or(&empty);
        let cpath = cluster.path.clone();
        let hg = &hosts.host_group_name;
        let vg = &hosts.vm_group_name;
        match config.group(hg) {
            Some(ClusterGroup::Host { .. }) => {}
            Some(other) => problems.push((
                FdProblem::HostGroupNotFound,
                format!("group {hg} in {cpath} is not a host group ({other:?})"),
            )),
            None if auto => {
                // Build it from the cluster's hosts that carry the zone tag.
                let tag_id = self
                    .catalog()
                    .tag(&zone_side.tag_category, &zone_side.name)
                    .map(|t| t.id.clone());
                let tagged: Vec<MoRef> = self
                    .inv
                    .hosts_of(&cluster.moref)
                    .into_iter()
                    .filter(|h| {
                        tag_id.as_ref().is_some_and(|id| {
                            self.view
                                .attachments
                                .get(&h.moref)
                                .is_some_and(|a| a.contains(id))
                        })
                    })
                    .map(|h| h.moref.clone())
                    .collect();
                if tagged.is_empty() {
                    problems.push((
                        FdProblem::HostGroupNotFound,
                        format!(
                            "host group {hg} not found in {cpath}, and no host of {cpath} carries zone tag {} (category {}) to build it from",
                            zone_side.name, zone_side.tag_category
                        ),
                    ));
                } else {
                    steps.push(Step::CreateHostGroup {
                        cluster: cluster.moref.clone(),
                        cluster_path: cpath.clone(),
                        name: hg.clone(),
                        hosts: tagged,
                    });
                }
            }
            None => problems.push((
                FdProblem::HostGroupNotFound,
                format!("host group {hg} not found in {cpath}"),
            )),
        }
        match config.group(vg) {
            Some(ClusterGroup::Vm { .. }) => {}
            Some(other) => problems.push((
                FdProblem::VmGroupNotFound,
                format!("group {vg} in {cpath} is not a VM group ({other:?})"),
            )),
            None if auto => steps.push(Step::CreateVmGroup {
                cluster: cluster.moref.clone(),
                cluster_path: cpath.clone(),
                name: vg.clone(),
            }),
            None => problems.push((
                FdProblem::VmGroupNotFound,
                format!("VM group {vg} not found in {cpath}"),
            )),
        }
        let matching: Vec<&VmHostRule> = config
            .vm_host_rules()
            .filter(|r| r.vm_group == *vg && r.affine_host_group.as_deref() == Some(hg.as_str()))
            .collect();
        let enabled = matching.iter().find(|r| r.enabled);
        match (enabled, matching.first()) {
            (Some(r), _) => {
                if !r.mandatory {
                    notes.push(format!(
                        "VM-host rule {} in {cpath} is not mandatory: DRS may run VMs outside host group {hg}",
                        r.name
                    ));
                }
            }
            (None, Some(r)) if auto => steps.push(Step::EnableVmHostRule {
                cluster: cluster.moref.clone(),
                cluster_path: cpath.clone(),
                rule: r.name.clone(),
            }),
            (None, Some(r)) => problems.push((
                FdProblem::AffinityRuleDisabled,
                format!("VM-host rule {} in {cpath} (VM group {vg} → host group {hg}) is disabled", r.name),
            )),
            (None, None) if auto => {
                let name = rule_name(vg, hg);
                if config.rule(&name).is_some() {
                    // No rule binds the two groups, so a rule of this name binds something else.
                    problems.push((
                        FdProblem::AffinityRuleMissing,
                        format!(
                            "cannot create VM-host rule {name} in {cpath}: a rule of that name exists but does not bind VM group {vg} to host group {hg}"
                        ),
                    ));
                } else {
                    steps.push(Step::CreateVmHostRule {
                        cluster: cluster.moref.clone(),
                        cluster_path: cpath.clone(),
                        name,
                        vm_group: vg.clone(),
                        host_group: hg.clone(),
                    });
                }
            }
            (None, None) => problems.push((
                FdProblem::AffinityRuleMissing,
                format!("vm host affinity rule does not exist in {cpath} for VM group {vg} and host group {hg}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn zones_of_three_types_sharing_a_category_create_it_once_with_every_type() {
        let create = |t: &str| Step::CreateCategory {
            name: "k8s-zone".into(),
            associable_types: vec![t.into()],
        };
        let mut steps = vec![
            create("Datacenter"),
            create("ClusterComputeResource"),
            create("HostSystem"),
        ];
        dedup_steps(&mut steps);
        assert_eq!(
            steps,
            [Step::CreateCategory {
                name: "k8s-zone".into(),
                associable_types: vec![
                    "Datacenter".into(),
                    "ClusterComputeResource".into(),
                    "HostSystem".into()
                ],
            }]
        );
    }

    use std::collections::BTreeMap;

    use super::*;
    use crate::api::deployment_zone::{PlacementConstraint, VSphereDeploymentZoneSpec};
    use crate::api::failure_domain::{FailureDomainHosts, Topology, VSphereFailureDomainSpec};
    use crate::vcenter::cluster::ClusterRule;
    use crate::vcenter::inventory::tests::{content, sample_contents};
    use crate::vcenter::rest::{Category, Tag};

    /// DC0 with clusters C0 (hosts h0, h1; pool rp0) and C1 (host h2; pool rp0), datastore ds0,
    /// network net0, folder vm/capi.
    fn inventory() -> Inventory {
        let mut objects = sample_contents();
        objects.extend([
            content("Folder", "f-ds", "datastore", Some(("Datacenter", "dc-1"))),
            content("Folder", "f-net", "network", Some(("Datacenter", "dc-1"))),
            content("Datastore", "ds-0", "ds0", Some(("Folder", "f-ds"))),
            content("Network", "net-0", "net0", Some(("Folder", "f-net"))),
            content(
                "HostSystem",
                "h-1",
                "h1",
                Some(("ClusterComputeResource", "c-0")),
            ),
            content(
                "HostSystem",
                "h-2",
                "h2",
                Some(("ClusterComputeResource", "c-1")),
            ),
        ]);
        Inventory::from_contents(objects)
    }

    fn m(kind: &str, v: &str) -> MoRef {
        MoRef::new(kind, v)
    }

    struct World {
        view: VcenterView,
    }

    impl World {
        fn new() -> Self {
            Self {
                view: VcenterView {
                    inventory: inventory(),
                    ..VcenterView::default()
                },
            }
        }

        fn category(mut self, id: &str, name: &str) -> Self {
            self.view.tags.insert_category(Category {
                id: id.into(),
                name: name.into(),
                description: String::new(),
                cardinality: "MULTIPLE".into(),
                associable_types: vec![],
            });
            self
        }

        fn tag(mut self, id: &str, name: &str, category: &str, on: &[MoRef]) -> Self {
            self.view.tags.insert_tag(Tag {
                id: id.into(),
                name: name.into(),
                category_id: category.into(),
                description: String::new(),
            });
            for o in on {
                self.view
                    .attachments
                    .entry(o.clone())
                    .or_default()
                    .insert(id.into());
            }
            self
        }

        fn config(mut self, cluster: &str, cfg: ClusterConfig) -> Self {
            self.view
                .cluster_configs
                .insert(m("ClusterComputeResource", cluster), cfg);
            self
        }

        /// Region DC0 (Datacenter) and zone C0 (ComputeCluster) tagged properly.
        fn tagged() -> Self {
            Self::new()
                .category("cat-r", "k8s-region")
                .category("cat-z", "k8s-zone")
                .tag("t-r", "region-a", "cat-r", &[m("Datacenter", "dc-1")])
                .tag(
                    "t-z",
                    "zone-a",
                    "cat-z",
                    &[m("ClusterComputeResource", "c-0")],
                )
        }
    }

    fn side(name: &str, t: FailureDomainType, cat: &str, auto: bool) -> FailureDomain {
        FailureDomain {
            name: name.into(),
            type_: t,
            tag_category: cat.into(),
            auto_configure: Some(auto),
        }
    }

    fn fd(region: FailureDomain, zone: FailureDomain, topology: Topology) -> VSphereFailureDomain {
        VSphereFailureDomain::new(
            "fd",
            VSphereFailureDomainSpec {
                region,
                zone,
                topology,
            },
        )
    }

    fn cc_fd(auto: bool) -> VSphereFailureDomain {
        fd(
            side(
                "region-a",
                FailureDomainType::Datacenter,
                "k8s-region",
                auto,
            ),
            side(
                "zone-a",
                FailureDomainType::ComputeCluster,
                "k8s-zone",
                auto,
            ),
            Topology {
                datacenter: "DC0".into(),
                compute_cluster: Some("C0".into()),
                datastore: Some("ds0".into()),
                networks: Some(vec!["net0".into()]),
                ..Topology::default()
            },
        )
    }

    fn dz(pool: Option<&str>, folder: Option<&str>) -> VSphereDeploymentZone {
        VSphereDeploymentZone::new(
            "zone",
            VSphereDeploymentZoneSpec {
                server: Some("vc".into()),
                failure_domain: Some("fd".into()),
                control_plane: None,
                placement_constraint: PlacementConstraint {
                    resource_pool: pool.map(str::to_string),
                    folder: folder.map(str::to_string),
                },
            },
        )
    }

    fn failed_reason(c: &Check) -> (&'static str, &'static str, String) {
        match c {
            Check::Failed {
                v1beta1_reason,
                v1beta2_reason,
                message,
            } => (v1beta1_reason, v1beta2_reason, message.clone()),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn a_missing_failure_domain_is_a_reason_not_silence() {
        let v = plan_zone(&dz(None, None), None, Err("unused"));
        assert!(!v.ready());
        let (r1, _, msg) = failed_reason(&v.failure_domain);
        assert_eq!(r1, zone_ours::FAILURE_DOMAIN_NOT_FOUND);
        assert!(msg.contains("\"fd\""), "{msg}");
        assert_eq!(v.vcenter, Check::Skipped);
    }

    #[test]
    fn an_unreachable_vcenter_is_vcenter_unreachable() {
        let v = plan_zone(
            &dz(None, None),
            Some(&cc_fd(false)),
            Err("cannot connect to vCenter vc: refused"),
        );
        let (r1, r2, msg) = failed_reason(&v.vcenter);
        assert_eq!((r1, r2), ("VCenterUnreachable", "VCenterUnreachable"));
        assert!(msg.contains("refused"));
        assert!(!v.ready());
    }

    #[test]
    fn a_well_tagged_compute_cluster_zone_is_ready_with_its_placement() {
        let w = World::tagged();
        let v = plan_zone(
            &dz(Some("rp0"), Some("capi")),
            Some(&cc_fd(false)),
            Ok(&w.view),
        );
        assert!(v.ready(), "{v:?}");
        assert!(v.steps.is_empty());
        let p = v.placement_refs.unwrap();
        assert_eq!(
            p.resource_pool,
            Some(m("ResourcePool", "rp-0a")),
            "rp0 resolved inside C0 (#1913)"
        );
        assert_eq!(p.folder, m("Folder", "f-capi"));
        assert_eq!(p.datastore, Some(m("Datastore", "ds-0")));
        assert_eq!(p.networks, vec![m("Network", "net-0")]);
        // Without a pool: the cluster's root pool; without a folder: the datacenter's vm folder.
        let v = plan_zone(&dz(None, None), Some(&cc_fd(false)), Ok(&w.view));
        let p = v.placement_refs.unwrap();
        assert_eq!(p.resource_pool, Some(m("ResourcePool", "rp-0")));
        assert_eq!(p.folder, m("Folder", "f-vm"));
    }

    #[test]
    fn a_pool_of_another_cluster_is_named_with_its_owner() {
        let w = World::tagged();
        let v = plan_zone(
            &dz(Some("/DC0/host/C1/Resources/rp0"), None),
            Some(&cc_fd(false)),
            Ok(&w.view),
        );
        let (r1, _, msg) = failed_reason(&v.placement);
        assert_eq!(r1, "ResourcePoolNotFound");
        assert!(msg.contains("not in compute cluster /DC0/host/C0"), "{msg}");
        let (r1, _, msg) = failed_reason(&v.failure_domain);
        assert_eq!(r1, "ResourcePoolNotFound");
        assert!(
            msg.contains("not owned by compute cluster") && msg.contains("/DC0/host/C1"),
            "{msg}"
        );
    }

    #[test]
    fn an_ambiguous_pool_without_a_cluster_lists_the_candidates() {
        let w = World::tagged();
        let mut f = cc_fd(false);
        f.spec.topology.compute_cluster = None;
        f.spec.zone.type_ = FailureDomainType::Datacenter;
        f.spec.zone.name = "region-a".into();
        f.spec.zone.tag_category = "k8s-region".into();
        let v = plan_zone(&dz(Some("rp0"), None), Some(&f), Ok(&w.view));
        let (_, _, msg) = failed_reason(&v.placement);
        assert!(msg.contains("ambiguous"), "{msg}");
        assert!(
            msg.contains("/DC0/host/C0/Resources/rp0")
                && msg.contains("/DC0/host/C1/Resources/rp0"),
            "{msg}"
        );
    }

    #[test]
    fn untagged_objects_and_missing_tags_name_what_is_missing() {
        let w = World::new()
            .category("cat-r", "k8s-region")
            .category("cat-z", "k8s-zone")
            .tag("t-r", "region-a", "cat-r", &[])
            .tag(
                "t-z",
                "zone-a",
                "cat-z",
                &[m("ClusterComputeResource", "c-0")],
            );
        let v = plan_zone(&dz(None, None), Some(&cc_fd(false)), Ok(&w.view));
        let (r1, r2, msg) = failed_reason(&v.failure_domain);
        assert_eq!(
            (r1, r2),
            ("FailureDomainRegionMisconfigured", "RegionMisconfigured")
        );
        assert_eq!(
            msg,
            "object /DC0 does not have tag region-a (category k8s-region)"
        );

        let w = World::new().category("cat-r", "k8s-region").tag(
            "t-r",
            "region-a",
            "cat-r",
            &[m("Datacenter", "dc-1")],
        );
        let v = plan_zone(&dz(None, None), Some(&cc_fd(false)), Ok(&w.view));
        let (r1, _, msg) = failed_reason(&v.failure_domain);
        assert_eq!(r1, "FailureDomainZoneMisconfigured");
        assert!(
            msg.contains("zone tag category k8s-zone not found"),
            "{msg}"
        );
    }

    #[test]
    fn a_tag_in_the_wrong_category_is_not_accepted() {
        // CAPV compares tag names only and would accept this.
        let w = World::tagged().category("cat-o", "other").tag(
            "t-o",
            "zone-b",
            "cat-o",
            &[m("ClusterComputeResource", "c-0")],
        );
        let mut f = cc_fd(false);
        f.spec.zone.name = "zone-b".into();
        let v = plan_zone(&dz(None, None), Some(&f), Ok(&w.view));
        let (r1, _, msg) = failed_reason(&v.failure_domain);
        assert_eq!(r1, zone_ours::TAG_CATEGORY_MISMATCH);
        assert!(msg.contains("category other"), "{msg}");
    }

    #[test]
    fn auto_configure_plans_categories_tags_and_attachments_in_order() {
        let w = World::new();
        let v = plan_zone(&dz(None, None), Some(&cc_fd(true)), Ok(&w.view));
        assert!(!v.ready(), "changes pending");
        let shown: Vec<String> = v.steps.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            shown,
            [
                "create tag category k8s-region for Datacenter",
                "create tag category k8s-zone for ClusterComputeResource",
                "create tag region-a in category k8s-region",
                "create tag zone-a in category k8s-zone",
                "attach tag region-a (k8s-region) to /DC0",
                "attach tag zone-a (k8s-zone) to /DC0/host/C0",
            ]
        );
        // An existing category restricted to other types is widened, keeping their order.
        let mut w = World::tagged();
        w.view.tags.insert_category(Category {
            id: "cat-z".into(),
            name: "k8s-zone".into(),
            description: String::new(),
            cardinality: "SINGLE".into(),
            associable_types: vec!["HostSystem".into()],
        });
        let v = plan_zone(&dz(None, None), Some(&cc_fd(true)), Ok(&w.view));
        assert_eq!(
            v.steps,
            [Step::WidenCategory {
                name: "k8s-zone".into(),
                associable_types: vec!["HostSystem".into(), "ClusterComputeResource".into()]
            }]
        );
    }

    fn hg_fd(auto: bool) -> VSphereFailureDomain {
        fd(
            side(
                "region-a",
                FailureDomainType::Datacenter,
                "k8s-region",
                false,
            ),
            side("rack-1", FailureDomainType::HostGroup, "k8s-zone", auto),
            Topology {
                datacenter: "DC0".into(),
                compute_cluster: Some("C0".into()),
                hosts: Some(FailureDomainHosts {
                    vm_group_name: "vms".into(),
                    host_group_name: "hosts".into(),
                }),
                ..Topology::default()
            },
        )
    }

    fn hg_world(cfg: ClusterConfig, tagged_hosts: &[&str]) -> World {
        let hosts: Vec<MoRef> = tagged_hosts.iter().map(|h| m("HostSystem", h)).collect();
        World::new()
            .category("cat-r", "k8s-region")
            .category("cat-z", "k8s-zone")
            .tag("t-r", "region-a", "cat-r", &[m("Datacenter", "dc-1")])
            .tag("t-z", "rack-1", "cat-z", &hosts)
            .config("c-0", cfg)
    }

    fn rule(enabled: bool, mandatory: bool) -> ClusterRule {
        ClusterRule::VmHost(VmHostRule {
            key: Some(1),
            name: "r".into(),
            enabled,
            mandatory,
            vm_group: "vms".into(),
            affine_host_group: Some("hosts".into()),
            anti_affine_host_group: None,
        })
    }

    fn groups(hosts: &[&str]) -> Vec<ClusterGroup> {
        vec![
            ClusterGroup::Host {
                name: "hosts".into(),
                hosts: hosts.iter().map(|h| m("HostSystem", h)).collect(),
            },
            ClusterGroup::Vm {
                name: "vms".into(),
                vms: vec![],
            },
        ]
    }

    #[test]
    fn auto_configure_builds_the_host_group_from_tagged_hosts() {
        let w = hg_world(ClusterConfig::default(), &["h-1"]);
        let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
        let shown: Vec<String> = v.steps.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            shown,
            [
                "create host group hosts in /DC0/host/C0 with 1 host(s)",
                "create VM group vms in /DC0/host/C0",
                "create VM-host rule vms-hosts-affinity in /DC0/host/C0: VMs of vms must run on hosts of hosts",
            ]
        );
        assert!(
            matches!(&v.steps[0], Step::CreateHostGroup { hosts, .. } if hosts == &[m("HostSystem", "h-1")])
        );
        // Nobody tagged: nothing to build from, said so.
        let w = hg_world(ClusterConfig::default(), &[]);
        let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
        let (r1, _, msg) = failed_reason(&v.failure_domain);
        assert_eq!(r1, zone_ours::HOST_GROUP_NOT_FOUND);
        assert!(
            msg.contains("no host of /DC0/host/C0 carries zone tag rack-1"),
            "{msg}"
        );
    }

    #[test]
    fn auto_configure_tags_the_hosts_of_an_existing_group() {
        let cfg = ClusterConfig {
            groups: groups(&["h-0", "h-1"]),
            rules: vec![rule(true, true)],
        };
        let w = hg_world(cfg, &["h-0"]);
        let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
        assert_eq!(
            v.steps,
            [Step::AttachTag {
                category: "k8s-zone".into(),
                tag: "rack-1".into(),
                object: m("HostSystem", "h-1"),
                object_path: "/DC0/host/C0/h1".into(),
            }]
        );
    }

    #[test]
    fn host_group_rules_disabled_missing_or_soft_are_reported() {
        let ready_cfg = |r: Vec<ClusterRule>| ClusterConfig {
            groups: groups(&["h-0"]),
            rules: r,
        };
        let w = hg_world(ready_cfg(vec![rule(true, true)]), &["h-0"]);
        assert!(plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view)).ready());

        let w = hg_world(ready_cfg(vec![rule(true, false)]), &["h-0"]);
        let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
        assert!(v.ready());
        assert!(
            matches!(&v.failure_domain, Check::Ok { message } if message.contains("not mandatory"))
        );

        let w = hg_world(ready_cfg(vec![rule(false, true)]), &["h-0"]);
        let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
        assert_eq!(
            failed_reason(&v.failure_domain).0,
            zone_ours::AFFINITY_RULE_DISABLED
        );
        let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
        assert!(matches!(&v.steps[..], [Step::EnableVmHostRule { rule, .. }] if rule == "r"));

        let w = hg_world(ready_cfg(vec![]), &["h-0"]);
        let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
        let (r1, r2, msg) = failed_reason(&v.failure_domain);
        assert_eq!((r1, r2), ("HostsMisconfigured", "HostsMisconfigured"));
        assert!(
            msg.contains("vm host affinity rule does not exist"),
            "{msg}"
        );

        let w = hg_world(ClusterConfig::default(), &["h-0"]);
        let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
        let (r1, _, msg) = failed_reason(&v.failure_domain);
        assert_eq!(r1, zone_ours::HOST_GROUP_NOT_FOUND);
        assert!(
            msg.contains("host group hosts not found") && msg.contains("VM group vms not found"),
            "{msg}"
        );
    }

    #[test]
    fn a_missing_datacenter_is_named() {
        let w = World::tagged();
        let mut f = cc_fd(false);
        f.spec.topology.datacenter = "DC9".into();
        let v = plan_zone(&dz(None, None), Some(&f), Ok(&w.view));
        let (r1, _, msg) = failed_reason(&v.failure_domain);
        assert_eq!(r1, zone_ours::DATACENTER_NOT_FOUND);
        assert!(msg.contains("DC9"), "{msg}");
    }

    #[test]
    fn steps_shared_by_zones_are_planned_once() {
        let mut steps = vec![
            Step::CreateTag {
                category: "c".into(),
                name: "t".into(),
            },
            Step::CreateCategory {
                name: "c".into(),
                associable_types: vec![],
            },
            Step::CreateTag {
                category: "c".into(),
                name: "t".into(),
            },
        ];
        dedup_steps(&mut steps);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].phase(), 0);
        let _ = BTreeMap::<u8, u8>::new();
    }
}
