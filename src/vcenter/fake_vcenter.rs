//! A loopback vCenter for the transport's unit tests: the recorded vcsim answers to
//! RetrieveServiceContent, Login, CurrentTime and Logout; it counts logouts, and on request
//! answers the next call of one method with an endless body (or one announced as 10 GiB),
//! counting what it managed to send.
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

/// How the next call of a method is answered, once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Huge {
    /// Chunks without end.
    Endless,
    /// `Content-Length: 10 GiB`, then chunks without end.
    Announced,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) logouts: AtomicUsize,
    /// Bytes of huge bodies handed to the connection so far.
    pub(crate) huge_bytes_sent: Arc<AtomicU64>,
    huge_next: Mutex<Option<(&'static str, Huge)>>,
}

impl State {
    /// Answer the next `method` call with a huge body.
    pub(crate) fn huge_next(&self, method: &'static str, how: Huge) {
        *self.huge_next.lock().unwrap() = Some((method, how));
    }
}

/// The recorded answer body of a fixture (`tests/fixtures/vcsim-wire/<prefix>*.response.http`).
fn fixture(prefix: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vcsim-wire");
    let path = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.starts_with(prefix) && name.ends_with(".response.http")
        })
        .unwrap_or_else(|| panic!("no fixture {prefix}"));
    let raw = std::fs::read_to_string(path).unwrap();
    raw.split_once("\r\n\r\n")
        .or_else(|| raw.split_once("\n\n"))
        .unwrap()
        .1
        .to_string()
}

fn endless(sent: Arc<AtomicU64>) -> Body {
    const CHUNK: usize = 64 * 1024;
    let stream = futures::stream::repeat_with(move || {
        sent.fetch_add(CHUNK as u64, Ordering::Relaxed);
        Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; CHUNK]))
    });
    Body::from_stream(stream)
}

async fn handle(
    axum::extract::State(state): axum::extract::State<Arc<State>>,
    body: String,
) -> Response {
    let method = ["RetrieveServiceContent", "Login", "CurrentTime", "Logout"]
        .into_iter()
        .find(|m| body.contains(&format!("<{m} ")));
    let Some(method) = method else {
        return (StatusCode::NOT_FOUND, "unknown method").into_response();
    };
    let huge = {
        let mut next = state.huge_next.lock().unwrap();
        match *next {
            Some((m, how)) if m == method => next.take().map(|_| how),
            _ => None,
        }
    };
    let xml = [(header::CONTENT_TYPE, "text/xml; charset=utf-8")];
    match huge {
        Some(Huge::Endless) => {
            return (xml, endless(state.huge_bytes_sent.clone())).into_response();
        }
        Some(Huge::Announced) => {
            let mut r = (xml, endless(state.huge_bytes_sent.clone())).into_response();
            r.headers_mut()
                .insert(header::CONTENT_LENGTH, (10u64 << 30).into());
            return r;
        }
        None => {}
    }
    match method {
        "RetrieveServiceContent" => (xml, fixture("01_")).into_response(),
        "Login" => (
            [
                (header::CONTENT_TYPE, "text/xml; charset=utf-8"),
                (header::SET_COOKIE, "vmware_soap_session=s-1; HttpOnly"),
            ],
            fixture("03_"),
        )
            .into_response(),
        "CurrentTime" => (xml, fixture("63_")).into_response(),
        _ => {
            state.logouts.fetch_add(1, Ordering::SeqCst);
            (xml, fixture("60_")).into_response()
        }
    }
}

/// Serve on a free loopback port; returns the server address and the state.
pub(crate) async fn start() -> (String, Arc<State>) {
    let state = Arc::new(State::default());
    let app = Router::new()
        .fallback(any(handle))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, state)
}
