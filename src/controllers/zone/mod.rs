//! The VSphereDeploymentZone controller (reference §3): the finalizer is the only top-level
//! action; Apply verifies (and autoConfigures) the zone in vCenter through the shared per-server
//! view, patches the status only when it changed, and makes the zone an owner of its failure
//! domain once ready; Cleanup refuses while Machines use the zone and otherwise releases (or
//! deletes) the failure domain.
//!
//! Files: this one (entry point, error policy, finalizer), [`apply`] (verify and
//! autoConfigure, status, events), [`cleanup`] (deletion).
//!
//! Requeues: ready → 5 min (vCenter drifts outside Kubernetes), not ready → 1 min, vCenter
//! unreachable → per-object exponential backoff, deletion blocked → 30 s.
mod apply;
mod cleanup;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;

use crate::plan::failure::Cause;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::{Context, Error, NOT_SYNCED_REQUEUE, events};
use crate::api::deployment_zone::ZONE_FINALIZER;
use crate::api::{VSphereDeploymentZone, VSphereFailureDomain};
use crate::plan::failure::Retry;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "vspheredeploymentzone";
/// A zone that is not ready (misconfigured, autoConfigure pending) is retried this often.
pub const NOT_READY_REQUEUE: Duration = Duration::from_secs(60);
/// A zone without usable credentials is looked at again this often (see `error_policy`).
pub const CONFIG_REQUEUE: Duration = Duration::from_secs(10);
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
        .filter(|z| z.0.as_ref().is_ok_and(|z| z.spec.failure_domain == fd_name))
        .map(|z| ObjectRef::from_obj(z.as_ref()))
        .collect()
}

fn key(zone: &VSphereDeploymentZone) -> String {
    format!("{CONTROLLER}/{}", zone.name_any())
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
            finalizer::Event::Apply(z) => apply::apply(&z, &ctx).await,
            finalizer::Event::Cleanup(z) => cleanup::cleanup(&z, &ctx).await,
        }
    })
    .await
    .map_err(Error::from);
    ctx.measure(CONTROLLER, started, &result);
    ctx.settle(&key, &result);
    result
}

/// Blocked deletions wait a fixed time; a vCenter failure no retry fixes (credentials,
/// permissions, an invalid argument) waits like a zone that is not ready; everything else
/// backs off per zone.
pub fn error_policy(zone: Arc<VSphereDeploymentZone>, error: &Error, ctx: Arc<Context>) -> Action {
    match error.root() {
        Error::DeletionBlocked(_) => {
            tracing::info!(zone = %zone.name_any(), "{error}");
            Action::requeue(BLOCKED_REQUEUE)
        }
        // No credentials yet (an identityRef Secret not there, the manager's not bound to the
        // server): they come from Secrets, which the manager never watches, so look again soon;
        // it costs Secret reads, no vCenter call.
        Error::Vcenter(f) if matches!(f.cause(), Cause::Config) => {
            ctx.backoff.reset(&key(&zone));
            tracing::warn!(zone = %zone.name_any(), category = error.category(), retry_in = ?CONFIG_REQUEUE, "{error}");
            Action::requeue(CONFIG_REQUEUE)
        }
        Error::Vcenter(_) if error.retry() == Retry::Failed => {
            ctx.backoff.reset(&key(&zone));
            tracing::warn!(zone = %zone.name_any(), category = error.category(), retry_in = ?NOT_READY_REQUEUE, "{error}; failed until something changes");
            Action::requeue(NOT_READY_REQUEUE)
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
    let Some(name) = zone.spec.failure_domain_name() else {
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

/// Publish one Event about `zone`; a failure is logged, never fails the reconcile.
async fn publish(
    ctx: &Context,
    zone: &VSphereDeploymentZone,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    events::publish_with(
        &ctx.recorder,
        &zone.object_ref(&()),
        type_,
        reason,
        action,
        note,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::VSphereDeploymentZoneSpec;

    fn zone(name: &str, fd: &str) -> Arc<VSphereDeploymentZone> {
        Arc::new(VSphereDeploymentZone::new(
            name,
            VSphereDeploymentZoneSpec {
                failure_domain: fd.into(),
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
}
