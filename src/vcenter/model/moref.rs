//! Managed object references: the opaque `(type, value)` handles vCenter gives every object.
//! (Read from a SOAP answer by `soap::decode`.)
use std::fmt;

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
}

impl fmt::Display for MoRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.value)
    }
}
