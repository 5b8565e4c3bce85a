//! The per-server state the fixed-point driver ([`super::server`]) works on: a short-lived view
//! cache and a write lock per vCenter. Kubernetes hands zones to the controller one at a time;
//! gathering per zone would cost N bulk reads for N zones. Instead one gather per server covers
//! every failure domain on that server and is reused by all zone reconciles for `ttl`; any write
//! by us invalidates it, and a periodic requeue past the TTL catches drift made outside
//! Kubernetes. Local mode uses a TTL of zero (every read is fresh) seeded with its tag catalog.
//!
//! Servers are bounded like sessions ([`IdleCache`]): a server unused for a while, or the least
//! recently used past the bound, loses its view, tag catalog and write lock — never while a
//! sweep holds or waits for them (the next sweep then reads its tags again).
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use super::gather;
use crate::api::failure_domain::VSphereFailureDomain;
use crate::plan::view::VcenterView;
use crate::vcenter::idle_cache::{CacheLimits, Clock, IdleCache, system_clock};
use crate::vcenter::model::tags::TagCatalog;
use crate::vcenter::{Client, Result};

#[derive(Default)]
struct Entry {
    gathered: Option<(Instant, BTreeSet<String>, Arc<VcenterView>)>,
    tags: TagCatalog,
}

/// One server's view and write lock.
#[derive(Clone, Default)]
struct PerServer {
    view: Arc<Mutex<Entry>>,
    writer: Arc<Mutex<()>>,
}

impl PerServer {
    /// Nobody holds or waits for the view or the lock (only the cache's own handles exist):
    /// dropping it then cannot let two writers in.
    fn unused(&self) -> bool {
        Arc::strong_count(&self.view) == 1 && Arc::strong_count(&self.writer) == 1
    }
}

/// Views per server and identity (keyed by [`Client::principal_key`]: what one account may see
/// is not what another may, and one tenant's view must not stand in for another's), write locks
/// per server (keyed by the client's endpoint).
pub struct ServerViews {
    ttl: Duration,
    servers: std::sync::Mutex<IdleCache<String, PerServer>>,
    clock: Clock,
}

impl ServerViews {
    pub fn new(ttl: Duration) -> Self {
        Self::with_limits(ttl, CacheLimits::DEFAULT, system_clock())
    }

    /// With other bounds and clock (tests).
    pub fn with_limits(ttl: Duration, limits: CacheLimits, clock: Clock) -> Self {
        Self {
            ttl,
            servers: std::sync::Mutex::new(IdleCache::new(limits)),
            clock,
        }
    }

    /// The server's entry, created on first use; drops unused servers past the bounds.
    fn server(&self, server: &str) -> PerServer {
        let now = (self.clock)();
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        let key = server.to_string();
        let found = servers.get(&key, now).cloned();
        let entry = match found {
            Some(e) => e,
            None => {
                let e = PerServer::default();
                servers.insert(key, e.clone(), now);
                e
            }
        };
        // `entry` is held here, so this server's own entry is never the one dropped.
        let dropped = servers.evict(now, PerServer::unused);
        if !dropped.is_empty() {
            let names: Vec<&str> = dropped.iter().map(|(k, _)| k.as_str()).collect();
            tracing::debug!(servers = ?names, "dropped the cached views of unused vCenter servers");
        }
        entry
    }

    /// How many servers are cached.
    pub fn len(&self) -> usize {
        self.servers.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Held while deciding and making changes on a server.
    pub async fn write_lock(&self, client: &Client) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self.server(&client.server()).writer;
        lock.lock_owned().await
    }

    fn entry(&self, server: &str) -> Arc<Mutex<Entry>> {
        self.server(server).view
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
        let entry = self.entry(&client.principal_key());
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
        let entry = self.entry(&client.principal_key());
        entry.lock().await.gathered = None;
    }

    /// Keep what the executor learnt about tags (ids of what it created); also seeds the
    /// catalog of a server (local mode carries its own across runs).
    pub async fn remember_tags(&self, client: &Client, tags: &TagCatalog) {
        let entry = self.entry(&client.principal_key());
        entry.lock().await.tags = tags.clone();
    }

    /// The tag catalog known for the server.
    pub async fn tags(&self, client: &Client) -> TagCatalog {
        let entry = self.entry(&client.principal_key());
        entry.lock().await.tags.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::idle_cache::TestClock;
    use crate::vcenter::{ClientOptions, Credentials};

    fn client(server: &str) -> Client {
        let creds = Credentials::new("u", secrecy::SecretString::from("p"));
        Client::new(server, creds, ClientOptions::default()).unwrap()
    }

    const LIMITS: CacheLimits = CacheLimits {
        idle: Duration::from_secs(60),
        max_entries: 2,
    };

    #[tokio::test]
    async fn unused_servers_are_dropped_and_a_held_write_lock_never_is() {
        let time = TestClock::new();
        let views = ServerViews::with_limits(Duration::ZERO, LIMITS, time.clock());
        let [a, b, c, d] =
            ["vc-a", "vc-b", "vc-c", "vc-d"].map(|s| client(&format!("https://{s}")));
        let held = views.write_lock(&a).await;
        views.tags(&b).await;
        time.advance(Duration::from_secs(61));
        views.tags(&c).await;
        // b went idle; a is locked, so it stays although idle.
        assert_eq!(views.len(), 2);
        // Still one lock for a: a second writer waits.
        let second = tokio::time::timeout(Duration::from_millis(20), views.write_lock(&a)).await;
        assert!(
            second.is_err(),
            "a second writer got in while the first held the lock"
        );
        drop(held);
        time.advance(Duration::from_secs(61));
        views.tags(&d).await;
        assert_eq!(views.len(), 1, "a and c went idle");
        // Past the size bound the least recently used goes, idle or not.
        views.tags(&a).await;
        views.tags(&b).await;
        assert_eq!(views.len(), 2);
    }
}
