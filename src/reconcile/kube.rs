//! The Kubernetes side of every machine reconciler, as one small interface. The in-cluster shell
//! implements it on the API server (status subresource, Eviction API, Events); local mode
//! implements it on its persisted object store. The machine, control plane machine set and
//! health check reconcilers are written once, against this trait.
use std::future::Future;

use k8s_openapi::api::core::v1::ObjectReference;

use crate::api::control_plane_machine_set::{ControlPlaneMachineSet, ControlPlaneMachineSetStatus};
use crate::api::machine::Machine;
use crate::plan::machine::drain::PodRef;

/// A failed Kubernetes write, with what was being done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{action}: {message}")]
pub struct KubeError {
    pub action: String,
    pub message: String,
    /// The object changed under us (conflict) or is gone: re-read and decide again.
    pub stale: bool,
}

/// What an eviction request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eviction {
    /// Accepted: the pod terminates.
    Evicted,
    /// Refused for now (a PodDisruptionBudget, HTTP 429): try again later.
    Refused(String),
}

/// An event about an object, as `kubectl get events` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub regarding: ObjectReference,
    /// `Normal` or `Warning`.
    pub type_: String,
    pub reason: String,
    pub message: String,
}

impl EventRecord {
    pub fn new(regarding: ObjectReference, warning: bool, reason: &str, message: &str) -> Self {
        EventRecord {
            regarding,
            type_: if warning { "Warning" } else { "Normal" }.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
        }
    }
}

/// A reference to a Machine for events.
pub fn machine_ref(m: &Machine) -> ObjectReference {
    ObjectReference {
        api_version: Some("machine.openshift.io/v1beta1".into()),
        kind: Some("Machine".into()),
        name: m.metadata.name.clone(),
        namespace: m.metadata.namespace.clone(),
        uid: m.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// What reconcilers do to Kubernetes objects.
pub trait KubeOps {
    /// Write what changed between `before` and `after`: metadata (labels, annotations,
    /// finalizers, owner references), spec (providerID) and status. A deleting machine whose last finalizer is
    /// released is gone afterwards.
    fn update_machine(
        &self,
        before: &Machine,
        after: &Machine,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;

    /// Create a Machine (the control plane machine set's replacements).
    fn create_machine(
        &self,
        m: &Machine,
    ) -> impl Future<Output = Result<Machine, KubeError>> + Send;

    /// The Machines of a namespace as they are now: a direct read, never a cache (the machine
    /// set confirms each creation on it).
    fn list_machines(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<Machine>, KubeError>> + Send;

    /// Write a machine set's status.
    fn set_machine_set_status(
        &self,
        set: &ControlPlaneMachineSet,
        status: &ControlPlaneMachineSetStatus,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;

    /// Mark a Machine for deletion (finalizers respected).
    fn delete_machine(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;

    /// Mark a node unschedulable.
    fn cordon(&self, node: &str) -> impl Future<Output = Result<(), KubeError>> + Send;

    /// Evict a pod through the Eviction API (PodDisruptionBudgets honoured).
    fn evict(&self, pod: &PodRef) -> impl Future<Output = Result<Eviction, KubeError>> + Send;

    /// Delete a Node.
    fn delete_node(&self, node: &str) -> impl Future<Output = Result<(), KubeError>> + Send;

    /// Record an event (best effort: a lost event never fails a reconcile).
    fn event(&self, event: EventRecord) -> impl Future<Output = ()> + Send;

    /// Record an event about `regarding` from its parts.
    fn record(
        &self,
        regarding: ObjectReference,
        warning: bool,
        reason: &str,
        message: &str,
    ) -> impl Future<Output = ()> + Send {
        self.event(EventRecord::new(regarding, warning, reason, message))
    }
}
