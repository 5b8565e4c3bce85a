//! Apply: verify (and autoConfigure) the zone in vCenter through the shared per-server view,
//! patch the status only when it changed, own the failure domain once ready, and publish
//! events for what changed.
use std::collections::BTreeMap;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::{NOT_READY_REQUEUE, failure_domain_of, publish};
use crate::api::{VSphereDeploymentZone, VSphereFailureDomain};
use crate::controllers::patch::{apply_status, set_owner_references};
use crate::controllers::{Context, Error, now};
use crate::plan::credentials::principal;
use crate::plan::failure::Failure;
use crate::plan::zone::ZoneState;
use crate::plan::zone_status::{apply_zone_status, with_owner};
use crate::reconcile::zones::{ZoneRun, reconcile_zone};
use crate::vcenter::model::endpoint::same_server;

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
        let Some(name) = z.spec.failure_domain_name().filter(|_| on_server) else {
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

pub(super) async fn apply(zone: &VSphereDeploymentZone, ctx: &Context) -> Result<Action, Error> {
    let name = zone.name_any();
    let fd = failure_domain_of(zone, ctx)?;
    let server = zone.spec.server.clone().unwrap_or_default();
    // Without a failure domain there is nothing to verify: no credentials, no vCenter call.
    let client = match &fd {
        Some(_) => ctx.client_as(&server, &principal::for_zone(zone)).await,
        None => Err(Failure::config("no failure domain")),
    };
    let server_fds = failure_domains_on_server(ctx, &server, fd.as_ref());
    let run = reconcile_zone(client.as_ref(), &ctx.views, zone, fd.as_ref(), &server_fds).await;
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

    // Retrying or failed is the typed failure's call; the error policy requeues accordingly.
    match (run.verdict.state(), run.verdict.decisive_failure()) {
        (ZoneState::Retrying | ZoneState::Failed, Some(failure)) => {
            Err(Error::Vcenter(failure.clone()))
        }
        (ZoneState::Ready, _) => Ok(Action::requeue(ctx.polling.infrastructure_resync)),
        _ => Ok(Action::requeue(NOT_READY_REQUEUE)),
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
        let note = error.to_string();
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
