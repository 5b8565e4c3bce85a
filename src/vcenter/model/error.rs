//! vCenter errors, as data: each variant is one failure class an admin can act on; messages
//! name the server and the operation, never a password or a session token. The transport
//! produces them; planners read them (whether to retry) without depending on the transport.
//!
//! The message (`Display`) is what conditions, events and the CLI show, and a server name
//! comes from objects tenants write: it may be any host the manager reaches, not a vCenter at
//! all. So the message is a fixed, typed description: the failure class, the server host, the
//! method, the HTTP status, the fault type. Text the server wrote (a reply body, a fault's
//! message, a decoder's view of a reply) is kept apart in [`Error::server_text`] for the
//! manager's own debug log, and the login's user name is in no message.
use super::endpoint::EndpointError;
use super::fault::{Fault, token};
use super::inventory::LookupError;
use super::trust::TlsError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid vCenter address: {0}")]
    Endpoint(#[from] EndpointError),

    #[error(transparent)]
    Tls(#[from] TlsError),

    /// Nothing answered: DNS failure, connection refused, no route, connect timeout.
    #[error("cannot connect to vCenter {server}: {reason}")]
    Unreachable { server: String, reason: String },

    /// The TLS handshake failed: untrusted certificate, thumbprint mismatch, wrong host name.
    #[error(
        "TLS verification of vCenter {server} failed: {reason} (pass --thumbprint or --ca-file to trust this server, or --insecure to skip verification)"
    )]
    TlsHandshake { server: String, reason: String },

    /// The connection broke or timed out after the request was sent.
    #[error("vCenter {server} did not answer {method}: {reason}")]
    Transport {
        server: String,
        method: String,
        reason: String,
    },

    /// An HTTP status that is not a SOAP fault (proxy errors, 503 while vCenter starts).
    /// `detail` is the start of the reply body: the server's text, never in the message.
    #[error("vCenter {server} answered {method} with HTTP {status}")]
    Http {
        server: String,
        method: String,
        status: u16,
        detail: String,
    },

    /// Wrong user name or password. Never retried: retrying locks accounts. The user name is
    /// not kept: the message reaches the status of every object acting with these credentials,
    /// and the user name of the manager or of another tenant's identity is not theirs to read.
    #[error("vCenter {server} rejected the login: wrong user name or password")]
    InvalidLogin { server: String },

    /// A vSphere fault returned by a SOAP method or a task.
    #[error("{method} on vCenter {server} failed: {fault}")]
    Fault {
        server: String,
        method: String,
        fault: Box<Fault>,
    },

    /// A REST (vAPI) error, classified by its error type. `detail` holds the server's messages,
    /// never in the message.
    #[error("{operation} on vCenter {server} failed: {kind}")]
    Rest {
        server: String,
        operation: String,
        kind: RestErrorKind,
        detail: String,
    },

    /// A request refused before it was sent: a value it would carry cannot be sent safely (a
    /// tag ID not in the tag ID form, a text XML cannot carry). Changing the value fixes it.
    #[error("{method} was not sent to vCenter {server}: {reason}")]
    InvalidRequest {
        server: String,
        method: String,
        reason: String,
    },

    /// Plain `http://` to a host that is not this machine, without the admin's explicit leave:
    /// the login would carry the password unencrypted and unverified to whatever answers.
    #[error(
        "refusing plain http:// to vCenter {server}: the login would send the password unencrypted to a host that is not this machine; use https://, or pass --allow-remote-http if the network between them is trusted"
    )]
    PlainHttpRefused { server: String },

    /// The reply grew past the cap on reply bodies: read no further and not kept.
    #[error(
        "vCenter {server} answered {method} with more than {} (the reply cap); the reply was dropped unread",
        mib(*.limit)
    )]
    ReplyTooLarge {
        server: String,
        method: String,
        limit: u64,
    },

    /// A property read grew past a cap on what one read may hold, over all its continuation
    /// pages together (`property::MAX_READ_OBJECTS`, `property::MAX_READ_BYTES`): the read was
    /// stopped there and what it had read dropped. Not transient: the same read fails the same
    /// way, so the caller backs off.
    #[error(
        "vCenter {server} answered {method} with more than {limit} over its continuation pages (the cap on one read); the read was stopped and dropped"
    )]
    ReadTooLarge {
        server: String,
        method: String,
        limit: ReadLimit,
    },

    /// The server answered something we cannot read. `reason` says what is wrong with the
    /// reply and may quote it, so it is not in the message.
    #[error(
        "cannot decode the answer of vCenter {server} to {method} (the manager's debug log says what is wrong with it)"
    )]
    Decode {
        server: String,
        method: String,
        reason: String,
    },

    /// An inventory lookup failed (not found, ambiguous, wrong type).
    #[error(transparent)]
    Lookup(#[from] Box<LookupError>),

    /// A task finished in error.
    #[error("task {task} ({operation}) failed: {fault}")]
    Task {
        task: String,
        operation: String,
        fault: Box<Fault>,
    },

    /// A task did not finish within the wait budget.
    #[error("task {task} ({operation}) did not finish within {seconds}s")]
    TaskTimeout {
        task: String,
        operation: String,
        seconds: u64,
    },
}

