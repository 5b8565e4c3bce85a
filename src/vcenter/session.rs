//! Sessions cached per (server, user, TLS trust), held in the controller context rather than a
//! process global so tests can inject their own. A changed password for the same key replaces
//! the cached client and logs the old session out. The cache is bounded ([`IdleCache`]): a
//! client unused for [`CacheLimits::idle`] is dropped and its sessions logged out, and so are
//! the least recently used past [`CacheLimits::max_entries`] — never one a caller still holds.
use std::sync::{Arc, Mutex};

use super::client::Client;
use super::credentials::Credentials;
use super::http::ClientOptions;
use super::idle_cache::{CacheLimits, Clock, IdleCache, system_clock};
use super::model::endpoint::Endpoint;
use super::model::error::Result;
use super::model::trust::TlsPolicy;
use super::stats::Stats;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    endpoint: Endpoint,
    username: String,
    tls: TlsPolicy,
}

/// A cache of logged-in clients.
#[derive(Clone)]
pub struct SessionCache {
    clients: Arc<Mutex<IdleCache<Key, (String, Client)>>>,
    stats: Stats,
    options: ClientOptions,
    clock: Clock,
}

impl SessionCache {
    /// All clients record round trips into `stats`; `options` are the defaults (TLS policy is
    /// per call). Bounded by [`CacheLimits::DEFAULT`].
    pub fn new(stats: Stats, options: ClientOptions) -> Self {
        Self::with_limits(stats, options, CacheLimits::DEFAULT, system_clock())
    }

    /// With other bounds and clock (tests).
    pub fn with_limits(
        stats: Stats,
        options: ClientOptions,
        limits: CacheLimits,
        clock: Clock,
    ) -> Self {
        Self {
            clients: Arc::new(Mutex::new(IdleCache::new(limits))),
            stats,
            options,
            clock,
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The client for this server, user and TLS trust; created (not yet logged in) on first use.
    pub fn client(
        &self,
        server: &str,
        credentials: &Credentials,
        tls: TlsPolicy,
    ) -> Result<Client> {
        let endpoint = Endpoint::parse(server)?;
        let key = Key {
            endpoint: endpoint.clone(),
            username: credentials.username.clone(),
            tls: tls.clone(),
        };
        let fingerprint = credentials.password_fingerprint();
        let now = (self.clock)();
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let evicted = clients.evict(now, |(_, c)| !c.is_shared());
        log_out_in_background(evicted.into_iter().map(|(_, (_, c))| c), "unused");
        if let Some((fp, client)) = clients.get(&key, now) {
            if *fp == fingerprint {
                return Ok(client.clone());
            }
            log_out_in_background([client.clone()], "its password changed");
        }
        let options = ClientOptions {
            tls,
            ..self.options.clone()
        };
        let client =
            Client::with_stats(endpoint, credentials.clone(), options, self.stats.clone())?;
        clients.insert(key, (fingerprint, client.clone()), now);
        // The bound holds once the new client is in (it is shared now, so it stays).
        let evicted = clients.evict(now, |(_, c)| !c.is_shared());
        log_out_in_background(evicted.into_iter().map(|(_, (_, c))| c), "over the bound");
        Ok(client)
    }

    /// Log every cached session out (on shutdown).
    pub async fn logout_all(&self) {
        let clients: Vec<Client> = {
            let mut map = self.clients.lock().unwrap_or_else(|p| p.into_inner());
            map.drain().into_iter().map(|(_, (_, c))| c).collect()
        };
        for c in clients {
            if let Err(e) = c.logout().await {
                tracing::debug!(server = %c.server(), error = %e, "logout failed");
            }
        }
    }

    pub fn len(&self) -> usize {
        self.clients.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// End the sessions of clients dropped from the cache, without making the caller wait (the
/// server may be slow or gone; vCenter ends idle sessions itself anyway).
fn log_out_in_background(clients: impl IntoIterator<Item = Client>, why: &'static str) {
    for c in clients {
        tracing::debug!(server = %c.server(), user = %c.username(), why, "dropping a cached vCenter client");
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            if let Err(e) = c.logout().await {
                tracing::debug!(server = %c.server(), error = %e, "logout of a dropped client failed");
            }
        });
    }
}

#[cfg(test)]
mod tests;
