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
    pub fn untyped(message: &str) -> Self {
        Self {
            kind: FaultKind::Other(String::new()),
            type_name: String::new(),
            message: message.trim().to_string(),
        }
    }

    pub fn is_not_authenticated(&self) -> bool {
        self.kind == FaultKind::NotAuthenticated
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // vcsim's localized messages are Go type names (`*types.InvalidArgument`); they add nothing.
        let message = self.message.trim_start_matches("*types.");
        match &self.kind {
            FaultKind::ManagedObjectNotFound { obj: Some(obj) } => {
                write!(f, "ManagedObjectNotFound: {obj} does not exist")
            }
            FaultKind::DuplicateName { name } if !name.is_empty() => {
                write!(f, "DuplicateName: an object named {name:?} already exists")
            }
            FaultKind::InvalidArgument {
                invalid_property: Some(p),
            } => write!(f, "InvalidArgument: {p}"),
            FaultKind::InvalidProperty { name } => write!(f, "InvalidProperty: {name}"),
            _ if message.is_empty() || message == self.type_name => write!(f, "{}", self.type_name),
            _ => write!(f, "{}: {}", self.type_name, message),
        }
    }
}
