//! The vAPI REST side of vCenter (tagging). Two dialects exist: `/api/...` (vSphere 7.0U2+,
//! unwrapped JSON) and the deprecated `/rest/com/vmware/cis/...` (`{"value": ...}`), which is
//! all vcsim 0.24.2 serves. We try `/api/session` once, fall back to `/rest`, and remember which
//! dialect the server speaks for the life of the client.
pub(crate) mod path;
pub mod tagging;

use std::future::Future;

use reqwest::{Method, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use tokio::sync::Mutex;
use tracing::debug;
use url::Url;

use super::http::{Connection, sensitive, snippet};
use super::model::endpoint::Endpoint;
use super::model::error::{Error, RestErrorKind, Result};
use super::stats::CallKind;
use path::RestPath;

/// Which REST dialect the server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `/api/...`, unwrapped bodies.
    Api,
    /// `/rest/com/vmware/cis/...`, `{"value": ...}` wrapping, `~action=` query.
    Rest,
}

/// The REST session of one client: the dialect the server speaks and the session token. The
/// client (`Client::rest`) sends requests through it; `api_version` is how the login learns
/// the SOAP `about.apiVersion` (read only when the dialect is not known yet).
#[derive(Default)]
pub(crate) struct RestSession {
    state: Mutex<RestState>,
}

#[derive(Default)]
struct RestState {
    dialect: Option<Dialect>,
    token: Option<SecretString>,
    generation: u64,
}

impl Dialect {
    /// The path every request of the dialect stays under.
    pub(crate) fn prefix(self) -> &'static [&'static str] {
        match self {
            Dialect::Api => &["api"],
            Dialect::Rest => &["rest", "com", "vmware"],
        }
    }
}

/// One REST request in both dialects.
pub(crate) struct RestRequest {
    /// Name for round-trip accounting (`rest:tagging.category.create`).
    pub op: &'static str,
    pub kind: CallKind,
    pub method: Method,
    /// Path and query under `/api/` (e.g. `cis/tagging/category`).
    pub api: RestPath,
    pub api_body: Option<Value>,
    /// Path and query under `/rest/com/vmware/` (e.g. `cis/tagging/category`).
    pub rest: RestPath,
    pub rest_body: Option<Value>,
}

impl RestRequest {
    /// The URL in `dialect`, or why a value in it cannot be sent.
    pub(crate) fn url(&self, endpoint: &Endpoint, dialect: Dialect) -> Result<Url, String> {
        match dialect {
            Dialect::Api => self.api.url(endpoint, dialect.prefix()),
            Dialect::Rest => self.rest.url(endpoint, dialect.prefix()),
        }
    }
}

impl RestSession {
    /// The REST dialect in use (logging in if needed).
    pub(crate) async fn dialect<F>(
        &self,
        conn: &Connection,
        api_version: impl Fn() -> F,
    ) -> Result<Dialect>
    where
        F: Future<Output = Option<String>>,
    {
        Ok(self.token(conn, &api_version).await?.0)
    }

    async fn token<F>(
        &self,
        conn: &Connection,
        api_version: &impl Fn() -> F,
    ) -> Result<(Dialect, SecretString, u64)>
    where
        F: Future<Output = Option<String>>,
    {
        let mut state = self.state.lock().await;
        if let (Some(d), Some(t)) = (state.dialect, state.token.clone()) {
            return Ok((d, t, state.generation));
        }
        let (dialect, token) = login(conn, state.dialect, api_version).await?;
        state.dialect = Some(dialect);
        state.token = Some(token.clone());
        state.generation += 1;
        Ok((dialect, token, state.generation))
    }

