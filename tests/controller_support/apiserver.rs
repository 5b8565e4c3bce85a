//! A small in-memory Kubernetes API server for the controller tests: a stand-in for kube-apiserver
//! where exact requests and injected faults are asserted (the realapi_* tests run the real one,
//! tests/support/realapi.rs). It speaks enough of the REST API for kube-rs: list and watch
//! (streamed initial lists as WatchList serves them, and resourceVersion replay), get, create,
//! replace (resourceVersion compare-and-swap), patch (merge, JSON patch, and server-side apply of
//! the status subresource approximated per field manager: what a manager sends is merged in,
//! map-lists by their key (`list_key`), other lists whole, and what it sent last time but not this
//! time is removed), delete with finalizers and preconditions, and the status subresource. Every
//! request is recorded so tests can assert what the controllers wrote, and what they did not.
//! Requests can be failed (`inject`) or held unanswered until released (`hold`).
//!
//! It is an axum `Router` handed to `kube::Client::new`, so no socket is involved.
//!
//! ```ignore
//! #[path = "controller_support/apiserver.rs"]
//! mod apiserver;
//! let api = apiserver::FakeApiServer::new();
//! let client = api.client();
//! ```
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// Where an object lives: `group/version/plural`, namespace, name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub resource: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub body: Value,
    pub status: u16,
}

#[derive(Clone, Debug)]
struct Change {
    rv: u64,
    type_: &'static str,
    key: Key,
    object: Value,
}

/// A failure to inject: the next `count` requests whose method matches and whose path contains
/// `path` get `status`.
#[derive(Clone, Debug)]
struct Injected {
    method: String,
    path: String,
    status: u16,
    count: u32,
}

#[derive(Default)]
struct Inner {
    rv: u64,
    uid: u64,
    objects: BTreeMap<Key, Value>,
    changes: Vec<Change>,
    requests: Vec<Recorded>,
    injected: Vec<Injected>,
    /// (method, path substring) of requests held unanswered.
    holds: Vec<(String, String)>,
    /// The status each field manager last applied, per object.
    applied: BTreeMap<(Key, String), Value>,
}

/// The fake API server; clone freely (shared state).
#[derive(Clone)]
pub struct FakeApiServer {
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<Change>,
    /// Bumped whenever holds are released.
    released: Arc<tokio::sync::watch::Sender<u64>>,
}

/// What the path names.
#[derive(Debug)]
struct Target {
    resource: String,
    api_version: String,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, s] => (*p, Some(n.to_string()), Some(s.to_string())),
        _ => return None,
    };
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(Target {
        resource: format!("{group}/{version}/{plural}"),
        api_version,
        namespace,
        name,
        subresource: sub,
    })
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok_json(code: StatusCode, v: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

/// RFC 7386 JSON merge patch.
pub fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn pointer_parts(path: &str) -> Vec<String> {
    path.split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// The subset of RFC 6902 kube-runtime's finalizer helper uses: test, add, remove, replace.
fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    for op in ops.as_array().ok_or("JSON patch is not an array")? {
        let kind = op["op"].as_str().unwrap_or_default();
        let path = op["path"].as_str().unwrap_or_default();
        let parts = pointer_parts(path);
        let (last, parents) = parts.split_last().ok_or("empty path")?;
        let mut parent = &mut *doc;
        for p in parents {
            parent = match parent {
                Value::Object(m) => m.get_mut(p).ok_or(format!("{path}: missing {p}"))?,
                Value::Array(a) => a
                    .get_mut(p.parse::<usize>().map_err(|e| e.to_string())?)
                    .ok_or(format!("{path}: index {p}"))?,
                _ => return Err(format!("{path}: not a container")),
            };
        }
        match kind {
            "test" => {
                let actual = match &*parent {
                    Value::Object(m) => m.get(last).cloned().unwrap_or(Value::Null),
                    Value::Array(a) => last
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| a.get(i).cloned())
                        .unwrap_or(Value::Null),
                    _ => Value::Null,
                };
                if actual != op["value"] {
                    return Err(format!("test of {path} failed"));
                }
            }
            "add" | "replace" => match parent {
                Value::Object(m) => {
                    m.insert(last.clone(), op["value"].clone());
                }
                Value::Array(a) if last == "-" => a.push(op["value"].clone()),
                Value::Array(a) => {
                    let i: usize = last.parse().map_err(|_| format!("{path}: bad index"))?;
                    if kind == "add" {
                        a.insert(i.min(a.len()), op["value"].clone());
                    } else if i < a.len() {
                        a[i] = op["value"].clone();
                    }
                }
                _ => return Err(format!("{path}: not a container")),
            },
            "remove" => match parent {
                Value::Object(m) => {
                    m.remove(last);
                }
                Value::Array(a) => {
                    let i: usize = last.parse().map_err(|_| format!("{path}: bad index"))?;
                    if i >= a.len() {
                        return Err(format!("{path}: no such index"));
                    }
                    a.remove(i);
                }
                _ => return Err(format!("{path}: not a container")),
            },
            other => return Err(format!("unsupported op {other}")),
        }
    }
    Ok(())
}

