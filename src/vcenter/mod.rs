//! The hand-written vCenter client: SOAP at `/sdk` and vAPI REST for tagging, over reqwest with
//! rustls. Round trips are the cost that matters, so reads are batched (one bulk inventory read,
//! one `configurationEx` read for many clusters, one tag-attachment read for many objects) and
//! every request is counted per method in [`stats::Stats`].
pub mod client;
pub mod cluster;
pub mod credentials;
pub mod endpoint;
pub mod error;
pub mod inventory;
pub mod moref;
pub mod property;
pub mod rest;
pub mod search;
pub mod session;
pub mod soap;
pub mod stats;
pub mod tags;
pub mod task;
pub mod tls;
pub mod vm;

pub use client::{Client, ClientOptions, RetryPolicy};
pub use credentials::Credentials;
pub use endpoint::Endpoint;
pub use error::{Error, Result};
pub use inventory::{Inventory, Wanted};
pub use moref::MoRef;
pub use stats::{CallKind, Stats};
pub use tls::TlsPolicy;
