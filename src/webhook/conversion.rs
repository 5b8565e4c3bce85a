//! The CRD conversion webhook: `POST /convert`, ConversionReview v1, answered with
//! [`crate::api::conversion::convert`] for every object of the request. config/crd registers it
//! for the kinds served in more than one version.
//!
//! # One object's fault is not the list's
//!
//! A ConversionReview answer is all or nothing: one `result`, and on `Success` exactly one
//! converted object per object sent, each at the desired version with its name, namespace and
//! UID unchanged (the API server takes only labels and annotations from a converted object's
//! metadata). The API server sends every item of a list that needs converting in one review,
//! and each watch event in one of its own, so a `Failure` for one object fails the whole list
//! and breaks the watches of every reader of that kind at that version — the manager's included,
//! and every tenant's with it.
//!
//! The one thing in an object that a tenant can write freely and that conversion reads is the
//! conversion-data annotation: a value the provider cannot read there (malformed, or refused by
//! the conversion) would otherwise fail every list of the kind. That annotation is the
//! provider's own record, never an input, so such an object is converted as if it carried none:
//! the answer is a real conversion of the object's own fields, and the unreadable annotation is
//! left out (a write of it back carries none, and a write at the other version stores none).
//! What it would have restored is lost; nothing it said is trusted.
//!
//! Anything else that cannot be converted (an object of a kind or version this provider does
//! not serve, a field with no counterpart) still fails the review, naming the object. There is
//! no safe per-object answer for it: the same object relabelled would serve one version's
//! fields as another's, and a stub without its spec would, written back by a reader, replace
//! the real one. Such an object passed the schema of its version when it was stored, so
//! reaching here takes a provider bug, not a tenant's doing.
//!
//! # Body size and memory
//!
//! [`MAX_BODY_BYTES`] is sized for a list page; objects are parsed one at a time from the
//! request text and written out one at a time, so a request costs about twice its size, and
//! requests over the size axum allows other endpoints ([`SMALL_BODY_BYTES`]) are converted
//! [`LARGE_AT_ONCE`] at a time.
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::Semaphore;

use crate::api::conversion::{CONVERSION_DATA, ConversionError, LEGACY_CONVERSION_DATA, convert};

/// The URL path the CRDs' `spec.conversion.webhook.clientConfig` names.
pub const PATH: &str = "/convert";

/// The largest ConversionReview accepted: a list page. client-go's pager and kubectl ask for
/// 500 objects a page; the largest of this provider's objects (a VSphereVM or a machine
/// template with its status, conversion data and managedFields) is 5–10 KiB, and the API server
/// refuses objects over 1.5 MiB. 16 MiB holds a page of 500 objects of 32 KiB — three times
/// the largest we write — and the review's envelope; a list served whole from the watch cache
/// fits up to some 2,000 such objects. axum's default of 2 MiB held about 200.
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// Requests up to this size are converted without waiting: what every other endpoint accepts
/// (axum's default), and far more than one object.
pub const SMALL_BODY_BYTES: usize = 2 << 20;

/// How many requests over [`SMALL_BODY_BYTES`] are read and converted at once: each costs up
/// to twice [`MAX_BODY_BYTES`], against a manager limit of 256 MiB. A caller that announces a
/// large body and trickles it holds one of them until the request timeout
/// ([`super::server::Limits::request_timeout`]): large conversions wait meanwhile, small ones
/// (every single object, every admission review) do not.
pub const LARGE_AT_ONCE: usize = 2;

static LARGE: Semaphore = Semaphore::const_new(LARGE_AT_ONCE);

/// `POST /convert`.
pub async fn handle(request: Request) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return too_large();
    }
    // A request that does not say its size may be large.
    let _permit = match declared {
        Some(n) if n <= SMALL_BODY_BYTES => None,
        _ => LARGE.acquire().await.ok(),
    };
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(_) => return too_large(),
    };
    // A page takes a while to convert: off the async workers, which serve every other request.
    let answer = if body.len() > SMALL_BODY_BYTES {
        match tokio::task::spawn_blocking(move || review(&body)).await {
            Ok(answer) => answer,
            Err(e) => {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("conversion failed: {e}"),
                )
                    .into_response();
            }
        }
    } else {
        review(&body)
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(answer),
    )
        .into_response()
}

