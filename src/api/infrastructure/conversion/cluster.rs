//! VSphereCluster, VSphereClusterTemplate and VSphereClusterIdentity. The specs are the same
//! JSON; the cluster's status follows the v1beta2 InfraCluster contract: `ready` becomes
//! `initialization.provisioned` and the failure-domain map a list sorted by name.

use serde_json::{Map, Value};

use super::{Direction, FieldError, Kind, put, relocate, status_conditions, take};

pub(super) fn map(kind: Kind, object: &mut Value, direction: Direction) -> Result<(), FieldError> {
    match kind {
        Kind::VSphereCluster => {
            status_conditions(object, direction);
            provisioned(object, direction);
            failure_domains(object, direction)
        }
        Kind::VSphereClusterIdentity => {
            status_conditions(object, direction);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// v1beta1 `status.ready` ↔ v1beta2 `status.initialization.provisioned`. This provider's
/// v1beta1 status already has `initialization` (the controllers write both for CAPI): where it
/// says something, it wins over `ready`.
pub(super) fn provisioned(object: &mut Value, direction: Direction) {
    match direction {
        Direction::Up => {
            if object
                .pointer("/status/initialization/provisioned")
                .is_some()
            {
                take(object, "/status/ready");
            } else {
                relocate(
                    object,
                    "/status/ready",
                    "/status/initialization/provisioned",
                );
            }
        }
        Direction::Down => {
            if let Some(p) = object
                .pointer("/status/initialization/provisioned")
                .cloned()
            {
                put(object, "/status/ready", p);
            }
        }
    }
}

/// v1beta1's `{name: {controlPlane, attributes}}` ↔ v1beta2's `[{name, controlPlane,
/// attributes}]`, sorted by name as the contract wants.
fn failure_domains(object: &mut Value, direction: Direction) -> Result<(), FieldError> {
    let Some(domains) = take(object, "/status/failureDomains") else {
        return Ok(());
    };
    let field = || "status.failureDomains".to_string();
    let converted = match (direction, domains) {
        (Direction::Up, Value::Object(by_name)) => {
            let mut list = Vec::new();
            for (name, domain) in by_name {
                let Value::Object(mut fields) = domain else {
                    return Err((
                        format!("status.failureDomains.{name}"),
                        "not an object".into(),
                    ));
                };
                fields.insert("name".into(), Value::String(name));
                list.push(Value::Object(fields));
            }
            list.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
            Value::Array(list)
        }
        (Direction::Down, Value::Array(list)) => {
            let mut by_name = Map::new();
            for (i, domain) in list.into_iter().enumerate() {
                let at = || format!("status.failureDomains[{i}]");
                let Value::Object(mut fields) = domain else {
                    return Err((at(), "not an object".into()));
                };
                let Some(Value::String(name)) = fields.remove("name") else {
                    return Err((at(), "no name".into()));
                };
                if by_name.contains_key(&name) {
                    return Err((at(), format!("a second failure domain named {name:?}")));
                }
                by_name.insert(name, Value::Object(fields));
            }
            Value::Object(by_name)
        }
        (Direction::Up, _) => return Err((field(), "not a map".into())),
        (Direction::Down, _) => return Err((field(), "not a list".into())),
    };
    put(object, "/status/failureDomains", converted);
    Ok(())
}
