//! A hostile vCenter (a tenant may name any server) cannot make the manager's memory grow
//! without bound (issue 42, N3). A proxy in front of vcsim answers some methods itself:
//!
//! * property reads that page without end (`RetrievePropertiesEx`, then a fresh token on every
//!   `ContinueRetrievePropertiesEx`), with many small objects or few large ones: the read fails
//!   with `ReadTooLarge` at the cap, naming the server, the method and the cap, and is not read
//!   again;
//! * long polls (`WaitForUpdatesEx`) that report 100,000 objects nobody asked for, in truncated
//!   pages: the watcher neither keeps nor reports them, and still reports the object it was
//!   asked to watch.
//!
//! Each test prints the process's peak RSS (VmHWM); run one alone to read it for that case
//! (`cargo test --test vcenter_hostile_server <name> -- --nocapture`). The pagers stop after
//! twice the cap, so that a client without the cap fails the test instead of the machine.
#[path = "support/soap_forward.rs"]
mod soap_forward;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::response::IntoResponse;
use secrecy::SecretString;
use soap_forward::forward;
use tokio::sync::mpsc;
use vcsim::Vcsim;
use vsphere_provider::vcenter::model::error::ReadLimit;
use vsphere_provider::vcenter::property::{MAX_READ_BYTES, MAX_READ_OBJECTS, PropertyFilter};
use vsphere_provider::vcenter::watcher::{WatchEvent, WatchOptions, Watcher};
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials, Error, MoRef, Wanted};

fn client(url: &str) -> Client {
    Client::new(
        url,
        Credentials::new("admin", SecretString::from("secret".to_string())),
        ClientOptions::default(),
    )
    .unwrap()
}

