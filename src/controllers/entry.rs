//! The one entry point and one error policy of every controller, as kube-runtime calls them:
//! objects arrive as [`DeserializeGuard`]s (one bad object must not wedge a watch), so an
//! object that does not decode is logged and left alone until it is edited, and every other one
//! goes to the controller's own `reconcile` and `error_policy` inside a tracing span naming the
//! controller and the object — vCenter retries and errors logged below are tied to it.
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::Resource;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::{reflector, watcher};
use tracing::Instrument;

use super::cache::display_name;
use super::{Context, Error, Shutdown};

/// Reconciles of one controller running at once (2 cores; vCenter is the bottleneck anyway).
const CONCURRENCY: u16 = 4;

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
            ctx.measure(controller, Instant::now(), &result);
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
/// Run one controller the way all run: bounded concurrency, stopped by `shutdown` (in-flight
/// reconciles drained), every object through the one entry point and error policy, queue
/// trouble logged.
pub fn run<K, F>(
    name: &'static str,
    controller: Controller<DeserializeGuard<K>>,
    reconcile: Reconcile<K, F>,
    policy: ErrorPolicy<K>,
    ctx: Arc<Context>,
    shutdown: &Shutdown,
) -> impl Future<Output = ()> + Send + 'static
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    F: Future<Output = Result<Action, Error>> + Send + 'static,
{
    controller
        .with_config(Config::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(shutdown.clone().wait())
        .run(
            move |o, ctx| self::reconcile(name, reconcile, o, ctx),
            move |o, e, ctx| error_policy(name, policy, o, e, ctx),
            ctx,
        )
        .for_each(move |result| {
            log_controller_result(name, result);
            futures::future::ready(())
        })
}

/// Reconcile failures are logged by the error policies; this logs the rest (queue trouble).
fn log_controller_result<K: Resource, E: std::error::Error>(
    controller: &str,
    result: Result<
        (reflector::ObjectRef<K>, Action),
        kube::runtime::controller::Error<E, watcher::Error>,
    >,
) {
    use kube::runtime::controller::Error as CtrlError;
    match result {
        Ok((obj, action)) => tracing::debug!(controller, object = %obj, ?action, "reconciled"),
        Err(CtrlError::ReconcilerFailed(_, obj)) => {
            tracing::debug!(controller, object = %obj, "reconcile failed (see error policy)");
        }
        Err(CtrlError::ObjectNotFound(obj)) => {
            tracing::debug!(controller, object = %obj, "object gone before its reconcile");
        }
        Err(e) => tracing::warn!(controller, error = %e, "controller error"),
    }
}
