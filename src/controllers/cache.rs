//! The reflector caches the reconcilers read, one per watched kind.
//!
//! Objects are cached as [`DeserializeGuard`]s: an object that does not decode (a hand-edited
//! field of the wrong type, a CRD version skew) is kept with its metadata and the decode error
//! instead of failing the whole list, so one bad object never stops a watch. Readers choose:
//! [`Cache::valid`] for the decodable objects, [`Cache::invalid`] for the others (a zone
//! deletion, for instance, treats an undecodable Machine as possibly in the zone).
//!
//! A cache also says whether it has its initial list ([`Cache::is_synced`]): reconcilers must
//! not act on an empty cache that merely has not loaded yet (no Machines is not the same as no
//! Machines listed yet).
//!
//! A kind this provider does not install may not be served at all (Cluster API's Machine and
//! Cluster on an OpenShift-only install): its cache is then *absent* ([`Cache::is_served`]
//! false), which counts as loaded — an empty answer that is true — so it holds no controller
//! back; readers that must not miss an object in the moment the kind appears read it directly
//! while the cache says absent.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::Resource;
use kube::core::DeserializeGuard;
use kube::core::error_boundary::InvalidObject;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;

/// The cache of one kind.
pub struct Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store: Store<DeserializeGuard<K>>,
    synced: Arc<AtomicBool>,
    /// The kind was not served at the last look (its watch has not started).
    absent: Arc<AtomicBool>,
}

impl<K> Clone for Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn clone(&self) -> Self {
        Cache {
            store: self.store.clone(),
            synced: self.synced.clone(),
            absent: self.absent.clone(),
        }
    }
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// A cache fed by `writer`'s reflector; not synced until [`Cache::wait_synced`] saw the
    /// initial list.
    pub(crate) fn over(store: Store<DeserializeGuard<K>>) -> Self {
        Cache {
            store,
            synced: Arc::default(),
            absent: Arc::default(),
        }
    }

    /// A synced cache holding exactly `entries` (decodable or not): for calling a reconciler
    /// directly.
    pub fn from_entries(entries: impl IntoIterator<Item = DeserializeGuard<K>>) -> Self {
        let (store, mut writer) = reflector::store::<DeserializeGuard<K>>();
        writer.apply_watcher_event(&watcher::Event::Init);
        for o in entries {
            writer.apply_watcher_event(&watcher::Event::InitApply(o));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        Cache {
            store,
            synced: Arc::new(AtomicBool::new(true)),
            absent: Arc::default(),
        }
    }

    /// A cache of a kind the API server does not serve: loaded and empty.
    pub fn absent() -> Self {
        let c = Self::unsynced();
        c.set_absent(true);
        c
    }

    /// Whether the kind was served at the last look (false: its CRD is not installed, and
    /// the cache is empty for that reason).
    pub fn is_served(&self) -> bool {
        !self.absent.load(Ordering::SeqCst)
    }

    pub(crate) fn set_absent(&self, absent: bool) {
        self.absent.store(absent, Ordering::SeqCst);
    }

    /// A synced cache holding exactly `objects`.
    pub fn from_objects(objects: impl IntoIterator<Item = K>) -> Self {
        Self::from_entries(objects.into_iter().map(|o| DeserializeGuard(Ok(o))))
    }

    /// An empty cache that has not loaded yet (its watch has not listed).
    pub fn unsynced() -> Self {
        let (store, _writer) = reflector::store::<DeserializeGuard<K>>();
        Cache::over(store)
    }

    /// The underlying store (what the controllers are built on).
    pub fn store(&self) -> Store<DeserializeGuard<K>> {
        self.store.clone()
    }

    /// Whether the initial list is in, or the kind is not served.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst) || !self.is_served()
    }

    /// Wait for the initial list; false if the watch is gone for good (its writer dropped).
    ///
    /// The store's readiness signal keeps only the waker of its latest waiter (a kube-runtime
    /// `DelayedInit` is a oneshot channel), so this polls with a timeout rather than waiting
    /// once: a waiter whose waker was replaced still looks again. After the first success it
    /// answers at once.
    pub async fn wait_synced(&self) -> bool {
        if self.is_synced() {
            return true;
        }
        loop {
            // An optional kind found absent meanwhile is loaded too.
            if self.is_synced() {
                return true;
            }
            match tokio::time::timeout(Duration::from_millis(200), self.store.wait_until_ready())
                .await
            {
                Ok(Ok(())) => {
                    self.synced.store(true, Ordering::SeqCst);
                    return true;
                }
                Ok(Err(_)) => return false,
                Err(_) => continue,
            }
        }
    }

    /// For a kind that was absent and whose watch has now started: wait for the initial list,
    /// then say the cache is loaded and the kind served (in that order, so it never reads as
    /// loading meanwhile). False if the watch is gone for good.
    pub(crate) async fn load(&self) -> bool {
        loop {
            match tokio::time::timeout(Duration::from_millis(200), self.store.wait_until_ready())
                .await
            {
                Ok(Ok(())) => {
                    self.synced.store(true, Ordering::SeqCst);
                    self.set_absent(false);
                    return true;
                }
                Ok(Err(_)) => return false,
                Err(_) => continue,
            }
        }
    }

    /// Every decodable object.
    pub fn valid(&self) -> Vec<K> {
        self.store
            .state()
            .iter()
            .filter_map(|g| g.0.as_ref().ok().cloned())
            .collect()
    }

    /// The first decodable object `pred` accepts, cloning only that one (a reconcile per object
    /// that copied every object of its kind would cost N² copies per resync).
    pub fn find(&self, pred: impl Fn(&K) -> bool) -> Option<K> {
        self.store
            .state()
            .iter()
            .find_map(|g| g.0.as_ref().ok().filter(|o| pred(o)).cloned())
    }

    /// Every object that could not be decoded (metadata and the error).
    pub fn invalid(&self) -> Vec<InvalidObject> {
        self.store
            .state()
            .iter()
            .filter_map(|g| g.0.as_ref().err().cloned())
            .collect()
    }

    /// One object by namespace and name: `None` if absent, `Some(Err(why))` if it does not
    /// decode.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Result<K, String>> {
        let mut r = ObjectRef::<DeserializeGuard<K>>::new(name);
        if let Some(ns) = namespace {
            r = r.within(ns);
        }
        self.store.get(&r).map(|g| g.0.clone().map_err(|e| e.error))
    }
}

