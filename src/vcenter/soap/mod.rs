//! SOAP at `/sdk`: the envelope, a namespace-aware XML tree, request encoding and typed faults.
pub mod encode;
pub mod fault;
pub mod xml;

pub use encode::{envelope, Xml};
pub use fault::{Fault, FaultKind};
pub use xml::Node;
