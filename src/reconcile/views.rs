//! Shared, short-lived vCenter views for the in-cluster controller. Kubernetes hands zones to
//! the controller one at a time; gathering per zone would cost N bulk reads for N zones. Instead
//! one gather per server covers every failure domain on that server and is reused by all zone
//! reconciles for `ttl`; any write by us invalidates it, and a periodic requeue past the TTL
//! catches drift made outside Kubernetes.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use super::{execute, gather};
use crate::api::deployment_zone::VSphereDeploymentZone;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::plan::view::VcenterView;
use crate::plan::zone::{Step, ZoneVerdict, plan_zone};
use crate::vcenter::tags::TagCatalog;
use crate::vcenter::{Client, Result};

#[derive(Default)]
struct Entry {
    gathered: Option<(Instant, BTreeSet<String>, Arc<VcenterView>)>,
    tags: TagCatalog,
}

/// Views per server (keyed by the client's endpoint).
pub struct ServerViews {
    ttl: Duration,
    servers: std::sync::Mutex<HashMap<String, Arc<Mutex<Entry>>>>,
    writers: std::sync::Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl ServerViews {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            servers: std::sync::Mutex::default(),
            writers: std::sync::Mutex::default(),
        }
    }

    /// Held while deciding and making changes on a server.
    pub async fn write_lock(&self, client: &Client) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self
            .writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(client.server())
            .or_default()
            .clone();
        lock.lock_owned().await
    }

    fn entry(&self, server: &str) -> Arc<Mutex<Entry>> {
        self.servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(server.to_string())
            .or_default()
            .clone()
    }

    /// A view covering `fds` (by name), gathered at most `ttl` ago; concurrent callers for the
    /// same server wait for one gather.
    pub async fn view(
        &self,
        client: &Client,
        fds: &[&VSphereFailureDomain],
    ) -> Result<Arc<VcenterView>> {
        // Name, uid and generation (bumped by spec changes only, not by the owner references
        // zones add): a failure domain changed or re-created needs a new read.
        let names: BTreeSet<String> = fds
            .iter()
            .map(|f| {
                format!(
                    "{}@{}/{}",
                    f.metadata.name.clone().unwrap_or_default(),
                    f.metadata.uid.clone().unwrap_or_default(),
                    f.metadata.generation.unwrap_or_default()
                )
            })
            .collect();
        let entry = self.entry(&client.server());
        let mut e = entry.lock().await;
        if let Some((at, covered, view)) = &e.gathered
            && at.elapsed() < self.ttl
            && names.is_subset(covered)
        {
            return Ok(view.clone());
        }
        let mut tags = std::mem::take(&mut e.tags);
        let result = gather::gather(client, fds.iter().copied(), &mut tags).await;
        e.tags = tags;
        let view = Arc::new(result?);
        e.gathered = Some((Instant::now(), names, view.clone()));
        Ok(view)
    }

    /// Forget the view of a server (after we changed it).
    pub async fn invalidate(&self, client: &Client) {
        let entry = self.entry(&client.server());
        entry.lock().await.gathered = None;
    }

    /// Keep what the executor learnt about tags (ids of what it created).
    async fn remember_tags(&self, client: &Client, tags: &TagCatalog) {
        let entry = self.entry(&client.server());
        entry.lock().await.tags = tags.clone();
    }
}

/// The outcome of reconciling one zone in the cluster.
#[derive(Debug)]
pub struct ZoneRun {
    pub verdict: ZoneVerdict,
    pub applied: Vec<Step>,
    pub failed: Vec<(Step, String)>,
}

/// Reconcile one zone: plan against the shared view of its server (which covers every failure
/// domain in `server_fds`, so other zones reuse it), apply the autoConfigure steps, re-read and
/// re-plan once to verify.
pub async fn reconcile_zone(
    client: Result<&Client, &str>,
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
        (Some(_), Err(msg)) => {
            run.verdict = plan_zone(zone, fd, Err(msg));
            return run;
        }
        (Some(_), Ok(c)) => c,
    };
    let fds: Vec<&VSphereFailureDomain> = server_fds.values().collect();
    for round in 0..2 {
        let view = match views.view(client, &fds).await {
            Ok(v) => v,
            Err(e) => {
                run.verdict = plan_zone(zone, fd, Err(&e.to_string()));
                return run;
            }
        };
        run.verdict = plan_zone(zone, fd, Ok(&view));
        if run.verdict.steps.is_empty() || round == 1 || !run.failed.is_empty() {
            break;
        }
        // Changes are serialised per server and decided on a fresh read taken under the lock,
        // so two zones sharing a cluster or a tag cannot both create it.
        let _writing = views.write_lock(client).await;
        views.invalidate(client).await;
        let view = match views.view(client, &fds).await {
            Ok(v) => v,
            Err(e) => {
                run.verdict = plan_zone(zone, fd, Err(&e.to_string()));
                return run;
            }
        };
        run.verdict = plan_zone(zone, fd, Ok(&view));
        if run.verdict.steps.is_empty() {
            break;
        }
        let mut working = (*view).clone();
        let outcome = execute::execute(client, &mut working, &run.verdict.steps).await;
        views.remember_tags(client, &working.tags).await;
        views.invalidate(client).await;
        run.applied.extend(outcome.done);
        run.failed.extend(outcome.failed);
    }
    if !run.failed.is_empty() {
        let errors: Vec<String> = run.failed.iter().map(|(_, e)| e.clone()).collect();
        run.verdict
            .mark_auto_configure_failed(errors.iter().map(String::as_str));
    } else {
        run.verdict.mark_pending();
    }
    run
}
