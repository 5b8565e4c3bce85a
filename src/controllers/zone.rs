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

use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::patch::{apply_status, delete_failure_domain, set_owner_references};
use super::{Context, Error, now};
use crate::api::conditions::zone_v1beta1;
use crate::api::deployment_zone::ZONE_FINALIZER;
use crate::api::{VSphereDeploymentZone, VSphereFailureDomain};
use crate::plan::zone::Check;
use crate::plan::zone_status::{
    Deletion, apply_deleting, apply_zone_status, plan_zone_deletion, with_owner,
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

/// The zones a failure domain change concerns: those naming it in `spec.failureDomain`.
pub fn zones_using(
    zones: &[Arc<VSphereDeploymentZone>],
    fd: &VSphereFailureDomain,
) -> Vec<ObjectRef<VSphereDeploymentZone>> {
    let name = fd.name_any();
    zones
        .iter()
        .filter(|z| z.spec.failure_domain.as_deref() == Some(name.as_str()))
        .map(|z| ObjectRef::from_obj(z.as_ref()))
        .collect()
}

fn key(zone: &VSphereDeploymentZone) -> String {
    format!("{CONTROLLER}/{}", zone.name_any())
}

/// The reconciler: add the finalizer, then Apply or Cleanup.
pub async fn reconcile(
    zone: Arc<VSphereDeploymentZone>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
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

/// The failure domains of every zone on `server` (plus the zone's own), so the shared view of
/// that server is gathered once for all of them.
fn failure_domains_on_server(
    ctx: &Context,
    server: &str,
    own: Option<&VSphereFailureDomain>,
) -> BTreeMap<String, VSphereFailureDomain> {
    let mut out = BTreeMap::new();
    for z in ctx.stores.zones.state() {
        let on_server = z
            .spec
            .server
            .as_deref()
            .is_some_and(|s| same_server(s, server));
        let Some(name) = z.spec.failure_domain.as_deref().filter(|_| on_server) else {
            continue;
        };
        if let Some(fd) = ctx.stores.failure_domains.get(&ObjectRef::new(name)) {
            out.insert(name.to_string(), (*fd).clone());
        }
    }
    if let Some(fd) = own {
        out.insert(fd.name_any(), fd.clone());
    }
    out
}

async fn apply(zone: &VSphereDeploymentZone, ctx: &Context) -> Result<Action, Error> {
    let name = zone.name_any();
    let fd = zone
        .spec
        .failure_domain
        .as_deref()
        .and_then(|n| ctx.stores.failure_domains.get(&ObjectRef::new(n)));
    let server = zone.spec.server.clone().unwrap_or_default();
    // Without a failure domain there is nothing to verify: no credentials, no vCenter call.
    let client = match &fd {
        Some(_) => ctx.vcenter_client(&server).await,
        None => Err(String::new()),
    };
    let server_fds = failure_domains_on_server(ctx, &server, fd.as_deref());
    let run = reconcile_zone(
        client.as_ref().map_err(String::as_str),
        &ctx.views,
        zone,
        fd.as_deref(),
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

async fn cleanup(zone: &VSphereDeploymentZone, ctx: &Context) -> Result<Action, Error> {
    let name = zone.name_any();
    let fd = zone
        .spec
        .failure_domain
        .as_deref()
        .and_then(|n| ctx.stores.failure_domains.get(&ObjectRef::new(n)));
    let machines: Vec<_> = ctx
        .stores
        .machines
        .state()
        .iter()
        .map(|m| (**m).clone())
        .collect();
    match plan_zone_deletion(zone, fd.as_deref(), &machines) {
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
fn truncate(mut s: String, max: usize) -> String {
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
        let names: Vec<String> = zones_using(&zones, &fd)
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