/// `namespace/name` (or `name`) of an object's metadata, for messages.
pub fn display_name(meta: &kube::api::ObjectMeta) -> String {
    match (&meta.namespace, &meta.name) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        (None, Some(n)) => n.clone(),
        _ => "(unnamed)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::VSphereDeploymentZone;

    #[test]
    fn undecodable_objects_are_kept_apart_from_valid_ones() {
        let good: DeserializeGuard<VSphereDeploymentZone> =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "VSphereDeploymentZone",
                "metadata": {"name": "good"},
                "spec": {"server": "vc", "placementConstraint": {}}
            }))
            .unwrap();
        let bad: DeserializeGuard<VSphereDeploymentZone> =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "VSphereDeploymentZone",
                "metadata": {"name": "bad"},
                "spec": {"server": 42}
            }))
            .unwrap();
        let cache = Cache::from_entries([good, bad]);
        assert!(cache.is_synced());
        let names: Vec<_> = cache
            .valid()
            .iter()
            .map(|z| z.metadata.name.clone())
            .collect();
        assert_eq!(names, [Some("good".to_string())]);
        let invalid = cache.invalid();
        assert_eq!(invalid.len(), 1);
        assert_eq!(display_name(&invalid[0].metadata), "bad");
        assert!(cache.get(None, "bad").unwrap().is_err());
        assert!(cache.get(None, "good").unwrap().is_ok());
        assert!(cache.get(None, "missing").is_none());
        assert!(!Cache::<VSphereDeploymentZone>::unsynced().is_synced());
    }
}
