//! The former home of the v1beta2 types, kept so existing paths compile: the types now live in
//! [`super::infrastructure::v1beta2`] (one file per kind) and the conversion in
//! [`super::conversion`].

use serde_json::Value;

pub use super::infrastructure::v1beta2::common::{DeprecatedStatus, DeprecatedV1Beta1Status};
pub use super::infrastructure::v1beta2::*;

/// `value` in the storage version (v1beta1), for code written against it (admission rules,
/// the manifest loader): a v1beta2 object of a kind served here is converted; anything else
/// comes back unchanged, and so does an object that cannot be converted (decoding it then says
/// what is wrong; [`super::conversion::convert`] names the field).
pub fn to_v1beta1(value: &Value) -> Value {
    to(value, super::infrastructure::TYPED_API_VERSION)
}

/// `value` at v1beta2, the inverse of [`to_v1beta1`].
pub fn to_v1beta2(value: &Value) -> Value {
    to(value, API_VERSION)
}

fn to(value: &Value, desired: &str) -> Value {
    let api_version = value.get("apiVersion").and_then(Value::as_str);
    let ours = api_version.is_some_and(|v| v.starts_with("infrastructure.cluster.x-k8s.io/"));
    if !ours || api_version == Some(desired) {
        return value.clone();
    }
    super::conversion::convert(value, desired).unwrap_or_else(|_| value.clone())
}
