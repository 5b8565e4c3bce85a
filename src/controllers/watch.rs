//! The watches: one reflector per kind feeding the shared caches, and the filter that keeps our
//! own status writes from waking the reconcilers again.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{self, ObjectRef, ReflectHandle, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::cache;
use super::startup::FirstAnswer;

/// A kind that can be watched into a cache.
pub(super) trait Watchable:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> Watchable for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// How many objects a shared store buffers for a slow subscriber before the watch waits.
const SUBSCRIBER_BUFFER: usize = 256;

/// Start the watch of kind `K`: its store, and `N` subscriptions to it (controller triggers)
/// taken before the watch starts, so none misses an object. Deleted objects also go to
/// `deleted`. A kind nothing subscribes to (`N == 0`) gets a plain store.
pub(super) fn watch_kind<K, const N: usize>(
    client: &kube::Client,
    first: &FirstAnswer,
    deleted: Option<Deleted<K>>,
    tasks: &mut tokio::task::JoinSet<()>,
) -> (
    Store<DeserializeGuard<K>>,
    [ReflectHandle<DeserializeGuard<K>>; N],
)
where
    K: Watchable,
{
    let (store, writer) = if N == 0 {
        reflector::store()
    } else {
        reflector::store_shared(SUBSCRIBER_BUFFER)
    };
    let subscriptions = std::array::from_fn(|_| {
        writer
            .subscribe()
            .unwrap_or_else(|| unreachable!("shared stores can be subscribed to"))
    });
    let api = Api::all(client.clone());
    tasks.spawn(reflect(api, writer, deleted, Until::Served(first.clone())));
    (store, subscriptions)
}

pub(super) type Deleted<K> = futures::channel::mpsc::UnboundedSender<Arc<DeserializeGuard<K>>>;

/// The watch of `api` into `writer`, forever. Watch errors (API server restarts, a CRD
/// removed) are logged and retried with the watcher's backoff; an object that does not decode
/// is cached as such and logged, never failing the list. Deleted objects go to `deleted`
/// (shared stores tell their subscribers about changes, not deletions).
async fn reflect<K>(
    api: Api<DeserializeGuard<K>>,
    writer: reflector::store::Writer<DeserializeGuard<K>>,
    deleted: Option<Deleted<K>>,
    until: Until<K>,
) where
    K: Watchable,
{
    let kind = K::kind(&()).into_owned();
    let stream = reflector::reflector(
        writer,
        streaming_or_list(api, until).default_backoff().modify(slim),
    );
    stream
        .for_each(|event| {
            match event {
                Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                    if let Err(e) = &obj.0 {
                        tracing::warn!(
                            %kind,
                            object = %cache::display_name(&e.metadata),
                            error = %e.error,
                            "cannot decode the object; it is skipped until fixed"
                        );
                    }
                }
                Ok(watcher::Event::Delete(obj)) => {
                    if let Some(tx) = &deleted {
                        let _ = tx.unbounded_send(Arc::new(obj));
                    }
                }
                Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                Err(e) => tracing::warn!(%kind, error = %e, "watch failed; retrying"),
            }
            futures::future::ready(())
        })
        .await;
}

/// What ends a kind's wait for its CRD: the cache to mark absent meanwhile, and the resource's
/// name for the log.
struct Optional<K: Watchable> {
    cache: cache::Cache<K>,
    resource: String,
}

/// What a watch does with a refusal before its first answer.
enum Until<K: Watchable> {
    /// A kind the controllers need: the refusal is told as the startup check tells its own
    /// and the watch tried again ([`FirstAnswer`]); the caches stay unsynced meanwhile.
    Served(FirstAnswer),
    /// A kind that may be absent ([`watch_optional_kind`]).
    Optional(Optional<K>),
}

