//! Cleanup: refuse while Machines use the zone (or may: undecodable ones), otherwise release
//! the failure domain, or delete it when this was its last zone.
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::{failure_domain_of, publish};
use crate::api::{VSphereDeploymentZone, VSphereFailureDomain};
use crate::controllers::cache::display_name;
use crate::controllers::patch::{apply_status, delete_failure_domain, set_owner_references};
use crate::controllers::{Context, Error, now};
use crate::plan::zone_status::{Deletion, ZONE_LABEL, apply_deleting, plan_zone_deletion};

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

pub(super) async fn cleanup(zone: &VSphereDeploymentZone, ctx: &Context) -> Result<Action, Error> {
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