    /// Send a REST request, logging in first and once more on 401. Returns the unwrapped
    /// JSON value (`Null` for an empty body).
    pub(crate) async fn call<F>(
        &self,
        conn: &Connection,
        api_version: impl Fn() -> F,
        req: RestRequest,
    ) -> Result<Value>
    where
        F: Future<Output = Option<String>>,
    {
        // Refused before anything is sent, the login included, whichever dialect is spoken.
        for dialect in [Dialect::Api, Dialect::Rest] {
            req.url(&conn.endpoint, dialect)
                .map_err(|reason| Error::InvalidRequest {
                    server: conn.server(),
                    method: req.op.to_string(),
                    reason,
                })?;
        }
        let (dialect, token, generation) = self.token(conn, &api_version).await?;
        match send(conn, &req, dialect, &token).await {
            Err(Error::Rest {
                kind: RestErrorKind::Unauthenticated,
                ..
            }) => {
                {
                    let mut state = self.state.lock().await;
                    if state.generation == generation {
                        state.token = None;
                    }
                }
                let (dialect, token, _) = self.token(conn, &api_version).await?;
                send(conn, &req, dialect, &token).await
            }
            other => other,
        }
    }

    /// End the REST session if one is held.
    pub(crate) async fn logout(&self, conn: &Connection) -> Result<()> {
        let mut state = self.state.lock().await;
        let (Some(dialect), Some(token)) = (state.dialect, state.token.take()) else {
            return Ok(());
        };
        let url = match dialect {
            Dialect::Api => conn.endpoint.join("api/session"),
            Dialect::Rest => conn.endpoint.join("rest/com/vmware/cis/session"),
        };
        let raw = conn
            .with_retries("rest:session.delete", CallKind::Session, || {
                conn.http.delete(url.clone()).header(
                    "vmware-api-session-id",
                    sensitive(token.expose_secret().to_string()),
                )
            })
            .await?;
        if raw.status.is_success() || raw.status == StatusCode::UNAUTHORIZED {
            Ok(())
        } else {
            Err(Error::Http {
                server: conn.server(),
                method: "rest:session.delete".into(),
                status: raw.status.as_u16(),
                detail: snippet(&raw.body),
            })
        }
    }
}

/// Whether an `about.apiVersion` is at least `major.minor.patch` (None if unknown).
pub(crate) fn version_at_least(
    version: Option<&str>,
    major: u32,
    minor: u32,
    patch: u32,
) -> Option<bool> {
    let parts: Vec<u32> = version?
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    let get = |i: usize| parts.get(i).copied().unwrap_or(0);
    Some((get(0), get(1), get(2)) >= (major, minor, patch))
}

async fn login<F>(
    conn: &Connection,
    known: Option<Dialect>,
    api_version: &impl Fn() -> F,
) -> Result<(Dialect, SecretString)>
where
    F: Future<Output = Option<String>>,
{
    if conn.login_rejected_recently().await {
        return Err(Error::InvalidLogin {
            server: conn.server(),
        });
    }
    // The API version tells which dialect to try first (cached; usually already read).
    let version = match known {
        None => api_version().await,
        Some(_) => None,
    };
    let creds = &conn.credentials;
    let try_dialect = |d: Dialect| {
        let url = match d {
            Dialect::Api => conn.endpoint.join("api/session"),
            Dialect::Rest => conn.endpoint.join("rest/com/vmware/cis/session"),
        };
        let http = conn.http.clone();
        let user = creds.username.clone();
        let password = creds.password().to_string();
        async move {
            conn.with_retries("rest:session.create", CallKind::Session, || {
                http.post(url.clone())
                    .basic_auth(&user, Some(&password))
                    .header("Accept", "application/json")
            })
            .await
        }
    };
    let order: &[Dialect] = match known {
        Some(Dialect::Rest) => &[Dialect::Rest],
        Some(Dialect::Api) => &[Dialect::Api],
        // `/api` exists from vSphere 7.0 U2 (API 7.0.2); older servers (and vcsim, which
        // reports 6.5) only serve `/rest`: ask the likely one first, fall back on 404.
        None if version_at_least(version.as_deref(), 7, 0, 2) == Some(false) => {
            &[Dialect::Rest, Dialect::Api]
        }
        None => &[Dialect::Api, Dialect::Rest],
    };
    let mut last_status = StatusCode::NOT_FOUND;
    for &d in order {
        let raw = try_dialect(d).await?;
        match raw.status {
            s if s.is_success() => {
                let token = session_token(d, &raw.body).map_err(|reason| Error::Decode {
                    server: conn.server(),
                    method: "rest:session.create".into(),
                    reason,
                })?;
                debug!(server = %conn.endpoint, dialect = ?d, "REST session created");
                return Ok((d, SecretString::from(token)));
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                conn.remember_rejected_login().await;
                debug!(server = %conn.endpoint, user = ?creds.username, "vCenter refused the REST login");
                return Err(Error::InvalidLogin {
                    server: conn.server(),
                });
            }
            StatusCode::NOT_FOUND => last_status = raw.status,
            s => {
                return Err(Error::Http {
                    server: conn.server(),
                    method: "rest:session.create".into(),
                    status: s.as_u16(),
                    detail: snippet(&raw.body),
                });
            }
        }
    }
    Err(Error::Rest {
        server: conn.server(),
        operation: "REST session create".into(),
        kind: RestErrorKind::Unavailable,
        detail: format!(
            "neither /api/session nor /rest/com/vmware/cis/session is served (HTTP {})",
            last_status.as_u16()
        ),
    })
}

