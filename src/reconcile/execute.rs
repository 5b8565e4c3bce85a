//! The only code that changes vCenter for zones. Every step reads the view before it writes and
//! treats "already exists" as done, so a run killed at any point and started again converges
//! without duplicate categories, tags, attachments, groups or rules.
use std::collections::BTreeMap;
use std::time::Duration;

use tracing::info;

use crate::plan::failure::Failure;
use crate::plan::view::VcenterView;
use crate::plan::zone::{CATEGORY_DESCRIPTION, Step};
use crate::vcenter::model::cluster::{GroupChange, RuleChange, VmHostRule};
use crate::vcenter::model::error::RestErrorKind;
use crate::vcenter::model::tags::CategorySpec;
use crate::vcenter::{Client, Error, MoRef};

/// How long a group or rule reconfiguration may take (they are quick metadata changes).
const RECONFIGURE_TIMEOUT: Duration = Duration::from_secs(60);

/// What happened to the steps: done, or failed with a typed failure (which says whether the
/// step is worth retrying as it is).
#[derive(Debug)]
pub struct Outcome<S = Step> {
    pub done: Vec<S>,
    pub failed: Vec<(S, Failure)>,
}

impl<S> Default for Outcome<S> {
    fn default() -> Self {
        Outcome {
            done: Vec::new(),
            failed: Vec::new(),
        }
    }
}

fn already_exists(e: &Error) -> bool {
    matches!(
        e,
        Error::Rest {
            kind: RestErrorKind::AlreadyExists,
            ..
        }
    )
}

/// Execute steps in phase order, updating `view` as it goes.
pub async fn execute(client: &Client, view: &mut VcenterView, steps: &[Step]) -> Outcome {
    let mut out = Outcome::default();
    let mut sorted: Vec<Step> = steps.to_vec();
    sorted.sort_by_key(Step::phase);
    // Tag steps one by one; group and rule steps batched per cluster and phase.
    let mut batches: BTreeMap<(u8, MoRef), Vec<Step>> = BTreeMap::new();
    for step in sorted {
        match step.phase() {
            0..=2 => match tag_step(client, view, &step).await {
                Ok(()) => out.done.push(step),
                Err(e) => {
                    // What we cached about it may be stale (deleted or changed outside us):
                    // the next gather reads it again.
                    forget_step_objects(view, &step);
                    out.failed.push((step, e));
                }
            },
            phase => {
                let cluster = match &step {
                    Step::CreateHostGroup { cluster, .. }
                    | Step::CreateVmGroup { cluster, .. }
                    | Step::CreateVmHostRule { cluster, .. }
                    | Step::EnableVmHostRule { cluster, .. } => cluster.clone(),
                    _ => unreachable!("tag steps are phases 0-2"),
                };
                batches.entry((phase, cluster)).or_default().push(step);
            }
        }
    }
    let mut broken_clusters = BTreeMap::new();
    for ((phase, cluster), steps) in batches {
        if let Some(blocker) = broken_clusters.get(&cluster) {
            // Rules need the groups: not attempted when the group change failed.
            let e = Failure::blocked_by(
                blocker,
                format!(
                    "not attempted: the group changes of {} failed",
                    path_of(view, &cluster)
                ),
            );
            out.failed.extend(steps.into_iter().map(|s| (s, e.clone())));
            continue;
        }
        match cluster_batch(client, view, &cluster, &steps).await {
            Ok(()) => out.done.extend(steps),
            Err(e) => {
                if phase == 3 {
                    broken_clusters.insert(cluster.clone(), e.clone());
                }
                out.failed.extend(steps.into_iter().map(|s| (s, e.clone())));
            }
        }
    }
    for s in &out.done {
        info!(server = %client.server(), "{s}");
    }
    out
}

fn forget_step_objects(view: &mut VcenterView, step: &Step) {
    let (category, tag) = match step {
        Step::CreateCategory { name, .. } | Step::WidenCategory { name, .. } => (name, None),
        Step::CreateTag { category, name } => (category, Some(name)),
        Step::AttachTag { category, tag, .. } => (category, Some(tag)),
        _ => return,
    };
    if let Some(t) = tag
        .and_then(|t| view.tags.tag(category, t))
        .map(|t| t.id.clone())
    {
        view.tags.forget(&t);
    }
    if tag.is_none()
        && let Some(c) = view.tags.category(category).map(|c| c.id.clone())
    {
        view.tags.forget(&c);
    }
}

async fn refresh_categories(client: &Client, view: &mut VcenterView) -> Result<(), Error> {
    for id in client.list_categories().await? {
        if view.tags.category_by_id(&id).is_none() {
            let c = client.get_category(&id).await?;
            view.tags.insert_category(c);
        }
    }
    Ok(())
}

