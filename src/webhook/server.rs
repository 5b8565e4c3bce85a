//! The admission webhook server: AdmissionReview v1 over HTTPS (or plain HTTP for tests), one
//! validating and one mutating endpoint per kind, on the paths controller-runtime would use and
//! `config/webhook/manifests.yaml` registers:
//!
//! * `POST /validate-<group with dashes>-<version>-<kind lowercase>`
//! * `POST /mutate-<group with dashes>-<version>-<kind lowercase>`
//! * `POST /convert` — CRD conversion (ConversionReview v1, [`super::conversion`]);
//! * `GET /healthz` — 200 when serving.
//!
//! Validation runs [`admit`](super::admission::admit) (the same code as `validate`), with
//! placeholders not allowed. Mutation returns a JSON patch from the request object to the
//! defaulted one. Delete and Connect operations, and status subresource requests, are allowed
//! unchanged. The TLS certificate and key are re-read when their files change (cert-manager
//! rotates them in place). Connections are bounded in number, per peer, and in how long a caller
//! may take to shake hands, send headers or finish a request ([`Limits`]).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::Router;
use axum::extract::{Json, State};
use axum::routing::{get, post};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde_json::Value;
use tokio::net::TcpListener;

use super::Ctx;
use super::admission::{admit, default_object, validate_object};
use super::connections;
pub use super::connections::{Limits, serve_plain};
use crate::api::Kind;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Binding or accepting failed.
    #[error("webhook server on {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The certificate or key could not be loaded.
    #[error("webhook TLS: {0}")]
    Tls(String),
}

/// Certificate and key files (PEM) for HTTPS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain (e.g. `tls.crt`).
    pub cert: PathBuf,
    /// Private key (e.g. `tls.key`).
    pub key: PathBuf,
}

impl TlsFiles {
    /// `dir/tls.crt` and `dir/tls.key`, as cert-manager and controller-runtime lay them out.
    pub fn in_dir(dir: &Path) -> Self {
        TlsFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }
}

/// Whether an endpoint validates or mutates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/validate-…`.
    Validate,
    /// `/mutate-…`.
    Mutate,
}

/// The URL path of a kind's endpoint (controller-runtime's convention), named after the kind's
/// oldest served version. The path is only a name (each endpoint admits every served version),
/// so it stays put when the Rust types move to another version: the webhook configurations
/// installed in clusters keep pointing at it.
pub fn path(kind: Kind, endpoint: Endpoint) -> String {
    let oldest = kind.api_versions()[0];
    let (group, version) = oldest.split_once('/').unwrap_or(("", oldest));
    let prefix = match endpoint {
        Endpoint::Validate => "validate",
        Endpoint::Mutate => "mutate",
    };
    format!(
        "/{prefix}-{}-{version}-{}",
        group.replace('.', "-"),
        kind.name().to_lowercase()
    )
}

/// The axum router with every endpoint.
pub fn router() -> Router {
    let mut router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            super::conversion::PATH,
            // It reads its body itself, within its own limit (sized for a list page).
            post(super::conversion::handle),
        );
    for kind in Kind::ALL {
        router = router
            .route(
                &path(kind, Endpoint::Validate),
                post(handle).with_state((kind, Endpoint::Validate)),
            )
            .route(
                &path(kind, Endpoint::Mutate),
                post(handle).with_state((kind, Endpoint::Mutate)),
            );
    }
    router
}

