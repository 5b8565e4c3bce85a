//! Region and zone tags: the category, the tag, and its attachment to the objects the failure
//! domain names — checked, or planned when autoConfigure is set.
use crate::api::failure_domain::{FailureDomain, FailureDomainType};
use crate::vcenter::model::inventory::Entity;

use super::context::FdContext;
use super::reasons::FdProblem;
use super::steps::Step;

/// The associable type a region/zone tag is attached to.
pub fn associable_type(t: FailureDomainType) -> &'static str {
    match t {
        FailureDomainType::Datacenter => "Datacenter",
        FailureDomainType::ComputeCluster => "ClusterComputeResource",
        FailureDomainType::HostGroup => "HostSystem",
    }
}

impl FdContext<'_> {
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
                Some(hosts) if hosts.is_empty() => {
                    let hg = self.host_group.unwrap_or_default();
                    let cluster = self.cluster.map(|c| c.path.as_str()).unwrap_or_default();
                    Err(format!(
                        "unable to find taggable object: host group {hg} in {cluster} has no hosts (add the zone's hosts of {cluster} to it)"
                    ))
                }
                Some(hosts) => Ok(hosts.into_iter().filter_map(|h| self.inv.get(&h)).collect()),
            },
        }
    }

    pub(super) fn check_tag(
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
                    problem,
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
                    problem,
                    format!(
                        "object {} does not have tag {} (category {}): the tag of that name attached to it is in category {other}",
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
}
