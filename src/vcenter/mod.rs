//! The hand-written vCenter client: SOAP at `/sdk` and vAPI REST for tagging, over reqwest with
//! rustls. Round trips are the cost that matters, so reads are batched (one bulk inventory read,
//! one `configurationEx` read for many clusters, one tag-attachment read for many objects) and
//! every request is counted per method in [`stats::Stats`].
//!
//! Layers, each depending only on the ones before it (checked by `tests/module_graph.rs`):
//!
//! * [`model`] — the data: morefs, faults, errors, server addresses and TLS trust, the inventory
//!   snapshot and its path resolution, cluster groups and rules, clone specs, tasks, tags. Plain
//!   values and pure functions; planners (`plan/`) see vCenter only through it.
//! * [`soap`] — the wire codec, no I/O: XML tree, request writer, moref and fault decoding.
//! * transport — [`credentials`], [`stats`], [`tls`] (the policy as rustls), [`http`] (the
//!   exchange with retries), [`rest`] (the REST session), [`client`] (the SOAP session and the
//!   [`Client`] handle), [`session`] (clients cached per server and user).
//! * the calls, one module per area, each an `impl Client` that encodes requests and decodes
//!   answers into `model` values: [`property`] (the collector), [`inventory`], [`cluster`],
//!   [`vm`], [`task`], [`search`], [`rest::tagging`], [`tags`] (the tag catalog fill),
//!   [`updates`] (`WaitForUpdatesEx` and its filters).
//! * [`watcher`] — one long poll per client: a task that keeps the collector's filters in line
//!   with the objects callers want watched and reports their changes.
pub mod model;
pub mod soap;

pub mod client;
pub mod credentials;
pub mod http;
pub mod idle_cache;
pub mod rest;
pub mod session;
pub mod stats;
pub mod tls;

pub mod cluster;
pub mod inventory;
pub mod property;
pub mod search;
pub mod tags;
pub mod task;
pub mod updates;
pub mod vm;
pub mod watcher;

#[cfg(test)]
mod fake_vcenter;
#[cfg(test)]
mod request_encoding_tests;

pub use client::Client;
pub use credentials::Credentials;
pub use http::{ClientOptions, RetryPolicy};
pub use model::endpoint::Endpoint;
pub use model::error::{Error, Result};
pub use model::inventory::{Inventory, Wanted};
pub use model::moref::MoRef;
pub use model::trust::TlsPolicy;
pub use stats::{CallKind, Stats};
