//! vSphere faults, classified by the `xsi:type` of the fault object, never by `faultstring`
//! (vcsim leaves it empty for several faults; real vCenter localises it).
use std::fmt;

use super::xml::Node;
use crate::vcenter::moref::MoRef;

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
    /// Build from the fault object element (the one carrying `xsi:type`) and a message.
    pub fn from_object(object: &Node, message: &str) -> Self {
        let type_name = object
            .xsi_type
            .clone()
            .or_else(|| object.name.strip_suffix("Fault").map(str::to_string))
            .unwrap_or_else(|| object.name.clone());
        let kind = match type_name.as_str() {
            "NotAuthenticated" => FaultKind::NotAuthenticated,
            "InvalidLogin" => FaultKind::InvalidLogin,
            "ManagedObjectNotFound" => FaultKind::ManagedObjectNotFound {
                obj: object.child("obj").and_then(MoRef::from_node),
            },
            "DuplicateName" => FaultKind::DuplicateName {
                name: object.child_text("name").unwrap_or_default().to_string(),
            },
            "InvalidArgument" => FaultKind::InvalidArgument {
                invalid_property: object
                    .child_text("invalidProperty")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            },
            "InvalidProperty" => FaultKind::InvalidProperty {
                name: object.child_text("name").unwrap_or_default().to_string(),
            },
            "MethodNotFound" => FaultKind::MethodNotFound,
            "InvalidPowerState" => FaultKind::InvalidPowerState,
            "InvalidState" => FaultKind::InvalidState,
            "InvalidRequest" => FaultKind::InvalidRequest,
            "NoPermission" => FaultKind::NoPermission {
                privilege: object.child_text("privilegeId").map(str::to_string),
            },
            "RequestCanceled" => FaultKind::RequestCanceled,
            other => FaultKind::Other(other.to_string()),
        };
        Self {
            kind,
            type_name,
            message: message.trim().to_string(),
        }
    }

    /// Parse `soapenv:Fault` (the element itself).
    pub fn from_soap_fault(fault: &Node) -> Self {
        let message = fault.child_text("faultstring").unwrap_or_default();
        match fault.child("detail").and_then(|d| d.children.first()) {
            Some(object) => Self::from_object(object, message),
            None => Self {
                kind: FaultKind::Other("SOAP fault".into()),
                type_name: fault.child_text("faultcode").unwrap_or("Fault").to_string(),
                message: message.trim().to_string(),
            },
        }
    }

    /// Parse a `LocalizedMethodFault` (`TaskInfo.error`, `missingSet/fault`): `{fault, localizedMessage}`.
    pub fn from_localized(error: &Node) -> Self {
        let message = error.child_text("localizedMessage").unwrap_or_default();
        match error.child("fault") {
            Some(object) => Self::from_object(object, message),
            None => Self {
                kind: FaultKind::Other("unknown".into()),
                type_name: "unknown".into(),
                message: message.to_string(),
            },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::soap::xml::parse;

    fn soap_fault(doc: &str) -> Fault {
        let root = parse(doc).unwrap();
        Fault::from_soap_fault(root.find("Fault").unwrap())
    }

    #[test]
    fn not_authenticated_has_an_empty_faultstring_on_vcsim() {
        let f = soap_fault(
            r#"<e:Envelope xmlns:e="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><e:Body><e:Fault><faultcode>ServerFaultCode</faultcode><faultstring></faultstring><detail><NotAuthenticatedFault xmlns="urn:vim25" xsi:type="NotAuthenticated"><object type="SearchIndex">SearchIndex</object><privilegeId>System.View</privilegeId></NotAuthenticatedFault></detail></e:Fault></e:Body></e:Envelope>"#,
        );
        assert!(f.is_not_authenticated());
        assert_eq!(f.to_string(), "NotAuthenticated");
    }

    #[test]
    fn managed_object_not_found_names_the_object() {
        let f = soap_fault(
            r#"<Envelope xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><Body><Fault><faultstring>managed object not found: VirtualMachine:vm-9999</faultstring><detail><ManagedObjectNotFoundFault xmlns="urn:vim25" xsi:type="ManagedObjectNotFound"><obj type="VirtualMachine">vm-9999</obj></ManagedObjectNotFoundFault></detail></Fault></Body></Envelope>"#,
        );
        assert_eq!(
            f.kind,
            FaultKind::ManagedObjectNotFound {
                obj: Some(MoRef::new("VirtualMachine", "vm-9999"))
            }
        );
        assert!(f.to_string().contains("VirtualMachine:vm-9999"));
    }

    #[test]
    fn task_error_uses_the_nested_fault_type() {
        let root = parse(
            r#"<error xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance"><fault XMLSchema-instance:type="InvalidPowerState"><requestedState>poweredOn</requestedState></fault><localizedMessage>*types.InvalidPowerState</localizedMessage></error>"#,
        )
        .unwrap();
        let f = Fault::from_localized(&root);
        assert_eq!(f.kind, FaultKind::InvalidPowerState);
        assert_eq!(f.to_string(), "InvalidPowerState");
    }
}