/// Which cap a paged read passed ([`Error::ReadTooLarge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadLimit {
    Objects(usize),
    Bytes(u64),
}

impl std::fmt::Display for ReadLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadLimit::Objects(n) => write!(f, "{n} objects"),
            ReadLimit::Bytes(b) => write!(f, "{} of objects", mib(*b)),
        }
    }
}

/// A byte count in MiB (`64 MiB`), or bytes below one.
fn mib(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// vAPI error types (`com.vmware.vapi.std.errors.*` on `/rest`, `error_type` on `/api`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestErrorKind {
    AlreadyExists,
    NotFound,
    Unauthenticated,
    Unauthorized,
    InvalidArgument,
    /// The tagging API is not served at all (no vAPI endpoint).
    Unavailable,
    Other(String),
}

impl std::fmt::Display for RestErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::AlreadyExists => f.write_str("already exists"),
            Self::NotFound => f.write_str("not found"),
            Self::Unauthenticated => f.write_str("not authenticated"),
            Self::Unauthorized => f.write_str("permission denied"),
            Self::InvalidArgument => f.write_str("invalid argument"),
            Self::Unavailable => f.write_str("the vAPI (REST) endpoint is not available"),
            // The error type as the server spelled it: shown only if it reads as one.
            Self::Other(s) => f.write_str(token(s).unwrap_or("an unrecognised error type")),
        }
    }
}

impl Error {
    /// The vSphere fault, for a SOAP or task failure.
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            Error::Fault { fault, .. } | Error::Task { fault, .. } => Some(fault),
            _ => None,
        }
    }

    /// What the server itself wrote, kept out of the message: the start of a reply body, a
    /// fault's message, the REST error messages, what the decoder found wrong with a reply.
    /// For the manager's own log only (escape it: a server writes any character).
    pub fn server_text(&self) -> Option<&str> {
        let text = match self {
            Error::Http { detail, .. } | Error::Rest { detail, .. } => detail.as_str(),
            Error::Decode { reason, .. } => reason.as_str(),
            Error::Fault { fault, .. } | Error::Task { fault, .. } => fault.message.as_str(),
            _ => "",
        };
        (!text.is_empty()).then_some(text)
    }

    /// Worth retrying later without any change (vCenter busy, network blip).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Unreachable { .. } | Error::Transport { .. } | Error::TaskTimeout { .. } => true,
            Error::Http { status, .. } => matches!(status, 429 | 502 | 503 | 504),
            _ => false,
        }
    }

    /// A short class name for metrics, conditions and `doctor`.
    pub fn class(&self) -> &'static str {
        match self {
            Error::Endpoint(_) | Error::PlainHttpRefused { .. } => "InvalidServer",
            Error::Tls(_) | Error::TlsHandshake { .. } => "TLSError",
            Error::Unreachable { .. } => "Unreachable",
            Error::Transport { .. } | Error::Http { .. } => "TransportError",
            Error::InvalidLogin { .. } => "InvalidLogin",
            Error::Fault { .. } => "Fault",
            Error::Rest { .. } => "RestError",
            Error::Decode { .. } => "DecodeError",
            Error::InvalidRequest { .. } => "InvalidRequest",
            Error::ReplyTooLarge { .. } => "ReplyTooLarge",
            Error::ReadTooLarge { .. } => "ReadTooLarge",
            Error::Lookup(_) => "NotFound",
            Error::Task { .. } | Error::TaskTimeout { .. } => "TaskError",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