/// The key of the list at `path` (inside a status) where it is a map-list, as our CRDs declare
/// them: the v1beta2 `conditions` (and a v1beta1 status's `v1beta2.conditions`) by `type`, a
/// v1beta2 VSphereCluster's `failureDomains` by `name`; other lists (the v1beta1 conditions,
/// under `deprecated.v1beta1` at v1beta2) are atomic. Every kind applied here is served at
/// v1beta2, so a top-level `conditions` is the metav1 list.
fn list_key(path: &[String]) -> Option<&'static str> {
    match path {
        [c] if c == "conditions" => Some("type"),
        [f] if f == "failureDomains" => Some("name"),
        [.., v, c] if v == "v1beta2" && c == "conditions" => Some("type"),
        _ => None,
    }
}

fn by_key<'a>(list: &'a [Value], key: &str, v: &Value) -> Option<&'a Value> {
    list.iter().find(|e| e[key] == *v)
}

/// Server-side apply, part one: remove from `target` what the manager applied last time
/// (`previous`) but not this time (`sent`).
fn drop_unsent(target: &mut Value, previous: &Value, sent: &Value, path: &mut Vec<String>) {
    match (previous, sent) {
        (Value::Object(prev), _) => {
            for (k, pv) in prev {
                let sv = sent.get(k);
                let Some(t) = target.as_object_mut() else {
                    return;
                };
                match sv {
                    None => {
                        t.remove(k);
                    }
                    Some(sv) => {
                        if let Some(tv) = t.get_mut(k) {
                            path.push(k.clone());
                            drop_unsent(tv, pv, sv, path);
                            path.pop();
                        }
                    }
                }
            }
        }
        (Value::Array(prev), Value::Array(now)) if list_key(path).is_some() => {
            let key = list_key(path).unwrap_or_default();
            if let Value::Array(t) = target {
                t.retain(|e| {
                    by_key(prev, key, &e[key]).is_none() || by_key(now, key, &e[key]).is_some()
                });
            }
        }
        _ => {}
    }
}

