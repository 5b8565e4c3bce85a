//! The VSphereClusterIdentity controller on the real API server (Kubernetes' own
//! kube-apiserver, tests/support/realapi.rs), the controllers running in this process as the
//! controller's ServiceAccount bound by config/rbac (so a missing grant fails here with 403).
//!
//! An identity's Secret lives in the manager's namespace (`vsphere-provider-system`); the
//! controller makes it the identity's own (owner reference, CAPV's Secret finalizer) so that
//! `clusterctl move` takes it along with the identity, refuses it to a second identity
//! (CAPV's SecretAlreadyInUse), names a missing one and retries until it appears, and lets it go
//! when the identity is deleted. No kube-controller-manager runs here: nothing garbage-collects
//! the Secret once its owner is gone, so the test sees exactly what the controller left.
#[path = "support/capi_crds.rs"]
mod capi_crds;
#[path = "support/capi_in_process.rs"]
mod capi_in_process;
#[path = "support/process.rs"]
mod process;
#[path = "support/realapi.rs"]
mod realapi;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::time::Duration;

use capi_in_process::*;
use realapi::{ControlPlane, Identity, SA_NAMESPACE, control_plane};
use serde_json::{Value, json};

const ADMIN: &Identity = &Identity::Admin;
const IDENTITY_FINALIZER: &str = "vsphereclusteridentity/infrastructure.cluster.x-k8s.io";
const SECRET_FINALIZER: &str = "vspherecluster/infrastructure.cluster.x-k8s.io";
const LIMIT: Duration = Duration::from_secs(60);

/// One test at a time: each runs its own controllers, which would otherwise reconcile the
/// other test's identities too.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn identity(name: &str, secret: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VSphereClusterIdentity",
        "metadata": {"name": name},
        "spec": {"secretName": secret, "allowedNamespaces": {"selector": {}}}
    })
}

/// A Secret of the manager's namespace with placeholder credentials (no vCenter is used).
fn secret(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": SA_NAMESPACE},
        "type": "Opaque",
        "stringData": {"username": "user", "password": "placeholder"}
    })
}

fn apply(cp: &ControlPlane, objects: Vec<Value>) {
    cp.apply_text(
        ADMIN,
        &json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string(),
        None,
    )
    .ok();
}

async fn get_identity(cp: &ControlPlane, name: &str) -> Option<Value> {
    get_json(cp, "vsphereclusteridentity", SA_NAMESPACE, name)
}

async fn get_secret(cp: &ControlPlane, name: &str) -> Option<Value> {
    get_json(cp, "secret", SA_NAMESPACE, name)
}

fn owners(s: &Value) -> Vec<(String, String, String)> {
    s["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let f = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (f("kind"), f("name"), f("uid"))
        })
        .collect()
}

