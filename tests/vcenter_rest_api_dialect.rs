//! The `/api` REST dialect (vSphere 7.0 U2+), whose session and tagging vcsim does not serve
//! (neither 0.24.2 nor v0.56.0: only `/rest/com/vmware/cis/...`): a loopback
//! server that answers like real vCenter does (reference vcenter-wire.md §9) — `201` with a bare
//! JSON string for the session, unwrapped bodies, `?action=` queries, `error_type` errors —
//! and records what the client sent.
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::IntoResponse;
use axum::routing::any;
use secrecy::SecretString;
use vsphere_provider::vcenter::model::error::RestErrorKind;
use vsphere_provider::vcenter::model::tags::CategorySpec;
use vsphere_provider::vcenter::rest::Dialect;
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials, Error, MoRef, RetryPolicy};

type Log = Arc<Mutex<Vec<String>>>;

const TAG_1: &str = "urn:vmomi:InventoryServiceTag:11111111-0000-0000-0000-000000000001:GLOBAL";
const TAG_2: &str = "urn:vmomi:InventoryServiceTag:11111111-0000-0000-0000-000000000002:GLOBAL";

fn service_content() -> String {
    let raw = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/vcsim-wire/01_RetrieveServiceContent.response.http"),
    )
    .unwrap();
    let body = raw.split_once("\n\n").unwrap().1;
    // A vSphere 8 server: the client should go to /api first.
    body.replace(
        "<apiVersion>6.5</apiVersion>",
        "<apiVersion>8.0.3.0</apiVersion>",
    )
}

