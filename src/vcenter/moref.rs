//! Managed object references: the opaque `(type, value)` handles vCenter gives every object.
use std::fmt;

use super::soap::xml::Node;

/// A managed object reference such as `ClusterComputeResource:domain-c7`.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct MoRef {
    /// The managed object type (`Datacenter`, `VirtualMachine`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// The server-assigned value; opaque, never parsed.
    pub value: String,
}

impl MoRef {
    pub fn new(kind: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            value: value.into(),
        }
    }

    /// Read a moref from an element such as `<obj type="Folder">group-d1</obj>`.
    pub fn from_node(node: &Node) -> Option<Self> {
        let kind = node.type_attr.clone()?;
        let value = node.text.trim();
        (!value.is_empty()).then(|| Self::new(kind, value))
    }
}

impl fmt::Display for MoRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.value)
    }
}
