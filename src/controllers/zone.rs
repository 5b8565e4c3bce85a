//! The VSphereDeploymentZone controller (reference §3): the finalizer is the only top-level
//! action; Apply verifies (and autoConfigures) the zone in vCenter through the shared per-server
//! view, patches the status only when it changed, and makes the zone an owner of its failure
//! domain once ready; Cleanup refuses while Machines use the zone and otherwise releases (or
//! deletes) the failure domain.
//!
//! Requeues: ready → 5 min (vCenter drifts outside Kubernetes), not ready → 1 min, vCenter
//! unreachable → per-object exponential backoff, deletion blocked → 30 s.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::cache::display_name;
use super::patch::{apply_status, delete_failure_domain, set_owner_references};
use super::{Context, Error, NOT_SYNCED_REQUEUE, now};
use crate::api::conditions::zone_v1beta1;
use crate::api::deployment_zone::ZONE_FINALIZER;
use crate::api::{VSphereDeploymentZone, VSphereFailureDomain};
use crate::plan::zone::Check;
use crate::plan::zone_status::{
    Deletion, ZONE_LABEL, apply_deleting, apply_zone_status, plan_zone_deletion, with_owner,
};
use crate::reconcile::views::{ZoneRun, reconcile_zone};
use crate::vcenter::endpoint::same_server;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "vspheredeploymentzone";
/// A ready zone is re-verified this often: vCenter changes outside Kubernetes.
pub const READY_REQUEUE: Duration = Duration::from_secs(300);
/// A zone that is not ready (misconfigured, autoConfigure pending) is retried this often.
pub const NOT_READY_REQUEUE: Duration = Duration::from_secs(60);
/// A deletion blocked by Machines is re-checked this often.
pub const BLOCKED_REQUEUE: Duration = Duration::from_secs(30);

/// The zones a failure domain change concerns: those naming it (`fd_name`) in
/// `spec.failureDomain`.
pub fn zones_using(
    zones: &[Arc<DeserializeGuard<VSphereDeploymentZone>>],
    fd_name: &str,
) -> Vec<ObjectRef<DeserializeGuard<VSphereDeploymentZone>>> {
    zones
        .iter()
        .filter(|z| {
            z.0.as_ref()
                .is_ok_and(|z| z.spec.failure_domain.as_deref() == Some(fd_name))
        })
        .map(|z| ObjectRef::from_obj(z.as_ref()))
        .collect()
}

fn key(zone: &VSphereDeploymentZone) -> String {
    format!("{CONTROLLER}/{}", zone.name_any())
}

/// The controller's entry point: a zone that does not decode is logged and left alone until
/// it is edited; the others are reconciled.
pub async fn reconcile_guarded(
    zone: Arc<DeserializeGuard<VSphereDeploymentZone>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    match &zone.0 {
        Ok(z) => reconcile(Arc::new(z.clone()), ctx).await,
        Err(e) => {
            let result = Err(Error::InvalidObject(e.error.clone()));
            ctx.record(
                CONTROLLER,
                &format!("{CONTROLLER}/{}", display_name(&e.metadata)),
                Instant::now(),
                &result,
            );
            result
        }
    }
}

/// [`error_policy`] for [`reconcile_guarded`].
pub fn error_policy_guarded(
    zone: Arc<DeserializeGuard<VSphereDeploymentZone>>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    match &zone.0 {
        Ok(z) => error_policy(Arc::new(z.clone()), error, ctx),
        Err(e) => {
            tracing::warn!(zone = %display_name(&e.metadata), "{error}; waiting for it to be fixed");
            Action::await_change()
        }
    }
}

/// The reconciler: add the finalizer, then Apply or Cleanup. Nothing happens before every
/// cache it reads has loaded (an unloaded Machine cache would let a zone in use be deleted).
pub async fn reconcile(
    zone: Arc<VSphereDeploymentZone>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    if !ctx.stores.all_synced() {
        tracing::debug!(zone = %zone.name_any(), loading = ?ctx.stores.not_synced(), "caches not loaded; retrying soon");
        return Ok(Action::requeue(NOT_SYNCED_REQUEUE));
    }
    let started = Instant::now();
    let key = key(&zone);
    let api: Api<VSphereDeploymentZone> = Api::all(ctx.client.clone());
    let result = finalizer(&api, ZONE_FINALIZER, zone, |event| async {
        match event {
            finalizer::Event::Apply(z) => apply(&z, &ctx).await,
            finalizer::Event::Cleanup(z) => cleanup(&z, &ctx).await,
        }
    })
    .await
    .map_err(Error::from);
    ctx.record(CONTROLLER, &key, started, &result);
    result
}

/// Blocked deletions wait a fixed time; everything else backs off per zone.
pub fn error_policy(zone: Arc<VSphereDeploymentZone>, error: &Error, ctx: Arc<Context>) -> Action {
    match error.root() {
        Error::DeletionBlocked(_) => {
            tracing::info!(zone = %zone.name_any(), "{error}");
            Action::requeue(BLOCKED_REQUEUE)
        }
        _ => {
            let delay = ctx.backoff.next(&key(&zone));
            tracing::warn!(zone = %zone.name_any(), category = error.category(), retry_in = ?delay, "{error}");
            Action::requeue(delay)
        }
    }
}

