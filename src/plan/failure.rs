//! Why something could not be done in vCenter, kept typed from the client up to the verdict:
//! whether a later pass may succeed unchanged ("retry later") or someone has to act ("failed")
//! is decided from the error's type ([`crate::vcenter::model::error::Error::is_transient`]), never from its
//! text. The message is what conditions, events and the CLI show; it never holds a secret, nor
//! text a server wrote (the error's own message leaves that out: see
//! [`Error::server_text`], which only the manager's debug log receives, escaped).
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::vcenter::model::error::Error;

/// One failure: what was being done and what went wrong, and its cause.
#[derive(Clone, Debug)]
pub struct Failure {
    message: String,
    cause: Cause,
}

/// What a failure comes from.
#[derive(Clone, Debug)]
pub enum Cause {
    /// A vCenter call failed; the error says whether it is worth retrying.
    Vcenter(Arc<Error>),
    /// There is nothing to ask vCenter with: no credentials, an invalid address or thumbprint.
    Config,
    /// The object is busy with another change (a task still queued or running).
    Busy,
    /// The plan named something the view no longer holds; the next read sees it as it is.
    Stale,
}

/// Whether a failed pass is worth repeating as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// vCenter did not answer, was busy or changed meanwhile: the same pass later may succeed.
    Later,
    /// vCenter (or the configuration) refused: nothing changes until someone acts.
    Failed,
}

impl Failure {
    /// A vCenter error, its message prefixed by what was being done (`context: error`). What
    /// the server wrote goes to the debug log only.
    pub fn vcenter(context: Option<&str>, error: Error) -> Self {
        let message = match context {
            Some(c) => format!("{c}: {error}"),
            None => error.to_string(),
        };
        if let Some(text) = error.server_text() {
            tracing::debug!(failure = %message, server_text = %escaped(text), "what the server said");
        }
        Failure {
            message,
            cause: Cause::Vcenter(Arc::new(error)),
        }
    }

    /// Nothing to connect with (credentials, address, TLS settings): `message` says what.
    pub fn config(message: impl Into<String>) -> Self {
        Self::with(Cause::Config, message)
    }

    /// The object is busy with another change.
    pub fn busy(message: impl Into<String>) -> Self {
        Self::with(Cause::Busy, message)
    }

    /// The view the plan was made on no longer holds.
    pub fn stale(message: impl Into<String>) -> Self {
        Self::with(Cause::Stale, message)
    }

    /// Not attempted because `blocker` failed: retried (or not) alike.
    pub fn blocked_by(blocker: &Failure, message: impl Into<String>) -> Self {
        Self::with(blocker.cause.clone(), message)
    }