/// The process's peak resident set (VmHWM), in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// What the proxy answers itself: given a request body, `Some(reply body)` or `None` to pass
/// the request on to vcsim.
type Answer = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A proxy in front of vcsim answering what `answer` answers and passing the rest on.
async fn hostile_proxy(upstream: &str, answer: Answer) -> String {
    let upstream = upstream.to_string();
    let http = vcsim::insecure_client();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap, body: String| {
        let http = http.clone();
        let upstream = upstream.clone();
        let answer = answer.clone();
        async move {
            if let Some(reply) = answer(&body) {
                return (
                    axum::http::StatusCode::OK,
                    [("content-type", "text/xml")],
                    reply,
                )
                    .into_response();
            }
            forward(&http, &upstream, &headers, body).await
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/sdk")
}

/// A pager without end (up to `safety` pages): every property read gets `per_page` objects
/// with a `name` of `value_bytes` each (none: no property), and a fresh continuation token.
/// Counts the pages it sent.
fn endless_pages(per_page: usize, value_bytes: usize, safety: u64) -> (Answer, Arc<AtomicU64>) {
    let pages = Arc::new(AtomicU64::new(0));
    let sent = pages.clone();
    let value = "x".repeat(value_bytes);
    let answer: Answer = Arc::new(move |body: &str| {
        let method = ["RetrievePropertiesEx", "ContinueRetrievePropertiesEx"]
            .into_iter()
            .find(|m| body.contains(&format!("<{m} ")))?;
        let n = sent.fetch_add(1, Ordering::SeqCst);
        let mut rv = String::new();
        if n + 1 < safety {
            rv.push_str(&format!("<token>page-{n}</token>"));
        }
        for i in 0..per_page {
            let id = format!("vm-{n}-{i}");
            if value.is_empty() {
                rv.push_str(&format!(
                    r#"<objects><obj type="VirtualMachine">{id}</obj></objects>"#
                ));
            } else {
                rv.push_str(&format!(
                    r#"<objects><obj type="VirtualMachine">{id}</obj><propSet><name>name</name><val xsi:type="xsd:string">{value}</val></propSet></objects>"#
                ));
            }
        }
        Some(vcsim::soap_envelope(&format!(
            r#"<{method}Response xmlns="urn:vim25"><returnval>{rv}</returnval></{method}Response>"#
        )))
    });
    (answer, pages)
}

async fn read_through(url: &str) -> Result<usize, Error> {
    let c = client(url);
    let root = c.service_content().await?.root_folder.clone();
    let filter = PropertyFilter::new()
        .props("ManagedEntity", &["name"])
        .objects([&root]);
    let before = peak_rss_mib();
    let r = c.retrieve(&filter).await.map(|v| v.len());
    eprintln!(
        "peak RSS (VmHWM): {before:.1} MiB before the read, {:.1} MiB after",
        peak_rss_mib()
    );
    let spent = c.stats().snapshot();
    assert_eq!(
        spent.calls("RetrievePropertiesEx"),
        1,
        "a read past its cap is not read again: {}",
        spent.summary()
    );
    r
}

fn assert_cap(r: Result<usize, Error>, url: &str, limit: ReadLimit) {
    match r {
        Err(e @ Error::ReadTooLarge { .. }) => {
            let text = e.to_string();
            assert_eq!(e.class(), "ReadTooLarge");
            assert!(!e.is_transient(), "{text}");
            let Error::ReadTooLarge {
                server,
                method,
                limit: l,
            } = e
            else {
                unreachable!()
            };
            assert_eq!(l, limit);
            assert_eq!(method, "ContinueRetrievePropertiesEx");
            assert!(url.starts_with(&server), "{server} / {url}");
            assert!(
                text.contains(&server)
                    && text.contains("ContinueRetrievePropertiesEx")
                    && text.contains(&limit.to_string()),
                "{text}"
            );
        }
        other => panic!("expected the read cap ({limit}), got {other:?}"),
    }
}

/// Many objects without properties (the smallest there are), a fresh token on every page: the
/// read stops at [`MAX_READ_OBJECTS`] (before the byte cap).
#[tokio::test]
async fn a_server_paging_forever_stops_at_the_object_cap() {
    let sim = Vcsim::start_default().await;
    let per_page = 1000;
    let safety = 2 * (MAX_READ_OBJECTS / per_page) as u64;
    let (answer, pages) = endless_pages(per_page, 0, safety);
    let url = hostile_proxy(sim.url(), answer).await;
    let r = tokio::time::timeout(Duration::from_secs(120), read_through(&url))
        .await
        .expect("the read did not end");
    assert_cap(r, &url, ReadLimit::Objects(MAX_READ_OBJECTS));
    let sent = pages.load(Ordering::SeqCst);
    assert_eq!(
        sent,
        (MAX_READ_OBJECTS / per_page) as u64 + 1,
        "pages asked for"
    );
}

/// Few large objects (4 of 1 MiB a page, each reply under the 16 MiB reply cap), a fresh
/// token on every page: the read stops at [`MAX_READ_BYTES`].
#[tokio::test]
async fn a_server_paging_large_objects_forever_stops_at_the_byte_cap() {
    let sim = Vcsim::start_default().await;
    let (per_page, value) = (4, 1 << 20);
    let page_bytes = (per_page * value) as u64;
    let safety = 2 * MAX_READ_BYTES / page_bytes;
    let (answer, pages) = endless_pages(per_page, value, safety);
    let url = hostile_proxy(sim.url(), answer).await;
    let r = tokio::time::timeout(Duration::from_secs(120), read_through(&url))
        .await
        .expect("the read did not end");
    assert_cap(r, &url, ReadLimit::Bytes(MAX_READ_BYTES));
    let sent = pages.load(Ordering::SeqCst);
    assert!(
        sent <= MAX_READ_BYTES / page_bytes + 1,
        "{sent} pages asked for"
    );
}

/// Unasked objects to report, in all.
const UNASKED: u64 = 100_000;
/// Of them per `WaitForUpdatesEx` reply (about 5 MB of XML: under the reply cap).
const UNASKED_PER_REPLY: u64 = 20_000;

/// The first `WaitForUpdatesEx` goes to vcsim (the asked-for object's first state); every
/// later one is answered with `UNASKED_PER_REPLY` finished tasks nobody asked to watch
/// (`truncated`: more at once), until `UNASKED` are sent; then waits go to vcsim again.
fn unasked_updates() -> (Answer, Arc<AtomicU64>) {
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    let waits = AtomicU64::new(0);
    let answer: Answer = Arc::new(move |body: &str| {
        if !body.contains("<WaitForUpdatesEx ") || waits.fetch_add(1, Ordering::SeqCst) == 0 {
            return None;
        }
        let from = counter.fetch_add(UNASKED_PER_REPLY, Ordering::SeqCst);
        if from >= UNASKED {
            return None;
        }
        let mut objects = String::new();
        for i in from..from + UNASKED_PER_REPLY {
            objects.push_str(&format!(
                r#"<objectSet><kind>enter</kind><obj type="Task">task-unasked-{i}</obj><changeSet><name>info.state</name><op>assign</op><val xsi:type="TaskInfoState">success</val></changeSet></objectSet>"#
            ));
        }
        Some(vcsim::soap_envelope(&format!(
            r#"<WaitForUpdatesExResponse xmlns="urn:vim25"><returnval><version>-</version><filterSet><filter type="PropertyFilter">hostile</filter>{objects}</filterSet><truncated>true</truncated></returnval></WaitForUpdatesExResponse>"#
        )))
    });
    (answer, sent)
}

/// A long poll reporting 100,000 objects nobody asked for: none is reported (so none is kept,
/// see `watcher::tests`), the watcher stays healthy, and a change of the object it was asked to
/// watch still comes through once the flood is over.
#[tokio::test]
async fn a_long_poll_reporting_unasked_objects_keeps_and_reports_none_of_them() {
    let sim = Vcsim::start_default().await;
    let (answer, sent) = unasked_updates();
    let url = hostile_proxy(sim.url(), answer).await;
    let ours = client(&url);
    let inv = ours.inventory().await.unwrap();
    let vm0: MoRef = inv
        .find(Wanted::VirtualMachine, "DC0_H0_VM0", None)
        .unwrap()
        .moref
        .clone();
    let before = peak_rss_mib();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let w = Watcher::start(
        ours.clone(),
        tx,
        WatchOptions {
            max_wait_seconds: 2,
            max_backoff: Duration::from_secs(2),
            ..WatchOptions::default()
        },
    );
    w.set([vm0.clone()]);
    tokio::time::timeout(Duration::from_secs(60), async {
        while sent.load(Ordering::SeqCst) < UNASKED + UNASKED_PER_REPLY {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the watcher did not take in the flood");
    eprintln!(
        "peak RSS (VmHWM): {before:.1} MiB before {UNASKED} unasked objects, {:.1} MiB after",
        peak_rss_mib()
    );

    // The tenant's own VM, powered off by another session: reported, and nothing else was.
    let other = client(sim.url());
    let task = other.power_off_vm(&vm0).await.unwrap();
    drop(task);
    let event = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let e = rx.recv().await.expect("the watcher ended");
            assert_eq!(e.obj(), &vm0, "an unasked object was reported: {e:?}");
            if matches!(e, WatchEvent::Changed { .. }) {
                return e;
            }
        }
    })
    .await
    .expect("the asked-for VM's change did not come through");
    assert_eq!(event.obj(), &vm0);
}