/// The zone's failure domain from the cache: absent is `None`, undecodable is an error.
fn failure_domain_of(
    zone: &VSphereDeploymentZone,
    ctx: &Context,
) -> Result<Option<VSphereFailureDomain>, Error> {
    let Some(name) = zone.spec.failure_domain.as_deref() else {
        return Ok(None);
    };
    match ctx.stores.failure_domains.get(None, name) {
        None => Ok(None),
        Some(Ok(fd)) => Ok(Some(fd)),
        Some(Err(e)) => Err(Error::Unreadable(format!(
            "VSphereFailureDomain {name} cannot be decoded: {e}"
        ))),
    }
}

/// The failure domains of every zone on `server` (plus the zone's own), so the shared view of
/// that server is gathered once for all of them.
fn failure_domains_on_server(
    ctx: &Context,
    server: &str,
    own: Option<&VSphereFailureDomain>,
) -> BTreeMap<String, VSphereFailureDomain> {
    let mut out = BTreeMap::new();
    for z in ctx.stores.zones.valid() {
        let on_server = z
            .spec
            .server
            .as_deref()
            .is_some_and(|s| same_server(s, server));
        let Some(name) = z.spec.failure_domain.as_deref().filter(|_| on_server) else {
            continue;
        };
        if let Some(Ok(fd)) = ctx.stores.failure_domains.get(None, name) {
            out.insert(name.to_string(), fd);
        }
    }
    if let Some(fd) = own {
        out.insert(fd.name_any(), fd.clone());
    }
    out
}

async fn apply(zone: &VSphereDeploymentZone, ctx: &Context) -> Result<Action, Error> {
    let name = zone.name_any();
    let fd = failure_domain_of(zone, ctx)?;
    let server = zone.spec.server.clone().unwrap_or_default();
    // Without a failure domain there is nothing to verify: no credentials, no vCenter call.
    let client = match &fd {
        Some(_) => ctx.vcenter_client(&server).await,
        None => Err(String::new()),
    };
    let server_fds = failure_domains_on_server(ctx, &server, fd.as_ref());
    let run = reconcile_zone(
        client.as_ref().map_err(String::as_str),
        &ctx.views,
        zone,
        fd.as_ref(),
        &server_fds,
    )
    .await;
    let ready = run.verdict.ready();

    // Own the failure domain before saying ready, so a ready zone always protects it.
    if let (true, Some(fd)) = (ready, &fd)
        && let Some(refs) = with_owner(fd, zone)
    {
        let fds: Api<VSphereFailureDomain> = Api::all(ctx.client.clone());
        set_owner_references(&fds, fd, &refs).await?;
        tracing::info!(zone = %name, failure_domain = %fd.name_any(), "owner reference added");
    }

    let was_ready = zone.status.as_ref().and_then(|s| s.ready);
    let mut status = zone.status.clone().unwrap_or_default();
    if apply_zone_status(&mut status, &run.verdict, zone.metadata.generation, &now()) {
        let api: Api<VSphereDeploymentZone> = Api::all(ctx.client.clone());
        apply_status(&api, &name, &status).await?;
    }
    publish_events(ctx, zone, &run, was_ready, &server).await;

    if let Check::Failed {
        v1beta1_reason: zone_v1beta1::VCENTER_UNREACHABLE,
        message,
        ..
    } = &run.verdict.vcenter
    {
        return Err(Error::Vcenter(message.clone()));
    }
    Ok(Action::requeue(if ready {
        READY_REQUEUE
    } else {
        NOT_READY_REQUEUE
    }))
}

/// Machines that cannot be decoded and may be in this zone: their placement cannot be read,
/// so unless their zone label names another zone they count as using it (deleting a zone in use
/// cannot be undone; waiting for a Machine to be fixed can).
fn unreadable_machines(zone: &VSphereDeploymentZone, ctx: &Context) -> Vec<String> {
    let name = zone.name_any();
    let mut out: Vec<String> = ctx
        .stores
        .machines
        .invalid()
        .into_iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .filter(|m| {
            m.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(ZONE_LABEL))
                .is_none_or(|z| *z == name)
        })
        .map(|m| format!("{} (cannot be decoded)", display_name(&m.metadata)))
        .collect();
    out.sort();
    out
}

