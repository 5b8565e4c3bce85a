//! Sessions cached per (server, user, TLS trust), held in the controller context rather than a
//! process global so tests can inject their own. A changed password for the same key replaces
//! the cached client and logs the old session out.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::client::Client;
use super::credentials::Credentials;
use super::http::ClientOptions;
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
    clients: Arc<Mutex<HashMap<Key, (String, Client)>>>,
    stats: Stats,
    options: ClientOptions,
}

impl SessionCache {
    /// All clients record round trips into `stats`; `options` are the defaults (TLS policy is
    /// per call).
    pub fn new(stats: Stats, options: ClientOptions) -> Self {
        Self {
            clients: Arc::default(),
            stats,
            options,
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
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((fp, client)) = clients.get(&key) {
            if *fp == fingerprint {
                return Ok(client.clone());
            }
            let old = client.clone();
            tokio::spawn(async move {
                let _ = old.logout().await;
            });
        }
        let options = ClientOptions {
            tls,
            ..self.options.clone()
        };
        let client =
            Client::with_stats(endpoint, credentials.clone(), options, self.stats.clone())?;
        clients.insert(key, (fingerprint, client.clone()));
        Ok(client)
    }

    /// Log every cached session out (on shutdown).
    pub async fn logout_all(&self) {
        let clients: Vec<Client> = {
            let mut map = self.clients.lock().unwrap_or_else(|p| p.into_inner());
            map.drain().map(|(_, (_, c))| c).collect()
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
