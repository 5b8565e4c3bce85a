//! `infrastructure.cluster.x-k8s.io`: Cluster API's infrastructure group, CAPV's kinds, laid out
//! as CAPV's `apis/govmomi/v1beta1|v1beta2`.
//!
//! * [`v1beta2`] is the hub and the storage version (CAPV v1.16+ stores it too).
//! * [`v1beta1`] is still served, deprecated, for clients and manifests written against it.
//! * [`conversion`] is the only code that knows both: the webhook's `POST /convert`, the
//!   manifest loader and admission call it at the edge.

pub mod conversion;
pub mod v1beta1;
pub mod v1beta2;

/// `infrastructure.cluster.x-k8s.io/v1beta1`.
pub const V1BETA1: &str = v1beta1::API_VERSION;

/// `infrastructure.cluster.x-k8s.io/v1beta2`: the hub every conversion goes through, the
/// version of every Rust type the planners, controllers, admission rules and local mode work
/// on, and the version the API server stores (as CAPV v1.16+ does; objects stored as v1beta1
/// by earlier releases are rewritten by the manager's storage migration,
/// [`crate::controllers::storage_migration`]).
pub const HUB: &str = v1beta2::API_VERSION;