fn too_large() -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("a ConversionReview may be at most {MAX_BODY_BYTES} bytes"),
    )
        .into_response()
}

#[derive(Deserialize)]
struct ReviewIn<'a> {
    #[serde(borrow)]
    request: Option<RequestIn<'a>>,
}

#[derive(Deserialize)]
struct RequestIn<'a> {
    uid: String,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: String,
    #[serde(borrow, default)]
    objects: Vec<&'a RawValue>,
}

#[derive(Serialize)]
struct ReviewOut {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    response: ResponseOut,
}

#[derive(Serialize)]
struct ResponseOut {
    uid: String,
    result: Outcome,
    #[serde(rename = "convertedObjects")]
    converted_objects: Vec<Box<RawValue>>,
}

/// The `result` Status.
#[derive(Serialize)]
struct Outcome {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<u16>,
}

impl ResponseOut {
    fn failure(uid: String, message: String) -> Self {
        ResponseOut {
            uid,
            result: Outcome {
                status: "Failure",
                message: Some(message),
                reason: Some("Invalid"),
                code: Some(422),
            },
            converted_objects: Vec::new(),
        }
    }
}

/// The answer to one ConversionReview's JSON (pure): objects come back in request order, each
/// converted on its own ([`convert_object`]); see the module's documentation for when the
/// review fails.
pub fn review(body: &[u8]) -> Vec<u8> {
    let response = match serde_json::from_slice::<ReviewIn<'_>>(body) {
        Ok(ReviewIn {
            request: Some(request),
        }) => respond(request),
        Ok(ReviewIn { request: None }) => {
            ResponseOut::failure(String::new(), "invalid ConversionReview: no request".into())
        }
        Err(e) => ResponseOut::failure(String::new(), format!("invalid ConversionReview: {e}")),
    };
    let review = ReviewOut {
        api_version: "apiextensions.k8s.io/v1",
        kind: "ConversionReview",
        response,
    };
    // Strings and raw JSON only: serialising cannot fail.
    serde_json::to_vec(&review).unwrap_or_default()
}

fn respond(request: RequestIn<'_>) -> ResponseOut {
    let desired = request.desired_api_version;
    let mut converted = Vec::with_capacity(request.objects.len());
    let mut failed = Vec::new();
    for raw in request.objects {
        let outcome = serde_json::from_str::<Value>(raw.get())
            .map_err(|e| format!("an object is not JSON: {e}"))
            .and_then(|object| convert_object(&object, &desired).map_err(|e| e.to_string()))
            .and_then(|object| serde_json::value::to_raw_value(&object).map_err(|e| e.to_string()));
        match outcome {
            Ok(object) => converted.push(object),
            Err(why) => failed.push(why),
        }
    }
    if !failed.is_empty() {
        return ResponseOut::failure(
            request.uid,
            format!("cannot convert to {desired}: {}", failed.join("; ")),
        );
    }
    ResponseOut {
        uid: request.uid,
        result: Outcome {
            status: "Success",
            message: None,
            reason: None,
            code: None,
        },
        converted_objects: converted,
    }
}

/// `object` at `desired`; one whose conversion data stands in the way is converted as if it
/// carried none (see the module's documentation for why).
pub fn convert_object(object: &Value, desired: &str) -> Result<Value, ConversionError> {
    let refused = match convert(object, desired) {
        Ok(converted) => return Ok(converted),
        Err(e) => e,
    };
    let mut without = object.clone();
    let Some(annotations) = without
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        return Err(refused);
    };
    let dropped = [CONVERSION_DATA, LEGACY_CONVERSION_DATA]
        .into_iter()
        .filter(|name| annotations.remove(*name).is_some())
        .count();
    if dropped == 0 {
        return Err(refused);
    }
    if annotations.is_empty()
        && let Some(metadata) = without.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.remove("annotations");
    }
    match convert(&without, desired) {
        Ok(converted) => {
            tracing::warn!(error = %refused, desired,
                "converted without its conversion-data annotation, which cannot be read");
            Ok(converted)
        }
        Err(_) => Err(refused),
    }
}

#[cfg(test)]
mod tests;
