//! A TCP proxy that adds a fixed latency to every request, SOAP and REST alike (vcsim's `-delay`
//! only delays SOAP). Bytes from the client reach the server `delay` after they arrived, in
//! order; answers come back at once. So every HTTP exchange costs one `delay` more, and
//! concurrent exchanges (on their own connections) overlap, as on a real network. A new
//! connection costs one `delay` more before its first byte goes through (the TCP handshake), so
//! opening connections for concurrent requests is not free either.
//!
//! With [`LatencyProxy::recording`] (no delay) it keeps every byte a client sends, per
//! connection, so a test can check the requests a process it does not control (the
//! `vsphere-provider` binary) put on the wire: plain HTTP only (vcsim without `-tls`).
//!
//! It runs on its own thread and runtime, so the measured client's runtime does not schedule it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What clients sent, one buffer per connection.
type Sent = Arc<Mutex<Vec<Vec<u8>>>>;

/// The union of the delay windows of every chunk sent (`[arrival, arrival + delay)`): with a
/// delay per request, busy time ÷ delay is how many round trips the client made one after the
/// other (the sequential depth), whatever ran alongside. `until` is the end of the last window.
#[derive(Default)]
struct BusyClock {
    until: Option<Instant>,
    busy: Duration,
}
type Busy = Arc<Mutex<BusyClock>>;

/// A running proxy; it stops when dropped.
pub struct LatencyProxy {
    addr: SocketAddr,
    sent: Sent,
    busy: Busy,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LatencyProxy {
    /// Listen on 127.0.0.1 (a free port) and forward to `upstream` with `delay` added to
    /// every client-to-server byte.
    pub fn start(upstream: SocketAddr, delay: Duration) -> LatencyProxy {
        Self::run(upstream, delay, None)
    }

    /// Listen on 127.0.0.1 (a free port) and forward to `upstream` at once, keeping what
    /// clients send ([`Self::sent`], [`Self::calls`]).
    pub fn recording(upstream: SocketAddr) -> LatencyProxy {
        Self::run(upstream, Duration::ZERO, Some(Sent::default()))
    }

    fn run(upstream: SocketAddr, delay: Duration, record: Option<Sent>) -> LatencyProxy {
        let sent = record.clone().unwrap_or_default();
        let busy = Busy::default();
        let busy_clock = busy.clone();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("proxy address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("proxy runtime");
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).expect("proxy listener");
                let accept = async {
                    loop {
                        let Ok((client, _)) = listener.accept().await else {
                            continue;
                        };
                        let record = record.clone();
                        let busy = busy_clock.clone();
                        tokio::spawn(async move {
                            // The handshake's round trip.
                            tokio::time::sleep(delay).await;
                            if let Ok(server) = TcpStream::connect(upstream).await {
                                let _ = client.set_nodelay(true);
                                let _ = server.set_nodelay(true);
                                pipe(client, server, delay, record, busy).await;
                            }
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
        });
        LatencyProxy {
            addr,
            sent,
            busy,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// What clients sent so far, one string per connection (lossy UTF-8); empty unless
    /// [`Self::recording`].
    pub fn sent(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    /// Every `<method …>…</method>` element clients sent (SOAP bodies), in the order sent on
    /// each connection.
    pub fn calls(&self, method: &str) -> Vec<String> {
        let open = format!("<{method} ");
        let close = format!("</{method}>");
        let mut out = Vec::new();
        for conn in self.sent() {
            let mut rest = conn.as_str();
            while let Some(start) = rest.find(&open) {
                let Some(len) = rest[start..].find(&close) else {
                    break;
                };
                let end = start + len + close.len();
                out.push(rest[start..end].to_string());
                rest = &rest[end..];
            }
        }
        out
    }

    /// How long, so far, at least one request was on its way through the proxy (see
    /// `BusyClock`). Divided by the delay: the sequential depth of what clients sent.
    pub fn busy(&self) -> Duration {
        self.busy.lock().unwrap().busy
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `url` (any scheme, path and query) with its host and port replaced by the proxy's.
    pub fn url_for(&self, url: &str) -> String {
        let mut u = url::Url::parse(url).expect("a URL");
        u.set_ip_host(self.addr.ip()).expect("an IP host");
        u.set_port(Some(self.addr.port())).expect("a port");
        u.to_string()
    }
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Client → server delayed (each chunk sent `delay` after it arrived, and kept in a buffer of
/// the connection's own in `record`), server → client at once.
async fn pipe(
    client: TcpStream,
    server: TcpStream,
    delay: Duration,
    record: Option<Sent>,
    busy: Busy,
) {
    let kept = record.map(|r| {
        let slot = {
            let mut all = r.lock().unwrap();
            all.push(Vec::new());
            all.len() - 1
        };
        (r, slot)
    });
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Some((r, slot)) = &kept {
                        r.lock().unwrap()[*slot].extend_from_slice(&buf[..n]);
                    }
                    let due = {
                        let mut clock = busy.lock().unwrap();
                        let now = Instant::now();
                        let due = now + delay;
                        let from = clock.until.map_or(now, |u| u.max(now));
                        clock.busy += due.saturating_duration_since(from);
                        clock.until = Some(due);
                        due
                    };
                    if tx.send((due, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if server_write.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let back = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(reader, writer, back);
}
