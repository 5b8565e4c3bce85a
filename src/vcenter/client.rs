//! The connection to one vCenter: HTTP transport with bounded retries, the SOAP session
//! (login, cookie, one re-login on `NotAuthenticated`, logout) and round-trip accounting.
//!
//! Sessions are used optimistically: a cached session costs no liveness round trip; if vCenter
//! answers `NotAuthenticated` (expired, logged out elsewhere) we log in again once and repeat
//! the call. That is cheaper than CAPV's per-reconcile `UserSession` + REST `session?~action=get`.
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, SET_COOKIE};
use tokio::sync::{Mutex, OnceCell, RwLock, Semaphore};
use tracing::{debug, warn};

use super::credentials::Credentials;
use super::endpoint::Endpoint;
use super::error::{Error, Result};
use super::moref::MoRef;
use super::soap::{Fault, FaultKind, Node, Xml, envelope, xml};
use super::stats::{CallKind, Stats};
use super::tls::{self, TlsPolicy};

/// The SOAP version we ask for until vCenter tells us its own (`about.apiVersion`).
/// RetrieveServiceContent is answered under any version.
const BOOTSTRAP_API_VERSION: &str = "6.5";

/// How long a rejected login is remembered, so N reconciles sharing a client with wrong
/// credentials make one login attempt, not N (accounts lock after repeated failures).
const INVALID_LOGIN_MEMORY: Duration = Duration::from_secs(60);

/// Bounded retry of transient transport failures (connection refused while vCenter restarts,
/// HTTP 502/503/504, a dropped connection on a read). Each wait is jittered (between half and
/// all of [`RetryPolicy::delay`]) so clients failing together do not retry together, and the
/// whole call with its retries is bounded by [`ClientOptions::retry_deadline`].
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
}

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
        }
    }
}

/// What vCenter says about itself (`ServiceContent.about`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct About {
    pub full_name: String,
    pub api_version: String,
    pub api_type: String,
    pub version: String,
    pub build: String,
    pub instance_uuid: String,
}

/// The well-known managed objects every session starts from.
#[derive(Clone, Debug)]
pub struct ServiceContent {
    pub root_folder: MoRef,
    pub property_collector: MoRef,
    pub view_manager: Option<MoRef>,
    pub session_manager: MoRef,
    pub search_index: MoRef,
    pub about: About,
}

impl ServiceContent {
    fn from_node(n: &Node) -> Option<Self> {
        let r = n.child("returnval")?;
        let m = |name: &str| r.child(name).and_then(MoRef::from_node);
        let about = r.child("about");
        let a = |name: &str| {
            about
                .and_then(|x| x.child_text(name))
                .unwrap_or_default()
                .to_string()
        };
        Some(Self {
            root_folder: m("rootFolder")?,
            property_collector: m("propertyCollector")?,
            view_manager: m("viewManager"),
            session_manager: m("sessionManager")?,
            search_index: m("searchIndex")?,
            about: About {
                full_name: a("fullName"),
                api_version: a("apiVersion"),
                api_type: a("apiType"),
                version: a("version"),
                build: a("build"),
                instance_uuid: a("instanceUuid"),
            },
        })
    }
}

/// The SOAP session cookie, raw (quotes included, as real vCenter sends it), with a generation
/// so concurrent callers that all saw `NotAuthenticated` log in only once.
#[derive(Default)]
struct SoapSession {
    cookie: Option<String>,
    /// `UserSession.key` from the Login answer (what SessionIsActive wants; not the cookie).
    key: Option<String>,
    generation: u64,
}

/// A cheap-to-clone handle on one vCenter connection.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) http: reqwest::Client,
    pub(crate) endpoint: Endpoint,
    pub(crate) credentials: Credentials,
    pub(crate) stats: Stats,
    pub(crate) retry: RetryPolicy,
    retry_deadline: Duration,
    content: OnceCell<ServiceContent>,
    session: RwLock<SoapSession>,
    login_lock: Mutex<Option<(Instant, String)>>,
    pub(crate) rest: super::rest::RestSession,
    pub(crate) tls_policy: TlsPolicy,
    requests: AtomicU64,
    /// Bounds the concurrent reads of [`Client::read_all`] across all its callers.
    read_slots: Semaphore,
    reads_in_flight: usize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.endpoint.to_string())
            .field("username", &self.inner.credentials.username)
            .finish_non_exhaustive()
    }
}

/// The outcome of one HTTP exchange before SOAP/REST interpretation.
pub(crate) struct RawResponse {
    pub status: StatusCode,
    pub set_cookie: Vec<String>,
    pub body: String,
}

