//! The connection to one vCenter: the SOAP session (login, cookie, one re-login on
//! `NotAuthenticated`, logout) over the HTTP exchange ([`super::http`]), the REST session
//! beside it ([`super::rest`]), and concurrent reads.
//!
//! Sessions are used optimistically: a cached session costs no liveness round trip; if vCenter
//! answers `NotAuthenticated` (expired, logged out elsewhere) we log in again once and repeat
//! the call. That is cheaper than CAPV's per-reconcile `UserSession` + REST `session?~action=get`.
use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE};
use serde_json::Value;
use tokio::sync::{OnceCell, RwLock, Semaphore};
use tracing::debug;

use super::credentials::Credentials;
use super::http::{
    ClientOptions, Connection, INVALID_LOGIN_MEMORY, RawResponse, sensitive, snippet,
};
use super::model::endpoint::Endpoint;
use super::model::error::{Error, Result};
use super::model::fault::{Fault, FaultKind};
use super::model::moref::MoRef;
use super::model::trust::TlsPolicy;
use super::rest::{Dialect, RestRequest, RestSession};
use super::soap::decode::{Malformed, required};
use super::soap::encode::unencodable;
use super::soap::{Node, Xml, envelope, xml};
use super::stats::{CallKind, Stats};

/// The SOAP version we ask for until vCenter tells us its own (`about.apiVersion`).
/// RetrieveServiceContent is answered under any version.
const BOOTSTRAP_API_VERSION: &str = "6.5";

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
    /// Decode the `RetrieveServiceContent` response element; the four references every session
    /// needs are required.
    pub(crate) fn decode(n: &Node) -> std::result::Result<Self, Malformed> {
        let r = required(n, "returnval", "RetrieveServiceContentResponse")?;
        let m = |name: &str| {
            MoRef::decode(
                required(r, name, "the service content")?,
                &format!("service content {name}"),
            )
        };
        let about = r.child("about");
        let a = |name: &str| {
            about
                .and_then(|x| x.child_text(name))
                .unwrap_or_default()
                .to_string()
        };
        Ok(Self {
            root_folder: m("rootFolder")?,
            property_collector: m("propertyCollector")?,
            view_manager: r
                .child("viewManager")
                .map(|v| MoRef::decode(v, "service content viewManager"))
                .transpose()?,
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
    conn: Connection,
    content: OnceCell<ServiceContent>,
    session: RwLock<SoapSession>,
    rest: RestSession,
    tls_policy: TlsPolicy,
    /// Bounds the concurrent reads of [`Client::read_all`] across all its callers.
    read_slots: Semaphore,
    reads_in_flight: usize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.conn.endpoint.to_string())
            .field("username", &self.inner.conn.credentials.username)
            .finish_non_exhaustive()
    }
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
        let tls_policy = options.tls.clone();
        let reads_in_flight = options.reads_in_flight.max(1);
        let conn = Connection::new(endpoint, credentials, &options, stats)?;
        Ok(Self {
            inner: Arc::new(Inner {
                conn,
                content: OnceCell::new(),
                session: RwLock::new(SoapSession::default()),
                rest: RestSession::default(),
                tls_policy,
                read_slots: Semaphore::new(reads_in_flight),
                reads_in_flight,
            }),
        })
    }

    /// Whether another handle on this client exists besides this one (a cache asks before it
    /// drops and logs out a client: one in use elsewhere would lose its session mid-work).
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.inner.conn.endpoint
    }

    pub fn server(&self) -> String {
        self.inner.conn.endpoint.to_string()
    }

    pub fn username(&self) -> &str {
        &self.inner.conn.credentials.username
    }

    /// Whether vCenter refused this client's credentials lately (its last login failed with
    /// `InvalidLogin`): the caller may hold a stale password, e.g. one read from a Secret that
    /// has been rotated since (`controllers::secrets` reads the Secret again then).
    pub async fn login_refused(&self) -> bool {
        self.inner.conn.login_rejected_recently().await
    }

    /// Who this client is on which server, for caches of what it read: the endpoint, the user
    /// and a fingerprint of the password (never the password).
    pub fn principal_key(&self) -> String {
        let c = &self.inner.conn.credentials;
        format!(
            "{} as {}#{}",
            self.server(),
            c.username,
            c.password_fingerprint()
        )
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.conn.stats
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
                    .send_soap(
                        "RetrieveServiceContent",
                        CallKind::Session,
                        &body,
                        None,
                        BOOTSTRAP_API_VERSION,
                    )
                    .await?;
                ServiceContent::decode(&node)
                    .map_err(|m| m.into_error(self.server(), "RetrieveServiceContent"))
            })
            .await
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
        let mut failed = self.inner.conn.login_lock.lock().await;
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
            });
        }
        let content = self.service_content().await?.clone();
        // Drop the old cookie first: vcsim answers Login on a live cookie with InvalidLogin.
        self.inner.session.write().await.cookie = None;
        let body = login_body(
            &content.session_manager,
            &self.inner.conn.credentials.username,
            self.inner.conn.credentials.password(),
        );
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
        debug!(server = %self.inner.conn.endpoint, user = %self.username(), "logged in to vCenter");
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
                debug!(server = %self.inner.conn.endpoint, method, "session expired; logging in again");
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
        let body = session_is_active_body(&content.session_manager, &key, self.username());
        let node = self
            .call("SessionIsActive", CallKind::Session, &body)
            .await?;
        Ok(node.child("returnval").is_some_and(Node::is_true))
    }

    /// End the SOAP and REST sessions. Safe to call twice or without a session.
    pub async fn logout(&self) -> Result<()> {
        let rest = self.inner.rest.logout(&self.inner.conn).await;
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

    /// Which login the session is (1 for the first, +1 per re-login; 0 before any): what a
    /// session created on the server (a property collector, its filters) belongs to, so that
    /// after a re-login it is known to be gone.
    pub async fn session_generation(&self) -> u64 {
        self.inner.session.read().await.generation
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
        let url = self.inner.conn.endpoint.sdk_url();
        let payload = envelope(body);
        if let Some(reason) = unencodable(&payload) {
            return Err(Error::InvalidRequest {
                server: self.server(),
                method: method.to_string(),
                reason,
            });
        }
        let soap_action = format!("urn:vim25/{version}");
        self.inner
            .conn
            .with_retries(method, kind, || {
                let mut req = self
                    .inner
                    .conn
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

    /// Turn an HTTP answer into the response element or a typed error.
    fn interpret_soap(&self, method: &str, status: StatusCode, body: &str) -> Result<Node> {
        decode_reply(&self.server(), self.username(), method, status, body)
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
        self.inner.conn.requests_sent()
    }

    /// Send a REST request through the REST session (logging in first, and once more on 401).
    /// Returns the unwrapped JSON value (`Null` for an empty body).
    pub(crate) async fn rest(&self, req: RestRequest) -> Result<Value> {
        let api_version = || self.api_version_for_rest();
        self.inner
            .rest
            .call(&self.inner.conn, api_version, req)
            .await
    }

    /// The REST dialect in use (logging in if needed).
    pub async fn rest_dialect(&self) -> Result<Dialect> {
        let api_version = || self.api_version_for_rest();
        self.inner.rest.dialect(&self.inner.conn, api_version).await
    }

    /// The SOAP `about.apiVersion` (read once per client), which tells the REST login which
    /// dialect to try first; `None` when the service content cannot be read.
    async fn api_version_for_rest(&self) -> Option<String> {
        let content = self.service_content().await.ok()?;
        Some(content.about.api_version.clone())
    }
}

/// The `Login` request.
pub(crate) fn login_body(session_manager: &MoRef, username: &str, password: &str) -> String {
    let mut x = Xml::request("Login", session_manager);
    x.text("userName", username);
    x.text("password", password);
    x.finish("Login")
}

/// The `SessionIsActive` request for one session of one user.
pub(crate) fn session_is_active_body(
    session_manager: &MoRef,
    session_id: &str,
    username: &str,
) -> String {
    let mut x = Xml::request("SessionIsActive", session_manager);
    x.text("sessionID", session_id);
    x.text("userName", username);
    x.finish("SessionIsActive")
}

/// Turn a SOAP answer into the `<MethodResponse>` element or a typed error, without I/O: a
/// SOAP fault is [`Error::Fault`] (or [`Error::InvalidLogin`]), an HTTP error status without a
/// fault is [`Error::Http`], anything else unreadable is [`Error::Decode`]. `server` names the
/// server in errors; `username` is only logged (debug), never put in an error.
pub(crate) fn decode_reply(
    server: &str,
    username: &str,
    method: &str,
    status: StatusCode,
    body: &str,
) -> Result<Node> {
    let decode = |reason: String| Error::Decode {
        server: server.to_string(),
        method: method.to_string(),
        reason,
    };
    if !status.is_success() && status != StatusCode::INTERNAL_SERVER_ERROR {
        return Err(Error::Http {
            server: server.to_string(),
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
                server: server.to_string(),
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
    // Move the body out of the tree: responses can be large (the whole inventory). The index
    // was just found by `position`, so `swap_remove` cannot fail.
    let body_node = root.children.swap_remove(body_index);
    if let Some(fault) = body_node.child("Fault") {
        let fault = Fault::from_soap_fault(fault);
        if fault.kind == FaultKind::InvalidLogin {
            debug!(server, user = ?username, "vCenter refused the login");
            return Err(Error::InvalidLogin {
                server: server.to_string(),
            });
        }
        return Err(Error::Fault {
            server: server.to_string(),
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
            server: server.to_string(),
            method: method.to_string(),
            fault: Box::new(fault),
        });
    }
    Ok(response)
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
    fn unauthenticated_missing_sets_become_faults() {
        let doc = r#"<RetrievePropertiesExResponse xmlns="urn:vim25"><returnval><objects><obj type="SessionManager">SessionManager</obj><missingSet><path>currentSession</path><fault><fault xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" XMLSchema-instance:type="NotAuthenticated"><object type="SessionManager">SessionManager</object><privilegeId>System.Read</privilegeId></fault></fault></missingSet></objects></returnval></RetrievePropertiesExResponse>"#;
        let node = xml::parse(doc).unwrap();
        assert!(
            missing_set_not_authenticated(&node)
                .unwrap()
                .is_not_authenticated()
        );
    }

    #[test]
    fn a_service_content_without_a_required_reference_names_it() {
        let doc = r#"<RetrieveServiceContentResponse><returnval><rootFolder type="Folder">group-d1</rootFolder><propertyCollector type="PropertyCollector">propertyCollector</propertyCollector><sessionManager type="SessionManager">SessionManager</sessionManager></returnval></RetrieveServiceContentResponse>"#;
        let e = ServiceContent::decode(&xml::parse(doc).unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "the service content without searchIndex");
        let doc = doc.replace(
            "</returnval>",
            "<searchIndex>SearchIndex</searchIndex></returnval>",
        );
        let e = ServiceContent::decode(&xml::parse(&doc).unwrap()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "service content searchIndex is not a managed object reference (no type)"
        );
    }

    #[test]
    fn soap_replies_decode_to_typed_errors() {
        let decode = |status: u16, body: &str| {
            decode_reply(
                "https://vc.test",
                "user",
                "M",
                StatusCode::from_u16(status).unwrap(),
                body,
            )
        };
        assert!(matches!(
            decode(200, "<Envelope><Body>"),
            Err(Error::Decode { .. })
        ));
        assert!(matches!(
            decode(500, "<html>"),
            Err(Error::Http { status: 500, .. })
        ));
        assert!(matches!(
            decode(503, ""),
            Err(Error::Http { status: 503, .. })
        ));
        let fault = r#"<Envelope><Body><Fault><faultstring>x</faultstring><detail><InvalidLoginFault xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="InvalidLogin"/></detail></Fault></Body></Envelope>"#;
        assert!(matches!(
            decode(500, fault),
            Err(Error::InvalidLogin { .. })
        ));
        let empty_fault = "<Envelope><Body><Fault/></Body></Envelope>";
        assert!(matches!(decode(500, empty_fault), Err(Error::Fault { .. })));
    }
}
