//! What one caller can hold of a server: the webhook port and the probe port
//! ([`crate::controllers::admin`]) alike. Most webhooks are `failurePolicy: Fail`, so a pod that
//! opens connections and sends nothing, or sends a request a byte at a time, would otherwise
//! hold a task and a file descriptor each until the process runs out of descriptors (kube
//! watches and vCenter clients included) and every create of a provider kind is refused; on the
//! probe port it would get the pod restarted for failed liveness probes.
//!
//! * At most [`Limits::max_connections`] connections are served at once. Past that the server
//!   stops accepting: further callers wait in the kernel's listen backlog, which is bounded
//!   (and costs the process nothing), until a slot frees.
//! * One peer address holds at most [`Limits::max_connections_per_peer`] of them; a connection
//!   past that is closed at once, so one pod cannot take the slots the API server (or the
//!   kubelet) needs.
//! * A TLS handshake must finish within [`Limits::handshake_timeout`], and a request's headers
//!   must arrive within [`Limits::header_read_timeout`] — counted from when the connection is
//!   ready for a request, so an idle keep-alive connection is closed after it too.
//! * A request, from its first byte until its answer is flushed (headers, body, handling and
//!   the write), takes at most [`Limits::request_timeout`]: past it the connection is closed.
//!   The header timeout alone would let a caller trickle a body for as long as it likes.
//! * HTTP/1.1 only: hyper has no header timeout for HTTP/2, and HTTP/2 brought its own
//!   denial-of-service classes (Rapid Reset, CONTINUATION floods); controller-runtime turns it off
//!   for webhooks by default too. The API server speaks HTTP/1.1 to webhooks that offer only it.
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::response::Response;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

/// Bounds on connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections served at once from one peer IP address.
    pub max_connections_per_peer: usize,
    /// Longest TLS handshake.
    pub handshake_timeout: Duration,
    /// Longest wait for a request's headers.
    pub header_read_timeout: Duration,
    /// Longest request, from its first byte to its answer flushed.
    pub request_timeout: Duration,
}

impl Default for Limits {
    /// The webhook port's. The API server calls an admission webhook with a 10 s timeout by
    /// default and 30 s at most, and its connection pool holds a few connections per API server
    /// replica: 10 s for a handshake or for headers is far more than a real caller needs, a
    /// request still running after 30 s has been given up by its caller, and 256 connections
    /// are far more than any control plane keeps open, while the descriptors they can hold stay
    /// small next to the process's limit. A quarter of them per peer: an API server replica (or
    /// the one konnectivity agent all replicas come through) keeps far fewer open to one
    /// webhook, and a pod on the pod network cannot take more than that from it.
    fn default() -> Self {
        Self {
            max_connections: 256,
            max_connections_per_peer: 64,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
        }
    }
}

impl Limits {
    /// The probe port's (`/healthz`, `/livez`, `/readyz`, and `/metrics` where the metrics
    /// address is the same): the kubelet probes with a 1 s timeout by default and a few probes
    /// at a time, a Prometheus scrape takes well under a second. 32 connections, 8 per peer,
    /// 5 s for headers and 10 s per request leave room for a slow node and none for a caller
    /// that holds connections open.
    pub const PROBES: Limits = Limits {
        max_connections: 32,
        max_connections_per_peer: 8,
        handshake_timeout: Duration::from_secs(5),
        header_read_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
    };
}

/// Serve `app` over plain HTTP/1.1 on `listener` until `shutdown`, within `limits`. `server`
/// names it in logs.
pub async fn serve_plain(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    server: &'static str,
    shutdown: impl Future<Output = ()>,
) {
    accept(listener, limits, server, shutdown, move |stream, peer| {
        let app = app.clone();
        async move { serve_http1(stream, app, &limits, server, peer).await }
    })
    .await;
}

/// Accept connections until `shutdown`, at most `limits.max_connections` at a time and
/// `limits.max_connections_per_peer` from one address, each served by `serve` in its own task.
pub(crate) async fn accept<F, Fut>(
    listener: TcpListener,
    limits: Limits,
    server: &'static str,
    shutdown: impl Future<Output = ()>,
    serve: F,
) where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let peers = PeerCounts::default();
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
                    tracing::warn!(server, error = %e, "accept failed");
                    continue;
                }
            },
        };
        let Some(peer_slot) = peers.take(peer.ip(), limits.max_connections_per_peer) else {
            // Debug only: a caller that floods connections would otherwise flood the log too.
            tracing::debug!(server, %peer, limit = limits.max_connections_per_peer,
                "connection refused: this peer holds as many connections as one peer may");
            continue;
        };
        let connection = serve(stream, peer);
        tokio::spawn(async move {
            connection.await;
            drop(peer_slot);
            drop(slot);
        });
    }
}

/// Connections open per peer address.
#[derive(Clone, Default)]
struct PeerCounts(Arc<Mutex<HashMap<IpAddr, usize>>>);

