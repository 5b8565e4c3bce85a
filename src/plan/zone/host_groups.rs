//! The hosts of a HostGroup zone: the host group, the VM group and the VM-host rule binding
//! them — checked, or planned when autoConfigure is set.
use crate::api::failure_domain::FailureDomain;
use crate::vcenter::model::cluster::{ClusterConfig, ClusterGroup, VmHostRule};
use crate::vcenter::model::inventory::Entity;
use crate::vcenter::model::moref::MoRef;

use super::context::FdContext;
use super::reasons::FdProblem;
use super::steps::Step;

/// The name we give a VM-host rule we create: the rule binds VM group to host group.
pub fn rule_name(hosts_vm_group: &str, host_group: &str) -> String {
    format!("{hosts_vm_group}-{host_group}-affinity")
}

impl FdContext<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_hosts(
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
        let rule = rule_name(vg, hg);
        let zone_tag = format!(
            "zone tag {} (category {})",
            zone_side.name, zone_side.tag_category
        );
        // A rule holds only the names of its groups (ClusterVmHostRuleInfo), and its affine
        // host group must have hosts: a rule naming a missing or empty group is refused by
        // vCenter or, worse, kept bound to nothing. So the rule steps wait until both groups
        // exist (the host group with hosts) or are created by this same plan, whose group
        // phase runs before its rule phase and blocks it on failure (reconcile::execute). A
        // crash between the two leaves the group, and the next pass plans the rule once.
        let host_group_ready = match config.group(hg) {
            // An empty group is reported by the zone tag check (no taggable object).
            Some(ClusterGroup::Host { hosts, .. }) => !hosts.is_empty(),
            Some(other) => {
                problems.push((
                    FdProblem::HostGroupNotFound,
                    format!(
                        "group {hg} in {cpath} is not a host group ({other:?}): rename it, or set topology.hosts.hostGroupName to a host group of {cpath}"
                    ),
                ));
                false
            }
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
                            "host group {hg} not found in {cpath}, and no host of {cpath} carries {zone_tag} to build it from: tag hosts of {cpath} with {zone_tag}, or create host group {hg} in {cpath}; VM-host rule {rule} is created once the group exists"
                        ),
                    ));
                    false
                } else {
                    steps.push(Step::CreateHostGroup {
                        cluster: cluster.moref.clone(),
                        cluster_path: cpath.clone(),
                        name: hg.clone(),
                        hosts: tagged,
                    });
                    true
                }
            }
            None => {
                problems.push((
                    FdProblem::HostGroupNotFound,
                    format!(
                        "host group {hg} not found in {cpath}: create host group {hg} in {cpath} with the zone's hosts, or tag hosts of {cpath} with {zone_tag} and set zone.autoConfigure to build it"
                    ),
                ));
                false
            }
        };
        let vm_group_ready = match config.group(vg) {
            Some(ClusterGroup::Vm { .. }) => true,
            Some(other) => {
                problems.push((
                    FdProblem::VmGroupNotFound,
                    format!(
                        "group {vg} in {cpath} is not a VM group ({other:?}): rename it, or set topology.hosts.vmGroupName to a VM group of {cpath}"
                    ),
                ));
                false
            }
            None if auto => {
                steps.push(Step::CreateVmGroup {
                    cluster: cluster.moref.clone(),
                    cluster_path: cpath.clone(),
                    name: vg.clone(),
                });
                true
            }
            None => {
                problems.push((
                    FdProblem::VmGroupNotFound,
                    format!(
                        "VM group {vg} not found in {cpath}: create VM group {vg} in {cpath}, or set zone.autoConfigure"
                    ),
                ));
                false
            }
        };
        let groups_ready = host_group_ready && vm_group_ready;
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
            (None, Some(r)) if auto && groups_ready => steps.push(Step::EnableVmHostRule {
                cluster: cluster.moref.clone(),
                cluster_path: cpath.clone(),
                rule: r.name.clone(),
            }),
            (None, Some(r)) => problems.push((
                FdProblem::AffinityRuleDisabled,
                format!("VM-host rule {} in {cpath} (VM group {vg} → host group {hg}) is disabled", r.name),
            )),
            // The missing group is the problem reported above, with what to do about it.
            (None, None) if auto && !groups_ready => {}
            (None, None) if auto => {
                if config.rule(&rule).is_some() {
                    // No rule binds the two groups, so a rule of this name binds something else.
                    problems.push((
                        FdProblem::AffinityRuleMissing,
                        format!(
                            "cannot create VM-host rule {rule} in {cpath}: a rule of that name exists but does not bind VM group {vg} to host group {hg}"
                        ),
                    ));
                } else {
                    steps.push(Step::CreateVmHostRule {
                        cluster: cluster.moref.clone(),
                        cluster_path: cpath.clone(),
                        name: rule,
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
