//! Reconciling every zone on one vCenter to a fixed point: gather → plan → execute, repeated
//! until the plans ask for no change (at most [`MAX_ROUNDS`]). Zones on one server share one
//! gather, so verifying N zones costs the same bulk reads as verifying one.
use std::collections::BTreeMap;

use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::plan::view::VcenterView;
use crate::plan::zone::{Step, ZoneVerdict, dedup_steps, plan_zone};
use crate::vcenter::Client;
use crate::vcenter::tags::TagCatalog;

use super::{execute, gather};

/// Rounds before giving up on convergence (normally 2: configure, then verify).
pub const MAX_ROUNDS: usize = 4;

/// The result for one server.
#[derive(Debug, Default)]
pub struct ServerRun {
    /// Zone name → verdict after the last round.
    pub verdicts: BTreeMap<String, ZoneVerdict>,
    /// Steps executed, in order.
    pub applied: Vec<Step>,
    /// Steps that would run (dry run) or are still wanted after the last round.
    pub pending: Vec<Step>,
    /// Steps vCenter refused, with why.
    pub failed: Vec<(Step, String)>,
    /// The last view (for placement and tests).
    pub view: Option<VcenterView>,
}

/// Reconcile these zones against `client`. `fds` maps failure domain names to objects; a zone
/// whose failure domain is missing gets `FailureDomainNotFound` without any vCenter call.
pub async fn reconcile_server(
    client: &Client,
    zones: &[&VSphereDeploymentZone],
    fds: &BTreeMap<String, VSphereFailureDomain>,
    tags: &mut TagCatalog,
    dry_run: bool,
) -> ServerRun {
    let mut run = ServerRun::default();
    let used: Vec<&VSphereFailureDomain> = zones
        .iter()
        .filter_map(|z| z.spec.failure_domain.as_ref().and_then(|n| fds.get(n)))
        .collect();
    let mut refused: Vec<(Step, String)> = Vec::new();
    for _round in 0..MAX_ROUNDS {
        let gathered = if used.is_empty() {
            Ok(VcenterView::default())
        } else {
            gather::gather(client, used.iter().copied(), tags).await
        };
        let message = gathered.as_ref().err().map(|e| e.to_string());
        let view = gathered.ok();
        let mut steps = Vec::new();
        run.verdicts.clear();
        for z in zones {
            let fd = z.spec.failure_domain.as_ref().and_then(|n| fds.get(n));
            let input = match (&view, &message) {
                (Some(v), _) => Ok(v),
                (None, Some(m)) => Err(m.as_str()),
                (None, None) => unreachable!("either a view or an error"),
            };
            let mut verdict = plan_zone(z, fd, input);
            // Steps vCenter refused earlier are not retried in this run; the zone says why.
            let refused_here: Vec<&(Step, String)> = refused
                .iter()
                .filter(|(s, _)| verdict.steps.contains(s))
                .collect();
            if !refused_here.is_empty() {
                verdict.mark_auto_configure_failed(refused_here.iter().map(|(_, e)| e.as_str()));
                verdict
                    .steps
                    .retain(|s| !refused.iter().any(|(r, _)| r == s));
            }
            steps.extend(verdict.steps.iter().cloned());
            run.verdicts
                .insert(z.metadata.name.clone().unwrap_or_default(), verdict);
        }
        dedup_steps(&mut steps);
        let Some(mut view) = view else { break };
        if dry_run || steps.is_empty() {
            mark_pending(&mut run.verdicts);
            run.pending = steps;
            run.view = Some(view);
            break;
        }
        let outcome = execute::execute(client, &mut view, &steps).await;
        *tags = view.tags.clone();
        run.applied.extend(outcome.done);
        refused.extend(outcome.failed.iter().cloned());
        run.failed.extend(outcome.failed);
        run.pending = steps;
        run.view = Some(view);
    }
    mark_pending(&mut run.verdicts);
    run
}

/// A zone with autoConfigure changes still to make is not ready: say what is missing.
fn mark_pending(verdicts: &mut BTreeMap<String, ZoneVerdict>) {
    verdicts.values_mut().for_each(ZoneVerdict::mark_pending);
}
