//! VSphereFailureDomain and VSphereDeploymentZone: the specs agree but for value-typed fields
//! (v1beta2 `hosts` and `placementConstraint` are omitted when empty; v1beta1 requires the
//! zone's placement constraint), and the zone's conditions move as every kind's do.

use serde_json::{Value, json};

use super::{Direction, Kind, drop_if_empty, status_conditions, take};

pub(super) fn map(kind: Kind, object: &mut Value, direction: Direction) {
    match (kind, direction) {
        (Kind::VSphereFailureDomain, Direction::Down) => {
            // An empty v1beta2 `hosts` means "no host group", which v1beta1 says by omission.
            let unset = object
                .pointer("/spec/topology/hosts")
                .and_then(Value::as_object)
                .is_some_and(|hosts| {
                    ["vmGroupName", "hostGroupName"].iter().all(|k| {
                        hosts
                            .get(*k)
                            .and_then(Value::as_str)
                            .is_none_or(str::is_empty)
                    })
                });
            if unset {
                take(object, "/spec/topology/hosts");
            }
        }
        (Kind::VSphereDeploymentZone, Direction::Down) => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.entry("placementConstraint")
                    .or_insert_with(|| json!({}));
            }
            status_conditions(object, direction);
        }
        (Kind::VSphereDeploymentZone, Direction::Up) => {
            drop_if_empty(object, "/spec/placementConstraint");
            status_conditions(object, direction);
        }
        _ => {}
    }
}
