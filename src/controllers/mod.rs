//! The in-cluster shell (`vsphere-provider run`): kube-runtime controllers around the same
//! gather/plan/execute core local mode drives. See DESIGN.md §1–§2.
pub mod error;
pub mod metrics;

pub use error::Error;
