//! The HTTP exchange with one vCenter, under both the SOAP and the REST session: the reqwest
//! client (TLS from the policy, no redirects), bounded retries of transient failures, round-trip
//! accounting, and the memory of a rejected login that both logins share.
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::SET_COOKIE;
use tokio::sync::Mutex;
use tracing::{debug, warn};

mod capped_body;
#[cfg(test)]
mod reply_cap_tests;

use super::credentials::Credentials;
use super::model::endpoint::Endpoint;
use super::model::error::{Error, Result};
use super::model::trust::TlsPolicy;
use super::stats::{CallKind, Stats};
use super::tls;

/// How long a rejected login is remembered, so N reconciles sharing a client with wrong
/// credentials make one login attempt, not N (accounts lock after repeated failures).
pub(crate) const INVALID_LOGIN_MEMORY: Duration = Duration::from_secs(60);

/// Bounded retry of transient transport failures (connection refused while vCenter restarts,
/// HTTP 502/503/504, a dropped connection on a read). Each wait is jittered (between half and
/// all of [`RetryPolicy::delay`]) so clients failing together do not retry together, and no
/// retry starts past [`ClientOptions::retry_deadline`] (the last attempt may still be in flight
/// then: cutting it short would leave a write's outcome unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, including the first.
    pub attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    pub fn none() -> Self {
        Self {
            attempts: 1,
            ..Self::default()
        }
    }

    /// The longest wait before retry `attempt + 1` (exponential, capped).
    fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }

    /// The wait actually slept: "equal jitter", uniformly between half and all of the delay.
    fn jittered(&self, attempt: u32, random: u64) -> Duration {
        let delay = self.delay(attempt);
        let half = delay / 2;
        let span = u64::try_from((delay - half).as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(random.checked_rem(span.saturating_add(1)).unwrap_or(0))
    }
}

/// A random number for jitter, without a random-number crate: std's per-process random hash
/// keys over the current time.
fn jitter_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish()
}

/// Connection settings other than the address and credentials.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub tls: TlsPolicy,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    /// The most one call may take with its retries: no retry starts once its wait would end past
    /// it (the attempt in flight still has its own `request_timeout`).
    pub retry_deadline: Duration,
    /// The most independent reads (tag and category gets, per-cluster reads) one client has in
    /// flight at once, over its pooled connections; each still has its own retries and the
    /// shared re-login. 1 makes them sequential. Default [`DEFAULT_READS_IN_FLIGHT`].
    pub reads_in_flight: usize,
    /// The largest reply body read, in bytes; past it the call fails with
    /// [`Error::ReplyTooLarge`]. Default [`DEFAULT_MAX_REPLY_BYTES`].
    pub max_reply_bytes: u64,
    /// Allow plain `http://` to a host that is not loopback (`--allow-remote-http`). Off by
    /// default: a server name comes from objects tenants write, and over http the login's
    /// password would reach whatever answers, with no certificate to say who that is.
    pub allow_remote_http: bool,
}

/// The reply cap by default: 16 MiB. Measured against vcsim, the largest reply — the bulk
/// inventory read — is about 1.6 KiB per VM (966,239 bytes for 600 VMs and 26 other objects;
/// vcsim declares the XML Schema namespace on every value, real vCenter's form is about 1 KiB),
/// and a reply costs about seven times its size in memory while it is parsed (peak RSS of
/// `inventory` on 6,000 VMs: 92 MB, against 27 MB on 10). 16 MiB is thus about 10,000 VMs in
/// one reply and at most about 110 MB at the peak, within the manager's 256 MiB limit; 64 MiB
/// would not be. Real vCenter sends a large property collection in chunks (the continuation
/// token the client follows), so its replies stay far below the cap whatever the estate size;
/// only a server that never chunks (vcsim) with a larger estate needs a larger cap.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 16 << 20;

/// Independent reads in flight per client by default: a cold sweep of 100 zones then costs
/// about seven round-trip latencies for its hundred tag gets instead of a hundred.
pub const DEFAULT_READS_IN_FLIGHT: usize = 16;

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            tls: TlsPolicy::System,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            retry_deadline: Duration::from_secs(60),
            reads_in_flight: DEFAULT_READS_IN_FLIGHT,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            allow_remote_http: false,
        }
    }
}

/// The outcome of one HTTP exchange before SOAP/REST interpretation.
pub(crate) struct RawResponse {
    pub status: StatusCode,
    pub set_cookie: Vec<String>,
    pub body: String,
}

