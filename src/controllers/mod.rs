//! The in-cluster shell (`vsphere-provider run`): kube-runtime controllers around the same
//! gather/plan/execute core local mode drives (DESIGN.md §1–§2). Everything here is thin: the
//! decisions live in `plan`, the vCenter work in `reconcile`.
//!
//! * [`zone`] — VSphereDeploymentZone (also woken by VSphereFailureDomain changes): verify and
//!   autoConfigure in vCenter, status, the failure domain's owner reference, deletion.
//! * [`cluster`] — VSphereCluster (woken by zone changes): publish ready zones as failure domains.
//! * [`cluster_identity`] — VSphereClusterIdentity: its Secret made its own (owner reference,
//!   finalizer), its status, its release on deletion.
//! * [`machine`] — OpenShift Machines, and Cluster API VSphereVMs through their stand-ins: one
//!   sweep per vCenter for both kinds.
//! * [`capi_machine`] — VSphereMachine (woken by its VSphereVM): resolve into a VSphereVM,
//!   report the VM to Cluster API.
//! * [`leader`] — leader election on a `coordination.k8s.io/v1` Lease.
//! * [`admin`] — `/metrics`, `/healthz`, `/readyz`.
//! * [`startup`] — before the controllers: the API server answers and serves every watched
//!   kind, checked again with backoff until it does (never an exit, never a crash loop).
//!
//! One watch per kind: each kind is reflected once into a shared [`Cache`], and the controllers
//! are triggered from that cache's subscription. A trigger therefore never runs ahead of the
//! caches the reconcilers read (a zone woken by its failure domain sees that failure domain).
//! The controllers start only once every cache has its initial list: kube-runtime's
//! Controller waits for its own store only, and a reconcile reading a cache that has not loaded
//! would take "not listed yet" for "none" (no Machines, so delete the zone; no zones, so
//! unpublish every failure domain).
//!
//! Files: [`context`] (what a reconcile gets), [`stores`] (the caches, as a list the readiness
//! check iterates), [`watch`] (reflectors and the status-only filter), [`runtime`] (wiring,
//! drain, leadership terms), [`entry`] (each controller's one entry point and error policy,
//! with a span naming the object), [`backoff`], [`events`], [`patch`] (the writes).
pub mod admin;
pub mod api_server;
pub mod backoff;
pub mod cache;
pub mod capi_machine;
pub mod cluster;
pub mod cluster_identity;
pub mod context;
pub mod cpms;
pub mod credentials;
pub mod entry;
pub mod error;
pub mod events;
pub mod identity_secret;
pub mod leader;
pub mod machine;
pub mod metrics;
pub mod mhc;
pub mod patch;
pub mod pause;
pub mod runtime;
pub mod secrets;
pub mod settings;
pub mod shutdown;
pub mod startup;
pub mod storage_migration;
pub mod stores;
pub mod vcenter_metrics;
pub mod watch;
pub mod zone;

pub use admin::Health;
pub use backoff::Backoff;
pub use cache::Cache;
pub(crate) use context::now;
pub use context::{Context, Shared};
pub use error::Error;
pub use metrics::Metrics;
pub use runtime::{DRAIN_TIMEOUT, controllers_under_lease, drain_within, run_controllers};
pub use settings::{FIELD_MANAGER, NOT_SYNCED_REQUEUE};
pub use shutdown::{Shutdown, ShutdownTrigger};
pub use stores::Stores;
