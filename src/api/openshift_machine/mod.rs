//! `machine.openshift.io`: OpenShift's Machine API kinds this provider serves.

pub mod v1;
pub mod v1beta1;