async fn tag_step(client: &Client, view: &mut VcenterView, step: &Step) -> Result<(), Failure> {
    let describe = |e: Error| Failure::vcenter(Some(&step.to_string()), e);
    match step {
        Step::CreateCategory {
            name,
            associable_types,
        } => {
            if view.tags.category(name).is_some() {
                return Ok(());
            }
            let spec = CategorySpec {
                name: name.clone(),
                description: CATEGORY_DESCRIPTION.into(),
                cardinality: "MULTIPLE".into(),
                associable_types: associable_types.clone(),
            };
            match client.create_category(&spec).await {
                Ok(id) => {
                    view.tags
                        .insert_new_category(crate::vcenter::model::tags::Category {
                            id,
                            name: spec.name,
                            description: spec.description,
                            cardinality: spec.cardinality,
                            associable_types: spec.associable_types,
                        });
                    Ok(())
                }
                // Created by someone else since we looked: learn its id.
                Err(e) if already_exists(&e) => {
                    refresh_categories(client, view).await.map_err(describe)
                }
                Err(e) => Err(describe(e)),
            }
        }
        Step::WidenCategory {
            name,
            associable_types,
        } => {
            let Some(c) = view.tags.category(name).cloned() else {
                return Err(Failure::stale(format!("{step}: category {name} not found")));
            };
            client
                .update_category_types(&c.id, associable_types)
                .await
                .map_err(describe)?;
            view.tags
                .insert_category(crate::vcenter::model::tags::Category {
                    associable_types: associable_types.clone(),
                    ..c
                });
            Ok(())
        }
        Step::CreateTag { category, name } => {
            if view.tags.tag(category, name).is_some() {
                return Ok(());
            }
            let Some(c) = view.tags.category(category).cloned() else {
                return Err(Failure::stale(format!(
                    "{step}: category {category} not found"
                )));
            };
            match client.create_tag(name, &c.id, "").await {
                Ok(id) => {
                    view.tags.insert_tag(crate::vcenter::model::tags::Tag {
                        id,
                        name: name.clone(),
                        category_id: c.id,
                        description: String::new(),
                    });
                    Ok(())
                }
                Err(e) if already_exists(&e) => {
                    for id in client
                        .list_tags_for_category(&c.id)
                        .await
                        .map_err(describe)?
                    {
                        if view.tags.tag_by_id(&id).is_none() {
                            let t = client.get_tag(&id).await.map_err(describe)?;
                            view.tags.insert_tag(t);
                        }
                    }
                    Ok(())
                }
                Err(e) => Err(describe(e)),
            }
        }
        Step::AttachTag {
            category,
            tag,
            object,
            ..
        } => {
            let Some(t) = view.tags.tag(category, tag).cloned() else {
                return Err(Failure::stale(format!(
                    "{step}: tag {tag} not found in category {category}"
                )));
            };
            if view
                .attachments
                .get(object)
                .is_some_and(|a| a.contains(&t.id))
            {
                return Ok(());
            }
            match client.attach_tag(&t.id, object).await {
                Ok(()) => {
                    view.attachments
                        .entry(object.clone())
                        .or_default()
                        .insert(t.id);
                    Ok(())
                }
                Err(e) => Err(describe(e)),
            }
        }
        _ => Err(Failure::config(format!("{step}: not a tag step"))),
    }
}

/// Apply the group steps (or the rule steps) of one cluster in one reconfiguration. The view was
/// read this round, so what exists is not added again; the next round reads it back.
async fn cluster_batch(
    client: &Client,
    view: &VcenterView,
    cluster: &MoRef,
    steps: &[Step],
) -> Result<(), Failure> {
    let fail =
        |e: Error| Failure::vcenter(Some(&format!("reconfigure {}", path_of(view, cluster))), e);
    let empty = Default::default();
    let config = view.cluster_configs.get(cluster).unwrap_or(&empty);
    let mut groups = Vec::new();
    let mut rules = Vec::new();
    for s in steps {
        match s {
            Step::CreateHostGroup { name, .. } | Step::CreateVmGroup { name, .. }
                if config.group(name).is_none() =>
            {
                groups.extend(s.new_group().map(GroupChange::Add));
            }
            Step::CreateVmHostRule { name, .. } if config.rule(name).is_none() => {
                rules.extend(s.new_rule().map(RuleChange::Add));
            }
            Step::EnableVmHostRule { rule, .. } => {
                if let Some(r) = config
                    .vm_host_rules()
                    .find(|r| r.name == *rule && !r.enabled)
                {
                    rules.push(RuleChange::Edit(VmHostRule {
                        enabled: true,
                        ..r.clone()
                    }));
                }
            }
            _ => {}
        }
    }
    if !groups.is_empty() || !rules.is_empty() {
        // A reconfiguration still queued or running (ours, after a timeout or a crash, or
        // anyone's) may be adding the same group or rule: wait for it rather than add twice.
        if let Some(busy) = client.running_task(cluster).await.map_err(fail)? {
            return Err(Failure::busy(format!(
                "{} is busy with task {busy}; the change is retried on the next reconcile",
                path_of(view, cluster)
            )));
        }
        let task = client
            .reconfigure_cluster(cluster, &rules, &groups)
            .await
            .map_err(fail)?;
        client
            .wait_task(&task, RECONFIGURE_TIMEOUT)
            .await
            .map_err(fail)?;
    }
    Ok(())
}

fn path_of(view: &VcenterView, m: &MoRef) -> String {
    view.inventory.describe(m)
}