/// The watch of `api` with its initial list streamed (`sendInitialEvents`: one request per
/// kind, where a list and then a watch take two; a restart resync pays this once per kind).
/// An API server that refuses streaming lists (400/422: Kubernetes 1.33 turned the feature off
/// by default, 1.34 on again) gets a list and a watch instead, for good.
///
/// The first request also tells whether the kind is served and this identity may list and
/// watch it (no look of its own before: see `startup`). Until the first answer, a refusal —
/// a 404, a 403, an unreachable server — is, per `until`: told as the startup check tells its
/// own (the kind, what to fix, the attempt and the next try at `startup::retry_delay`), and
/// named by `/readyz`; or, for an optional kind, a 404 or 403 makes its cache absent (loaded
/// and empty), said once, and the watch is tried again every [`ABSENT_RECHECK`]; once served,
/// the cache loads. After the first answer, errors go to the watcher's own backoff.
fn streaming_or_list<K>(
    api: Api<DeserializeGuard<K>>,
    until: Until<K>,
) -> impl futures::Stream<Item = watcher::Result<watcher::Event<DeserializeGuard<K>>>> + Send
where
    K: Watchable,
{
    struct State<K: Watchable> {
        api: Api<DeserializeGuard<K>>,
        inner: futures::stream::BoxStream<
            'static,
            watcher::Result<watcher::Event<DeserializeGuard<K>>>,
        >,
        streaming: bool,
        answered: bool,
        until: Until<K>,
        was_absent: bool,
        /// Refusals in a row before the first answer.
        failures: u32,
    }
    fn start<K: Watchable>(
        api: &Api<DeserializeGuard<K>>,
        streaming: bool,
    ) -> futures::stream::BoxStream<'static, watcher::Result<watcher::Event<DeserializeGuard<K>>>>
    {
        let config = if streaming {
            watcher::Config::default().streaming_lists()
        } else {
            watcher::Config::default()
        };
        watcher(api.clone(), config).boxed()
    }
    let state = State {
        inner: start(&api, true),
        api,
        streaming: true,
        answered: false,
        until,
        was_absent: false,
        failures: 0,
    };
    futures::stream::unfold(state, |mut s| async move {
        loop {
            let item = s.inner.next().await?;
            if s.answered {
                return Some((item, s));
            }
            // The request refused, and with which verb.
            let refused = match &item {
                Err(watcher::Error::InitialListFailed(e)) => Some(("list", e)),
                Err(watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e)) => {
                    Some(("watch", e))
                }
                _ => None,
            };
            let code = match refused {
                Some((_, kube::Error::Api(st))) => Some(st.code),
                _ => None,
            };
            match (refused, code) {
                (None, _) => {
                    // `Init` comes before a list is made: the first answer is what follows.
                    s.answered = matches!(
                        &item,
                        Ok(watcher::Event::InitApply(_)
                            | watcher::Event::InitDone
                            | watcher::Event::Apply(_)
                            | watcher::Event::Delete(_))
                    );
                    if s.answered {
                        match &mut s.until {
                            Until::Served(first) => first.answered::<K>(s.failures),
                            Until::Optional(o) if s.was_absent => {
                                tracing::info!(resource = %o.resource, "now served: watched");
                                let cache = o.cache.clone();
                                tokio::spawn(async move { cache.load().await });
                            }
                            Until::Optional(_) => {}
                        }
                    }
                    return Some((item, s));
                }
                (Some((_, kube::Error::Api(st))), Some(400 | 422)) if s.streaming => {
                    tracing::info!(kind = %K::kind(&()), message = %st.message,
                        "the API server does not stream initial lists: listing, then watching");
                    s.streaming = false;
                    s.inner = start(&s.api, false);
                }
                (Some((_, kube::Error::Api(st))), Some(code @ (403 | 404)))
                    if matches!(s.until, Until::Optional(_)) =>
                {
                    let Until::Optional(o) = &s.until else {
                        unreachable!()
                    };
                    if !s.was_absent {
                        if code == 404 {
                            tracing::info!(resource = %o.resource, recheck = ?ABSENT_RECHECK,
                                "not served (Cluster API not installed): not watched; looked for again periodically");
                        } else {
                            tracing::warn!(resource = %o.resource, error = %st.message, recheck = ?ABSENT_RECHECK,
                                "not allowed to list: not watched; bind the manager's ServiceAccount with config/rbac");
                        }
                    }
                    s.was_absent = true;
                    o.cache.set_absent(true);
                    tokio::time::sleep(ABSENT_RECHECK).await;
                    s.inner = start(&s.api, s.streaming);
                }
                (Some((verb, e)), _) if matches!(s.until, Until::Served(_)) => {
                    let Until::Served(first) = &s.until else {
                        unreachable!()
                    };
                    s.failures += 1;
                    let wait = first.refused::<K>(s.failures, verb, e);
                    tokio::time::sleep(wait).await;
                    s.inner = start(&s.api, s.streaming);
                }
                (Some(_), _) => return Some((item, s)),
            }
        }
    })
}

