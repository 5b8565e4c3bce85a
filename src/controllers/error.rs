//! The controllers' error type. One variant per failure class, each with a `category()` that
//! labels metrics; the error policies decide the requeue from the variant and, for vCenter, from
//! the typed failure: "retry later" backs off per object, "failed" waits like a misconfigured
//! object, a blocked deletion waits a fixed 30 s, Kubernetes API errors back off.
use kube::runtime::finalizer;

use crate::plan::failure::{Failure, Retry};
use crate::plan::zone_status::Deletion;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed (status patch, owner references, Secret read).
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),

    /// vCenter could not be used or refused a change; the zone status already says so. The
    /// failure is typed: [`Error::retry`] says whether to retry later or wait for a change.
    #[error("vCenter: {0}")]
    Vcenter(Failure),

    /// Machines still use a zone being deleted: the finalizer stays (the finalizer helper only
    /// keeps it when cleanup fails, so a blocked deletion is an error).
    #[error("{}", Deletion::blocked_message(.0))]
    DeletionBlocked(Vec<String>),

    /// The object being reconciled cannot be decoded: nothing to do until it is edited.
    #[error("cannot decode the object: {0}")]
    InvalidObject(String),

    /// An object the reconcile reads (a zone's failure domain, a zone published in a cluster)
    /// cannot be decoded: retried with backoff, nothing is written meanwhile.
    #[error("{0}")]
    Unreadable(String),

    /// What the object names belongs to another (an identity Secret another VSphereCluster
    /// owns): nothing is written; retried with backoff until the reference or the owner changes.
    #[error("{0}")]
    Conflict(String),

    /// A machine's step failed (vCenter refused, a drain could not finish, its VM could not be
    /// read); its conditions and events say so. Backs off per machine, like every failure:
    /// returning it as an error is what makes the backoff grow.
    #[error("{0}")]
    Machine(String),

    /// A Kubernetes write of a reconciler failed, typed (conflict, gone, forbidden, timeout…).
    #[error("Kubernetes API: {0}")]
    KubeOps(#[from] crate::reconcile::kube_ops::KubeError),

    /// Adding or removing the finalizer failed, or apply/cleanup failed (boxed: it wraps us).
    #[error(transparent)]
    Finalizer(Box<finalizer::Error<Error>>),
}

impl Error {
    /// A short, stable label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kubernetes",
            Error::Vcenter(_) => "vcenter",
            Error::DeletionBlocked(_) => "deletion_blocked",
            Error::InvalidObject(_) => "invalid",
            Error::Unreadable(_) => "unreadable",
            Error::Conflict(_) => "conflict",
            Error::Machine(_) => "machine",
            Error::KubeOps(e) => e.category(),
            Error::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => {
                    e.category()
                }
                finalizer::Error::AddFinalizer(_) | finalizer::Error::RemoveFinalizer(_) => {
                    "finalizer"
                }
                finalizer::Error::UnnamedObject | finalizer::Error::InvalidFinalizer => "invalid",
            },
        }
    }

    /// Whether the same reconcile later may succeed (`Later`), or something has to change
    /// first (`Failed`): from the typed vCenter failure; other errors are worth retrying.
    pub fn retry(&self) -> Retry {
        match self.root() {
            Error::Vcenter(f) => f.retry(),
            Error::InvalidObject(_) => Retry::Failed,
            _ => Retry::Later,
        }
    }

    /// The innermost error, for deciding the requeue.
    pub fn root(&self) -> &Error {
        match self {
            Error::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.root(),
                _ => self,
            },
            _ => self,
        }
    }
}

impl From<finalizer::Error<Error>> for Error {
    fn from(e: finalizer::Error<Error>) -> Self {
        Error::Finalizer(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_see_through_the_finalizer_wrapper() {
        let e: Error = finalizer::Error::ApplyFailed(Error::Vcenter("down".into())).into();
        assert_eq!(e.category(), "vcenter");
        assert!(matches!(e.root(), Error::Vcenter(_)));
        let e: Error =
            finalizer::Error::CleanupFailed(Error::DeletionBlocked(vec!["ns/m1".into()])).into();
        assert_eq!(e.category(), "deletion_blocked");
        assert!(e.to_string().contains("currently in use by Machines ns/m1"));
        let e: Error = finalizer::Error::<Error>::UnnamedObject.into();
        assert_eq!(e.category(), "invalid");
    }
}
