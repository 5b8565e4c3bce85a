//! The Kubernetes side of every machine reconciler, as one small interface. The in-cluster shell
//! implements it on the API server (status subresource, Eviction API, Events); local mode
//! implements it on its persisted object store. The machine, control plane machine set and
//! health check reconcilers are written once, against this trait.
use std::future::Future;

use k8s_openapi::api::core::v1::ObjectReference;

use crate::api::control_plane_machine_set::{ControlPlaneMachineSet, ControlPlaneMachineSetStatus};
use crate::api::ipam::IpAddressClaim;
use crate::api::machine::Machine;
use crate::api::machine_health_check::MachineHealthCheck;
use crate::api::vsphere_vm::VSphereVM;
use crate::plan::health::RequestRef;
use crate::plan::machine::drain::PodRef;

/// A failed Kubernetes call, typed by what it means for the caller: a conflict or a vanished
/// object means "re-read and decide again", a timeout or an unavailable server "try again",
/// forbidden or invalid "someone must act". The message is the server's; the action names the
/// verb and object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{action}: {message}")]
pub struct KubeError {
    pub action: String,
    pub kind: KubeErrorKind,
    pub message: String,
}

/// What a failed Kubernetes call means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeErrorKind {
    /// 409: the object changed since it was read.
    Conflict,
    /// 404 / 410: the object (or the resource) is gone.
    NotFound,
    /// 401 / 403: the identity may not do this (RBAC).
    Forbidden,
    /// 400 / 422: the server refused the object (validation, admission).
    Invalid,
    /// No answer within the write timeout.
    Timeout,
    /// 429 / 5xx, or no connection: the server cannot answer now.
    Unavailable,
    /// Local mode's state file could not be written.
    State,
    Other,
}

impl KubeError {
    pub fn new(action: impl Into<String>, kind: KubeErrorKind, message: impl Into<String>) -> Self {
        KubeError {
            action: action.into(),
            kind,
            message: message.into(),
        }
    }

    /// A kube client error, typed by its HTTP status (or by having none: no connection).
    pub fn from_client(action: impl Into<String>, e: &kube::Error) -> Self {
        let kind = match e {
            kube::Error::Api(s) => match s.code {
                409 => KubeErrorKind::Conflict,
                404 | 410 => KubeErrorKind::NotFound,
                401 | 403 => KubeErrorKind::Forbidden,
                400 | 422 => KubeErrorKind::Invalid,
                429 | 500..=599 => KubeErrorKind::Unavailable,
                _ => KubeErrorKind::Other,
            },
            kube::Error::HyperError(_) | kube::Error::Service(_) => KubeErrorKind::Unavailable,
            _ => KubeErrorKind::Other,
        };
        KubeError::new(action, kind, e.to_string())
    }

    /// No answer within `after`.
    pub fn timeout(action: impl Into<String>, after: std::time::Duration) -> Self {
        KubeError::new(
            action,
            KubeErrorKind::Timeout,
            format!("no answer from the API server within {after:?}"),
        )
    }

    /// The object changed under us or is gone: re-read and decide again.
    pub fn stale(&self) -> bool {
        matches!(self.kind, KubeErrorKind::Conflict | KubeErrorKind::NotFound)
    }

    /// A short, stable label for metrics.
    pub fn category(&self) -> &'static str {
        match self.kind {
            KubeErrorKind::Conflict => "kubernetes_conflict",
            KubeErrorKind::NotFound => "kubernetes_not_found",
            KubeErrorKind::Forbidden => "kubernetes_forbidden",
            KubeErrorKind::Invalid => "kubernetes_invalid",
            KubeErrorKind::Timeout => "kubernetes_timeout",
            KubeErrorKind::Unavailable => "kubernetes_unavailable",
            KubeErrorKind::State => "state_file",
            KubeErrorKind::Other => "kubernetes",
        }
    }
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

    /// Write what changed between `before` and `after` of a VSphereVM: its finalizers,
    /// `spec.biosUUID` and status. A deleting VSphereVM whose last finalizer is released is gone
    /// afterwards.
    fn update_vsphere_vm(
        &self,
        before: &VSphereVM,
        after: &VSphereVM,
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

    /// Create an IP address claim (one of that name already there is fine: it was ours, made
    /// by a pass whose Machine write was lost).
    fn create_ip_address_claim(
        &self,
        claim: &IpAddressClaim,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;

    /// Release an IP address claim: remove the claim protection finalizer and delete it (gone
    /// already is fine).
    fn release_ip_address_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;

    /// Write what changed between `before` and `after` of a MachineHealthCheck: its
    /// annotations (the remediation backoff) and its status.
    fn update_health_check(
        &self,
        before: &MachineHealthCheck,
        after: &MachineHealthCheck,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;

    /// Create an external remediation request (a whole object of the template's kind minus
    /// `Template`). Local mode refuses: no remediation controller runs there to act on it.
    fn create_remediation_request(
        &self,
        namespace: &str,
        request: &serde_json::Value,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;

    /// Delete a remediation request (gone already is fine).
    fn delete_remediation_request(
        &self,
        namespace: &str,
        request: &RequestRef,
    ) -> impl Future<Output = Result<(), KubeError>> + Send;

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