fn available(i: &Value) -> Option<(String, String, String)> {
    v1beta2(i, "Available")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_owns_its_secret_refuses_it_to_a_second_and_releases_it_when_deleted() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    // Cluster-scoped names, unique per run of this control plane.
    let run = cp.namespace("identity");
    let (id1, id2, s1) = (
        format!("{run}-a"),
        format!("{run}-b"),
        format!("{run}-creds"),
    );
    let controllers = Controllers::start(cp).await;

    // The admin's identity and its Secret: the Secret becomes the identity's, the identity ready.
    apply(cp, vec![secret(&s1), identity(&id1, &s1)]);
    let first = eventually(
        "the first identity available",
        LIMIT,
        || get_identity(cp, &id1),
        |i| available(i).is_some_and(|a| a.0 == "True"),
    )
    .await;
    let uid1 = first["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(finalizers(&first), [IDENTITY_FINALIZER], "{first}");
    assert_eq!(first["status"]["ready"], true, "{first}");
    assert_eq!(available(&first).unwrap().1, "Available", "{first}");
    assert_eq!(
        v1beta1(&first, "CredentialsAvailable").unwrap().0,
        "True",
        "{first}"
    );
    assert_eq!(v1beta1(&first, "Ready").unwrap().0, "True", "{first}");
    assert_eq!(v1beta2(&first, "Paused").unwrap().1, "NotPaused", "{first}");
    let owned = eventually(
        "the Secret owned by the first identity",
        LIMIT,
        || get_secret(cp, &s1),
        |s| !owners(s).is_empty() && finalizers(s).contains(&SECRET_FINALIZER.to_string()),
    )
    .await;
    assert_eq!(
        owners(&owned),
        [("VSphereClusterIdentity".into(), id1.clone(), uid1.clone())],
        "{owned}"
    );
    assert_eq!(finalizers(&owned), [SECRET_FINALIZER], "{owned}");

    // A second identity naming the same Secret is refused, with CAPV's reasons; the Secret
    // stays the first one's.
    apply(cp, vec![identity(&id2, &s1)]);
    let second = eventually(
        "the second identity refused",
        LIMIT,
        || get_identity(cp, &id2),
        |i| available(i).is_some_and(|a| a.0 == "False"),
    )
    .await;
    let (_, reason, message) = available(&second).unwrap();
    assert_eq!(reason, "SecretAlreadyInUse", "{second}");
    assert!(
        message.contains(&format!("{SA_NAMESPACE}/{s1}")),
        "{message}"
    );
    assert!(message.contains(&id1), "names the owner: {message}");
    assert_eq!(
        v1beta1(&second, "CredentialsAvailable").unwrap(),
        ("False".into(), "SecretInUse".into()),
        "{second}"
    );
    assert_eq!(second["status"]["ready"], false, "{second}");
    let still = get_secret(cp, &s1).await.unwrap();
    assert_eq!(owners(&still), owners(&owned), "{still}");

    // Deleting the second identity leaves the first one's hold on the Secret alone.
    cp.kubectl(
        ADMIN,
        &["delete", "vsphereclusteridentity", &id2, "--wait=false"],
    )
    .ok();
    eventually(
        "the second identity gone",
        LIMIT,
        || async { Some(get_identity(cp, &id2).await.is_none()) },
        |gone| *gone,
    )
    .await;
    let still = get_secret(cp, &s1).await.unwrap();
    assert_eq!(finalizers(&still), [SECRET_FINALIZER], "{still}");

    // Deleting the first identity releases the Secret's finalizer, then the identity goes.
    cp.kubectl(
        ADMIN,
        &["delete", "vsphereclusteridentity", &id1, "--wait=false"],
    )
    .ok();
    eventually(
        "the first identity gone",
        LIMIT,
        || async { Some(get_identity(cp, &id1).await.is_none()) },
        |gone| *gone,
    )
    .await;
    let released = get_secret(cp, &s1).await.unwrap();
    assert!(finalizers(&released).is_empty(), "{released}");

    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_is_named_and_retried_until_it_appears_and_the_annotation_pauses() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cp = control_plane();
    let run = cp.namespace("identity-missing");
    let (id, s) = (format!("{run}-a"), format!("{run}-creds"));
    let controllers = Controllers::start(cp).await;

    apply(cp, vec![identity(&id, &s)]);
    let missing = eventually(
        "the missing Secret named",
        LIMIT,
        || get_identity(cp, &id),
        |i| available(i).is_some_and(|a| a.0 == "False"),
    )
    .await;
    let (_, reason, message) = available(&missing).unwrap();
    assert_eq!(reason, "SecretNotAvailable", "{missing}");
    assert!(
        message.contains(&format!("{SA_NAMESPACE}/{s}")),
        "names namespace/name: {message}"
    );
    assert_eq!(
        v1beta1(&missing, "CredentialsAvailable").unwrap(),
        ("False".into(), "SecretNotAvailable".into()),
        "{missing}"
    );
    assert_eq!(missing["status"]["ready"], false, "{missing}");

    // Secrets are not watched: the backoff's retries find it (5 s, 10 s, 20 s … from the
    // first failure).
    apply(cp, vec![secret(&s)]);
    let found = eventually(
        "the identity available once its Secret exists",
        Duration::from_secs(90),
        || get_identity(cp, &id),
        |i| available(i).is_some_and(|a| a.0 == "True"),
    )
    .await;
    assert_eq!(found["status"]["ready"], true, "{found}");

    // Paused by the annotation: only the Paused condition changes.
    cp.kubectl(
        ADMIN,
        &[
            "annotate",
            "vsphereclusteridentity",
            &id,
            "cluster.x-k8s.io/paused=",
        ],
    )
    .ok();
    let paused = eventually(
        "the identity paused",
        LIMIT,
        || get_identity(cp, &id),
        |i| v1beta2(i, "Paused").is_some_and(|p| p.0 == "True"),
    )
    .await;
    assert_eq!(v1beta2(&paused, "Paused").unwrap().1, "Paused", "{paused}");
    assert_eq!(available(&paused).unwrap().0, "True", "{paused}");

    controllers.stop().await;
}
