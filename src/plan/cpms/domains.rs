//! What the control plane machine set planner sees of its failure domains and nodes, built from
//! the objects both shells read (zones, failure domains, the OpenShift Infrastructure, Nodes)
//! and the inventory of each server. Pure; local mode and the cluster controller share it.
use crate::api::conditions::STATUS_TRUE;
use std::collections::{BTreeMap, BTreeSet};

use super::{DomainState, NodeState};
use crate::api::control_plane_machine_set::ControlPlaneMachineSet;
use crate::api::{Infrastructure, VSphereDeploymentZone, VSphereFailureDomain};
use crate::plan::infra_domain::infra_domain_fill;
use crate::plan::placement::zone_fill;
use crate::vcenter::model::inventory::Inventory;

/// The failure domains a CPMS names, as the planner sees them, and what to say about them.
///
/// A name is a VSphereDeploymentZone; a name with no zone is looked up in the OpenShift
/// `Infrastructure` named `cluster` (`spec.platformSpec.vsphere.failureDomains`), so OpenShift
/// manifests work unchanged: such a domain exists, is for the control plane, and is ready when it
/// resolves against its server's inventory (`plan::infra_domain`). `inventories` holds the vCenter
/// of each server as the manifests name it ([`servers`]: a zone's `spec.server`, a domain's
/// `server`), when it could be read.
pub fn domain_states(
    cpms: &ControlPlaneMachineSet,
    zones: &BTreeMap<String, VSphereDeploymentZone>,
    fds: &BTreeMap<String, VSphereFailureDomain>,
    infra: Option<&Infrastructure>,
    inventories: &BTreeMap<String, Inventory>,
) -> Domains {
    let inventory = |server: &str| inventories.get(server);
    let mut out = Domains::default();
    for name in cpms.spec.vsphere_failure_domains() {
        if let Some(z) = zones.get(name) {
            let fd = z.spec.failure_domain_name().and_then(|f| fds.get(f));
            let server = z.spec.server.as_deref().unwrap_or_default();
            // Why a zone does not resolve is kept (as for Infrastructure domains): the set's
            // events name it instead of a machine silently not being placed.
            let fill = match inventory(server) {
                None => {
                    out.problems.insert(
                        name.to_string(),
                        format!(
                            "VSphereDeploymentZone {name}: the inventory of server {server:?} could not be read"
                        ),
                    );
                    None
                }
                Some(inv) => match zone_fill(z, fd, inv) {
                    Ok(f) => Some(f),
                    Err(e) => {
                        out.problems.insert(
                            name.to_string(),
                            format!("VSphereDeploymentZone {name}: {}: {}", e.field, e.message),
                        );
                        None
                    }
                },
            };
            out.states.insert(
                name.to_string(),
                DomainState {
                    exists: true,
                    ready: z.status.as_ref().and_then(|s| s.ready) == Some(true),
                    control_plane: z.spec.is_control_plane(),
                    fill,
                },
            );
            continue;
        }
        let Some((infra, d)) = infra.and_then(|i| Some((i, i.vsphere_failure_domain(name)?)))
        else {
            continue;
        };
        let fill = match inventory(&d.server) {
            None => {
                out.problems.insert(
                    name.to_string(),
                    format!(
                        "failure domain {name:?} of Infrastructure {}: the inventory of server {:?} could not be read",
                        infra.metadata.name.as_deref().unwrap_or_default(),
                        d.server
                    ),
                );
                None
            }
            Some(inv) => match infra_domain_fill(infra, name, inv) {
                Ok(Some(f)) => {
                    if !f.notes.is_empty() {
                        out.notes.insert(name.to_string(), f.notes.join("; "));
                    }
                    Some(f.fill)
                }
                Ok(None) => None,
                Err(e) => {
                    out.problems.insert(name.to_string(), e.to_string());
                    None
                }
            },
        };
        out.infra.insert(name.to_string());
        out.states.insert(
            name.to_string(),
            DomainState {
                exists: true,
                ready: fill.is_some(),
                control_plane: true,
                fill,
            },
        );
    }
    out
}

/// The domains of one CPMS ([`domain_states`]).
#[derive(Debug, Default)]
pub struct Domains {
    pub states: BTreeMap<String, DomainState>,
    /// Domains from the Infrastructure (not deployment zones).
    pub infra: BTreeSet<String>,
    /// Why an Infrastructure domain is not ready, by domain.
    pub problems: BTreeMap<String, String>,
    /// A default taken for an Infrastructure domain, by domain.
    pub notes: BTreeMap<String, String>,
}

/// The vCenter server of each failure domain the set names, as the manifests name it: a zone's
/// `spec.server`, else the Infrastructure domain's `server` (the shells read each one's
/// inventory for [`domain_states`]).
pub fn servers(
    cpms: &ControlPlaneMachineSet,
    zones: &BTreeMap<String, VSphereDeploymentZone>,
    infra: Option<&Infrastructure>,
) -> BTreeSet<String> {
    cpms.spec
        .vsphere_failure_domains()
        .into_iter()
        .filter_map(|name| match zones.get(name) {
            Some(z) => z.spec.server.clone(),
            None => infra
                .and_then(|i| i.vsphere_failure_domain(name))
                .map(|d| d.server.clone()),
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// Node readiness as the planner sees it.
pub fn node_states(
    nodes: &BTreeMap<String, k8s_openapi::api::core::v1::Node>,
) -> BTreeMap<String, NodeState> {
    nodes
        .iter()
        .map(|(name, n)| {
            let ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
            let labels = n.metadata.labels.clone().unwrap_or_default();
            (
                name.clone(),
                NodeState {
                    ready: ready.is_some_and(|c| c.status == STATUS_TRUE),
                    ready_transition: ready.and_then(|c| c.last_transition_time.clone()),
                    control_plane: labels.contains_key("node-role.kubernetes.io/master")
                        || labels.contains_key("node-role.kubernetes.io/control-plane"),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::control_plane_machine_set::ControlPlaneMachineSetStrategyType as Strategy;

    fn zone(name: &str, server: &str) -> VSphereDeploymentZone {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "VSphereDeploymentZone",
            "metadata": {"name": name},
            "spec": {"server": server, "failureDomain": format!("fd-{name}"), "placementConstraint": {}},
            "status": {"ready": true}
        }))
        .unwrap()
    }

    /// A zone that cannot be resolved says why, by zone: an unreadable inventory names the
    /// server; a zone whose failure domain does not resolve names the field.
    #[test]
    fn why_a_zone_does_not_resolve_is_kept() {
        let cpms = super::super::tests::cpms(&["a", "b"], Strategy::RollingUpdate);
        let zones = BTreeMap::from([
            ("a".to_string(), zone("a", "vc-down")),
            ("b".to_string(), zone("b", "vc-up")),
        ]);
        let inventories = BTreeMap::from([("vc-up".to_string(), Inventory::default())]);
        let d = domain_states(&cpms, &zones, &BTreeMap::new(), None, &inventories);
        assert!(d.states["a"].fill.is_none() && d.states["b"].fill.is_none());
        assert!(
            d.problems["a"].contains("\"vc-down\" could not be read"),
            "{:?}",
            d.problems
        );
        assert!(
            d.problems["b"].starts_with("VSphereDeploymentZone b: "),
            "{:?}",
            d.problems
        );
    }
}
