//! Local mode (`vsphere-provider reconcile -f`): manifests from files, an in-process store, the
//! same reconcilers run to a fixed point against a real vCenter, results printed.
pub mod driver;
pub mod print;
pub mod store;
