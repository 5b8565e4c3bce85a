//! vsphere-provider: a Kubernetes infrastructure provider for VMware vSphere.
//!
//! Data flows one way (see DESIGN.md):
//!
//! ```text
//! custom resources ──► gather ──► plan (pure) ──► execute ──► status
//! ```
//!
//! * [`api`] — custom resource types, no I/O.
//! * [`vcenter`] — our own vCenter client (SOAP + REST tagging), the only code that talks to vCenter.
//! * [`plan`] — pure planners: every decision lives there.
//! * [`controllers`] / [`local`] — the in-cluster and local-mode shells around the same core.
//! * [`webhook`] — pure validation and defaulting plus the admission server.
//! * [`cli`] — one module per subcommand.
#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod controllers;
pub mod fuzzing;
pub mod local;
pub mod plan;
pub mod reconcile;
pub mod vcenter;
pub mod webhook;
