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