async fn handle(
    State((kind, endpoint)): State<(Kind, Endpoint)>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<Value> {
    let request: Result<AdmissionRequest<DynamicObject>, _> = review.try_into();
    let response = match request {
        Ok(request) => review_response(kind, endpoint, &request),
        Err(e) => AdmissionResponse::invalid(format!("invalid AdmissionReview: {e}")),
    };
    Json(encode_review(response.into_review()))
}

/// Serializes a review as the apiserver expects it: `response.patch` is a base64 string (Go's
/// encoding of `[]byte`), not an array of numbers.
pub fn encode_review(review: AdmissionReview<DynamicObject>) -> Value {
    use base64::Engine;
    let mut value = serde_json::to_value(&review).unwrap_or(Value::Null);
    if let Some(patch) = value.pointer_mut("/response/patch")
        && let Some(bytes) = patch.as_array()
    {
        let raw: Vec<u8> = bytes
            .iter()
            .filter_map(Value::as_u64)
            .map(|b| b as u8)
            .collect();
        *patch = Value::String(base64::engine::general_purpose::STANDARD.encode(raw));
    }
    value
}

/// The response to one admission request (pure; the HTTP handler only decodes and encodes).
pub fn review_response(
    kind: Kind,
    endpoint: Endpoint,
    req: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(req);
    if !matches!(req.operation, Operation::Create | Operation::Update) || req.sub_resource.is_some()
    {
        return response;
    }
    let Some(mut object) = req
        .object
        .as_ref()
        .and_then(|o| serde_json::to_value(o).ok())
    else {
        return response.deny("the request has no object");
    };
    // With matchPolicy Equivalent a v1beta2 object reaches the v1beta1 endpoint as v1beta1:
    // converted by our conversion webhook (config/crd), or, with CRDs installed without it,
    // relabelled with its v1beta2 fields. Either way, judge it as what the user sent
    // (`requestKind`), converted back (which is a relabelling in the second case), so both
    // served versions get their own schema.
    let mut old_value = req
        .old_object
        .as_ref()
        .and_then(|o| serde_json::to_value(o).ok());
    if let Some(rk) = &req.request_kind {
        let original = if rk.group.is_empty() {
            rk.version.clone()
        } else {
            format!("{}/{}", rk.group, rk.version)
        };
        if Kind::from_type(&original, &rk.kind) == Some(kind) {
            for v in std::iter::once(&mut object).chain(old_value.as_mut()) {
                match crate::api::conversion::convert(v, &original) {
                    Ok(converted) => *v = converted,
                    Err(_) => v["apiVersion"] = Value::String(original.clone()),
                }
            }
        }
    }
    let got = (
        object.get("apiVersion").and_then(Value::as_str),
        object.get("kind").and_then(Value::as_str),
    );
    if Kind::from_type(got.0.unwrap_or_default(), got.1.unwrap_or_default()) != Some(kind) {
        return response.deny(format!(
            "this endpoint admits {}/{}, not {}/{}",
            kind.api_version(),
            kind.name(),
            got.0.unwrap_or_default(),
            got.1.unwrap_or_default()
        ));
    }
    let old = old_value;
    let ctx = Ctx {
        dry_run: req.dry_run,
        ..Ctx::default()
    };
    match endpoint {
        Endpoint::Mutate => {
            let mut defaulted = object.clone();
            let changed = default_object(kind, &mut defaulted);
            if changed.is_empty() {
                return response;
            }
            let patch = json_patch::diff(&object, &defaulted);
            match response.with_patch(patch) {
                Ok(r) => r,
                Err(e) => AdmissionResponse::from(req)
                    .deny(format!("cannot encode the defaulting patch: {e}")),
            }
        }
        Endpoint::Validate => {
            // The apiserver has defaulted the object already; defaults are idempotent, so admit()
            // (which defaults again) sees what was stored.
            let outcome = match &old {
                Some(old) if req.operation == Operation::Update => admit(&object, Some(old), &ctx),
                _ => admit(&object, None, &ctx),
            };
            let mut response = response;
            if !outcome.warnings.is_empty() {
                response.warnings = Some(outcome.warnings.clone());
            }
            if outcome.errors.is_empty() {
                return response;
            }
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or(&req.name);
            let causes: Vec<String> = outcome.errors.iter().map(ToString::to_string).collect();
            let mut denied = response.deny(format!(
                "{}.{} {name:?} is invalid: {}",
                kind.name(),
                kind.api_version().split('/').next().unwrap_or_default(),
                causes.join(", ")
            ));
            denied.result.code = 422;
            denied.result.reason = "Invalid".into();
            denied
        }
    }
}

/// Validation of an object outside a request (e.g. a controller double-checking), returning the
/// error texts.
pub fn validate_value(kind: Kind, object: &Value, old: Option<&Value>) -> Vec<String> {
    validate_object(kind, object, old, &Ctx::default())
        .0
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The server's name in connection logs.
const SERVER: &str = "webhooks";

/// Serves the webhooks on `listener` until `shutdown` completes, with the default [`Limits`].
/// With `tls`, HTTPS with the certificate re-read when its files change; without, plain HTTP
/// (tests, or behind a TLS proxy).
pub async fn serve_listener(
    listener: TcpListener,
    tls: Option<TlsFiles>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    serve_listener_with(listener, tls, Limits::default(), shutdown).await
}

/// [`serve_listener`] with other bounds on connections.
pub async fn serve_listener_with(
    listener: TcpListener,
    tls: Option<TlsFiles>,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let app = router();
    let Some(tls) = tls else {
        serve_plain(listener, app, limits, SERVER, shutdown).await;
        return Ok(());
    };
    let cert_file = Arc::new(tls.cert.clone());
    let resolver = Arc::new(CertReloader::new(tls)?);
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ServeError::Tls(e.to_string()))?
    .with_no_client_auth()
    .with_cert_resolver(resolver);
    let mut config = config;
    // HTTP/1.1 only (see `connections`).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    connections::accept(listener, limits, SERVER, shutdown, move |stream, peer| {
        let acceptor = acceptor.clone();
        let app = app.clone();
        let cert_file = cert_file.clone();
        async move {
            let handshake =
                connections::within_handshake_timeout(&limits, peer, acceptor.accept(stream));
            let tls_stream = match handshake.await {
                None => return,
                Some(Ok(s)) => s,
                Some(Err(e)) => {
                    match refused_certificate(&e) {
                        Some(alert) => tracing::warn!(
                            %peer,
                            alert = %alert,
                            cert = %cert_file.display(),
                            "the webhook's caller refused its serving certificate: the \
                             certificate must be signed by the caBundle of the webhook \
                             configuration and name, in its subjectAltNames, the host the \
                             configuration calls (the Service's <name>.<namespace>.svc, or the \
                             host of clientConfig.url); the API server's error names both"
                        ),
                        None => tracing::debug!(%peer, error = %e, "webhook TLS handshake failed"),
                    }
                    return;
                }
            };
            connections::serve_http1(tls_stream, app, &limits, SERVER, peer).await;
        }
    })
    .await;
    Ok(())
}