/// How often a kind found not served (its CRD not installed) is looked for again. Installing
/// Cluster API under a running manager is rare and a restart picks it up at once; a look every
/// few minutes keeps an OpenShift-only install's requests and logs quiet.
pub const ABSENT_RECHECK: Duration = Duration::from_secs(300);

/// Like [`watch_kind`], for a kind the API server may not serve (Cluster API's, whose CRDs an
/// OpenShift-only install lacks). The watch's first request tells: not served (404), or not
/// allowed (403, an older config/rbac), makes the cache absent — loaded and empty, holding no
/// controller back — said once in the log and looked at again every [`ABSENT_RECHECK`]; once
/// served, the cache loads (see [`streaming_or_list`]). No look of its own before the watch:
/// that was one more request per kind and process start.
pub(super) fn watch_optional_kind<K, const N: usize>(
    client: &kube::Client,
    tasks: &mut tokio::task::JoinSet<()>,
) -> (cache::Cache<K>, [ReflectHandle<DeserializeGuard<K>>; N])
where
    K: Watchable,
{
    let (store, writer) = reflector::store_shared(SUBSCRIBER_BUFFER);
    let subscriptions = std::array::from_fn(|_| {
        writer
            .subscribe()
            .unwrap_or_else(|| unreachable!("shared stores can be subscribed to"))
    });
    let cache = cache::Cache::over(store);
    let api: Api<DeserializeGuard<K>> = Api::all(client.clone());
    let optional = Optional {
        cache: cache.clone(),
        resource: format!("{}.{}", K::plural(&()), K::group(&())),
    };
    tasks.spawn(reflect(api, writer, None, Until::Optional(optional)));
    (cache, subscriptions)
}

/// The annotation `kubectl apply` keeps the whole applied manifest in.
const KUBECTL_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops from a cached object what no reconcile reads and every copy would carry: the server's
/// `managedFields` and kubectl's copy of the applied manifest (together more than the object
/// itself for an applied Machine), as controller-runtime's default cache transform does.
/// Writes are merge patches of the keys that changed and server-side applies of our own
/// fields, so what is dropped here is never written back as missing.
fn slim<K: Resource>(object: &mut DeserializeGuard<K>) {
    if let Ok(o) = &mut object.0 {
        let meta = o.meta_mut();
        meta.managed_fields = None;
        if let Some(a) = meta.annotations.as_mut() {
            a.remove(KUBECTL_LAST_APPLIED);
        }
    }
}

/// What a change beyond the status touches: identity, generation (spec), labels, annotations,
/// finalizers, owner references (Cluster API adopting a VSphereCluster), deletion. Equal fingerprints mean "only the status (or server fields) changed".
pub(super) fn fingerprint(m: &kube::api::ObjectMeta) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    m.uid.hash(&mut h);
    m.generation.hash(&mut h);
    m.labels.hash(&mut h);
    m.annotations.hash(&mut h);
    m.finalizers.hash(&mut h);
    m.owner_references
        .as_ref()
        .map(|o| serde_json::to_string(o).unwrap_or_default())
        .hash(&mut h);
    m.deletion_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .hash(&mut h);
    h.finish()
}

/// How many remembered fingerprints of objects no longer cached are tolerated before the
/// status-only filter forgets them.
const FORGET_SLACK: usize = 64;

/// Remembers what last woke each object, to tell status-only updates apart.
struct StatusOnlyFilter<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    seen: HashMap<(Option<String>, String), u64>,
    cache: Store<K>,
    /// What of an object counts as a change.
    fingerprint: fn(&K) -> u64,
}