impl Client {
    /// A client for `server`; nothing is sent until the first call.
    pub fn new(server: &str, credentials: Credentials, options: ClientOptions) -> Result<Self> {
        let endpoint = Endpoint::parse(server)?;
        Self::with_stats(endpoint, credentials, options, Stats::default())
    }

    /// Like [`Client::new`], recording round trips into a shared [`Stats`].
    pub fn with_stats(
        endpoint: Endpoint,
        credentials: Credentials,
        options: ClientOptions,
        stats: Stats,
    ) -> Result<Self> {
        if options.tls == TlsPolicy::Insecure && endpoint.is_https() {
            warn!(server = %endpoint, "TLS certificate verification is disabled (--insecure)");
        }
        if !endpoint.is_https() && !endpoint.is_loopback() {
            warn!(server = %endpoint, "plain http:// to a remote vCenter: credentials travel unencrypted");
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
            inner: Arc::new(Inner {
                http,
                endpoint,
                credentials,
                stats,
                retry: options.retry,
                retry_deadline: options.retry_deadline,
                content: OnceCell::new(),
                session: RwLock::new(SoapSession::default()),
                login_lock: Mutex::new(None),
                rest: super::rest::RestSession::default(),
                tls_policy: options.tls,
                requests: AtomicU64::new(0),
                read_slots: Semaphore::new(options.reads_in_flight.max(1)),
                reads_in_flight: options.reads_in_flight.max(1),
            }),
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.inner.endpoint
    }

    pub fn server(&self) -> String {
        self.inner.endpoint.to_string()
    }

    pub fn username(&self) -> &str {
        &self.inner.credentials.username
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    pub fn tls_policy(&self) -> &TlsPolicy {
        &self.inner.tls_policy
    }

    /// The service content, fetched once per client.
    pub async fn service_content(&self) -> Result<&ServiceContent> {
        self.inner
            .content
            .get_or_try_init(|| async {
                let body = Xml::request(
                    "RetrieveServiceContent",
                    &MoRef::new("ServiceInstance", "ServiceInstance"),
                )
                .finish("RetrieveServiceContent");
                let node = self
                    .send_soap("RetrieveServiceContent", CallKind::Session, &body, None, BOOTSTRAP_API_VERSION)
                    .await?;
                ServiceContent::from_node(&node).ok_or_else(|| Error::Decode {
                    server: self.server(),
                    method: "RetrieveServiceContent".into(),
                    reason: "the service content lacks rootFolder, propertyCollector, sessionManager or searchIndex".into(),
                })
            })
            .await
    }

    /// The service content if it was already fetched (no round trip).
    pub(crate) fn inner_content(&self) -> Option<&ServiceContent> {
        self.inner.content.get()
    }

    fn api_version(&self) -> &str {
        self.inner
            .content
            .get()
            .map(|c| c.about.api_version.as_str())
            .filter(|v| !v.is_empty())
            .unwrap_or(BOOTSTRAP_API_VERSION)
    }

    /// Log in if there is no session yet (no round trip otherwise).
    pub async fn login(&self) -> Result<()> {
        self.session_cookie().await.map(|_| ())
    }

    async fn session_cookie(&self) -> Result<(u64, String)> {
        {
            let s = self.inner.session.read().await;
            if let Some(c) = &s.cookie {
                return Ok((s.generation, c.clone()));
            }
        }
        self.relogin(None).await
    }

    /// Log in again unless another caller already did since `seen_generation`.
    async fn relogin(&self, seen_generation: Option<u64>) -> Result<(u64, String)> {
        let mut failed = self.inner.login_lock.lock().await;
        {
            let s = self.inner.session.read().await;
            if let Some(c) = &s.cookie
                && seen_generation != Some(s.generation)
            {
                return Ok((s.generation, c.clone()));
            }
        }
        if let Some((at, _)) = failed.as_ref()
            && at.elapsed() < INVALID_LOGIN_MEMORY
        {
            return Err(Error::InvalidLogin {
                server: self.server(),
                username: self.username().to_string(),
            });
        }
        let content = self.service_content().await?.clone();
        // Drop the old cookie first: vcsim answers Login on a live cookie with InvalidLogin.
        self.inner.session.write().await.cookie = None;
        let mut x = Xml::request("Login", &content.session_manager);
        x.text("userName", &self.inner.credentials.username);
        x.text("password", self.inner.credentials.password());
        let body = x.finish("Login");
        let raw = self
            .exchange_soap("Login", CallKind::Session, &body, None, self.api_version())
            .await;
        let raw = match raw {
            Ok(raw) => raw,
            Err(e) => return Err(e),
        };
        let key = match self.interpret_soap("Login", raw.status, &raw.body) {
            Ok(node) => node.text_at("returnval/key").map(str::to_string),
            Err(Error::InvalidLogin { .. }) => {
                *failed = Some((Instant::now(), self.username().to_string()));
                return Err(Error::InvalidLogin {
                    server: self.server(),
                    username: self.username().to_string(),
                });
            }
            Err(e) => return Err(e),
        };
        let cookie = raw
            .set_cookie
            .iter()
            .find_map(|c| parse_session_cookie(c))
            .ok_or_else(|| Error::Decode {
                server: self.server(),
                method: "Login".into(),
                reason: "no vmware_soap_session cookie in the answer".into(),
            })?;
        *failed = None;
        let mut s = self.inner.session.write().await;
        s.cookie = Some(cookie.clone());
        s.key = key;
        s.generation += 1;
        debug!(server = %self.inner.endpoint, user = %self.username(), "logged in to vCenter");
        Ok((s.generation, cookie))
    }

    /// Call a SOAP method with the session, logging in first if needed and once more if vCenter
    /// says the session is gone. Returns the `<MethodResponse>` element.
    pub async fn call(&self, method: &str, kind: CallKind, body: &str) -> Result<Node> {
        self.service_content().await?;
        let (generation, cookie) = self.session_cookie().await?;
        match self
            .send_soap(method, kind, body, Some(&cookie), self.api_version())
            .await
        {
            Err(Error::Fault { fault, .. }) if fault.is_not_authenticated() => {
                debug!(server = %self.inner.endpoint, method, "session expired; logging in again");
                let (_, cookie) = self.relogin(Some(generation)).await?;
                self.send_soap(method, kind, body, Some(&cookie), self.api_version())
                    .await
            }
            other => other,
        }
    }

    /// `CurrentTime`: the cheapest authenticated call, used as an explicit liveness probe.
    pub async fn current_time(&self) -> Result<String> {
        let body = Xml::request(
            "CurrentTime",
            &MoRef::new("ServiceInstance", "ServiceInstance"),
        )
        .finish("CurrentTime");
        let node = self.call("CurrentTime", CallKind::Session, &body).await?;
        Ok(node.child_text("returnval").unwrap_or_default().to_string())
    }

    /// `SessionIsActive` for our own session (needs the Sessions.ValidateSession privilege on
    /// real vCenter; prefer [`Client::current_time`]).
    pub async fn session_is_active(&self) -> Result<bool> {
        let content = self.service_content().await?.clone();
        self.login().await?;
        let key = self
            .inner
            .session
            .read()
            .await
            .key
            .clone()
            .unwrap_or_default();
        let mut x = Xml::request("SessionIsActive", &content.session_manager);
        x.text("sessionID", &key);
        x.text("userName", self.username());
        let node = self
            .call(
                "SessionIsActive",
                CallKind::Session,
                &x.finish("SessionIsActive"),
            )
            .await?;
        Ok(node.child("returnval").is_some_and(Node::is_true))
    }

    /// End the SOAP and REST sessions. Safe to call twice or without a session.
    pub async fn logout(&self) -> Result<()> {
        let rest = self.rest_logout().await;
        let cookie = self.inner.session.write().await.cookie.take();
        if let (Some(cookie), Some(content)) = (cookie, self.inner.content.get()) {
            let body = Xml::request("Logout", &content.session_manager).finish("Logout");
            match self
                .send_soap(
                    "Logout",
                    CallKind::Session,
                    &body,
                    Some(&cookie),
                    self.api_version(),
                )
                .await
            {
                Ok(_) => {}
                // Already gone: nothing to end.
                Err(Error::Fault { fault, .. }) if fault.is_not_authenticated() => {}
                Err(e) => return Err(e),
            }
        }
        rest
    }

    /// Whether a SOAP session is currently held (no round trip).
    pub async fn has_session(&self) -> bool {
        self.inner.session.read().await.cookie.is_some()
    }

    /// One SOAP exchange with transport retries; returns the response element.
    async fn send_soap(
        &self,
        method: &str,
        kind: CallKind,
        body: &str,
        cookie: Option<&str>,
        version: &str,
    ) -> Result<Node> {
        let raw = self
            .exchange_soap(method, kind, body, cookie, version)
            .await?;
        self.interpret_soap(method, raw.status, &raw.body)
    }

    async fn exchange_soap(
        &self,
        method: &str,
        kind: CallKind,
        body: &str,
        cookie: Option<&str>,
        version: &str,
    ) -> Result<RawResponse> {
        let url = self.inner.endpoint.sdk_url();
        let payload = envelope(body);
        let soap_action = format!("urn:vim25/{version}");
        self.with_retries(method, kind, || {
            let mut req = self
                .inner
                .http
                .post(url.clone())
                .header(CONTENT_TYPE, "text/xml; charset=utf-8")
                .header("SOAPAction", soap_action.clone())
                .body(payload.clone());
            if let Some(c) = cookie {
                req = req.header(COOKIE, sensitive(format!("vmware_soap_session={c}")));
            }
            req
        })
        .await
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
        let policy = self.inner.retry;
        let first = Instant::now();
        let mut attempt = 0;
        loop {
            self.inner.requests.fetch_add(1, Ordering::Relaxed);
            let started = Instant::now();
            let result = send_once(build()).await;
            let elapsed = started.elapsed();
            let (outcome, retryable) = match result {
                Ok(raw) => {
                    let status = raw.status;
                    let retry = matches!(status.as_u16(), 503)
                        || (kind != CallKind::Write && matches!(status.as_u16(), 429 | 502 | 504));
                    let ok = status.is_success();
                    self.inner.stats.record(method, kind, elapsed, ok);
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
                    self.inner.stats.record(method, kind, elapsed, false);
                    let retry = match failure {
                        SendFailure::Connect(_) => true,
                        SendFailure::Tls(_) => false,
                        SendFailure::AfterSend(_) => kind != CallKind::Write,
                        // A vCenter that did not answer in time will not answer a retry sooner.
                        SendFailure::TimedOut(_) => false,
                    };
                    (Err(self.failure_error(method, failure)), retry)
                }
            };
            attempt += 1;
            match outcome {
                Err(e) if retryable && attempt < policy.attempts => {
                    let delay = policy.jittered(attempt - 1, jitter_seed());
                    if first.elapsed() + delay >= self.inner.retry_deadline {
                        debug!(server = %self.inner.endpoint, method, attempt, error = %e, deadline = ?self.inner.retry_deadline, "not retrying: past the deadline");
                        return Err(e);
                    }
                    debug!(server = %self.inner.endpoint, method, attempt, error = %e, ?delay, "retrying");
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
        }
    }

    /// Turn an HTTP answer into the response element or a typed error.
    fn interpret_soap(&self, method: &str, status: StatusCode, body: &str) -> Result<Node> {
        let decode = |reason: String| Error::Decode {
            server: self.server(),
            method: method.to_string(),
            reason,
        };
        if !status.is_success() && status != StatusCode::INTERNAL_SERVER_ERROR {
            return Err(Error::Http {
                server: self.server(),
                method: method.to_string(),
                status: status.as_u16(),
                detail: snippet(body),
            });
        }
        let root = xml::parse(body).map_err(|e| {
            if status.is_success() {
                decode(e.to_string())
            } else {
                Error::Http {
                    server: self.server(),
                    method: method.to_string(),
                    status: status.as_u16(),
                    detail: snippet(body),
                }
            }
        })?;
        let mut root = root;
        let body_index = root
            .children
            .iter()
            .position(|c| c.name == "Body")
            .ok_or_else(|| decode("no SOAP Body".into()))?;
        // Move the body out of the tree: responses can be large (the whole inventory).
        let body_node = root.children.swap_remove(body_index);
        if let Some(fault) = body_node.child("Fault") {
            let fault = Fault::from_soap_fault(fault);
            if fault.kind == FaultKind::InvalidLogin {
                return Err(Error::InvalidLogin {
                    server: self.server(),
                    username: self.username().to_string(),
                });
            }
            return Err(Error::Fault {
                server: self.server(),
                method: method.to_string(),
                fault: Box::new(fault),
            });
        }
        let response = body_node
            .children
            .into_iter()
            .next()
            .ok_or_else(|| decode("empty SOAP Body".into()))?;
        // vcsim reports an unauthenticated property read as NotAuthenticated in every
        // missingSet instead of a fault; treat it exactly like the fault so we log in again.
        if let Some(fault) = missing_set_not_authenticated(&response) {
            return Err(Error::Fault {
                server: self.server(),
                method: method.to_string(),
                fault: Box::new(fault),
            });
        }
        Ok(response)
    }

    /// Whether vCenter rejected these credentials within [`INVALID_LOGIN_MEMORY`]; shared by the
    /// SOAP and REST logins so neither keeps trying a wrong password.
    pub(crate) async fn login_rejected_recently(&self) -> bool {
        self.inner
            .login_lock
            .lock()
            .await
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < INVALID_LOGIN_MEMORY)
    }

    pub(crate) async fn remember_rejected_login(&self) {
        *self.inner.login_lock.lock().await = Some((Instant::now(), self.username().to_string()));
    }

    /// Run independent reads concurrently: at most [`ClientOptions::reads_in_flight`] in flight
    /// for this client (all callers together), over the pooled connections. Each read keeps its
    /// own retries and the shared re-login (a session lost under many reads is re-established
    /// once). Results come back in input order, and the error returned is the first one in input
    /// order, as a loop would have returned it; reads after it may already have been sent.
    pub(crate) async fn read_all<I, T, F, Fut>(&self, items: I, read: F) -> Result<Vec<T>>
    where
        I: IntoIterator,
        F: FnMut(I::Item) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let slots = &self.inner.read_slots;
        // Futures in a Vec (not a lazy map over `items`), so the stream holds no closure type and
        // the caller's future stays Send.
        let reads: Vec<Fut> = items.into_iter().map(read).collect();
        let guarded: Vec<_> = reads
            .into_iter()
            .map(|fut| async move {
                // Never closed, so acquiring only waits.
                let _slot = slots.acquire().await.ok();
                fut.await
            })
            .collect();
        futures::stream::iter(guarded)
            .buffered(self.inner.reads_in_flight)
            .try_collect()
            .await
    }

    /// Requests sent on this client (all attempts), for tests that check retry bounds.
    pub fn requests_sent(&self) -> u64 {
        self.inner.requests.load(Ordering::Relaxed)
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
}

async fn send_once(req: reqwest::RequestBuilder) -> std::result::Result<RawResponse, SendFailure> {
    let resp = req.send().await.map_err(classify_send_error)?;
    let status = resp.status();
    let set_cookie = resp
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let body = resp
        .text()
        .await
        .map_err(|e| SendFailure::AfterSend(error_chain(&e)))?;
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

/// Messages rustls gives TLS failures, most specific first.
const TLS_MARKERS: [&str; 5] = [
    "certificate thumbprint mismatch",
    "the server did not prove it holds the key",
    "invalid peer certificate",
    "peer is incompatible",
    "received fatal alert",
];

fn tls_reason(chain: &str) -> String {
    // rustls' own message is the useful one ("invalid peer certificate: UnknownIssuer",
    // "certificate thumbprint mismatch: expected …"); drop reqwest's and hyper's wrappers.
    for marker in [
        "certificate thumbprint mismatch",
        "invalid peer certificate",
        "peer is incompatible",
        "received fatal alert",
    ] {
        if let Some(i) = chain.find(marker) {
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

/// The value of `vmware_soap_session` from a Set-Cookie header, quotes included.
fn parse_session_cookie(header: &str) -> Option<String> {
    let first = header.split(';').next()?.trim();
    let (name, value) = first.split_once('=')?;
    (name.trim() == "vmware_soap_session" && !value.is_empty()).then(|| value.to_string())
}

fn missing_set_not_authenticated(response: &Node) -> Option<Fault> {
    let returnval = response.child("returnval")?;
    let objects = returnval.children_named("objects");
    for o in objects {
        for m in o.children_named("missingSet") {
            if let Some(f) = m.child("fault") {
                let fault = Fault::from_localized(f);
                if fault.is_not_authenticated() {
                    return Some(fault);
                }
            }
        }
    }
    None
}

/// The first 200 characters of a body, for error messages.
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

    #[test]
    fn session_cookies_are_kept_raw() {
        assert_eq!(
            parse_session_cookie("vmware_soap_session=55918fd7-fa21; HttpOnly").as_deref(),
            Some("55918fd7-fa21")
        );
        assert_eq!(
            parse_session_cookie(r#"vmware_soap_session="52a1b2"; Path=/; HttpOnly; Secure"#)
                .as_deref(),
            Some(r#""52a1b2""#)
        );
        assert_eq!(parse_session_cookie("other=1"), None);
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

    #[test]
    fn unauthenticated_missing_sets_become_faults() {
        let doc = r#"<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects><obj type="SessionManager">SessionManager</obj><missingSet><path>currentSession</path><fault><fault xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" XMLSchema-instance:type="NotAuthenticated"><object type="SessionManager">SessionManager</object><privilegeId>System.Read</privilegeId></fault></fault></missingSet></objects></returnval></RetrievePropertiesExResponse>"#;
        let node = xml::parse(doc).unwrap();
        assert!(
            missing_set_not_authenticated(&node)
                .unwrap()
                .is_not_authenticated()
        );
    }
}
