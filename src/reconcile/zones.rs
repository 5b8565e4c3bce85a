//! Zones as a sweep of the per-server driver ([`super::server`]): every zone on a server is
//! planned against one view (so verifying N zones costs the same bulk reads as verifying one),
//! the autoConfigure steps they ask for are executed, and the view read again until nothing is
//! left to change. Local mode drives all the zones of a server at once
//! ([`reconcile_server`]); the cluster drives one zone at a time over a view shared by every
//! zone on its server ([`reconcile_zone`]).
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::execute::{self, Outcome};
use super::server::{Limits, Locking, Sweep, drive};
use super::views::ServerViews;
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::plan::failure::Failure;
use crate::plan::view::VcenterView;
use crate::plan::zone::{Step, ZoneVerdict, dedup_steps, plan_zone, plan_zone_against};
use crate::vcenter::Client;
use crate::vcenter::model::tags::TagCatalog;

/// Reads before giving up on convergence in local mode (normally 2: configure, then verify).
pub const MAX_ROUNDS: usize = 4;

/// The zones of one server, each with its failure domain (if it exists), the failure domains
/// the view covers, and what was decided.
struct ZoneSweep<'a> {
    zones: Vec<(&'a VSphereDeploymentZone, Option<&'a VSphereFailureDomain>)>,
    covers: Vec<&'a VSphereFailureDomain>,
    verdicts: BTreeMap<String, ZoneVerdict>,
}

impl Sweep for ZoneSweep<'_> {
    type View = VcenterView;
    type Step = Step;

    /// The server's view covering the failure domains; with none to cover, no vCenter call is
    /// made (an empty view is planned against).
    async fn read(
        &self,
        views: &ServerViews,
        client: &Client,
    ) -> Result<Arc<VcenterView>, Failure> {
        if self.covers.is_empty() {
            return Ok(Arc::new(VcenterView::default()));
        }
        views
            .view(client, &self.covers)
            .await
            .map_err(Failure::from)
    }

    fn plan(
        &mut self,
        view: Result<&VcenterView, &Failure>,
        refused: &[(Step, Failure)],
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        self.verdicts.clear();
        for (z, fd) in &self.zones {
            let mut verdict = plan_zone_against(z, *fd, view);
            // Steps vCenter refused earlier are not retried in this drive; the zone says why.
            let refused_here: Vec<(&Step, &Failure)> = refused
                .iter()
                .filter(|(s, _)| verdict.steps.contains(s))
                .map(|(s, f)| (s, f))
                .collect();
            if !refused_here.is_empty() {
                verdict.mark_auto_configure_failed(*fd, refused_here);
                verdict
                    .steps
                    .retain(|s| !refused.iter().any(|(r, _)| r == s));
            }
            steps.extend(verdict.steps.iter().cloned());
            self.verdicts
                .insert(z.metadata.name.clone().unwrap_or_default(), verdict);
        }
        dedup_steps(&mut steps);
        steps
    }

    fn execute<'a>(
        &'a mut self,
        client: &'a Client,
        view: &'a mut VcenterView,
        steps: &'a [Step],
    ) -> impl Future<Output = Outcome<Step>> + Send + 'a {
        execute::execute(client, view, steps)
    }

    fn learnt<'a>(
        &'a self,
        views: &'a ServerViews,
        client: &'a Client,
        view: &'a VcenterView,
    ) -> impl Future<Output = ()> + Send + 'a {
        views.remember_tags(client, &view.tags)
    }
}

impl ZoneSweep<'_> {
    /// The verdicts once the drive stopped: a zone with autoConfigure changes still to make is
    /// not ready, saying what is missing.
    fn finish(mut self) -> BTreeMap<String, ZoneVerdict> {
        for (z, fd) in &self.zones {
            if let Some(v) = self
                .verdicts
                .get_mut(z.metadata.name.as_deref().unwrap_or_default())
            {
                v.mark_pending(*fd);
            }
        }
        self.verdicts
    }
}

