//! SOAP at `/sdk`: the envelope, a namespace-aware XML tree, request encoding and typed faults.
pub mod encode;
pub mod fault;
pub mod xml;

pub use encode::{Xml, envelope};
pub use fault::{Fault, FaultKind};
pub use xml::Node;
