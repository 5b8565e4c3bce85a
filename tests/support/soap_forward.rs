//! A SOAP proxy's pass-through, for tests whose proxy answers some calls itself and hands the
//! rest to vcsim (tests/vcenter_long_poll.rs, tests/vcenter_hostile_server.rs).
use axum::response::IntoResponse;

/// Pass one SOAP request on to `upstream` with its session cookie, and its answer back.
pub async fn forward(
    http: &reqwest::Client,
    upstream: &str,
    headers: &axum::http::HeaderMap,
    body: String,
) -> axum::response::Response {
    let mut req = http
        .post(upstream)
        .header("content-type", "text/xml; charset=utf-8")
        .header("SOAPAction", "urn:vim25/6.5");
    if let Some(c) = headers.get("cookie").and_then(|v| v.to_str().ok()) {
        req = req.header("cookie", c);
    }
    let Ok(r) = req.body(body).send().await else {
        return axum::http::StatusCode::BAD_GATEWAY.into_response();
    };
    let status = axum::http::StatusCode::from_u16(r.status().as_u16()).unwrap();
    let cookie = r
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let mut out = (
        status,
        [("content-type", "text/xml")],
        r.text().await.unwrap_or_default(),
    )
        .into_response();
    if !cookie.is_empty() {
        out.headers_mut()
            .insert("set-cookie", cookie.parse().unwrap());
    }
    out
}
