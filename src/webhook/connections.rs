//! What one caller can hold of the webhook server. Most webhooks are `failurePolicy: Fail`, so
//! a pod that opens connections and sends nothing would otherwise hold a task and a file
//! descriptor each, forever, until the process runs out of descriptors (kube watches and vCenter
//! clients included) and every create of a provider kind is refused.
//!
//! * At most [`Limits::max_connections`] connections are served at once. Past that the server
//!   stops accepting: further callers wait in the kernel's listen backlog, which is bounded
//!   (and costs the process nothing), until a slot frees.
//! * A TLS handshake must finish within [`Limits::handshake_timeout`], and a request's headers
//!   must arrive within [`Limits::header_read_timeout`] — counted from when the connection is
//!   ready for a request, so an idle keep-alive connection is closed after it too.
//! * HTTP/1.1 only: hyper has no header timeout for HTTP/2, and HTTP/2 brought its own
//!   denial-of-service classes (Rapid Reset, CONTINUATION floods); controller-runtime turns it off
//!   for webhooks by default too. The API server speaks HTTP/1.1 to webhooks that offer only it.
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Bounds on connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Longest TLS handshake.
    pub handshake_timeout: Duration,
    /// Longest wait for a request's headers.
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    /// The API server calls a webhook with a 10 s timeout by default (at most 30 s), and its
    /// connection pool holds a few connections per API server replica: 10 s for a handshake
    /// or for headers is far more than a real caller needs, and 256 connections far more
    /// than any control plane keeps open, while the descriptors they can hold stay small next
    /// to the process's limit.
    fn default() -> Self {
        Self {
            max_connections: 256,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
        }
    }
}

/// Accept connections until `shutdown`, at most `limits.max_connections` at a time, each served
/// by `serve` in its own task.
pub(super) async fn accept<F, Fut>(
    listener: TcpListener,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
    serve: F,
) where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    tokio::pin!(shutdown);
    loop {
        // A slot first, then accept: past the cap, callers wait in the listen backlog.
        let slot = tokio::select! {
            _ = &mut shutdown => return,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(s) => s,
                Err(_) => return,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook accept failed");
                    continue;
                }
            },
        };
        let connection = serve(stream, peer);
        tokio::spawn(async move {
            connection.await;
            drop(slot);
        });
    }
}

/// `handshake`, or `None` (logged) when it takes longer than the limit.
pub(super) async fn within_handshake_timeout<T>(
    limits: &Limits,
    peer: SocketAddr,
    handshake: impl Future<Output = T>,
) -> Option<T> {
    match tokio::time::timeout(limits.handshake_timeout, handshake).await {
        Ok(done) => Some(done),
        Err(_) => {
            tracing::debug!(%peer, timeout = ?limits.handshake_timeout, "webhook TLS handshake timed out; connection dropped");
            None
        }
    }
}

/// Serve HTTP/1.1 requests on one connection with the header timeout.
pub(super) async fn serve_http1<I>(io: I, app: Router, limits: &Limits, peer: SocketAddr)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper_util::service::TowerToHyperService::new(app);
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    if let Err(e) = builder.serve_connection(TokioIo::new(io), service).await {
        tracing::debug!(%peer, error = %e, "webhook connection ended with an error");
    }
}
