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
mod tests;
