//! VSphereMachine, VSphereMachineTemplate and VSphereVM: the clone spec's renames
//! (`guestSoftPowerOffTimeout` Duration ↔ `guestSoftPowerOffTimeoutSeconds`,
//! `namingStrategy` ↔ `naming`), the machine's `ready` ↔ `initialization.provisioned`, and the
//! conditions and failure fields every kind moves. v1beta1-only fields (VSphereMachine
//! `failureDomain`, `network.preferredAPIServerCidr`, the full `bootstrapRef`) are pruned by
//! the mapping and kept by [`super::convert`].

use serde_json::Value;

use super::duration::{format_seconds, parse_seconds};
use super::{Direction, FieldError, Kind, put, relocate, status_conditions, take};

/// The clone spec's fields v1beta2 renamed, `(v1beta1, v1beta2)`; the names are the same in
/// every kind that embeds the clone spec.
pub(super) const RENAMED: [(&str, &str); 2] = [
    (
        "guestSoftPowerOffTimeout",
        "guestSoftPowerOffTimeoutSeconds",
    ),
    ("namingStrategy", "naming"),
];

pub(super) fn map(kind: Kind, object: &mut Value, direction: Direction) -> Result<(), FieldError> {
    let spec = match kind {
        Kind::VSphereMachineTemplate => "/spec/template/spec",
        _ => "/spec",
    };
    let dotted = spec.trim_start_matches('/').replace('/', ".");
    power_off_timeout(object, spec, &dotted, direction)?;
    let [_, (naming_v1beta1, naming_v1beta2)] = RENAMED;
    let (naming_v1beta1, naming_v1beta2) = (
        format!("{spec}/{naming_v1beta1}"),
        format!("{spec}/{naming_v1beta2}"),
    );
    match direction {
        Direction::Up => {
            relocate(object, &naming_v1beta1, &naming_v1beta2);
            // 0 meant "the template's" in v1beta1; v1beta2 says it by omission (minimum 1).
            for field in ["numCPUs", "memoryMiB", "diskGiB"] {
                let at = format!("{spec}/{field}");
                if object.pointer(&at).and_then(Value::as_i64) == Some(0) {
                    take(object, &at);
                }
            }
        }
        Direction::Down => relocate(object, &naming_v1beta2, &naming_v1beta1),
    }
    if kind != Kind::VSphereMachineTemplate {
        status_conditions(object, direction);
    }
    if kind == Kind::VSphereMachine {
        super::cluster::provisioned(object, direction);
        if direction == Direction::Down {
            // This provider's v1beta1 VSphereMachine status has no `initialization`.
            take(object, "/status/initialization");
        }
    }
    Ok(())
}

/// v1beta1's `guestSoftPowerOffTimeout` (a Go duration) as v1beta2's
/// `guestSoftPowerOffTimeoutSeconds`: whole seconds, truncated, that fit an int32. What the
/// conversion does, for the typed v1beta1 → hub bridge that needs the same value
/// ([`crate::api::infrastructure::v1beta1::vsphere_machine`], until hub-types step 7).
pub fn power_off_timeout_seconds(text: &str) -> Result<i32, String> {
    let s = parse_seconds(text)?;
    i32::try_from(s)
        .map_err(|_| format!("{text:?} does not fit guestSoftPowerOffTimeoutSeconds (int32)"))
}

fn power_off_timeout(
    object: &mut Value,
    spec: &str,
    dotted: &str,
    direction: Direction,
) -> Result<(), FieldError> {
    let [(duration, seconds), _] = RENAMED;
    let (duration, seconds) = (format!("{spec}/{duration}"), format!("{spec}/{seconds}"));
    match direction {
        Direction::Up => {
            let Some(value) = take(object, &duration) else {
                return Ok(());
            };
            let field = || format!("{dotted}.guestSoftPowerOffTimeout");
            let text = value
                .as_str()
                .ok_or_else(|| (field(), format!("{value} is not a duration")))?;
            let s = power_off_timeout_seconds(text).map_err(|e| (field(), e))?;
            put(object, &seconds, Value::from(s));
        }
        Direction::Down => {
            let Some(value) = take(object, &seconds) else {
                return Ok(());
            };
            let s = value.as_i64().ok_or_else(|| {
                (
                    format!("{dotted}.guestSoftPowerOffTimeoutSeconds"),
                    format!("{value} is not a whole number of seconds"),
                )
            })?;
            put(object, &duration, Value::String(format_seconds(s)));
        }
    }
    Ok(())
}
