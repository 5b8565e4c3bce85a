//! The vCenter data the rest of the program reasons about: plain values and pure functions, no
//! I/O. Planners (`plan/`) see vCenter only through this module; the transport (client, SOAP
//! and REST sessions, the per-area call modules) produces and consumes these values.
//!
//! Rule (checked by `tests/module_graph.rs`): a module here refers only to other `model`
//! modules (and to std, serde and pure value crates), never to the transport.
pub mod cluster;
pub mod endpoint;
pub mod error;
pub mod fault;
pub mod inventory;
pub mod moref;
pub mod tag_id;
pub mod tags;
pub mod task;
pub mod trust;
pub mod vm;
