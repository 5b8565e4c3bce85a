//! `machine.openshift.io/v1beta1`: Machine (with its vSphere provider spec and status) and
//! MachineHealthCheck.

pub mod health_values;
pub mod machine;
pub mod machine_health_check;
pub mod machine_status;