async fn cleanup(zone: &VSphereDeploymentZone, ctx: &Context) -> Result<Action, Error> {
    let name = zone.name_any();
    let fd = failure_domain_of(zone, ctx)?;
    let machines = ctx.stores.machines.valid();
    let mut deletion = plan_zone_deletion(zone, fd.as_ref(), &machines);
    let unreadable = unreadable_machines(zone, ctx);
    if !unreadable.is_empty() {
        deletion = match deletion {
            Deletion::Blocked { mut machines } => {
                machines.extend(unreadable);
                Deletion::Blocked { machines }
            }
            Deletion::Proceed { .. } => Deletion::Blocked {
                machines: unreadable,
            },
        };
    }
    match deletion {
        Deletion::Blocked { machines } => {
            let message = Deletion::blocked_message(&machines);
            let mut status = zone.status.clone().unwrap_or_default();
            let before = status.clone();
            apply_deleting(&mut status, zone.metadata.generation, &now(), &message);
            if status != before {
                let api: Api<VSphereDeploymentZone> = Api::all(ctx.client.clone());
                apply_status(&api, &name, &status).await?;
                publish(
                    ctx,
                    zone,
                    EventType::Warning,
                    "DeletionBlocked",
                    "Delete",
                    message,
                )
                .await;
            }
            Err(Error::DeletionBlocked(machines))
        }
        Deletion::Proceed {
            remaining_owners,
            delete_failure_domain: delete,
        } => {
            if let Some(fd) = fd {
                let fds: Api<VSphereFailureDomain> = Api::all(ctx.client.clone());
                if delete {
                    delete_failure_domain(&fds, &fd).await?;
                    let note = format!(
                        "deleted VSphereFailureDomain {}: this was its last zone",
                        fd.name_any()
                    );
                    publish(
                        ctx,
                        zone,
                        EventType::Normal,
                        "FailureDomainDeleted",
                        "Delete",
                        note,
                    )
                    .await;
                } else if let Some(refs) = remaining_owners {
                    set_owner_references(&fds, &fd, &refs).await?;
                }
            }
            tracing::info!(zone = %name, "deletion done; removing the finalizer");
            Ok(Action::await_change())
        }
    }
}

/// Events for what changed: each autoConfigure step applied or refused, and readiness flips
/// (not every not-ready pass, which would flood the namespace).
async fn publish_events(
    ctx: &Context,
    zone: &VSphereDeploymentZone,
    run: &ZoneRun,
    was_ready: Option<bool>,
    server: &str,
) {
    for step in &run.applied {
        publish(
            ctx,
            zone,
            EventType::Normal,
            "AutoConfigured",
            "Configure",
            step.to_string(),
        )
        .await;
    }
    for (_, error) in &run.failed {
        // The executor's error already names the step.
        let note = error.clone();
        publish(
            ctx,
            zone,
            EventType::Warning,
            "AutoConfigureFailed",
            "Configure",
            note,
        )
        .await;
    }
    let ready = run.verdict.ready();
    match (was_ready, ready) {
        (Some(true), true) | (Some(false), false) => {}
        (_, true) => {
            let note = format!("verified in vCenter {server}");
            publish(ctx, zone, EventType::Normal, "Ready", "Verify", note).await;
        }
        (_, false) => {
            let (reason, message) = run
                .verdict
                .first_problem()
                .unwrap_or(("NotReady", "not ready"));
            let note = format!("{reason}: {message}");
            publish(ctx, zone, EventType::Warning, "NotReady", "Verify", note).await;
        }
    }
}

/// Publish one Event about `zone`; a failure is logged, never fails the reconcile.
async fn publish(
    ctx: &Context,
    zone: &VSphereDeploymentZone,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(truncate(note, 1024)),
        action: action.into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &zone.object_ref(&())).await {
        tracing::debug!(zone = %zone.name_any(), error = %e, "cannot publish event");
    }
}

/// Event notes are limited to 1 kB.
pub(crate) fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max - 3;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::VSphereDeploymentZoneSpec;

    fn zone(name: &str, fd: &str) -> Arc<VSphereDeploymentZone> {
        Arc::new(VSphereDeploymentZone::new(
            name,
            VSphereDeploymentZoneSpec {
                failure_domain: Some(fd.into()),
                ..VSphereDeploymentZoneSpec::default()
            },
        ))
    }

    #[test]
    fn a_failure_domain_wakes_exactly_the_zones_naming_it() {
        let zones = [zone("a", "fd1"), zone("b", "fd2"), zone("c", "fd1")];
        let fd: VSphereFailureDomain = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereFailureDomain",
            "metadata": {"name": "fd1"},
            "spec": {
                "region": {"name": "r", "type": "Datacenter", "tagCategory": "k8s-region"},
                "zone": {"name": "z", "type": "ComputeCluster", "tagCategory": "k8s-zone"},
                "topology": {"datacenter": "DC0"}
            }
        }))
        .unwrap();
        let guarded: Vec<_> = zones
            .iter()
            .map(|z| Arc::new(DeserializeGuard(Ok((**z).clone()))))
            .collect();
        let names: Vec<String> = zones_using(&guarded, &fd.name_any())
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["a", "c"]);
    }

    #[test]
    fn notes_are_cut_at_a_char_boundary() {
        let s = truncate("é".repeat(600), 1024);
        assert!(s.len() <= 1024 && s.ends_with("..."));
        assert_eq!(truncate("short".into(), 1024), "short");
    }
}