/// The TLS alert a client sent because it did not accept our certificate (Go's TLS client, as
/// in kube-apiserver, sends `bad_certificate` for a name mismatch and `unknown_ca` for a
/// certificate its caBundle did not sign). Other handshake failures (a port scan, a client
/// hanging up) are not worth a warning.
fn refused_certificate(e: &std::io::Error) -> Option<String> {
    use rustls::AlertDescription as A;
    let rustls::Error::AlertReceived(alert) = e.get_ref()?.downcast_ref::<rustls::Error>()? else {
        return None;
    };
    matches!(
        alert,
        A::BadCertificate
            | A::UnknownCA
            | A::CertificateUnknown
            | A::UnsupportedCertificate
            | A::CertificateExpired
            | A::CertificateRevoked
    )
    .then(|| format!("{alert:?}"))
}

/// Binds `addr` and serves (see [`serve_listener`]).
pub async fn serve(
    addr: SocketAddr,
    tls: Option<TlsFiles>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Io { addr, source })?;
    tracing::info!(%addr, tls = tls.is_some(), "admission webhooks listening");
    serve_listener(listener, tls, shutdown).await
}

/// Serves the certificate from files, re-reading them when their modification time changes.
#[derive(Debug)]
struct CertReloader {
    files: TlsFiles,
    current: Mutex<(Option<SystemTime>, Arc<rustls::sign::CertifiedKey>)>,
}

impl CertReloader {
    fn new(files: TlsFiles) -> Result<Self, ServeError> {
        let key = load_certified_key(&files)?;
        let stamp = modified(&files);
        Ok(CertReloader {
            files,
            current: Mutex::new((stamp, Arc::new(key))),
        })
    }
}

fn modified(files: &TlsFiles) -> Option<SystemTime> {
    let c = std::fs::metadata(&files.cert)
        .and_then(|m| m.modified())
        .ok()?;
    let k = std::fs::metadata(&files.key)
        .and_then(|m| m.modified())
        .ok()?;
    Some(c.max(k))
}

fn load_certified_key(files: &TlsFiles) -> Result<rustls::sign::CertifiedKey, ServeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| ServeError::Tls(format!("{}: {e}", files.cert.display())))?;
    if certs.is_empty() {
        return Err(ServeError::Tls(format!(
            "{}: no certificate",
            files.cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| ServeError::Tls(format!("{}: {e}", files.key.display())))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| ServeError::Tls(format!("{}: {e}", files.key.display())))?;
    Ok(rustls::sign::CertifiedKey::new(certs, signing))
}

impl rustls::server::ResolvesServerCert for CertReloader {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let stamp = modified(&self.files);
        if stamp.is_some() && stamp != current.0 {
            match load_certified_key(&self.files) {
                Ok(key) => *current = (stamp, Arc::new(key)),
                // Keep serving the old certificate while the new pair is half-written.
                Err(e) => {
                    tracing::warn!(error = %e, "webhook certificate reload failed; keeping the previous one")
                }
            }
        }
        Some(current.1.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_controller_runtime() {
        assert_eq!(
            path(Kind::VSphereFailureDomain, Endpoint::Mutate),
            "/mutate-infrastructure-cluster-x-k8s-io-v1beta1-vspherefailuredomain"
        );
        assert_eq!(
            path(Kind::ControlPlaneMachineSet, Endpoint::Validate),
            "/validate-machine-openshift-io-v1-controlplanemachineset"
        );
    }
}
