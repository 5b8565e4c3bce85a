//! Machines waiting for their Node are woken by its arrival: a Node added (or changed) that
//! is a provisioned machine's, by provider ID or internal IP, drops that machine's decision
//! from the sweep gates and triggers its reconcile at once, as the long poll does for vCenter
//! changes. So a machine links its Node (and goes `Running`) when the kubelet registers, not at
//! its next 10 s re-look, and a machine whose Node never comes costs no vCenter reads while it
//! waits (`Requeue::NodeJoin`, `plan::machine::waiting`). Which machines a Node concerns is
//! `plan::machine::node_link::machines_awaiting`'s; every other Node change wakes nobody.
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;

use super::long_poll::Wakers;
use crate::api::Machine;
use crate::controllers::Context;
use crate::plan::machine::node_link::machines_awaiting;

/// Wake the machines each Node of `nodes` is the awaited Node of; ends with the stream.
pub async fn wake_on_nodes(
    nodes: impl Stream<Item = Arc<DeserializeGuard<Node>>>,
    machines: Store<DeserializeGuard<Machine>>,
    ctx: Arc<Context>,
    wakers: Wakers,
) {
    futures::pin_mut!(nodes);
    while let Some(node) = nodes.next().await {
        let Ok(node) = &node.0 else { continue };
        let all = machines.state();
        let keys: Vec<String> =
            machines_awaiting(node, all.iter().filter_map(|m| m.0.as_ref().ok()))
                .into_iter()
                .map(crate::reconcile::machines::key)
                .collect();
        if keys.is_empty() {
            continue;
        }
        tracing::debug!(node = ?node.metadata.name, machines = ?keys, "a Node registered: waking the machines waiting for it");
        ctx.machine_sweeps.forget(&keys).await;
        for k in &keys {
            wakers.wake(k);
        }
    }
}
