//! Sessions cached per (server, credentials, TLS trust), held in the controller context rather
//! than a process global so tests can inject their own. The credentials are part of the key
//! through a [`CredentialFingerprint`], so a caller with the same user name and another password
//! (a rotated Secret, or a tenant who knows the manager's user name) gets a client of its own and
//! never evicts or logs out the sessions of the first; a superseded client ages out like any
//! unused one. The cache is bounded ([`IdleCache`]): a
//! client unused for [`CacheLimits::idle`] is dropped and its sessions logged out, and so are
//! the least recently used past [`CacheLimits::max_entries`] — never one a caller still holds.
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use ring::hmac;
use ring::rand::SystemRandom;

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
    credentials: CredentialFingerprint,
    tls: TlsPolicy,
}

/// Tells credentials apart without holding them: HMAC-SHA256 of the user name and password
/// under a key drawn at random once per process. Keyed, so a fingerprint that leaks (a heap
/// dump, a debugger) cannot be checked offline against guessed passwords, and it means nothing
/// in another process; its `Debug` shows none of it, so it never reaches a log.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct CredentialFingerprint([u8; 32]);

impl CredentialFingerprint {
    pub(crate) fn of(credentials: &Credentials) -> Self {
        static KEY: OnceLock<hmac::Key> = OnceLock::new();
        let key = KEY.get_or_init(|| {
            // The system's random source failing is not something a process can go on without.
            hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new())
                .expect("the system random source is available")
        });
        let mut mac = hmac::Context::with_key(key);
        // The user name's length first, so ("ab", "c") and ("a", "bc") differ.
        mac.update(&(credentials.username.len() as u64).to_be_bytes());
        mac.update(credentials.username.as_bytes());
        mac.update(credentials.password().as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(mac.sign().as_ref());
        Self(out)
    }
}

impl fmt::Debug for CredentialFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CredentialFingerprint(..)")
    }
}

/// A cache of logged-in clients.
#[derive(Clone)]
pub struct SessionCache {
    clients: Arc<Mutex<IdleCache<Key, Client>>>,
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

    /// The client for this server, these credentials and TLS trust; created (not yet logged in)
    /// on first use.
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
            credentials: CredentialFingerprint::of(credentials),
            tls: tls.clone(),
        };
        let now = (self.clock)();
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let evicted = clients.evict(now, |c| !c.is_shared());
        log_out_in_background(evicted.into_iter().map(|(_, c)| c), "unused");
        if let Some(client) = clients.get(&key, now) {
            return Ok(client.clone());
        }
        let options = ClientOptions {
            tls,
            ..self.options.clone()
        };
        let client =
            Client::with_stats(endpoint, credentials.clone(), options, self.stats.clone())?;
        clients.insert(key, client.clone(), now);
        // The bound holds once the new client is in (it is shared now, so it stays).
        let evicted = clients.evict(now, |c| !c.is_shared());
        log_out_in_background(evicted.into_iter().map(|(_, c)| c), "over the bound");
        Ok(client)
    }

    /// Log every cached session out (on shutdown).
    pub async fn logout_all(&self) {
        let clients: Vec<Client> = {
            let mut map = self.clients.lock().unwrap_or_else(|p| p.into_inner());
            map.drain().into_iter().map(|(_, c)| c).collect()
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