    fn with(cause: Cause, message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            cause,
        }
    }

    /// The same failure, its message prefixed by `context`.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// Worth repeating as it is, or not: decided from the cause's type.
    pub fn retry(&self) -> Retry {
        let later = match &self.cause {
            Cause::Vcenter(e) => e.is_transient(),
            Cause::Busy | Cause::Stale => true,
            Cause::Config => false,
        };
        if later { Retry::Later } else { Retry::Failed }
    }

    pub fn cause(&self) -> &Cause {
        &self.cause
    }

    /// The vCenter error behind it, if any.
    pub fn vcenter_error(&self) -> Option<&Error> {
        match &self.cause {
            Cause::Vcenter(e) => Some(e),
            _ => None,
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// `text` with control characters escaped (`\n`, `\u{1b}`), so a server's reply cannot
/// forge or break log lines.
fn escaped(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A failure reads as its message (conditions, events, CLI tables).
impl Deref for Failure {
    type Target = str;

    fn deref(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.vcenter_error()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Two failures are the same when they say the same and would be retried alike (verdicts are
/// compared, errors are not).
impl PartialEq for Failure {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message && self.retry() == other.retry()
    }
}

impl Eq for Failure {}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::vcenter(None, e)
    }
}

/// A bare message is a configuration problem: nothing a retry would change.
impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::config(message)
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::config(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_is_decided_by_the_error_type_not_its_text() {
        let unreachable = Error::Unreachable {
            server: "vc".into(),
            reason: "connection refused (permanent!)".into(),
        };
        let login = Error::InvalidLogin {
            server: "vc".into(),
        };
        let busy_http = Error::Http {
            server: "vc".into(),
            method: "RetrievePropertiesEx".into(),
            status: 503,
            detail: String::new(),
        };
        assert_eq!(Failure::from(unreachable).retry(), Retry::Later);
        assert_eq!(Failure::from(busy_http).retry(), Retry::Later);
        assert_eq!(Failure::from(login).retry(), Retry::Failed);
        assert_eq!(Failure::config("retry later").retry(), Retry::Failed);
        assert_eq!(Failure::busy("failed").retry(), Retry::Later);
    }

    /// What a server wrote never reaches a failure's message (conditions, events): not a
    /// reply body, a fault's message, REST error messages, a decoder's quote of the reply, nor
    /// the login's user name. The message is the typed description; the text stays on the
    /// error for the debug log.
    #[test]
    fn a_failure_message_carries_no_server_text_nor_user_name() {
        use crate::vcenter::client::decode_reply;
        use crate::vcenter::model::error::RestErrorKind;
        use reqwest::StatusCode;
        const CANARY: &str = "secret-intranet-page";
        let html = format!("<html><body><p>{CANARY}<br></body></html>");
        let fault = format!(
            r#"<Envelope xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><Body><Fault><faultstring>{CANARY}</faultstring><detail><F xsi:type="InvalidLogin"/></detail></Fault></Body></Envelope>"#
        );
        let typed_fault = format!(
            r#"<Envelope xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><Body><Fault><faultstring>{CANARY}</faultstring><detail><F xsi:type="NoPermission"><privilegeId>VirtualMachine.Inventory.Create</privilegeId></F></detail></Fault></Body></Envelope>"#
        );
        let odd_type = format!(
            r#"<Envelope xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><Body><Fault><faultstring>x</faultstring><detail><F xsi:type="{CANARY} &lt;b&gt;"/></detail></Fault></Body></Envelope>"#
        );
        let server = "https://vc.example/sdk";
        let reply = |status: u16, body: &str| {
            let status = StatusCode::from_u16(status).unwrap();
            decode_reply(server, "alice@corp.example", "Login", status, body).unwrap_err()
        };
        let rest = Error::Rest {
            server: server.into(),
            operation: "get tag".into(),
            kind: RestErrorKind::Other(format!("{CANARY} <script>")),
            detail: CANARY.into(),
        };
        let cases: Vec<(Error, &str)> = vec![
            (
                reply(502, &html),
                "vCenter https://vc.example/sdk answered Login with HTTP 502",
            ),
            (reply(500, &html), "HTTP 500"),
            (
                reply(200, &html),
                "cannot decode the answer of vCenter https://vc.example/sdk to Login",
            ),
            (reply(200, CANARY), "cannot decode"),
            (
                reply(500, &fault),
                "vCenter https://vc.example/sdk rejected the login: wrong user name or password",
            ),
            (
                reply(500, &typed_fault),
                "Login on vCenter https://vc.example/sdk failed: NoPermission: privilege VirtualMachine.Inventory.Create is missing",
            ),
            (reply(500, &odd_type), "failed: an unrecognised fault"),
            (
                rest,
                "get tag on vCenter https://vc.example/sdk failed: an unrecognised error type",
            ),
        ];
        for (error, shown) in cases {
            let kept = error.server_text().is_some() || matches!(error, Error::InvalidLogin { .. });
            let failure = Failure::vcenter(Some("cloning VM m-0"), error);
            let msg = failure.message();
            assert!(msg.contains(shown), "want {shown:?} in {msg:?}");
            for leak in [CANARY, "alice", "<p>", "<html"] {
                assert!(!msg.contains(leak), "{leak:?} in {msg:?}");
            }
            assert!(kept, "the log keeps the server's text: {msg}");
        }
        assert_eq!(escaped("a\nb\u{1b}[31m\r"), "a\\nb\\u{1b}[31m\\r");
    }

    #[test]
    fn context_prefixes_the_message_and_keeps_the_cause() {
        let f = Failure::vcenter(
            Some("create tag t"),
            Error::Unreachable {
                server: "vc".into(),
                reason: "refused".into(),
            },
        );
        assert_eq!(
            f.to_string(),
            "create tag t: cannot connect to vCenter vc: refused"
        );
        let f = f.context("zone a");
        assert!(f.starts_with("zone a: create tag t"));
        assert!(matches!(f.cause(), Cause::Vcenter(_)));
        assert_eq!(f.retry(), Retry::Later);
    }
}
