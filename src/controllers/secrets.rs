//! The vCenter credentials Secrets our objects name, each read at most once per
//! [`Polling::credentials_reread`](crate::plan::machine::waiting::Polling::credentials_reread)
//! rather than once per sweep and reconcile.
//!
//! Why not a watch: the manager reads Secrets by name only (`get`, config/rbac's
//! `vsphere-provider-secrets`). A watch needs `list` and `watch` on Secrets, and RBAC cannot
//! narrow those to names nobody knows in advance: the manager could then read every Secret in
//! its scope. So the Secret is read by name as before, and its content remembered for a short
//! while (per namespace and name; one read at a time per Secret, so concurrent reconciles of a
//! cold cache share one GET). Within that while:
//! - a changed Secret (a rotated password) is read at the next look after it, or at once
//!   after vCenter refused the remembered one (`Context::client_as` reads again when the
//!   client's last login was refused);
//! - a deleted Secret is noticed at the next look (a missing Secret is never remembered, so
//!   its absence is re-read every time until it is there).
//!
//! Nothing here is logged or printed: the cache has no `Debug`, and read errors name only the
//! Secret.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

/// One remembered Secret: when it was read and what it held.
struct Entry {
    read_at: Instant,
    secret: Secret,
}

/// One Secret's read in flight or its last one.
type Slot = Arc<tokio::sync::Mutex<Option<Entry>>>;

/// See the module documentation.
#[derive(Clone, Default)]
pub struct SecretCache {
    /// Per (namespace, name): the read in flight or the last one. The async lock is held across
    /// the GET so that concurrent callers wait for it instead of repeating it.
    entries: Arc<Mutex<HashMap<(String, String), Slot>>>,
}

/// Where a Secret came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Read from the API server by this call.
    Now,
    /// Remembered from an earlier read, younger than the reread interval.
    Remembered,
}

impl SecretCache {
    fn slot(&self, ns: &str, name: &str) -> Slot {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .entry((ns.to_string(), name.to_string()))
            .or_default()
            .clone()
    }

    /// The Secret `ns/name`: remembered if read less than `max_age` ago, else read now (`get`).
    /// `Ok(None)` when it does not exist (not remembered: the next call reads again).
    pub async fn get(
        &self,
        client: &kube::Client,
        ns: &str,
        name: &str,
        max_age: Duration,
    ) -> Result<Option<(Secret, Read)>, kube::Error> {
        let slot = self.slot(ns, name);
        let mut entry = slot.lock().await;
        if let Some(e) = entry.as_ref()
            && e.read_at.elapsed() < max_age
        {
            return Ok(Some((e.secret.clone(), Read::Remembered)));
        }
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        let read = api.get_opt(name).await;
        *entry = match &read {
            Ok(Some(s)) => Some(Entry {
                read_at: Instant::now(),
                secret: s.clone(),
            }),
            _ => None,
        };
        drop(entry);
        if !matches!(read, Ok(Some(_))) {
            self.drop_slot(ns, name, &slot);
        }
        Ok(read?.map(|s| (s, Read::Now)))
    }

    /// Forget `ns/name`: the next [`SecretCache::get`] reads it (after a write to it, whose
    /// result the remembered copy does not hold).
    pub fn forget(&self, ns: &str, name: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(&(ns.to_string(), name.to_string()));
    }

    /// Drops the slot of a Secret that is not there (nothing to remember), unless another
    /// caller holds it meanwhile.
    fn drop_slot(&self, ns: &str, name: &str, slot: &Slot) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ns.to_string(), name.to_string());
        if entries.get(&key).is_some_and(|s| Arc::ptr_eq(s, slot)) && Arc::strong_count(slot) <= 2 {
            entries.remove(&key);
        }
    }

    /// How many Secrets are remembered (tests).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A client whose API server answers every GET with the Secret `s` holding `password`
    /// (the current value of `password`), or 404 once `gone`; counts the requests.
    fn server(password: Arc<Mutex<Option<String>>>, requests: Arc<AtomicUsize>) -> kube::Client {
        let service = tower::service_fn(move |_req: Request<Body>| {
            requests.fetch_add(1, Ordering::SeqCst);
            let password = password.lock().unwrap().clone();
            async move {
                let (status, body) = match password {
                    Some(p) => (
                        200,
                        serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": "s", "namespace": "ns", "resourceVersion": "1"},
                            "stringData": {}, "data": {"password": base64(&p)}}),
                    ),
                    None => (
                        404,
                        serde_json::json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
                            "reason": "NotFound", "code": 404, "message": "secrets \"s\" not found"}),
                    ),
                };
                Ok::<_, std::convert::Infallible>(
                    Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(Body::from(serde_json::to_vec(&body).unwrap()))
                        .unwrap(),
                )
            }
        });
        kube::Client::new(service, "default")
    }

    fn base64(s: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn password(s: &Secret) -> String {
        String::from_utf8(s.data.as_ref().unwrap()["password"].0.clone()).unwrap()
    }

    #[tokio::test]
    async fn a_secret_is_read_once_per_interval_and_again_after_it_or_when_forgotten() {
        let value = Arc::new(Mutex::new(Some("old".to_string())));
        let requests = Arc::new(AtomicUsize::new(0));
        let client = server(value.clone(), requests.clone());
        let cache = SecretCache::default();
        let long = Duration::from_secs(60);
        let (s, read) = cache.get(&client, "ns", "s", long).await.unwrap().unwrap();
        assert_eq!((password(&s), read), ("old".into(), Read::Now));
        // Concurrent and later looks within the interval share that read.
        let (a, b) = tokio::join!(
            cache.get(&client, "ns", "s", long),
            cache.get(&client, "ns", "s", long)
        );
        assert_eq!(a.unwrap().unwrap().1, Read::Remembered);
        assert_eq!(b.unwrap().unwrap().1, Read::Remembered);
        assert_eq!(requests.load(Ordering::SeqCst), 1);

        // Rotated: seen once the interval is over (here: zero), or at once when forgotten.
        *value.lock().unwrap() = Some("new".into());
        let (s, _) = cache.get(&client, "ns", "s", long).await.unwrap().unwrap();
        assert_eq!(password(&s), "old", "remembered within the interval");
        let (s, read) = cache
            .get(&client, "ns", "s", Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((password(&s), read), ("new".into(), Read::Now));
        *value.lock().unwrap() = Some("newer".into());
        cache.forget("ns", "s");
        let (s, _) = cache.get(&client, "ns", "s", long).await.unwrap().unwrap();
        assert_eq!(password(&s), "newer");

        // Deleted: noticed at the next read, and absence is never remembered.
        *value.lock().unwrap() = None;
        assert!(
            cache
                .get(&client, "ns", "s", Duration::ZERO)
                .await
                .unwrap()
                .is_none()
        );
        assert!(cache.is_empty(), "nothing remembered of a missing Secret");
        let before = requests.load(Ordering::SeqCst);
        assert!(cache.get(&client, "ns", "s", long).await.unwrap().is_none());
        assert_eq!(requests.load(Ordering::SeqCst), before + 1);
    }
}
