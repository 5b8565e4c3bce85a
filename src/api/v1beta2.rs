//! The former home of the v1beta2 types, kept so existing paths compile: the types now live in
//! [`super::infrastructure::v1beta2`] (one file per kind) and the conversion in
//! [`super::conversion`] (an object at its kind's Rust type: `conversion::to_typed`).

pub use super::infrastructure::v1beta2::common::{DeprecatedStatus, DeprecatedV1Beta1Status};
pub use super::infrastructure::v1beta2::*;
