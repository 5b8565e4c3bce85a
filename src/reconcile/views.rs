//! The per-server state the fixed-point driver ([`super::server`]) works on: a short-lived view
//! cache and a write lock per vCenter. Kubernetes hands zones to the controller one at a time;
//! gathering per zone would cost N bulk reads for N zones. Instead one gather per server covers
//! every failure domain on that server and is reused by all zone reconciles for `ttl`; any write
//! by us invalidates it, and a periodic requeue past the TTL catches drift made outside
//! Kubernetes. Local mode uses a TTL of zero (every read is fresh) seeded with its tag catalog.
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use super::gather;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::plan::view::VcenterView;
use crate::vcenter::model::tags::TagCatalog;
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

    /// Keep what the executor learnt about tags (ids of what it created); also seeds the
    /// catalog of a server (local mode carries its own across runs).
    pub async fn remember_tags(&self, client: &Client, tags: &TagCatalog) {
        let entry = self.entry(&client.server());
        entry.lock().await.tags = tags.clone();
    }

    /// The tag catalog known for the server.
    pub async fn tags(&self, client: &Client) -> TagCatalog {
        let entry = self.entry(&client.server());
        entry.lock().await.tags.clone()
    }
}