/// Server-side apply, part two: merge `sent` into `target` (objects by key, map-lists by their
/// key ([`list_key`]), other lists and scalars replaced).
fn apply_sent(target: &mut Value, sent: &Value, path: &mut Vec<String>) {
    match sent {
        Value::Object(s) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in s {
                path.push(k.clone());
                apply_sent(t.entry(k.clone()).or_insert(Value::Null), v, path);
                path.pop();
            }
        }
        Value::Array(s) if list_key(path).is_some() => {
            let key = list_key(path).unwrap_or_default();
            if !target.is_array() {
                *target = json!([]);
            }
            let t = target.as_array_mut().expect("array");
            for e in s {
                match t.iter_mut().find(|x| x[key] == e[key]) {
                    Some(x) => *x = e.clone(),
                    None => t.push(e.clone()),
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now().to_string()
}

impl Default for FakeApiServer {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeApiServer {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(4096);
        FakeApiServer {
            inner: Arc::default(),
            tx,
            released: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    /// A kube client talking to this server.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.router(), "default")
    }

    /// The server as an axum router (can also be served on a socket).
    pub fn router(&self) -> axum::Router {
        axum::Router::new()
            .fallback(handle)
            .with_state(self.clone())
    }

    // ---- test helpers -------------------------------------------------------------------

    fn key_of<K: Resource<DynamicType = ()>>(namespace: Option<&str>, name: &str) -> Key {
        let group = K::group(&());
        Key {
            resource: format!("{group}/{}/{}", K::version(&()), K::plural(&())),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    /// Create or overwrite an object as an admin would (`kubectl apply`), keeping the
    /// server-managed metadata of an existing one.
    pub fn put<K: Resource<DynamicType = ()> + Serialize>(&self, obj: &K) {
        self.put_json::<K>(serde_json::to_value(obj).expect("serializable"));
    }

    /// Create or overwrite an object of kind `K` from raw JSON (which need not decode as `K`:
    /// for malformed objects), keeping the server-managed metadata of an existing one.
    pub fn put_json<K: Resource<DynamicType = ()>>(&self, mut value: Value) {
        value["apiVersion"] = json!(K::api_version(&()));
        value["kind"] = json!(K::kind(&()));
        let resource = format!("{}/{}/{}", K::group(&()), K::version(&()), K::plural(&()));
        self.put_at(&resource, value);
    }

    /// Create or overwrite an object of a resource this crate has no type for
    /// (`group/version/plural`, e.g. `config.openshift.io/v1/infrastructures`), from JSON that
    /// carries its own apiVersion and kind.
    pub fn put_at(&self, resource: &str, mut value: Value) {
        let key = Key {
            resource: resource.to_string(),
            namespace: value["metadata"]["namespace"].as_str().map(str::to_string),
            name: value["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        };
        let mut inner = self.inner.lock().unwrap();
        let existing = inner.objects.get(&key).cloned();
        match existing {
            Some(old) => {
                for f in ["uid", "creationTimestamp", "generation"] {
                    if let Some(v) = old["metadata"].get(f) {
                        value["metadata"][f] = v.clone();
                    }
                }
                self.commit(&mut inner, "MODIFIED", key, value, Some(&old));
            }
            None => {
                self.stamp_new(&mut inner, &mut value);
                self.commit(&mut inner, "ADDED", key, value, None);
            }
        }
    }

    /// The stored object at `resource` (`group/version/plural`) as raw JSON, if any.
    pub fn get_at(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let key = Key {
            resource: resource.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        };
        self.inner.lock().unwrap().objects.get(&key).cloned()
    }

    /// The stored object as raw JSON, if any.
    pub fn get_json<K: Resource<DynamicType = ()>>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let key = Self::key_of::<K>(namespace, name);
        self.inner.lock().unwrap().objects.get(&key).cloned()
    }

    /// Hold requests with this method whose path contains `path` unanswered until
    /// [`FakeApiServer::release_holds`] (an API server that stopped answering).
    pub fn hold(&self, method: &str, path: &str) {
        self.inner
            .lock()
            .unwrap()
            .holds
            .push((method.into(), path.into()));
    }

    /// Answer every held request, and hold no more.
    pub fn release_holds(&self) {
        self.inner.lock().unwrap().holds.clear();
        self.released.send_modify(|n| *n += 1);
    }

    fn is_held(&self, method: &str, path: &str) -> bool {
        self.inner
            .lock()
            .unwrap()
            .holds
            .iter()
            .any(|(m, p)| m == method && path.contains(p.as_str()))
    }

    /// The stored object, if any.
    pub fn get<K: Resource<DynamicType = ()> + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<K> {
        let key = Self::key_of::<K>(namespace, name);
        let v = self.inner.lock().unwrap().objects.get(&key).cloned()?;
        Some(serde_json::from_value(v).expect("stored object deserializes"))
    }

    /// Every stored object of a kind.
    pub fn list<K: Resource<DynamicType = ()> + DeserializeOwned>(&self) -> Vec<K> {
        let resource = Self::key_of::<K>(None, "").resource;
        self.inner
            .lock()
            .unwrap()
            .objects
            .iter()
            .filter(|(k, _)| k.resource == resource)
            .map(|(_, v)| serde_json::from_value(v.clone()).expect("deserializes"))
            .collect()
    }

    /// Delete as `kubectl delete` would: finalizers keep the object with a deletionTimestamp.
    pub fn delete<K: Resource<DynamicType = ()>>(&self, namespace: Option<&str>, name: &str) {
        let key = Self::key_of::<K>(namespace, name);
        let mut inner = self.inner.lock().unwrap();
        self.delete_locked(&mut inner, &key);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// Requests with this method whose path contains `path`.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method && r.path.contains(path))
            .count()
    }

    /// Fail the next `count` requests matching `method` and `path` (substring) with `status`.
    pub fn inject(&self, method: &str, path: &str, status: u16, count: u32) {
        self.inner.lock().unwrap().injected.push(Injected {
            method: method.into(),
            path: path.into(),
            status,
            count,
        });
    }

    /// Poll `check` every 50 ms until it returns Some, or panic after `timeout`.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&Self) -> Option<T>,
    ) -> T {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            if tokio::time::Instant::now() >= deadline {
                let log: Vec<String> = self
                    .requests()
                    .iter()
                    .map(|r| format!("{} {}?{} -> {}", r.method, r.path, r.query, r.status))
                    .collect();
                panic!(
                    "timed out waiting for {what}; requests:\n{}",
                    log.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // ---- internals ----------------------------------------------------------------------

    fn stamp_new(&self, inner: &mut Inner, value: &mut Value) {
        inner.uid += 1;
        let meta = value
            .as_object_mut()
            .expect("object")
            .entry("metadata")
            .or_insert_with(|| json!({}));
        meta["uid"] = json!(format!("uid-{}", inner.uid));
        meta["creationTimestamp"] = json!(now_rfc3339());
        meta["generation"] = json!(1);
    }

    /// Store `value` (or remove it for DELETED) with a fresh resourceVersion and broadcast.
    fn commit(
        &self,
        inner: &mut Inner,
        type_: &'static str,
        key: Key,
        mut value: Value,
        old: Option<&Value>,
    ) -> Value {
        inner.rv += 1;
        value["metadata"]["resourceVersion"] = json!(inner.rv.to_string());
        if let Some(old) = old {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
            let spec_changed = old.get("spec") != value.get("spec");
            value["metadata"]["generation"] = json!(if spec_changed {
                generation + 1
            } else {
                generation
            });
        }
        if type_ == "DELETED" {
            inner.objects.remove(&key);
        } else {
            inner.objects.insert(key.clone(), value.clone());
        }
        let change = Change {
            rv: inner.rv,
            type_,
            key,
            object: value.clone(),
        };
        inner.changes.push(change.clone());
        let _ = self.tx.send(change);
        value
    }

    /// After a write: an object being deleted whose finalizers are gone disappears.
    fn commit_update(&self, inner: &mut Inner, key: Key, value: Value, old: &Value) -> Value {
        let finalizers_empty = value["metadata"]["finalizers"]
            .as_array()
            .is_none_or(|a| a.is_empty());
        if value["metadata"].get("deletionTimestamp").is_some() && finalizers_empty {
            self.commit(inner, "DELETED", key, value, Some(old))
        } else {
            self.commit(inner, "MODIFIED", key, value, Some(old))
        }
    }

    fn delete_locked(&self, inner: &mut Inner, key: &Key) -> Option<Value> {
        let old = inner.objects.get(key).cloned()?;
        let has_finalizers = old["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
        if has_finalizers {
            if old["metadata"].get("deletionTimestamp").is_some() {
                return Some(old);
            }
            let mut value = old.clone();
            value["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            Some(self.commit(inner, "MODIFIED", key.clone(), value, Some(&old)))
        } else {
            Some(self.commit(inner, "DELETED", key.clone(), old.clone(), Some(&old)))
        }
    }

    fn take_injected(&self, inner: &mut Inner, method: &str, path: &str) -> Option<u16> {
        let i = inner
            .injected
            .iter()
            .position(|f| f.method == method && path.contains(&f.path) && f.count > 0)?;
        inner.injected[i].count -= 1;
        let status = inner.injected[i].status;
        if inner.injected[i].count == 0 {
            inner.injected.remove(i);
        }
        Some(status)
    }

    fn watch(&self, t: &Target, query: &str) -> Response {
        let since: u64 = query_param(query, "resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let matches = {
            let resource = t.resource.clone();
            let ns = t.namespace.clone();
            move |c: &Change| c.key.resource == resource && (ns.is_none() || c.key.namespace == ns)
        };
        // A streamed list (`sendInitialEvents=true`, as kube-apiserver's WatchList): every
        // object as ADDED, then the bookmark that ends the initial events, then what changes.
        let initial_events = query_param(query, "sendInitialEvents").as_deref() == Some("true");
        let (backlog, rx) = {
            let inner = self.inner.lock().unwrap();
            let backlog: Vec<Change> = if initial_events {
                let mut events: Vec<Change> = inner
                    .objects
                    .iter()
                    .filter(|(k, _)| {
                        k.resource == t.resource
                            && (t.namespace.is_none() || k.namespace == t.namespace)
                    })
                    .map(|(k, v)| Change {
                        rv: inner.rv,
                        type_: "ADDED",
                        key: k.clone(),
                        object: v.clone(),
                    })
                    .collect();
                let kind = events
                    .first()
                    .and_then(|c| c.object["kind"].as_str())
                    .unwrap_or_default()
                    .to_string();
                events.push(Change {
                    rv: inner.rv,
                    type_: "BOOKMARK",
                    key: Key {
                        resource: t.resource.clone(),
                        namespace: t.namespace.clone(),
                        name: String::new(),
                    },
                    object: json!({"apiVersion": t.api_version, "kind": kind, "metadata": {
                        "resourceVersion": inner.rv.to_string(),
                        "annotations": {"k8s.io/initial-events-end": "true"}
                    }}),
                });
                events
            } else {
                inner
                    .changes
                    .iter()
                    .filter(|c| c.rv > since && matches(c))
                    .cloned()
                    .collect()
            };
            (backlog, self.tx.subscribe())
        };
        let live = futures::stream::unfold(rx, |mut rx| async move {
            match rx.recv().await {
                Ok(c) => Some((c, rx)),
                Err(_) => None,
            }
        });
        let m2 = matches.clone();
        let stream = futures::stream::iter(backlog)
            .chain(live.filter(move |c| futures::future::ready(m2(c))))
            .map(|c| {
                let line = json!({"type": c.type_, "object": c.object}).to_string() + "\n";
                Ok::<_, Infallible>(Bytes::from(line))
            });
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from_stream(stream),
        )
            .into_response()
    }

    fn list_response(&self, t: &Target) -> Response {
        let inner = self.inner.lock().unwrap();
        let items: Vec<Value> = inner
            .objects
            .iter()
            .filter(|(k, _)| {
                k.resource == t.resource && (t.namespace.is_none() || k.namespace == t.namespace)
            })
            .map(|(_, v)| v.clone())
            .collect();
        ok_json(
            StatusCode::OK,
            &json!({
                "apiVersion": t.api_version,
                "kind": "List",
                "metadata": {"resourceVersion": inner.rv.to_string()},
                "items": items,
            }),
        )
    }

    fn write(
        &self,
        method: &Method,
        t: &Target,
        query: &str,
        content_type: &str,
        body: &Value,
    ) -> Response {
        let mut inner = self.inner.lock().unwrap();
        let name = t
            .name
            .clone()
            .or_else(|| body["metadata"]["name"].as_str().map(str::to_string))
            .unwrap_or_default();
        let key = Key {
            resource: t.resource.clone(),
            namespace: t.namespace.clone(),
            name: name.clone(),
        };
        let existing = inner.objects.get(&key).cloned();
        let status_sub = t.subresource.as_deref() == Some("status");
        match (method.as_str(), existing) {
            ("POST", Some(_)) => status(409, "AlreadyExists", &format!("{name} already exists")),
            ("POST", None) => {
                let mut value = body.clone();
                if let Some(ns) = &t.namespace {
                    value["metadata"]["namespace"] = json!(ns);
                }
                self.stamp_new(&mut inner, &mut value);
                let v = self.commit(&mut inner, "ADDED", key, value, None);
                ok_json(StatusCode::CREATED, &v)
            }
            (_, None) => status(404, "NotFound", &format!("{} {name} not found", t.resource)),
            ("PUT", Some(old)) => {
                let sent_rv = body["metadata"]["resourceVersion"].as_str();
                if sent_rv.is_some_and(|rv| Some(rv) != old["metadata"]["resourceVersion"].as_str())
                {
                    return status(
                        409,
                        "Conflict",
                        "the object has been modified; please apply your changes to the latest version and try again",
                    );
                }
                let mut value = if status_sub {
                    let mut v = old.clone();
                    v["status"] = body["status"].clone();
                    v
                } else {
                    let mut v = body.clone();
                    if let Some(s) = old.get("status") {
                        v["status"] = s.clone();
                    }
                    v
                };
                for f in ["uid", "creationTimestamp", "deletionTimestamp", "namespace"] {
                    if let Some(x) = old["metadata"].get(f) {
                        value["metadata"][f] = x.clone();
                    }
                }
                let v = self.commit_update(&mut inner, key, value, &old);
                ok_json(StatusCode::OK, &v)
            }
            ("PATCH", Some(old)) => {
                let mut value = old.clone();
                if content_type.starts_with("application/json-patch+json") {
                    if let Err(e) = json_patch(&mut value, body) {
                        return status(422, "Invalid", &e);
                    }
                } else {
                    let sent_rv = body["metadata"]["resourceVersion"].as_str();
                    if sent_rv
                        .is_some_and(|rv| Some(rv) != old["metadata"]["resourceVersion"].as_str())
                    {
                        return status(
                            409,
                            "Conflict",
                            "the object has been modified; please apply your changes to the latest version and try again",
                        );
                    }
                    if content_type.starts_with("application/apply-patch") && status_sub {
                        let manager = query_param(query, "fieldManager").unwrap_or_default();
                        let slot = (key.clone(), manager);
                        let previous = inner.applied.get(&slot).cloned().unwrap_or(json!({}));
                        let sent = match &body["status"] {
                            Value::Object(_) => body["status"].clone(),
                            _ => json!({}),
                        };
                        let mut st = match value.get("status") {
                            Some(v @ Value::Object(_)) => v.clone(),
                            _ => json!({}),
                        };
                        drop_unsent(&mut st, &previous, &sent, &mut Vec::new());
                        apply_sent(&mut st, &sent, &mut Vec::new());
                        value["status"] = st;
                        inner.applied.insert(slot, sent);
                    } else {
                        merge(&mut value, body);
                    }
                }
                if status_sub {
                    let mut only_status = old.clone();
                    only_status["status"] = value["status"].clone();
                    value = only_status;
                } else if let Some(s) = old.get("status") {
                    value["status"] = s.clone();
                }
                for f in ["uid", "creationTimestamp", "deletionTimestamp"] {
                    match old["metadata"].get(f) {
                        Some(x) => value["metadata"][f] = x.clone(),
                        None => {
                            if let Some(m) = value["metadata"].as_object_mut() {
                                m.remove(f);
                            }
                        }
                    }
                }
                let v = self.commit_update(&mut inner, key, value, &old);
                ok_json(StatusCode::OK, &v)
            }
            ("DELETE", Some(old)) => {
                let pre = &body["preconditions"];
                let uid_ok = pre["uid"]
                    .as_str()
                    .is_none_or(|u| Some(u) == old["metadata"]["uid"].as_str());
                let rv_ok = pre["resourceVersion"]
                    .as_str()
                    .is_none_or(|rv| Some(rv) == old["metadata"]["resourceVersion"].as_str());
                if !(uid_ok && rv_ok) {
                    return status(409, "Conflict", "Precondition failed");
                }
                let v = self.delete_locked(&mut inner, &key).unwrap_or(old);
                ok_json(StatusCode::OK, &v)
            }
            _ => status(405, "MethodNotAllowed", "method not allowed"),
        }
    }
}

async fn handle(State(api): State<FakeApiServer>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = axum::body::to_bytes(req.into_body(), 16 << 20)
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    loop {
        let mut released = api.released.subscribe();
        if !api.is_held(method.as_str(), &path) {
            break;
        }
        let _ = released.changed().await;
    }
    let injected = {
        let mut inner = api.inner.lock().unwrap();
        api.take_injected(&mut inner, method.as_str(), &path)
    };
    let response = match (injected, parse_path(&path)) {
        (Some(code), _) => status(code, "Injected", "injected failure"),
        (None, None) => status(404, "NotFound", &format!("no route {path}")),
        (None, Some(t)) => match (&method, &t.name) {
            (&Method::GET, None) if query_param(&query, "watch").as_deref() == Some("true") => {
                api.watch(&t, &query)
            }
            (&Method::GET, None) => api.list_response(&t),
            (&Method::GET, Some(name)) => {
                let key = Key {
                    resource: t.resource.clone(),
                    namespace: t.namespace.clone(),
                    name: name.clone(),
                };
                let stored = api.inner.lock().unwrap().objects.get(&key).cloned();
                match stored.or_else(|| installed_crd(&t.resource, name)) {
                    Some(v) => ok_json(StatusCode::OK, &v),
                    None => status(404, "NotFound", &format!("{} {name} not found", t.resource)),
                }
            }
            _ => api.write(&method, &t, &query, &content_type, &body),
        },
    };
    api.inner.lock().unwrap().requests.push(Recorded {
        method: method.to_string(),
        path,
        query,
        content_type,
        body,
        status: response.status().as_u16(),
    });
    response
}

/// This crate's CRD `name` as `kubectl apply -k config/crd` installs it (with the conversion
/// webhook, Established), unless a test stored its own: the manager reads the CRDs of its multi-version
/// kinds before it starts (`controllers::startup`). A stand-in for the real API server's CRDs,
/// which the realapi tests install.
fn installed_crd(resource: &str, name: &str) -> Option<Value> {
    if resource != "apiextensions.k8s.io/v1/customresourcedefinitions" {
        return None;
    }
    let kind = vsphere_provider::api::Kind::ALL
        .into_iter()
        .find(|k| format!("{}.{}", k.plural(), k.crd().spec.group) == name)?;
    let mut crd = serde_json::to_value(kind.crd()).ok()?;
    crd["status"] = json!({"conditions": [{"type": "Established", "status": "True"}]});
    if kind.api_versions().len() > 1 {
        crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "vsphere-provider-system",
                "name": "vsphere-provider-webhook-service", "path": "/convert"}}}});
    }
    Some(crd)
}

impl FakeApiServer {
    /// Forget every injected failure not yet used.
    pub fn clear_injected(&self) {
        self.inner.lock().unwrap().injected.clear();
    }
}
