//! Pure planners: inputs in, decisions out. No I/O, no clock (time is an input). Every decision
//! the controllers make lives here and is tested with tables.
pub mod capi_machine;
pub mod cluster;
pub mod cpms;
pub mod credentials;
pub mod failure;
pub mod health;
pub mod infra_domain;
pub mod ipam;
pub mod machine;
pub mod placement;
pub mod selector;
pub mod storage_version;
pub mod view;
pub mod vm_size;
pub mod zone;
pub mod zone_status;