/// The most JSON values a reply may hold, counted by the `[`, `{` and `,` that open or separate
/// them. A parsed value costs 32 bytes or more, so a body within the byte cap made of `0,0,0…`
/// would otherwise become hundreds of megabytes; at this bound the tree stays under about
/// 25 MB. Tagging replies are lists of ids and object references: this is over 40,000 objects
/// with their tags in one reply.
pub(crate) const MAX_JSON_VALUES: usize = 1 << 18;

/// Parse a reply, refusing one with more than [`MAX_JSON_VALUES`] (a comma inside a string
/// counts too: the bound only needs to be safe).
fn parse_json(text: &str) -> std::result::Result<Value, String> {
    let values = text
        .bytes()
        .filter(|b| matches!(b, b'[' | b'{' | b','))
        .count();
    if values > MAX_JSON_VALUES {
        return Err(format!("more than {MAX_JSON_VALUES} JSON values"));
    }
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// The session id in a successful session-create answer: a JSON string (`/api`) or
/// `{"value": "..."}` (`/rest`).
pub(crate) fn session_token(dialect: Dialect, body: &str) -> std::result::Result<String, String> {
    let v = parse_json(body.trim())?;
    match dialect {
        Dialect::Api => v.as_str(),
        Dialect::Rest => v.get("value").and_then(Value::as_str),
    }
    .map(str::to_string)
    .ok_or_else(|| "no session id in the answer".to_string())
}

/// The JSON of a successful answer: `Null` for an empty body, unwrapped from `{"value": ...}`
/// on `/rest`.
pub(crate) fn decode_body(dialect: Dialect, body: &str) -> std::result::Result<Value, String> {
    let text = body.trim();
    if text.is_empty() {
        return Ok(Value::Null);
    }
    let v = parse_json(text)?;
    Ok(match dialect {
        Dialect::Api => v,
        Dialect::Rest => v.get("value").cloned().unwrap_or(Value::Null),
    })
}

/// One REST exchange in the session's dialect.
async fn send(
    conn: &Connection,
    req: &RestRequest,
    dialect: Dialect,
    token: &SecretString,
) -> Result<Value> {
    let body = match dialect {
        Dialect::Api => req.api_body.clone(),
        Dialect::Rest => req.rest_body.clone(),
    };
    let url = req
        .url(&conn.endpoint, dialect)
        .map_err(|reason| Error::InvalidRequest {
            server: conn.server(),
            method: req.op.to_string(),
            reason,
        })?;
    let raw = conn
        .with_retries(req.op, req.kind, || {
            let mut r = conn
                .http
                .request(req.method.clone(), url.clone())
                .header(
                    "vmware-api-session-id",
                    sensitive(token.expose_secret().to_string()),
                )
                .header("Accept", "application/json");
            if let Some(b) = &body {
                r = r.json(b);
            }
            r
        })
        .await?;
    if raw.status.is_success() {
        return decode_body(dialect, &raw.body).map_err(|reason| Error::Decode {
            server: conn.server(),
            method: req.op.to_string(),
            reason,
        });
    }
    Err(Error::Rest {
        server: conn.server(),
        operation: req.op.trim_start_matches("rest:").to_string(),
        kind: classify_rest_error(raw.status, &raw.body),
        detail: rest_error_detail(raw.status, &raw.body),
    })
}

/// Classify by the vAPI error type, not the HTTP status: the status for one error varies by
/// release (`already_exists` is 400 on some, 409 on others).
pub(crate) fn classify_rest_error(status: StatusCode, body: &str) -> RestErrorKind {
    let v: Option<Value> = parse_json(body.trim()).ok();
    let kind = v.as_ref().and_then(|v| {
        v.get("type")
            .or_else(|| v.get("error_type"))
            .and_then(Value::as_str)
            .map(|s| s.rsplit('.').next().unwrap_or(s).to_ascii_lowercase())
    });
    match kind.as_deref() {
        Some("already_exists") => RestErrorKind::AlreadyExists,
        Some("not_found") => RestErrorKind::NotFound,
        Some("unauthenticated") => RestErrorKind::Unauthenticated,
        Some("unauthorized") => RestErrorKind::Unauthorized,
        Some("invalid_argument") => RestErrorKind::InvalidArgument,
        Some(other) => RestErrorKind::Other(other.to_string()),
        None => match status {
            StatusCode::UNAUTHORIZED => RestErrorKind::Unauthenticated,
            StatusCode::FORBIDDEN => RestErrorKind::Unauthorized,
            StatusCode::NOT_FOUND => RestErrorKind::NotFound,
            StatusCode::CONFLICT => RestErrorKind::AlreadyExists,
            s => RestErrorKind::Other(format!("HTTP {}", s.as_u16())),
        },
    }
}

pub(crate) fn rest_error_detail(status: StatusCode, body: &str) -> String {
    let v: Option<Value> = parse_json(body.trim()).ok();
    let messages = v.as_ref().and_then(|v| {
        v.get("value")
            .and_then(|x| x.get("messages"))
            .or_else(|| v.get("messages"))
            .and_then(Value::as_array)
            .map(|m| {
                m.iter()
                    .filter_map(|x| x.get("default_message").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("; ")
            })
    });
    match messages {
        Some(m) if !m.is_empty() => m,
        _ => format!("HTTP {}", status.as_u16()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_errors_are_classified_by_type_in_both_dialects() {
        let rest = r#"{"type":"com.vmware.vapi.std.errors.already_exists","value":{}}"#;
        assert_eq!(
            classify_rest_error(StatusCode::BAD_REQUEST, rest),
            RestErrorKind::AlreadyExists
        );
        let api =
            r#"{"error_type":"NOT_FOUND","messages":[{"id":"x","default_message":"Tag missing"}]}"#;
        assert_eq!(
            classify_rest_error(StatusCode::NOT_FOUND, api),
            RestErrorKind::NotFound
        );
        assert_eq!(rest_error_detail(StatusCode::NOT_FOUND, api), "Tag missing");
        // vcsim: plain-text 404 and empty 401.
        assert_eq!(
            classify_rest_error(StatusCode::NOT_FOUND, "404 page not found"),
            RestErrorKind::NotFound
        );
        assert_eq!(
            classify_rest_error(StatusCode::UNAUTHORIZED, ""),
            RestErrorKind::Unauthenticated
        );
    }

    #[test]
    fn a_reply_of_too_many_values_is_refused_before_it_is_parsed() {
        let list = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        assert!(decode_body(Dialect::Api, &list(MAX_JSON_VALUES - 1)).is_ok());
        assert_eq!(
            decode_body(Dialect::Api, &list(MAX_JSON_VALUES + 1)).unwrap_err(),
            format!("more than {MAX_JSON_VALUES} JSON values")
        );
        // Error bodies go through the same bound (they are only classified by HTTP status).
        assert_eq!(
            classify_rest_error(StatusCode::NOT_FOUND, &list(MAX_JSON_VALUES + 1)),
            RestErrorKind::NotFound
        );
    }
}
