//! Which Node is a machine's (machine-api-operator's nodelink): the Node whose
//! `spec.providerID` equals the machine's, else one with no providerID yet sharing an internal
//! IP address; and which linked Node the manager may drain and delete.
//!
//! The guest reports its own addresses, and whoever supplies a machine's user data controls the
//! guest, so an IP address is a claim, not proof. Linking by IP (for `status.nodeRef`, the
//! machine's phase and health checks) is kept for a kubelet that has registered before the
//! cloud provider set its providerID, but only to a Node with no providerID: one whose
//! providerID is set and differs is another VM's. Draining and deleting need proof
//! ([`may_drain_and_delete`]).
use k8s_openapi::api::core::v1::{Node, NodeAddress};

use crate::api::machine::Machine;

/// Provider IDs compare without case and without the `vsphere://` scheme's slashes mattering
/// (kubelets have written both `vsphere://` and `vsphere:///` over the years).
fn same_provider_id(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        s.trim()
            .trim_start_matches("vsphere:")
            .trim_start_matches('/')
            .to_ascii_lowercase()
    };
    !norm(a).is_empty() && norm(a) == norm(b)
}

fn node_provider_id(n: &Node) -> Option<&str> {
    n.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.trim().is_empty())
}

/// The providerID of the machine's VM as vCenter knows it (`vsphere://<BIOS UUID>`): from the
/// VM read this pass, else from the BIOS UUID the machine's status recorded when the VM was
/// last read (a deleted VM's Node is removed after the VM). Never the Machine's
/// `spec.providerID`: a tenant can write that one, and a Node is drained and deleted on the
/// strength of this one.
pub fn vcenter_provider_id(m: &Machine, vm: Option<&super::VmObs>) -> Option<String> {
    vm.and_then(|v| v.bios_uuid.clone())
        .or_else(|| super::provider_status(m).instance_id)
        .filter(|b| !b.trim().is_empty())
        .map(|b| super::create::provider_id(&b))
}

/// Whether the manager may cordon, drain and delete `node` for a machine whose providerID (as
/// vCenter knows it: [`vcenter_provider_id`]) is `machine_pid`: only if the Node's providerID
/// is the machine's. A Node linked by IP alone
/// (its providerID still empty) is not enough: the IP is what the guest says, so a tenant's
/// guest could name a control plane node. The cost of refusing is small: the cloud provider sets
/// a real kubelet's providerID seconds after it registers, and a Node left behind by a deleted
/// VM is removed by the cloud provider's node lifecycle controller. `Err` says why, for the
/// machine's condition and event.
pub fn may_drain_and_delete(node: &Node, machine_pid: Option<&str>) -> Result<(), String> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let machine_pid = machine_pid.unwrap_or_default();
    match node_provider_id(node) {
        Some(p) if same_provider_id(p, machine_pid) => Ok(()),
        Some(p) => Err(format!(
            "Node {name} is not drained or deleted: its spec.providerID {p} is not this machine's ({})",
            if machine_pid.is_empty() {
                "none"
            } else {
                machine_pid
            }
        )),
        None => Err(format!(
            "Node {name} is not drained or deleted: its spec.providerID is empty, so only its IP address (which the guest reports) links it to this machine"
        )),
    }
}

/// The machine's Node, if one has registered.
pub fn find_node<'n>(
    provider_id: Option<&str>,
    addresses: &[NodeAddress],
    nodes: &'n [Node],
) -> Option<&'n Node> {
    if let Some(pid) = provider_id
        && let Some(n) = nodes.iter().find(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .is_some_and(|p| same_provider_id(p, pid))
        })
    {
        return Some(n);
    }
    let ips: Vec<&str> = addresses
        .iter()
        .filter(|a| a.type_ == "InternalIP" && !a.address.is_empty())
        .map(|a| a.address.as_str())
        .collect();
    if ips.is_empty() {
        return None;
    }
    nodes
        .iter()
        .filter(|n| node_provider_id(n).is_none())
        .find(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .is_some_and(|addrs| {
                    addrs
                        .iter()
                        .any(|a| a.type_ == "InternalIP" && ips.contains(&a.address.as_str()))
                })
        })
}

