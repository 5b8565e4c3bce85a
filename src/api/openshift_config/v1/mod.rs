//! `config.openshift.io/v1`.

pub mod infrastructure;