async fn handle(
    State(log): State<Log>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let path_q = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body).to_string();
    log.lock()
        .unwrap()
        .push(format!("{method} {path_q} {body}"));
    let json = |s: StatusCode, v: &str| {
        (s, [("content-type", "application/json")], v.to_string()).into_response()
    };
    if path_q == "/sdk" {
        return (
            StatusCode::OK,
            [("content-type", "text/xml")],
            service_content(),
        )
            .into_response();
    }
    if path_q == "/api/session" && method == Method::POST {
        return match headers.get("authorization").and_then(|v| v.to_str().ok()) {
            // admin:secret
            Some("Basic YWRtaW46c2VjcmV0") => json(StatusCode::CREATED, r#""tok-1""#),
            _ => json(
                StatusCode::UNAUTHORIZED,
                r#"{"error_type":"UNAUTHENTICATED","messages":[]}"#,
            ),
        };
    }
    if headers
        .get("vmware-api-session-id")
        .and_then(|v| v.to_str().ok())
        != Some("tok-1")
    {
        return json(
            StatusCode::UNAUTHORIZED,
            r#"{"error_type":"UNAUTHENTICATED","messages":[]}"#,
        );
    }
    match (method.as_str(), path_q.as_str()) {
        ("DELETE", "/api/session") => StatusCode::NO_CONTENT.into_response(),
        ("GET", "/api/cis/tagging/category") => json(StatusCode::OK, r#"["cat-1"]"#),
        ("GET", "/api/cis/tagging/category/cat-1") => json(
            StatusCode::OK,
            r#"{"id":"cat-1","name":"k8s-zone","description":"","cardinality":"SINGLE","associable_types":["ClusterComputeResource"],"used_by":[]}"#,
        ),
        ("POST", "/api/cis/tagging/category") => json(
            StatusCode::BAD_REQUEST,
            r#"{"error_type":"ALREADY_EXISTS","messages":[{"id":"x","default_message":"Category k8s-zone already exists."}]}"#,
        ),
        ("POST", "/api/cis/tagging/tag?action=list-tags-for-category") => {
            json(StatusCode::OK, &format!(r#"["{TAG_1}"]"#))
        }
        ("POST", "/api/cis/tagging/tag") => json(StatusCode::CREATED, &format!(r#""{TAG_2}""#)),
        ("POST", p) if p == format!("/api/cis/tagging/tag-association/{TAG_1}?action=attach") => {
            StatusCode::NO_CONTENT.into_response()
        }
        ("POST", "/api/cis/tagging/tag-association?action=list-attached-tags-on-objects") => json(
            StatusCode::OK,
            &format!(
                r#"[{{"object_id":{{"type":"ClusterComputeResource","id":"domain-c7"}},"tag_ids":["{TAG_1}"]}}]"#
            ),
        ),
        _ => json(
            StatusCode::NOT_FOUND,
            r#"{"error_type":"NOT_FOUND","messages":[]}"#,
        ),
    }
}

async fn server() -> (String, Log) {
    let log: Log = Arc::default();
    let app = Router::new().fallback(any(handle)).with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, log)
}

fn client(url: &str, password: &str) -> Client {
    Client::new(
        url,
        Credentials::new("admin", SecretString::from(password.to_string())),
        ClientOptions {
            retry: RetryPolicy::none(),
            ..ClientOptions::default()
        },
    )
    .unwrap()
}

#[tokio::test]
async fn the_api_dialect_uses_unwrapped_bodies_and_action_queries() {
    let (url, log) = server().await;
    let c = client(&url, "secret");
    assert_eq!(c.rest_dialect().await.unwrap(), Dialect::Api);
    assert_eq!(c.list_categories().await.unwrap(), ["cat-1"]);
    let cat = c.get_category("cat-1").await.unwrap();
    assert_eq!(
        (cat.name.as_str(), cat.cardinality.as_str()),
        ("k8s-zone", "SINGLE")
    );
    let err = c
        .create_category(&CategorySpec {
            name: "k8s-zone".into(),
            description: String::new(),
            cardinality: "MULTIPLE".into(),
            associable_types: vec!["ClusterComputeResource".into()],
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Rest {
                kind: RestErrorKind::AlreadyExists,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(c.list_tags_for_category("cat-1").await.unwrap(), [TAG_1]);
    assert_eq!(c.create_tag("zone-a", "cat-1", "").await.unwrap(), TAG_2);
    let cluster = MoRef::new("ClusterComputeResource", "domain-c7");
    c.attach_tag(TAG_1, &cluster).await.unwrap();
    let on = c
        .list_attached_tags_on_objects(std::slice::from_ref(&cluster))
        .await
        .unwrap();
    assert_eq!(on, vec![(cluster.clone(), vec![TAG_1.to_string()])]);
    c.logout().await.unwrap();

    let log = log.lock().unwrap().clone();
    let sent = |needle: &str| {
        log.iter()
            .find(|l| l.starts_with(needle))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        !log.iter().any(|l| l.contains("/rest/")),
        "no /rest call on a vSphere 8 server: {log:#?}"
    );
    // Unwrapped create bodies (no create_spec), category_id in the list body.
    assert!(sent("POST /api/cis/tagging/category ").contains(r#""name":"k8s-zone""#));
    assert!(!sent("POST /api/cis/tagging/category ").contains("create_spec"));
    assert!(
        sent("POST /api/cis/tagging/tag?action=list-tags-for-category")
            .contains(r#""category_id":"cat-1""#)
    );
    assert!(sent("POST /api/cis/tagging/tag ").contains(r#""category_id":"cat-1""#));
    assert!(
        sent(&format!(
            "POST /api/cis/tagging/tag-association/{TAG_1}?action=attach"
        ))
        .contains(r#""id":"domain-c7""#)
    );
    assert!(
        log.iter().any(|l| l.starts_with("DELETE /api/session")),
        "logged out: {log:#?}"
    );
}

#[tokio::test]
async fn a_rejected_api_login_is_invalid_login_and_is_not_repeated() {
    let (url, log) = server().await;
    let c = client(&url, "wrong");
    for _ in 0..3 {
        let err = c.list_categories().await.unwrap_err();
        assert!(matches!(err, Error::InvalidLogin { .. }), "{err}");
    }
    let logins = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("POST /api/session"))
        .count();
    assert_eq!(logins, 1, "one attempt, then remembered");
}

/// A tag ID forced past the webhooks (local mode, an object admitted before the rule) is
/// refused by the client: nothing at all reaches the server, not even a login.
#[tokio::test]
async fn an_injected_tag_id_never_reaches_the_wire() {
    let (url, log) = server().await;
    let c = client(&url, "secret");
    let vm = MoRef::new("VirtualMachine", "vm-42");
    for evil in [
        format!("{TAG_1}/../../../../vcenter/vm/vm-42/power?action=stop&x="),
        format!("{TAG_1}?action=detach"),
        "..".to_string(),
        "tag-1".to_string(),
    ] {
        let err = c.attach_tag(&evil, &vm).await.unwrap_err();
        assert!(matches!(err, Error::InvalidRequest { .. }), "{err}");
        assert!(
            err.to_string().starts_with(&format!(
                "rest:tagging.association.attach was not sent to vCenter {url}: tag ID "
            )),
            "{err}"
        );
        assert!(c.detach_tag(&evil, &vm).await.is_err());
        assert!(c.get_tag(&evil).await.is_err());
        assert!(c.list_attached_objects(&evil).await.is_err());
    }
    // A category id comes from vCenter, but the path builder refuses one that is not id-shaped.
    let err = c.get_category("a/../../x").await.unwrap_err();
    assert!(err.to_string().contains("is not a vCenter id"), "{err}");
    assert!(log.lock().unwrap().is_empty(), "{:#?}", log.lock().unwrap());
}