/// One vCenter's HTTP side: what the SOAP session (`client`) and the REST session (`rest`)
/// send their requests through.
pub(crate) struct Connection {
    pub(crate) http: reqwest::Client,
    pub(crate) endpoint: Endpoint,
    pub(crate) credentials: Credentials,
    pub(crate) stats: Stats,
    retry: RetryPolicy,
    retry_deadline: Duration,
    max_reply_bytes: u64,
    requests: AtomicU64,
    /// The last login vCenter rejected (when, which user). Held across a SOAP login so
    /// concurrent callers log in once.
    pub(crate) login_lock: Mutex<Option<(Instant, String)>>,
}

impl Connection {
    pub(crate) fn new(
        endpoint: Endpoint,
        credentials: Credentials,
        options: &ClientOptions,
        stats: Stats,
    ) -> Result<Self> {
        if options.tls == TlsPolicy::Insecure && endpoint.is_https() {
            warn!(server = %endpoint, "TLS certificate verification is disabled (--insecure)");
        }
        if !endpoint.is_https() && !endpoint.is_loopback() {
            if !options.allow_remote_http {
                return Err(Error::PlainHttpRefused {
                    server: endpoint.to_string(),
                });
            }
            warn!(server = %endpoint, "plain http:// to a remote vCenter (--allow-remote-http): credentials travel unencrypted");
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout)
            .retry(reqwest::retry::never())
            // A redirect would re-send the Login body or the REST session header elsewhere,
            // and turn http:// into unverified https: follow none.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("vsphere-provider/", env!("CARGO_PKG_VERSION")));
        // reqwest needs a TLS configuration even for http:// (it has no default provider).
        let tls_policy = if endpoint.is_https() {
            &options.tls
        } else {
            &TlsPolicy::Insecure
        };
        builder = builder.tls_backend_preconfigured(tls::client_config(tls_policy)?);
        let http = builder.build().map_err(|e| Error::Unreachable {
            server: endpoint.to_string(),
            reason: format!("cannot build the HTTP client: {e}"),
        })?;
        Ok(Self {
            http,
            endpoint,
            credentials,
            stats,
            retry: options.retry,
            retry_deadline: options.retry_deadline,
            max_reply_bytes: options.max_reply_bytes,
            requests: AtomicU64::new(0),
            login_lock: Mutex::new(None),
        })
    }

    pub(crate) fn server(&self) -> String {
        self.endpoint.to_string()
    }

