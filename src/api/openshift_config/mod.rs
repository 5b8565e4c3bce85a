//! `config.openshift.io`: OpenShift's cluster configuration, read only (no CRD served here).

pub mod v1;
