//! vSphere faults, classified by the `xsi:type` of the fault object, never by `faultstring`
//! (vcsim leaves it empty for several faults; real vCenter localises it). Decoded from SOAP
//! answers by `soap::decode`.
use std::fmt;

use super::moref::MoRef;

/// The fault classes callers branch on. Anything else keeps its vSphere type name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The session is gone (logged out, expired): log in again.
    NotAuthenticated,
    /// Wrong user name or password: never retried.
    InvalidLogin,
    ManagedObjectNotFound {
        obj: Option<MoRef>,
    },
    DuplicateName {
        name: String,
    },
    InvalidArgument {
        invalid_property: Option<String>,
    },
    InvalidProperty {
        name: String,
    },
    MethodNotFound,
    InvalidPowerState,
    InvalidState,
    InvalidRequest,
    NoPermission {
        privilege: Option<String>,
    },
    RequestCanceled,
    /// No fault object at all (a task in error without one): `message` is the provider's own
    /// description, never the server's, and is shown.
    Undescribed,
    /// Any other fault, by its vSphere type name.
    Other(String),
}

/// A fault reported by vCenter, as a SOAP fault, in `TaskInfo.error` or in a `missingSet`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    /// The vSphere type name (`ManagedObjectNotFound`).
    pub type_name: String,
    /// `faultstring` or `localizedMessage`; may be empty.
    pub message: String,
}

impl Fault {
    /// A fault without a type: what a failed task reports when it carries no fault object.
    /// `message` is the provider's description of it, shown in conditions: never pass the
    /// server's text here.
    pub fn untyped(message: &str) -> Self {
        Self {
            kind: FaultKind::Undescribed,
            type_name: String::new(),
            message: message.trim().to_string(),
        }
    }

    pub fn is_not_authenticated(&self) -> bool {
        self.kind == FaultKind::NotAuthenticated
    }
}

/// The fault as conditions and events show it: its type and the typed fields vCenter fills
/// in (the missing object, the invalid property, the privilege), never `message`, the server's
/// own text (see [`crate::vcenter::model::error::Error::server_text`]).
impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let type_name = token(&self.type_name).unwrap_or("an unrecognised fault");
        match &self.kind {
            FaultKind::ManagedObjectNotFound { obj: Some(obj) } => match token(&obj.to_string()) {
                Some(obj) => write!(f, "ManagedObjectNotFound: {obj} does not exist"),
                None => f.write_str("ManagedObjectNotFound"),
            },
            FaultKind::DuplicateName { name } if !name.is_empty() => {
                write!(
                    f,
                    "DuplicateName: an object named {:?} already exists",
                    bounded(name)
                )
            }
            FaultKind::InvalidArgument {
                invalid_property: Some(p),
            } => match token(p) {
                Some(p) => write!(f, "InvalidArgument: {p}"),
                None => f.write_str("InvalidArgument"),
            },
            FaultKind::InvalidProperty { name } => match token(name) {
                Some(name) => write!(f, "InvalidProperty: {name}"),
                None => f.write_str("InvalidProperty"),
            },
            FaultKind::NoPermission { privilege: Some(p) } => match token(p) {
                Some(p) => write!(f, "NoPermission: privilege {p} is missing"),
                None => f.write_str("NoPermission"),
            },
            FaultKind::Undescribed => f.write_str(&self.message),
            _ => f.write_str(type_name),
        }
    }
}

/// The longest server-written name or identifier a message shows.
const MAX_TOKEN: usize = 80;

/// `text` if it reads as an identifier vSphere writes (a type name, a property path, a
/// privilege, a moref: letters, digits and `._-:[]/`) and is at most [`MAX_TOKEN`]
/// characters; `None` for anything else, which is then not shown. What a server sends where a
/// typed identifier belongs is its own text, and a message must not carry that.
pub fn token(text: &str) -> Option<&str> {
    let ok = !text.is_empty()
        && text.chars().count() <= MAX_TOKEN
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-:[]/".contains(c));
    ok.then_some(text)
}

/// An inventory name as sent back in a fault, cut to [`MAX_TOKEN`] characters (shown quoted,
/// so control characters are escaped).
fn bounded(name: &str) -> String {
    let mut s: String = name.chars().take(MAX_TOKEN).collect();
    if name.chars().count() > MAX_TOKEN {
        s.push('…');
    }
    s
}