    /// Requests sent (all attempts), for tests that check retry bounds.
    pub(crate) fn requests_sent(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Send a request built by `build`, retrying transient failures within the policy. Reads
    /// are retried on any transport failure; writes only when the request cannot have been
    /// processed (connection refused, 503), so a clone is never sent twice.
    pub(crate) async fn with_retries(
        &self,
        method: &str,
        kind: CallKind,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<RawResponse> {
        let policy = self.retry;
        let first = Instant::now();
        let mut attempt = 0;
        loop {
            self.requests.fetch_add(1, Ordering::Relaxed);
            let started = Instant::now();
            let result = send_once(build(), self.max_reply_bytes).await;
            let elapsed = started.elapsed();
            let (outcome, retryable) = match result {
                Ok(raw) => {
                    let status = raw.status;
                    let retry = matches!(status.as_u16(), 503)
                        || (kind != CallKind::Write && matches!(status.as_u16(), 429 | 502 | 504));
                    let ok = status.is_success();
                    self.stats.record(method, kind, elapsed, ok);
                    if retry {
                        (
                            Err(Error::Http {
                                server: self.server(),
                                method: method.to_string(),
                                status: status.as_u16(),
                                detail: snippet(&raw.body),
                            }),
                            true,
                        )
                    } else {
                        (Ok(raw), false)
                    }
                }
                Err(failure) => {
                    if matches!(failure, SendFailure::Connect(_)) {
                        self.stats.record_unsent(method, elapsed);
                    } else {
                        self.stats.record(method, kind, elapsed, false);
                    }
                    let retry = match failure {
                        SendFailure::Connect(_) => true,
                        SendFailure::Tls(_) => false,
                        SendFailure::AfterSend(_) => kind != CallKind::Write,
                        // A vCenter that did not answer in time will not answer a retry sooner.
                        SendFailure::TimedOut(_) => false,
                        // The same request gets the same reply.
                        SendFailure::TooLarge(_) => false,
                    };
                    (Err(self.failure_error(method, failure)), retry)
                }
            };
            attempt += 1;
            match outcome {
                Err(e) if retryable && attempt < policy.attempts => {
                    let delay = policy.jittered(attempt - 1, jitter_seed());
                    if first.elapsed() + delay >= self.retry_deadline {
                        debug!(server = %self.endpoint, method, attempt, error = %e, deadline = ?self.retry_deadline, "not retrying: past the deadline");
                        return Err(e);
                    }
                    debug!(server = %self.endpoint, method, attempt, error = %e, ?delay, "retrying");
                    tokio::time::sleep(delay).await;
                }
                other => return other,
            }
        }
    }

    fn failure_error(&self, method: &str, failure: SendFailure) -> Error {
        let server = self.server();
        match failure {
            SendFailure::Connect(reason) => Error::Unreachable { server, reason },
            SendFailure::Tls(reason) => Error::TlsHandshake { server, reason },
            SendFailure::AfterSend(reason) | SendFailure::TimedOut(reason) => Error::Transport {
                server,
                method: method.to_string(),
                reason,
            },
            SendFailure::TooLarge(limit) => Error::ReplyTooLarge {
                server,
                method: method.to_string(),
                limit,
            },
        }
    }

    /// Whether vCenter rejected these credentials within [`INVALID_LOGIN_MEMORY`]; shared by the
    /// SOAP and REST logins so neither keeps trying a wrong password.
    pub(crate) async fn login_rejected_recently(&self) -> bool {
        self.login_lock
            .lock()
            .await
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < INVALID_LOGIN_MEMORY)
    }

    pub(crate) async fn remember_rejected_login(&self) {
        *self.login_lock.lock().await = Some((Instant::now(), self.credentials.username.clone()));
    }
}

pub(crate) enum SendFailure {
    /// Nothing was sent: the request can be retried safely.
    Connect(String),
    Tls(String),
    /// The request may have reached the server.
    AfterSend(String),
    /// No answer within the request timeout.
    TimedOut(String),
    /// The body grew past the cap (bytes).
    TooLarge(u64),
}

async fn send_once(
    req: reqwest::RequestBuilder,
    max_reply_bytes: u64,
) -> std::result::Result<RawResponse, SendFailure> {
    let resp = req.send().await.map_err(classify_send_error)?;
    let status = resp.status();
    let set_cookie = resp
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let body = capped_body::read(resp, max_reply_bytes)
        .await
        .map_err(|e| match e {
            capped_body::BodyError::TooLarge(limit) => SendFailure::TooLarge(limit),
            capped_body::BodyError::Transport(e) if e.is_timeout() => {
                SendFailure::TimedOut(error_chain(&e))
            }
            capped_body::BodyError::Transport(e) => SendFailure::AfterSend(error_chain(&e)),
        })?;
    Ok(RawResponse {
        status,
        set_cookie,
        body,
    })
}

fn classify_send_error(e: reqwest::Error) -> SendFailure {
    let chain = error_chain(&e);
    if is_tls_error(&e) {
        return SendFailure::Tls(tls_reason(&chain));
    }
    if e.is_connect() {
        // The innermost cause is the one an admin can act on ("Connection refused").
        let inner = chain.rsplit(": ").next().unwrap_or(&chain).to_string();
        return SendFailure::Connect(inner);
    }
    if e.is_timeout() {
        return SendFailure::TimedOut(chain);
    }
    SendFailure::AfterSend(chain)
}

fn is_tls_error(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io
                .get_ref()
                .is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        source = err.source();
    }
    // Only rustls' own phrases, never a substring of the URL (`vc-tls01.corp`).
    let text = error_chain(e);
    TLS_MARKERS.iter().any(|m| text.contains(m))
}

/// Messages rustls gives TLS failures, most specific first. "received corrupt message" is an
/// answer that is no TLS at all (plain HTTP on the port): a failure of the handshake, which a
/// retry does not mend, not a connection that could not be made.
const TLS_MARKERS: [&str; 6] = [
    "certificate thumbprint mismatch",
    "the server did not prove it holds the key",
    "invalid peer certificate",
    "peer is incompatible",
    "received fatal alert",
    "received corrupt message",
];

/// rustls' own message, less the names a certificate presented (`…; certificate is only valid
/// for a.internal or b.internal`): they are the named host's, which may be any host a tenant
/// names, so they go to the debug log only.
fn tls_reason(chain: &str) -> String {
    let reason = tls_message(chain);
    match reason.find("; certificate is ") {
        Some(i) => {
            debug!(reason = ?reason, "TLS verification failed");
            format!(
                "{}; the names the certificate is valid for are in the manager's debug log",
                &reason[..i]
            )
        }
        None => reason,
    }
}

fn tls_message(chain: &str) -> String {
    // rustls' own message is the useful one ("invalid peer certificate: UnknownIssuer",
    // "certificate thumbprint mismatch: expected …"); drop reqwest's and hyper's wrappers.
    for marker in [
        "certificate thumbprint mismatch",
        "invalid peer certificate",
        "peer is incompatible",
        "received fatal alert",
        "received corrupt message",
    ] {
        if let Some(i) = chain.find(marker) {
            // `i` is where `find` matched: a char boundary of `chain`.
            return chain[i..].to_string();
        }
    }
    chain.rsplit(": ").next().unwrap_or(chain).to_string()
}