/// The machines whose Node `node` is and that have none linked yet (no `status.nodeRef`, not
/// deleting), matched as [`find_node`] matches: by provider ID, else by internal IP. The Node's
/// arrival wakes these; every other Node change (status heartbeats, labels) wakes nobody.
pub fn machines_awaiting<'m>(
    node: &Node,
    machines: impl IntoIterator<Item = &'m Machine>,
) -> Vec<&'m Machine> {
    machines
        .into_iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .filter(|m| m.status.as_ref().is_none_or(|s| s.node_ref.is_none()))
        .filter(|m| {
            let addresses = m
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_deref())
                .unwrap_or_default();
            find_node(
                m.spec.provider_id.as_deref(),
                addresses,
                std::slice::from_ref(node),
            )
            .is_some()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::node;
    use super::*;

    #[test]
    fn provider_id_first_then_internal_ip() {
        let nodes = [
            node("by-ip", None, Some("10.0.0.5")),
            node("by-id", Some("vsphere:///4211-ABC"), Some("10.0.0.6")),
        ];
        let ip = |a: &str| NodeAddress {
            type_: "InternalIP".into(),
            address: a.into(),
        };
        let found = |pid, addrs: &[NodeAddress]| {
            find_node(pid, addrs, &nodes).and_then(|n| n.metadata.name.clone())
        };
        assert_eq!(
            found(Some("vsphere://4211-abc"), &[ip("10.0.0.5")]).as_deref(),
            Some("by-id")
        );
        assert_eq!(
            found(Some("vsphere://other"), &[ip("10.0.0.5")]).as_deref(),
            Some("by-ip")
        );
        assert_eq!(found(None, &[ip("10.0.0.7")]), None);
        assert_eq!(
            found(Some("vsphere://mine"), &[ip("10.0.0.6")]),
            None,
            "a Node whose providerID is another VM's is never linked by IP"
        );
        assert_eq!(
            found(Some(""), &[]),
            None,
            "an empty provider ID links nothing"
        );
    }

    #[test]
    fn only_a_node_with_the_machines_provider_id_is_drained_or_deleted() {
        let pid = Some("vsphere://4211-abc");
        let cases: [(Option<&str>, Option<&str>, bool, &str); 7] = [
            // (Node's providerID, machine's providerID, allowed, message contains)
            (Some("vsphere://4211-abc"), pid, true, ""),
            (Some("vsphere:///4211-ABC"), pid, true, ""),
            (
                Some("vsphere://victim"),
                pid,
                false,
                "spec.providerID vsphere://victim is not this machine's (vsphere://4211-abc)",
            ),
            (None, pid, false, "spec.providerID is empty"),
            (Some("  "), pid, false, "spec.providerID is empty"),
            (
                Some("vsphere://4211-abc"),
                None,
                false,
                "is not this machine's (none)",
            ),
            (Some(""), Some(""), false, "spec.providerID is empty"),
        ];
        for (node_pid, machine_pid, allowed, why) in cases {
            let n = node("n-1", node_pid, Some("10.0.0.5"));
            let got = may_drain_and_delete(&n, machine_pid);
            assert_eq!(
                got.is_ok(),
                allowed,
                "{node_pid:?} vs {machine_pid:?}: {got:?}"
            );
            if let Err(e) = got {
                assert!(e.starts_with("Node n-1 is not drained or deleted"), "{e}");
                assert!(e.contains(why), "{e}");
            }
        }
    }

    #[test]
    fn a_nodes_arrival_concerns_only_the_machines_waiting_for_it() {
        use crate::api::machine::MachineStatus;
        use k8s_openapi::api::core::v1::ObjectReference;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

        let with = |name: &str, pid: Option<&str>, ip: Option<&str>| {
            let mut m = super::super::tests::machine(name);
            m.spec.provider_id = pid.map(str::to_string);
            m.status = Some(MachineStatus {
                addresses: ip.map(|a| {
                    vec![NodeAddress {
                        type_: "InternalIP".into(),
                        address: a.into(),
                    }]
                }),
                ..Default::default()
            });
            m
        };
        let by_id = with("by-id", Some("vsphere://4211-abc"), None);
        let by_ip = with("by-ip", None, Some("10.0.0.5"));
        let other = with("other", Some("vsphere://4211-def"), Some("10.0.0.9"));
        let mut linked = with("linked", Some("vsphere://4211-abc"), None);
        linked.status.as_mut().unwrap().node_ref = Some(ObjectReference {
            name: Some("n".into()),
            ..Default::default()
        });
        let mut deleting = with("deleting", Some("vsphere://4211-abc"), None);
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let all = [&by_id, &by_ip, &other, &linked, &deleting];
        let names = |n: &Node| -> Vec<String> {
            machines_awaiting(n, all)
                .into_iter()
                .map(|m| m.metadata.name.clone().unwrap())
                .collect()
        };
        // By provider ID (either spelling of the scheme); linked and deleting machines are
        // not woken.
        assert_eq!(
            names(&node("n", Some("vsphere:///4211-ABC"), None)),
            ["by-id"]
        );
        // By IP only while the Node has no provider ID of its own.
        assert_eq!(names(&node("n", None, Some("10.0.0.5"))), ["by-ip"]);
        assert!(names(&node("n", Some("vsphere:///4211-xyz"), Some("10.0.0.5"))).is_empty());
        assert!(names(&node("n", None, None)).is_empty());
    }
}
