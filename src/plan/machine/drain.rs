//! What draining a node means (machine-api-operator's drain, kubectl's rules): cordon, then
//! evict every pod except DaemonSet pods and mirror (static) pods; emptyDir data is given up;
//! PodDisruptionBudgets are honoured by the Eviction API itself (a refused eviction is retried
//! with backoff). A control plane node is drained only while no other control plane node is
//! cordoned, so two etcd members are never down at once.
use k8s_openapi::api::core::v1::Node;

use crate::api::machine::{MACHINE_ROLE_LABEL, MACHINE_TYPE_LABEL, Machine};

/// A pod as the drain sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    /// Owned by a DaemonSet: left alone (the DaemonSet controller would put it back).
    pub daemon_set: bool,
    /// A mirror pod (static pod of the kubelet): cannot be evicted through the API.
    pub mirror: bool,
    /// Already terminating (eviction accepted earlier).
    pub terminating: bool,
    /// Already finished (Succeeded/Failed): nothing to evict.
    pub finished: bool,
}

/// A pod to evict.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

/// The pods a drain evicts, and how many evicted ones are still terminating.
pub fn to_evict(pods: &[PodInfo]) -> (Vec<PodRef>, usize) {
    let mut evict = Vec::new();
    let mut terminating = 0;
    for p in pods {
        if p.daemon_set || p.mirror || p.finished {
            continue;
        }
        if p.terminating {
            terminating += 1;
        } else {
            evict.push(PodRef {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
            });
        }
    }
    evict.sort();
    (evict, terminating)
}

/// Whether a machine is a control plane machine (role or type label `master`).
pub fn is_control_plane(m: &Machine) -> bool {
    m.metadata.labels.as_ref().is_some_and(|l| {
        [MACHINE_ROLE_LABEL, MACHINE_TYPE_LABEL].iter().any(|k| {
            l.get(*k)
                .is_some_and(|v| v == "master" || v == "control-plane")
        })
    })
}

fn cordoned(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// Another control plane machine's node is cordoned: this control plane drain must wait.
pub fn other_control_plane_cordoned(
    me: &Machine,
    machines: &[Machine],
    nodes: &[Node],
) -> Option<String> {
    let mine = me
        .status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .and_then(|r| r.name.clone());
    machines
        .iter()
        .filter(|m| m.metadata.uid != me.metadata.uid && is_control_plane(m))
        .filter_map(|m| m.status.as_ref()?.node_ref.as_ref()?.name.clone())
        .filter(|n| Some(n) != mine.as_ref())
        .find(|name| {
            nodes
                .iter()
                .any(|n| n.metadata.name.as_deref() == Some(name.as_str()) && cordoned(n))
        })
}

/// Whether this node is cordoned already.
pub fn is_cordoned(nodes: &[Node], name: &str) -> bool {
    nodes
        .iter()
        .any(|n| n.metadata.name.as_deref() == Some(name) && cordoned(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> PodInfo {
        PodInfo {
            namespace: "ns".into(),
            name: name.into(),
            ..PodInfo::default()
        }
    }

    #[test]
    fn daemonset_mirror_and_finished_pods_are_left() {
        let pods = [
            pod("app"),
            PodInfo {
                daemon_set: true,
                ..pod("ds")
            },
            PodInfo {
                mirror: true,
                ..pod("etcd")
            },
            PodInfo {
                finished: true,
                ..pod("job")
            },
            PodInfo {
                terminating: true,
                ..pod("going")
            },
        ];
        let (evict, terminating) = to_evict(&pods);
        assert_eq!(
            evict,
            [PodRef {
                namespace: "ns".into(),
                name: "app".into()
            }]
        );
        assert_eq!(terminating, 1);
    }
}