impl PeerCounts {
    /// A slot for `ip`, or `None` when it holds `limit` already.
    fn take(&self, ip: IpAddr, limit: usize) -> Option<PeerSlot> {
        // An IPv4 caller on a dual-stack socket is one peer, however its address is written.
        let ip = ip.to_canonical();
        let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(ip).or_default();
        if *count >= limit.max(1) {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            counts: self.clone(),
            ip,
        })
    }
}

/// One connection of a peer; given back on drop.
struct PeerSlot {
    counts: PeerCounts,
    ip: IpAddr,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// `handshake`, or `None` (logged) when it takes longer than the limit.
pub(crate) async fn within_handshake_timeout<T>(
    limits: &Limits,
    peer: SocketAddr,
    handshake: impl Future<Output = T>,
) -> Option<T> {
    match tokio::time::timeout(limits.handshake_timeout, handshake).await {
        Ok(done) => Some(done),
        Err(_) => {
            tracing::debug!(%peer, timeout = ?limits.handshake_timeout, "TLS handshake timed out; connection dropped");
            None
        }
    }
}

/// Serve HTTP/1.1 requests on one connection with the header and request timeouts.
pub(crate) async fn serve_http1<I>(
    io: I,
    app: Router,
    limits: &Limits,
    server: &'static str,
    peer: SocketAddr,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let clock = Arc::new(RequestClock::default());
    let io = Clocked {
        inner: io,
        clock: clock.clone(),
    };
    let service = hyper_util::service::TowerToHyperService::new(ClockedService {
        app,
        clock: clock.clone(),
    });
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    loop {
        let deadline = clock.deadline(limits.request_timeout);
        tokio::select! {
            ended = &mut connection => {
                if let Err(e) = ended {
                    tracing::debug!(server, %peer, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = clock.began.notified(), if deadline.is_none() => {}
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                if clock.deadline(limits.request_timeout).is_some_and(|d| d <= Instant::now()) {
                    tracing::debug!(server, %peer, timeout = ?limits.request_timeout,
                        "request not answered within the request timeout; connection closed");
                    return;
                }
            }
        }
    }
}

/// When the request in progress on a connection began, if one is.
#[derive(Default)]
struct RequestClock {
    state: Mutex<Phase>,
    /// Woken when a request begins on an idle connection.
    began: Notify,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// Between requests: the header timeout governs.
    #[default]
    Idle,
    /// A request is in progress since `since`; `answered` once the service returned its
    /// response (the request is over when that response is flushed).
    Busy { since: Instant, answered: bool },
}

impl RequestClock {
    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes arrived: on an idle connection, a request begins.
    fn bytes_read(&self) {
        let mut phase = self.phase();
        if *phase == Phase::Idle {
            *phase = Phase::Busy {
                since: Instant::now(),
                answered: false,
            };
            drop(phase);
            self.began.notify_one();
        }
    }

    /// The service is called: a request read from bytes buffered earlier (pipelined) begins
    /// now; one whose first bytes were just read goes on.
    fn called(&self) {
        let mut phase = self.phase();
        match *phase {
            Phase::Busy {
                answered: false, ..
            } => {}
            _ => {
                *phase = Phase::Busy {
                    since: Instant::now(),
                    answered: false,
                };
                drop(phase);
                self.began.notify_one();
            }
        }
    }

    fn answered(&self) {
        if let Phase::Busy { answered, .. } = &mut *self.phase() {
            *answered = true;
        }
    }

    /// Everything written so far reached the socket: an answered request is over.
    fn flushed(&self) {
        let mut phase = self.phase();
        if let Phase::Busy { answered: true, .. } = *phase {
            *phase = Phase::Idle;
        }
    }

    fn deadline(&self, timeout: Duration) -> Option<Instant> {
        match *self.phase() {
            Phase::Idle => None,
            Phase::Busy { since, .. } => Some(since + timeout),
        }
    }
}

/// The connection's I/O, telling the [`RequestClock`] when bytes arrive and when writes are
/// flushed.
struct Clocked<I> {
    inner: I,
    clock: Arc<RequestClock>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Clocked<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.clock.bytes_read();
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Clocked<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        if matches!(polled, Poll::Ready(Ok(()))) {
            self.clock.flushed();
        }
        polled
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The router, telling the [`RequestClock`] when a request is handed to it and answered.
#[derive(Clone)]
struct ClockedService {
    app: Router,
    clock: Arc<RequestClock>,
}

impl<B> tower::Service<axum::http::Request<B>> for ClockedService
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // A Router is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        use tower::ServiceExt;
        self.clock.called();
        let clock = self.clock.clone();
        let answer = self.app.clone().oneshot(request.map(axum::body::Body::new));
        Box::pin(async move {
            let response = answer.await;
            clock.answered();
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_past_its_limit_gets_no_slot_until_one_is_given_back() {
        let peers = PeerCounts::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = peers.take(a, 2).unwrap();
        let _second = peers.take(a, 2).unwrap();
        assert!(peers.take(a, 2).is_none());
        // The same address written as IPv4-mapped IPv6 is the same peer.
        assert!(peers.take("::ffff:10.0.0.1".parse().unwrap(), 2).is_none());
        assert!(peers.take(b, 2).is_some(), "another peer is not affected");
        drop(first);
        assert!(peers.take(a, 2).is_some());
    }
}
