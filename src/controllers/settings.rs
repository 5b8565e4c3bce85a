//! The controllers' fixed settings, in a leaf module (every controller reads them; the
//! facade `controllers/mod.rs` only re-exports).
use std::time::Duration;

/// The field manager of every write this provider makes (server-side apply owner).
pub const FIELD_MANAGER: &str = "vsphere-provider";

/// A reconcile that finds a cache it reads not loaded yet comes back this soon (and changes
/// nothing meanwhile).
pub const NOT_SYNCED_REQUEUE: Duration = Duration::from_secs(2);
