//! SOAP at `/sdk`, the wire codec (no I/O): the envelope and request writer, a namespace-aware
//! XML tree, and decoding of the general vSphere values (morefs, faults) into `model` types.
pub mod decode;
pub mod encode;
pub mod xml;

pub use encode::{Xml, envelope};
pub use xml::Node;
