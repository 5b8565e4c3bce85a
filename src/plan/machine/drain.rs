//! What draining a node means (machine-api-operator's drain, kubectl's rules): cordon, then
//! evict every pod except DaemonSet pods and mirror (static) pods; emptyDir data is given up;
//! PodDisruptionBudgets are honoured by the Eviction API itself (a refused eviction is retried
//! with backoff). A control plane node is drained only while no other control plane node is
//! cordoned, and of several starting together only the first, so two etcd members are never down
//! at once ([`control_plane_drain_hold`]).
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

/// Why a control plane machine's drain may not go on now, naming what holds it; `None`: it may.
///
/// machine-api-operator's rule (`isDrainAllowed`), so two etcd members are never drained at once:
/// a node already cordoned goes on draining (its drain started; stopping half-way helps nobody);
/// another control plane node cordoned holds this one until that node is removed. One more rule,
/// ours, because every machine of a pass is planned on the same snapshot (local mode; concurrent
/// reconciles on one cache): of the control plane machines that would start their drain now, only
/// the first (oldest deletion, then namespace/name) does. Without it, three control plane machines
/// deleted at once were all cordoned in one pass, and from then on each saw the others cordoned and
/// waited for ever (issue #27).
pub fn control_plane_drain_hold(
    me: &Machine,
    machines: &[Machine],
    nodes: &[Node],
) -> Option<String> {
    if !is_control_plane(me) {
        return None;
    }
    let mine = node_name(me);
    if mine.as_deref().is_some_and(|n| is_cordoned(nodes, n)) {
        return None;
    }
    let others = || {
        machines
            .iter()
            .filter(|m| m.metadata.uid != me.metadata.uid && is_control_plane(m))
    };
    let node_of = |name: &str| {
        nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
    };
    // Another control plane node cordoned: named with its machine, and why it is cordoned.
    if let Some((m, node)) = others()
        .filter_map(|m| Some((m, node_name(m)?)))
        .filter(|(_, n)| Some(n) != mine.as_ref())
        .find(|(_, n)| node_of(n).is_some_and(cordoned))
    {
        let name = machine_name(m);
        let why = if m.metadata.deletion_timestamp.is_some() {
            format!(
                "its machine {name} is being deleted; this drain starts once Node {node} is removed"
            )
        } else {
            format!(
                "its machine {name} is not being deleted: uncordon Node {node} (or delete its machine) to let this drain start"
            )
        };
        return Some(format!(
            "Drain not permitted: control plane Node {node} is already cordoned ({why}); one control plane node is drained at a time, so etcd never loses two members at once"
        ));
    }
    // No control plane node cordoned yet: the first of those starting now goes.
    let me_key = turn_key(me);
    others()
        .filter(|m| starts_drain_now(m, nodes) && turn_key(m) < me_key)
        .min_by_key(|m| turn_key(m))
        .map(|first| {
            format!(
                "Drain not permitted yet: control plane machine {} is drained first (one control plane node at a time, so etcd never loses two members at once)",
                machine_name(first)
            )
        })
}

fn node_name(m: &Machine) -> Option<String> {
    m.status.as_ref()?.node_ref.as_ref()?.name.clone()
}

fn machine_name(m: &Machine) -> String {
    m.metadata.name.clone().unwrap_or_default()
}

/// The order in which control plane drains that would start in the same pass take their turn.
fn turn_key(m: &Machine) -> (Option<jiff::Timestamp>, String, String) {
    (
        m.metadata.deletion_timestamp.as_ref().map(|t| t.0),
        m.metadata.namespace.clone().unwrap_or_default(),
        machine_name(m),
    )
}

/// Whether a machine's deletion is at the rung where it would cordon its node now: deleting, no
/// preDrain hook, not drained, not exempt, and its Node linked, its own and not cordoned.
fn starts_drain_now(m: &Machine, nodes: &[Node]) -> bool {
    let exempt = m
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(crate::api::machine::EXCLUDE_NODE_DRAINING_ANNOTATION));
    let drained = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|c| {
            crate::api::conditions::is_capi_true(c, crate::api::conditions::machine::DRAINED)
        });
    m.metadata.deletion_timestamp.is_some()
        && m.metadata.finalizers.as_ref().is_some_and(|f| {
            f.iter()
                .any(|f| f == crate::api::machine::MACHINE_FINALIZER)
        })
        && m.hooks().0.is_empty()
        && !drained
        && !exempt
        && super::linked_node(m, nodes).is_some_and(|n| {
            !cordoned(n)
                && super::node_link::may_drain_and_delete(
                    n,
                    super::node_link::vcenter_provider_id(m, None).as_deref(),
                )
                .is_ok()
        })
}

/// What a refused eviction says on the Machine (`Drained=False`, `DrainError`): the pod and,
/// when the API server named it, the PodDisruptionBudget that refused it. `why` is the API
/// server's answer: its message ("Cannot evict pod as it would violate the pod's disruption
/// budget.") followed by its causes ("The disruption budget web needs 2 healthy pods and has 2
/// currently"), which is where the budget's name is.
pub fn eviction_refused(pod: &PodRef, why: &str) -> String {
    // The cause kube-apiserver writes: "The disruption budget NAME needs …" (or "… is still
    // being processed by the server").
    let budget = why
        .split("The disruption budget ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .filter(|name| !name.ends_with('.'));
    match budget {
        Some(pdb) => format!(
            "eviction of pod {}/{} refused by PodDisruptionBudget {}/{pdb}: {why}",
            pod.namespace, pod.name, pod.namespace
        ),
        None => format!(
            "eviction of pod {}/{} refused: {why}",
            pod.namespace, pod.name
        ),
    }
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
