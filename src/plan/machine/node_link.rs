//! Which Node is a machine's (machine-api-operator's nodelink): the Node whose
//! `spec.providerID` equals the machine's, else the one sharing an internal IP address.
use k8s_openapi::api::core::v1::{Node, NodeAddress};

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
    nodes.iter().find(|n| {
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
            found(Some(""), &[]),
            None,
            "an empty provider ID links nothing"
        );
    }
}
