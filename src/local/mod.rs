//! Local mode (`vsphere-provider reconcile -f`): manifests from files, an in-process object store
//! persisted in a state file, the same reconcilers run to a fixed point against a real vCenter,
//! results printed.
pub mod capi;
pub mod cluster;
pub mod cpms;
pub mod deletes;
pub mod driver;
pub mod health;
pub mod ipam;
pub mod machines;
pub mod overlay;
pub mod print;
pub mod run;
pub mod store;