/// The result for one server (local mode).
#[derive(Debug, Default)]
pub struct ServerRun {
    /// Zone name → verdict after the last round (with the typed failures behind it).
    pub verdicts: BTreeMap<String, ZoneVerdict>,
    /// Steps executed, in order.
    pub applied: Vec<Step>,
    /// Steps that would run (dry run) or are still wanted after the last round.
    pub pending: Vec<Step>,
    /// Steps vCenter refused, with why (the typed failures are in the verdicts).
    pub failed: Vec<(Step, String)>,
    /// The last view (for placement and tests).
    pub view: Option<VcenterView>,
}

/// Reconcile these zones against `client` (local mode). `fds` maps failure domain names to
/// objects; a zone whose failure domain is missing gets `FailureDomainNotFound` without any
/// vCenter call. `tags` is the caller's catalog: it seeds the reads and learns what they found.
pub async fn reconcile_server(
    client: &Client,
    zones: &[&VSphereDeploymentZone],
    fds: &BTreeMap<String, VSphereFailureDomain>,
    tags: &mut TagCatalog,
    dry_run: bool,
) -> ServerRun {
    let fd_of = |z: &VSphereDeploymentZone| z.spec.failure_domain_name().and_then(|n| fds.get(n));
    let mut sweep = ZoneSweep {
        zones: zones.iter().map(|z| (*z, fd_of(z))).collect(),
        covers: zones.iter().filter_map(|z| fd_of(z)).collect(),
        verdicts: BTreeMap::new(),
    };
    // Every read fresh: one run, one pass over the server.
    let views = ServerViews::new(Duration::ZERO);
    views.remember_tags(client, tags).await;
    let limits = Limits {
        max_writes: MAX_ROUNDS - 1,
        dry_run,
        locking: Locking::Whole,
    };
    let driven = drive(&views, client, &mut sweep, limits).await;
    *tags = views.tags(client).await;
    ServerRun {
        verdicts: sweep.finish(),
        applied: driven.applied,
        pending: driven.pending,
        failed: driven
            .failed
            .into_iter()
            .map(|(s, f)| (s, f.to_string()))
            .collect(),
        view: driven.view,
    }
}

/// The outcome of reconciling one zone in the cluster.
#[derive(Debug)]
pub struct ZoneRun {
    pub verdict: ZoneVerdict,
    pub applied: Vec<Step>,
    pub failed: Vec<(Step, Failure)>,
}

/// Reconcile one zone (cluster): plan against the shared view of its server (which covers every
/// failure domain in `server_fds`, so other zones reuse it), apply the autoConfigure steps under
/// the server's write lock, re-read and re-plan once to verify. `client` is the connection to
/// the zone's server, or the typed failure that kept it from being made.
pub async fn reconcile_zone(
    client: Result<&Client, &Failure>,
    views: &ServerViews,
    zone: &VSphereDeploymentZone,
    fd: Option<&VSphereFailureDomain>,
    server_fds: &BTreeMap<String, VSphereFailureDomain>,
) -> ZoneRun {
    let mut run = ZoneRun {
        verdict: plan_zone(zone, fd, Err("not evaluated")),
        applied: Vec::new(),
        failed: Vec::new(),
    };
    let client = match (fd, client) {
        (None, _) => return run,
        (Some(_), Err(failure)) => {
            run.verdict = plan_zone_against(zone, fd, Err(failure));
            return run;
        }
        (Some(_), Ok(c)) => c,
    };
    let mut sweep = ZoneSweep {
        zones: vec![(zone, fd)],
        covers: server_fds.values().collect(),
        verdicts: BTreeMap::new(),
    };
    let limits = Limits {
        max_writes: 1,
        dry_run: false,
        locking: Locking::OnWrite,
    };
    let driven = drive(views, client, &mut sweep, limits).await;
    if let Some(verdict) = sweep.finish().into_values().next() {
        run.verdict = verdict;
    }
    run.applied = driven.applied;
    run.failed = driven.failed;
    run
}