/// A header value hyper and h2 never log or index (session cookies and tokens).
pub(crate) fn sensitive(value: String) -> reqwest::header::HeaderValue {
    let mut v = reqwest::header::HeaderValue::from_str(&value)
        .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static(""));
    v.set_sensitive(true);
    v
}

/// `a: b: c` from an error and its sources, without repeats.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = source {
        let s = err.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        source = err.source();
    }
    // reqwest puts the URL in its message; keep it, it names the server, never credentials.
    parts.join(": ")
}

/// The first 200 characters of a body: the `detail` of an [`Error::Http`] or [`Error::Rest`],
/// which is never in the error's message and reaches only the manager's debug log.
pub(crate) fn snippet(body: &str) -> String {
    let trimmed = body.trim();
    let mut s: String = trimmed.chars().take(200).collect();
    if trimmed.chars().count() > 200 {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain http leaves the machine only when the admin says so: a server name comes from
    /// objects tenants write, and the login would hand the password to whatever answers.
    #[test]
    fn plain_http_to_a_remote_host_is_refused_unless_allowed() {
        let connect = |url: &str, allow_remote_http: bool| {
            Connection::new(
                Endpoint::parse(url).unwrap(),
                Credentials::new("u", "secret-pw".to_string().into()),
                &ClientOptions {
                    allow_remote_http,
                    ..ClientOptions::default()
                },
                Stats::default(),
            )
        };
        let refused = connect("http://192.0.2.1/sdk", false).err().unwrap();
        assert!(
            matches!(refused, Error::PlainHttpRefused { .. }),
            "{refused}"
        );
        let text = refused.to_string();
        assert!(
            text.contains("192.0.2.1") && text.contains("--allow-remote-http"),
            "{text}"
        );
        assert!(!text.contains("secret-pw"));
        assert_eq!(refused.class(), "InvalidServer");
        assert!(!refused.is_transient(), "a refusal is not retried");
        assert!(connect("http://192.0.2.1/sdk", true).is_ok());
        assert!(connect("http://127.0.0.1:8989/sdk", false).is_ok());
        assert!(connect("http://localhost:8989/sdk", false).is_ok());
        assert!(connect("https://192.0.2.1/sdk", false).is_ok());
    }

    /// The names a certificate presents are the named host's: not in the reason conditions
    /// show. The name that was expected (the server the object names) is.
    #[test]
    fn a_tls_reason_does_not_list_the_names_the_certificate_presents() {
        let chain = "error sending request for url (https://vc.example/sdk): client error (Connect): invalid peer certificate: certificate not valid for name \"vc.example\"; certificate is only valid for intranet-db.corp.internal or 10.1.2.3";
        let reason = tls_reason(chain);
        assert!(
            reason.starts_with(
                "invalid peer certificate: certificate not valid for name \"vc.example\""
            ),
            "{reason}"
        );
        assert!(
            !reason.contains("intranet-db") && !reason.contains("10.1.2.3"),
            "{reason}"
        );
        let other = "x: invalid peer certificate: UnknownIssuer";
        assert_eq!(tls_reason(other), "invalid peer certificate: UnknownIssuer");
    }

    #[test]
    fn retry_delays_are_bounded() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(0), Duration::from_millis(200));
        assert_eq!(p.delay(1), Duration::from_millis(400));
        assert_eq!(p.delay(10), Duration::from_secs(2));
        assert_eq!(p.delay(40), Duration::from_secs(2));
    }

    #[test]
    fn retry_waits_are_jittered_between_half_and_all_of_the_delay() {
        let p = RetryPolicy::default();
        for attempt in 0..6 {
            let full = p.delay(attempt);
            for random in [0, 1, 7, u64::MAX / 3, u64::MAX] {
                let d = p.jittered(attempt, random);
                assert!(d >= full / 2 && d <= full, "{attempt}: {d:?} of {full:?}");
            }
        }
        assert_eq!(p.jittered(0, 0), Duration::from_millis(100));
        let spread: std::collections::BTreeSet<Duration> =
            (0..32).map(|_| p.jittered(3, jitter_seed())).collect();
        assert!(spread.len() > 1, "waits differ between clients");
        let none = RetryPolicy {
            base_delay: Duration::ZERO,
            ..p
        };
        assert_eq!(none.jittered(2, 12345), Duration::ZERO);
    }
}
