//! The one entry point and one error policy of every controller, as kube-runtime calls them:
//! objects arrive as [`DeserializeGuard`]s (one bad object must not wedge a watch), so an
//! object that does not decode is logged and left alone until it is edited, and every other one
//! goes to the controller's own `reconcile` and `error_policy` inside a tracing span naming the
//! controller and the object — vCenter retries and errors logged below are tied to it.
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use kube::Resource;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use tracing::Instrument;

use super::cache::display_name;
use super::{Context, Error};

/// A controller's reconcile over decoded objects.
pub type Reconcile<K, F> = fn(Arc<K>, Arc<Context>) -> F;
/// A controller's error policy over decoded objects.
pub type ErrorPolicy<K> = fn(Arc<K>, &Error, Arc<Context>) -> Action;

/// The span every reconcile of `object` by `controller` runs in.
pub fn span(controller: &'static str, object: &str) -> tracing::Span {
    tracing::info_span!("reconcile", controller, object)
}

fn name_of<K: Resource<DynamicType = ()>>(obj: &DeserializeGuard<K>) -> String {
    match &obj.0 {
        Ok(o) => display_name(o.meta()),
        Err(e) => display_name(&e.metadata),
    }
}

/// Reconcile a decoded object with `reconcile`; an undecodable one is counted as invalid.
pub async fn reconcile<K, F>(
    controller: &'static str,
    reconcile: Reconcile<K, F>,
    obj: Arc<DeserializeGuard<K>>,
    ctx: Arc<Context>,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()> + Clone,
    F: Future<Output = Result<Action, Error>>,
{
    let name = name_of(&obj);
    let span = span(controller, &name);
    match &obj.0 {
        Ok(o) => reconcile(Arc::new(o.clone()), ctx).instrument(span).await,
        Err(e) => {
            let result = Err(Error::InvalidObject(e.error.clone()));
            let key = format!("{controller}/{name}");
            ctx.record(controller, &key, Instant::now(), &result);
            result
        }
    }
}

/// The error policy of a decoded object is `policy`; an undecodable one waits for an edit.
pub fn error_policy<K>(
    controller: &'static str,
    policy: ErrorPolicy<K>,
    obj: Arc<DeserializeGuard<K>>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action
where
    K: Resource<DynamicType = ()> + Clone,
{
    let name = name_of(&obj);
    span(controller, &name).in_scope(|| match &obj.0 {
        Ok(o) => policy(Arc::new(o.clone()), error, ctx),
        Err(_) => {
            tracing::warn!("{error}; waiting for it to be fixed");
            Action::await_change()
        }
    })
}
