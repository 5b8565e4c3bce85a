//! Reading the general vSphere values out of the XML tree: managed object references and
//! faults (a SOAP fault, `TaskInfo.error`, a `missingSet` entry). The types are plain data in
//! `model`; each area module decodes its own values (cluster configuration, task info, devices).
//!
//! A reply that lacks what the WSDL requires, or holds a value of the wrong type, is
//! [`Malformed`], never a panic and never a silently different value: each area module turns it
//! into [`Error::Decode`] naming the server and the method.
use std::str::FromStr;

use super::xml::Node;
use crate::vcenter::model::error::Error;
use crate::vcenter::model::fault::{Fault, FaultKind};
use crate::vcenter::model::moref::MoRef;

/// What is wrong with a reply: the element missing or the value that does not decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

impl Malformed {
    pub fn new(what: impl Into<String>) -> Self {
        Self(what.into())
    }

    /// The [`Error::Decode`] of `method` on `server`.
    pub fn into_error(self, server: String, method: &str) -> Error {
        Error::Decode {
            server,
            method: method.to_string(),
            reason: self.0,
        }
    }

    /// The same problem inside `context` (`in objects[2]: ...`).
    pub fn within(self, context: &str) -> Self {
        Self(format!("{context}: {}", self.0))
    }
}

/// A value for an error message: trimmed, at most 40 characters (replies can be huge).
pub fn shown(text: &str) -> String {
    let t = text.trim();
    let mut s: String = t.chars().take(40).collect();
    if t.chars().count() > 40 {
        s.push('…');
    }
    format!("{s:?}")
}

impl MoRef {
    /// Read a moref from an element such as `<obj type="Folder">group-d1</obj>`.
    pub fn from_node(node: &Node) -> Option<Self> {
        let kind = node.type_attr.clone()?;
        let value = node.text.trim();
        (!value.is_empty()).then(|| Self::new(kind, value))
    }

    /// A moref that must be one (`what` names it in the error): a `type` attribute and a value,
    /// and no `xsi:type` other than `ManagedObjectReference`.
    pub fn decode(node: &Node, what: &str) -> Result<Self, Malformed> {
        expect_type(node, &["ManagedObjectReference"], what)?;
        let kind = node
            .type_attr
            .as_deref()
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| {
                Malformed::new(format!(
                    "{what} is not a managed object reference (no type)"
                ))
            })?;
        let value = node.text.trim();
        if value.is_empty() {
            return Err(Malformed::new(format!("{what} has no value")));
        }
        Ok(Self::new(kind, value))
    }
}

/// The child `tag` of `parent`, required.
pub fn required<'a>(parent: &'a Node, tag: &str, what: &str) -> Result<&'a Node, Malformed> {
    parent
        .child(tag)
        .ok_or_else(|| Malformed::new(format!("{what} without {tag}")))
}

/// Check the `xsi:type` of a value when it carries one: one of `expected` (an element without
/// `xsi:type` is its declared type).
pub fn expect_type(node: &Node, expected: &[&str], what: &str) -> Result<(), Malformed> {
    match node.xsi_type.as_deref() {
        Some(t) if !expected.contains(&t) => Err(Malformed::new(format!(
            "{what} is a {t}, not a {}",
            expected.join(" or ")
        ))),
        _ => Ok(()),
    }
}

/// A number (`xsd:int`, `xsd:long`): present text that does not parse is an error.
pub fn number<T: FromStr>(node: &Node, what: &str) -> Result<T, Malformed> {
    node.text.trim().parse().map_err(|_| {
        Malformed::new(format!(
            "{what} {} is not a number in range",
            shown(&node.text)
        ))
    })
}

/// The optional number child `tag` of `parent`.
pub fn optional_number<T: FromStr>(
    parent: &Node,
    tag: &str,
    what: &str,
) -> Result<Option<T>, Malformed> {
    parent.child(tag).map(|n| number(n, what)).transpose()
}

/// An `xsd:boolean` (`true`, `false`, `1`, `0`).
pub fn boolean(node: &Node, what: &str) -> Result<bool, Malformed> {
    match node.text.trim() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        other => Err(Malformed::new(format!(
            "{what} {} is not a boolean",
            shown(other)
        ))),
    }
}

/// The optional boolean child `tag` of `parent`.
pub fn optional_boolean(parent: &Node, tag: &str, what: &str) -> Result<Option<bool>, Malformed> {
    parent.child(tag).map(|n| boolean(n, what)).transpose()
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
