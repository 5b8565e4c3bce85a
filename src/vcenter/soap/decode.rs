//! Reading the general vSphere values out of the XML tree: managed object references and
//! faults (a SOAP fault, `TaskInfo.error`, a `missingSet` entry). The types are plain data in
//! `model`; each area module decodes its own values (cluster configuration, task info, devices).
use super::xml::Node;
use crate::vcenter::model::fault::{Fault, FaultKind};
use crate::vcenter::model::moref::MoRef;

impl MoRef {
    /// Read a moref from an element such as `<obj type="Folder">group-d1</obj>`.
    pub fn from_node(node: &Node) -> Option<Self> {
        let kind = node.type_attr.clone()?;
        let value = node.text.trim();
        (!value.is_empty()).then(|| Self::new(kind, value))
    }
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
