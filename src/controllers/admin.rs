//! The admin endpoints on `--metrics-addr` (loopback by default): `/metrics` (Prometheus), `/healthz` and `/livez` (the
//! process serves HTTP) and `/readyz` (this replica does its job: caches synced while leading, or standing
//! by for the lease — a standby replica is healthy, not broken). Both admin ports are bounded like the
//! webhook port ([`Limits::PROBES`]): the probe port is reachable from the node, and a caller holding
//! its connections would fail the kubelet's liveness probes and get the pod restarted.
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use super::Metrics;
use crate::webhook::server::{Limits, serve_plain};

/// What `/readyz` reports.
#[derive(Debug)]
pub struct Health {
    leader_election: bool,
    leading: AtomicBool,
    synced: AtomicBool,
    /// Set while `run` waits for the API server to serve the watched kinds
    /// ([`super::startup`]): not ready, whatever else holds.
    waiting_for_api: AtomicBool,
    /// The watched kinds whose watch was refused before its first answer, and why
    /// ([`super::startup::FirstAnswer`]): what `/readyz` says the caches wait for.
    not_served: Mutex<BTreeMap<String, String>>,
}

impl Health {
    /// `leader_election`: whether this replica competes for the lease (else it always leads).
    pub fn new(leader_election: bool) -> Arc<Self> {
        Arc::new(Health {
            leader_election,
            leading: AtomicBool::new(false),
            synced: AtomicBool::new(false),
            waiting_for_api: AtomicBool::new(false),
            not_served: Mutex::new(BTreeMap::new()),
        })
    }

    pub fn set_leading(&self, leading: bool) {
        self.leading.store(leading, Ordering::SeqCst);
    }

    /// Marks the caches synced or not; unsynced also forgets why kinds were not served (the
    /// watches that said so are gone with their term).
    pub fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::SeqCst);
        if !synced {
            self.not_served_now().clear();
        }
    }

    /// Why `kind` is not served to the controllers (`None`: it is).
    pub fn set_not_served(&self, kind: &str, why: Option<String>) {
        let mut not_served = self.not_served_now();
        match why {
            Some(why) => not_served.insert(kind.to_string(), why),
            None => not_served.remove(kind),
        };
    }

    fn not_served_now(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.not_served.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_waiting_for_api(&self, waiting: bool) {
        self.waiting_for_api.store(waiting, Ordering::SeqCst);
    }

    pub fn is_leading(&self) -> bool {
        self.leading.load(Ordering::SeqCst)
    }

    /// Ready, or why not.
    pub fn readiness(&self) -> Result<Cow<'static, str>, Cow<'static, str>> {
        if self.waiting_for_api.load(Ordering::SeqCst) {
            return Err("waiting for the Kubernetes API server to serve every watched kind".into());
        }
        let synced = self.synced.load(Ordering::SeqCst);
        match (self.leader_election, self.is_leading(), synced) {
            (true, false, _) => Ok("standing by for the leader lease".into()),
            (_, _, true) => Ok("caches synced".into()),
            (_, _, false) => {
                let not_served = self.not_served_now();
                if not_served.is_empty() {
                    return Err("caches not synced yet".into());
                }
                let why: Vec<String> = not_served
                    .iter()
                    .map(|(kind, why)| format!("{kind}: {why}"))
                    .collect();
                Err(format!("caches not synced yet, waiting for {}", why.join("; ")).into())
            }
        }
    }
}

#[derive(Clone)]
struct AdminState {
    health: Arc<Health>,
}

/// The admin router: `/metrics` only when `metrics` is given. The probe port serves health
/// alone: it must be reachable by the kubelet from the node, and metrics there would undo
/// binding `/metrics` to loopback (they are unauthenticated plain HTTP).
pub fn router(metrics: Option<Arc<Metrics>>, health: Arc<Health>) -> Router {
    let router = Router::new();
    let router = match metrics {
        Some(metrics) => router
            .route("/metrics", get(metrics_handler))
            .layer(axum::Extension(metrics)),
        None => router,
    };
    router
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(AdminState { health })
}

async fn metrics_handler(axum::Extension(metrics): axum::Extension<Arc<Metrics>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
        .into_response()
}

async fn readyz(State(s): State<AdminState>) -> Response {
    match s.health.readiness() {
        Ok(why) => (StatusCode::OK, why).into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// Serve the admin endpoints on `listener` until `shutdown`, within [`Limits::PROBES`].
pub async fn serve(
    listener: TcpListener,
    metrics: Option<Arc<Metrics>>,
    health: Arc<Health>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(metrics, health);
    serve_plain(listener, app, Limits::PROBES, "admin", shutdown).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_leadership_and_caches() {
        let h = Health::new(true);
        assert!(h.readiness().is_ok(), "standby is ready");
        h.set_leading(true);
        assert_eq!(h.readiness(), Err("caches not synced yet".into()));
        h.set_synced(true);
        assert!(h.readiness().is_ok());
        h.set_waiting_for_api(true);
        assert!(
            h.readiness().is_err(),
            "not ready while the API server is not usable"
        );
        h.set_waiting_for_api(false);
        let h = Health::new(false);
        assert!(h.readiness().is_err(), "without election, caches decide");
        h.set_synced(true);
        assert!(h.readiness().is_ok());
    }

    /// Issue 42 N6: the probe port is capped per peer. A caller holding as many connections as
    /// one peer may has its next one closed at once, and the kubelet (another address) is
    /// still answered.
    #[tokio::test]
    async fn the_probe_port_caps_what_one_peer_holds() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, None, Health::new(false), async {
            let _ = stopped.await;
        }));
        let connect_from = |source: &'static str| async move {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
            socket.connect(addr).await.unwrap()
        };
        let mut held = Vec::new();
        for _ in 0..Limits::PROBES.max_connections_per_peer {
            held.push(connect_from("127.0.0.1").await);
        }
        let mut extra = connect_from("127.0.0.1").await;
        let mut byte = [0u8; 1];
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(1), extra.read(&mut byte)).await;
        assert!(
            matches!(read, Ok(Ok(0) | Err(_))),
            "a connection past the peer's share was kept: {read:?}"
        );
        let mut kubelet = connect_from("127.0.0.2").await;
        kubelet
            .write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(2),
            kubelet.read_to_string(&mut answer),
        )
        .await
        .expect("the kubelet is answered")
        .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("ok"), "{answer}");
        drop(held);
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
