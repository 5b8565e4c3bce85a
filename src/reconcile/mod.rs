//! The core both shells drive (`run` in a cluster, `reconcile` on files): gather a vCenter view
//! in a fixed number of bulk reads, plan (pure, `plan::zone`), execute the changes autoConfigure
//! asks for, and repeat until nothing is left to change.
//!
//! * [`server`] — the per-server driver: view cache and write lock ([`views`]), the fixed point.
//! * [`zones`] — zones as a sweep of that driver, for local mode and for the controller.
//! * [`gather`] — the bulk reads; [`execute`] — the only vCenter writes. Both keep vCenter
//!   errors typed ([`crate::plan::failure::Failure`]) so "retry later" and "failed" are told
//!   apart from the error's type.
pub mod cpms;
pub mod execute;
pub mod gather;
pub mod health;
pub mod kube_ops;
pub mod machines;
pub mod server;
pub mod views;
pub mod zones;