impl<K> StatusOnlyFilter<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn new(cache: Store<K>, fingerprint: fn(&K) -> u64) -> Self {
        StatusOnlyFilter {
            seen: HashMap::new(),
            cache,
            fingerprint,
        }
    }

    /// Whether `obj` changed more than its status since it last came by.
    fn admit(&mut self, obj: &K) -> bool {
        let m = obj.meta();
        let fingerprint = (self.fingerprint)(obj);
        let key = (m.namespace.clone(), m.name.clone().unwrap_or_default());
        let fresh = self.seen.insert(key, fingerprint) != Some(fingerprint);
        // Deleted objects are not announced: forget those no longer cached once they pile up.
        if self.seen.len() > self.cache.len() + FORGET_SLACK {
            let cache = &self.cache;
            self.seen.retain(|(ns, name), _| {
                let mut r = ObjectRef::<K>::new(name);
                if let Some(ns) = ns {
                    r = r.within(ns);
                }
                cache.get(&r).is_some()
            });
        }
        fresh
    }

    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.seen.len()
    }
}

/// Drop updates that changed nothing but the status (or other server-managed fields): our own
/// status writes would otherwise wake the reconciler once more each time, doubling vCenter
/// traffic and defeating the backoff. Spec (generation), labels, annotations, finalizers, owner
/// references and deletion still wake it; periodic requeues catch everything else.
pub(super) fn skip_status_only_changes<K>(
    trigger: impl futures::Stream<Item = Arc<K>> + Send + 'static,
    cache: Store<K>,
) -> impl futures::Stream<Item = Arc<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    skip_unchanged(trigger, cache, |o| fingerprint(o.meta()))
}

/// Drop updates that leave `fingerprint` as it was: for a kind whose changes matter only in
/// part to the controller it wakes (a Cluster API Cluster's status changes often; its pause and
/// readiness are what a VSphereMachine reads).
pub(super) fn skip_unchanged<K>(
    trigger: impl futures::Stream<Item = Arc<K>> + Send + 'static,
    cache: Store<K>,
    fingerprint: fn(&K) -> u64,
) -> impl futures::Stream<Item = Arc<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let mut filter = StatusOnlyFilter::new(cache, fingerprint);
    trigger.filter(move |obj| futures::future::ready(filter.admit(obj)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{VSphereDeploymentZone, VSphereDeploymentZoneSpec};

    fn zone(name: &str, uid: &str) -> VSphereDeploymentZone {
        let mut z = VSphereDeploymentZone::new(name, VSphereDeploymentZoneSpec::default());
        z.metadata.uid = Some(uid.into());
        z
    }

    #[test]
    fn cached_objects_carry_no_managed_fields_nor_kubectls_copy() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let mut z = zone("a", "u1");
        z.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        z.metadata.annotations = Some(
            [
                (KUBECTL_LAST_APPLIED.to_string(), "{...}".to_string()),
                ("team".to_string(), "x".to_string()),
            ]
            .into(),
        );
        let mut guard = DeserializeGuard(Ok(z));
        slim(&mut guard);
        let z = guard.0.unwrap();
        assert_eq!(z.metadata.managed_fields, None);
        assert_eq!(
            z.metadata.annotations,
            Some([("team".to_string(), "x".to_string())].into()),
            "other annotations stay"
        );
    }

    #[test]
    fn the_status_only_filter_forgets_deleted_objects() {
        let (store, mut writer) = reflector::store::<VSphereDeploymentZone>();
        let mut filter = StatusOnlyFilter::new(store, |z| fingerprint(z.meta()));
        for i in 0..500 {
            let z = zone(&format!("z{i}"), &format!("uid-{i}"));
            writer.apply_watcher_event(&watcher::Event::Apply(z.clone()));
            assert!(filter.admit(&z));
            assert!(!filter.admit(&z), "a repeat without changes is dropped");
            writer.apply_watcher_event(&watcher::Event::Delete(z));
        }
        assert!(
            filter.remembered() <= FORGET_SLACK + 1,
            "{} fingerprints remembered for deleted objects",
            filter.remembered()
        );
        // A live object is still remembered.
        let live = zone("live", "uid-live");
        writer.apply_watcher_event(&watcher::Event::Apply(live.clone()));
        assert!(filter.admit(&live));
        for i in 0..200 {
            filter.admit(&zone(&format!("gone{i}"), "x"));
        }
        assert!(!filter.admit(&live), "live objects are not forgotten");
    }
}
