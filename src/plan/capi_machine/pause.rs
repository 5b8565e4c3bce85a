//! Cluster API's pause for a machine's VSphereVM: paused by its own
//! `cluster.x-k8s.io/paused` annotation, or by its Cluster's (`spec.paused` or the annotation).
//! A paused VSphereVM is left entirely alone — no finalizer added, no status written, no vCenter
//! call, and **no deletion step** even when it is being deleted: `clusterctl move` pauses the
//! Cluster, copies every object to the target, then strips the finalizers and deletes the
//! source's copies, and a provider that acted on that deletion would destroy the VMs the target
//! just took over. A paused VSphereVM looks again every [`PAUSED_POLL`] to notice the resume
//! (its Cluster's changes do not wake it); a paused VSphereMachine is woken by its Cluster's
//! changes and looks again only every [`PAUSED_SAFETY_POLL`].
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::api::capi_core::{CLUSTER_NAME_LABEL, PAUSED_ANNOTATION};
use crate::plan::cluster::lifecycle::cluster_paused;

/// The annotation `clusterctl move` puts on each source object just before it deletes it (and
/// then strips its finalizers): the deletion is a move, not the end of the machine.
pub const DELETE_FOR_MOVE_ANNOTATION: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";

/// How often a paused VSphereVM checks whether its Cluster resumed.
pub const PAUSED_POLL: Duration = Duration::from_secs(30);

/// How often a paused VSphereMachine looks again, although the resume (its Cluster's or its
/// own change) wakes it at once through the watches. Kept as a safety net, not a schedule: a
/// Cluster created while Cluster API's kinds were not yet watched (installed under a running
/// manager) or a wake lost with a controller's queue is then noticed within minutes rather than
/// at the next restart, and a paused pass costs no API request (it reads the caches).
pub const PAUSED_SAFETY_POLL: Duration = Duration::from_secs(300);

/// The Cluster an object belongs to (its `cluster.x-k8s.io/cluster-name` label).
pub fn cluster_name(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(CLUSTER_NAME_LABEL))
        .map(String::as_str)
}

/// Why the `kind` object (a VSphereVM, a VSphereMachine) is paused, if it is: its annotation
/// first, then `cluster` (the Cluster it belongs to, any version, as read; `None`: none).
pub fn paused(kind: &str, meta: &ObjectMeta, cluster: Option<&Value>) -> Option<String> {
    let annotated = |a: &str| meta.annotations.as_ref().is_some_and(|m| m.contains_key(a));
    if annotated(DELETE_FOR_MOVE_ANNOTATION) {
        return Some(format!(
            "{kind} is being deleted by clusterctl move ({DELETE_FOR_MOVE_ANNOTATION}): its VM now belongs to the target"
        ));
    }
    if annotated(PAUSED_ANNOTATION) {
        return Some(format!("{kind} has the annotation {PAUSED_ANNOTATION}"));
    }
    cluster.and_then(cluster_paused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vm(annotated: bool) -> ObjectMeta {
        ObjectMeta {
            name: Some("m1".into()),
            labels: Some([(CLUSTER_NAME_LABEL.to_string(), "c1".to_string())].into()),
            annotations: annotated.then(|| [(PAUSED_ANNOTATION.to_string(), String::new())].into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_vm_is_paused_by_its_annotation_or_its_clusters_pause() {
        assert_eq!(cluster_name(&vm(false)), Some("c1"));
        let running = json!({"metadata": {"name": "c1"}, "spec": {"paused": false}});
        let moving = json!({"metadata": {"name": "c1"}, "spec": {"paused": true}});
        let annotated =
            json!({"metadata": {"name": "c1", "annotations": {PAUSED_ANNOTATION: ""}}, "spec": {}});
        assert_eq!(paused("VSphereVM", &vm(false), Some(&running)), None);
        assert_eq!(paused("VSphereVM", &vm(false), None), None);
        assert!(
            paused("VSphereVM", &vm(false), Some(&moving))
                .unwrap()
                .contains("spec.paused")
        );
        assert!(
            paused("VSphereVM", &vm(false), Some(&annotated))
                .unwrap()
                .contains(PAUSED_ANNOTATION)
        );
        assert!(
            paused("VSphereVM", &vm(true), Some(&running))
                .unwrap()
                .starts_with("VSphereVM")
        );
        // clusterctl move's deletion of the source copy, whatever the Cluster says.
        let mut moving_away = vm(false);
        moving_away.annotations =
            Some([(DELETE_FOR_MOVE_ANNOTATION.to_string(), String::new())].into());
        assert!(
            paused("VSphereVM", &moving_away, None)
                .unwrap()
                .contains("clusterctl move")
        );
    }
}
