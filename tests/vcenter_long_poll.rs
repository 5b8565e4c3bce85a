//! The long poll (`vcenter::watcher`) against a live vcsim: task completion and VM power changes
//! reported through `WaitForUpdatesEx` without task reads, resumption without leaking a
//! collector or filter and with nothing missed after a lost session, a dropped long poll and a
//! restarted vCenter, and the fallback when vCenter refuses the method.
//!
//! vcsim gaps (vcenter-wire.md §11): tasks finish inside their `*_Task` call, so a task is never
//! seen queued or running and its filter's first update already says `success`; the returned
//! version is always `-`; after a change of the watcher's ListView, the pending wait re-reports
//! every object of the view as `enter` (real vCenter reports only those that joined); the
//! watcher drops what it already knows.
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
use vsphere_provider::vcenter::updates::UpdateKind;
use vsphere_provider::vcenter::watcher::{Health, WatchEvent, WatchOptions, Watcher};
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials, MoRef, RetryPolicy, Wanted};

fn client(url: &str) -> Client {
    let options = ClientOptions {
        retry: RetryPolicy {
            attempts: 2,
            base_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(50),
        },
        ..ClientOptions::default()
    };
    Client::new(
        url,
        Credentials::new("admin", SecretString::from("secret".to_string())),
        options,
    )
    .unwrap()
}

/// Short waits, so that a lost session is noticed within the test's time.
fn options() -> WatchOptions {
    WatchOptions {
        max_wait_seconds: 2,
        max_backoff: Duration::from_secs(2),
        ..WatchOptions::default()
    }
}

async fn vm(c: &Client, name: &str) -> MoRef {
    let inv = c.inventory().await.unwrap();
    inv.find(Wanted::VirtualMachine, name, None)
        .unwrap()
        .moref
        .clone()
}

/// The next event about `obj` that satisfies `pred` (other events are skipped), within 15 s.
async fn event_about(
    rx: &mut mpsc::UnboundedReceiver<WatchEvent>,
    obj: &MoRef,
    pred: impl Fn(&WatchEvent) -> bool,
) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let e = rx.recv().await.expect("the watcher ended");
            eprintln!("event: {e:?}");
            if e.obj() == obj && pred(&e) {
                return e;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no event about {obj} within 15 s"))
}

fn value<'a>(e: &'a WatchEvent, path: &str) -> Option<&'a str> {
    match e {
        WatchEvent::Changed { values, .. } => values.get(path)?.as_deref(),
        WatchEvent::Unwatched(_) => None,
    }
}

async fn healthy(w: &Watcher) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while w.health() != Health::Healthy || w.collector().is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the long poll did not become healthy");
}

#[tokio::test]
async fn a_finished_task_and_a_power_change_by_another_client_come_through_the_long_poll() {
    let sim = Vcsim::start_default().await;
    let ours = client(sim.url());
    let vm0 = vm(&ours, "DC0_H0_VM0").await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let w = Watcher::start(ours.clone(), tx, options());
    healthy(&w).await;

    // Our own tasks, added while the wait is pending: both reported finished by that wait, with
    // no task read, one `ModifyListView` for the two (no filter per task), and the pending wait
    // is not cancelled for them.
    let vm1 = vm(&ours, "DC0_H0_VM1").await;
    let before = ours.stats().snapshot();
    let t0 = ours.power_off_vm(&vm0).await.unwrap();
    let t1 = ours.power_off_vm(&vm1).await.unwrap();
    w.set([t0.task.clone(), t1.task.clone()]);
    assert!(w.watching(&t0.task));
    for t in [&t0.task, &t1.task] {
        let e = event_about(&mut rx, t, |_| true).await;
        assert_eq!(value(&e, "info.state"), Some("success"), "{e:?}");
    }
    let spent = ours.stats().snapshot().since(&before);
    for (method, n) in [
        ("RetrievePropertiesEx", 0),
        ("CreateFilter", 0),
        ("ModifyListView", 1),
        ("CancelWaitForUpdates", 0),
    ] {
        assert_eq!(spent.calls(method), n, "{method}: {}", spent.summary());
    }
    // Reported once each: the pending wait's own report of them (real vCenter) or a later one
    // is not news.
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Ok(e) = rx.try_recv() {
        assert!(
            e.obj() != &t0.task && e.obj() != &t1.task,
            "reported twice: {e:?}"
        );
    }

    // The VM, powered on by another client (another session): reported as a modify.
    w.set([vm0.clone()]);
    healthy(&w).await;
    // Let the filter on the VM be made and its first state be read (not reported).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let other = client(sim.url());
    other.power_on_vm(&vm0).await.unwrap();
    let e = event_about(&mut rx, &vm0, |e| {
        value(e, "runtime.powerState") == Some("poweredOn")
    })
    .await;
    assert!(
        matches!(
            e,
            WatchEvent::Changed {
                kind: UpdateKind::Modify,
                ..
            }
        ),
        "{e:?}"
    );
    let before = ours.stats().snapshot();
    other.power_off_vm(&vm0).await.unwrap();
    event_about(&mut rx, &vm0, |e| {
        value(e, "runtime.powerState") == Some("poweredOff")
    })
    .await;
    // Destroyed by hand: the VM leaves the filter.
    other.destroy(&vm0).await.unwrap();
    event_about(&mut rx, &vm0, |e| {
        matches!(
            e,
            WatchEvent::Changed {
                kind: UpdateKind::Leave,
                ..
            }
        )
    })
    .await;
    let spent = ours.stats().snapshot().since(&before);
    assert_eq!(
        spent.calls("RetrievePropertiesEx"),
        0,
        "only the long poll reads: {}",
        spent.summary()
    );
    // At rest, with nothing changing, the long poll is all there is: one wait per
    // maxWaitSeconds (2 s here), no hot loop.
    let before = ours.stats().snapshot();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let spent = ours.stats().snapshot().since(&before);
    assert_eq!(
        spent.total(),
        spent.calls("WaitForUpdatesEx") + spent.calls("ModifyListView"),
        "{}",
        spent.summary()
    );
    assert!(spent.calls("WaitForUpdatesEx") <= 4, "{}", spent.summary());
}

#[tokio::test]
async fn after_a_lost_session_the_long_poll_resumes_with_fresh_filters_and_leaks_none() {
    let sim = Vcsim::start_default().await;
    let ours = client(sim.url());
    let vm0 = vm(&ours, "DC0_H0_VM0").await;
    let vm1 = vm(&ours, "DC0_H0_VM1").await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let w = Watcher::start(ours.clone(), tx, options());
    w.set([vm0.clone(), vm1.clone()]);
    healthy(&w).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let first = w.collector().unwrap();
    assert_eq!(ours.collector_filters(&first).await.unwrap().len(), 1);
    let mut in_view = ours.list_view_objects(&w.view().unwrap()).await.unwrap();
    in_view.sort();
    assert_eq!(in_view, [vm0.clone(), vm1.clone()]);

    // The session ends under the watcher (as an idle timeout or an admin would end it).
    let generation = ours.session_generation().await;
    let expired = sim.expire_sessions().await;
    assert!(expired.soap >= 1, "{expired:?}");
    // Its owners hear that the objects are not watched meanwhile.
    event_about(&mut rx, &vm0, |e| matches!(e, WatchEvent::Unwatched(_))).await;
    let other = client(sim.url());
    other.power_off_vm(&vm0).await.unwrap();
    // Reported after the re-login, by a new collector.
    event_about(&mut rx, &vm0, |e| {
        value(e, "runtime.powerState") == Some("poweredOff")
    })
    .await;
    assert!(ours.session_generation().await > generation);
    let second = w.collector().unwrap();
    assert_ne!(first, second, "the old session's collector went with it");
    assert_eq!(
        ours.collector_filters(&second).await.unwrap().len(),
        1,
        "one filter over the view, none left over"
    );
    let view = w.view().unwrap();
    assert_eq!(ours.list_view_objects(&view).await.unwrap().len(), 2);

    // Objects no longer watched leave the view; the one filter stays.
    w.set([vm1.clone()]);
    tokio::time::timeout(Duration::from_secs(10), async {
        while ours.list_view_objects(&view).await.unwrap() != [vm1.clone()] {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the unwatched VM did not leave the view");
    w.set([]);
    tokio::time::timeout(Duration::from_secs(10), async {
        while !ours.list_view_objects(&view).await.unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("objects left in the view");
    assert_eq!(ours.collector_filters(&second).await.unwrap().len(), 1);
}

const METHOD_NOT_FOUND: (u16, &str) = (
    500,
    r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>PropertyCollector does not implement: WaitForUpdatesEx</faultstring><detail><MethodNotFoundFault xmlns="urn:vim25" xsi:type="MethodNotFound"><receiver type="PropertyCollector">pc</receiver><method>WaitForUpdatesEx</method></MethodNotFoundFault></detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>"#,
);

/// A wait that returns at once with nothing (a server that does not wait).
const EMPTY_AT_ONCE: (u16, &str) = (
    200,
    r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body><WaitForUpdatesExResponse xmlns="urn:vim25"></WaitForUpdatesExResponse></soapenv:Body></soapenv:Envelope>"#,
);

/// A proxy in front of vcsim that answers every `WaitForUpdatesEx` with `answer` (status,
/// body) instead, and counts them.
async fn refusing_proxy(upstream: String, answer: (u16, &'static str)) -> (String, Arc<AtomicU64>) {
    let refused = Arc::new(AtomicU64::new(0));
    let counter = refused.clone();
    let http = vcsim::insecure_client();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap, body: String| {
        let http = http.clone();
        let upstream = upstream.clone();
        let counter = counter.clone();
        async move {
            if body.contains("<WaitForUpdatesEx ") {
                counter.fetch_add(1, Ordering::SeqCst);
                return (
                    axum::http::StatusCode::from_u16(answer.0).unwrap(),
                    [("content-type", "text/xml")],
                    answer.1.to_string(),
                )
                    .into_response();
            }
            forward(&http, &upstream, &headers, body).await
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/sdk"), refused)
}

#[tokio::test]
async fn a_vcenter_without_wait_for_updates_is_polled_and_asked_once() {
    let sim = Vcsim::start_default().await;
    let (url, refused) = refusing_proxy(sim.url().to_string(), METHOD_NOT_FOUND).await;
    let ours = client(&url);
    let vm0 = vm(&ours, "DC0_H0_VM0").await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let w = Watcher::start(ours.clone(), tx, options());
    w.set([vm0.clone()]);
    tokio::time::timeout(Duration::from_secs(10), async {
        while !matches!(w.health(), Health::Unsupported(_)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the refusal was not taken as unsupported");
    match w.health() {
        Health::Unsupported(why) => assert!(why.contains("MethodNotFound"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(!w.watching(&vm0), "its owner polls");
    // Asked once, never again (no retry loop), and the collector it made is destroyed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(refused.load(Ordering::SeqCst), 1);
    let spent = ours.stats().snapshot();
    assert_eq!(
        spent.calls("DestroyPropertyCollector"),
        1,
        "{}",
        spent.summary()
    );
    assert_eq!(w.collector(), None);
    event_about(&mut rx, &vm0, |e| matches!(e, WatchEvent::Unwatched(_))).await;
}

/// A server whose waits come back at once with nothing does not make the watcher a hot loop:
/// after three such waits in a row it pauses a second between waits.
#[tokio::test]
async fn a_server_that_does_not_wait_is_not_asked_in_a_hot_loop() {
    let sim = Vcsim::start_default().await;
    let (url, asked) = refusing_proxy(sim.url().to_string(), EMPTY_AT_ONCE).await;
    let ours = client(&url);
    let vm0 = vm(&ours, "DC0_H0_VM0").await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let w = Watcher::start(ours.clone(), tx, options());
    w.set([vm0]);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let n = asked.load(Ordering::SeqCst);
    assert!((3..=10).contains(&n), "{n} waits in 4 s");
    assert_eq!(w.health(), Health::Healthy);
}

/// A proxy in front of vcsim whose upstream can be switched (a vCenter restarted: same address,
/// every session and object state gone) and which, while `dropping`, answers each
/// `WaitForUpdatesEx` with 502 Bad Gateway and no body, as a load balancer does when its
/// connection to vCenter is cut. Everything else is passed through with the session cookie.
struct FlakyProxy {
    url: String,
    upstream: Arc<std::sync::Mutex<String>>,
    dropping: Arc<std::sync::atomic::AtomicBool>,
}

async fn flaky_proxy(upstream: &str) -> FlakyProxy {
    let target = Arc::new(std::sync::Mutex::new(upstream.to_string()));
    let dropping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (t, d) = (target.clone(), dropping.clone());
    let http = vcsim::insecure_client();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap, body: String| {
        let http = http.clone();
        let upstream = t.lock().unwrap().clone();
        let dropping = d.load(Ordering::SeqCst);
        async move {
            if dropping && body.contains("<WaitForUpdatesEx ") {
                return axum::http::StatusCode::BAD_GATEWAY.into_response();
            }
            forward(&http, &upstream, &headers, body).await
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    FlakyProxy {
        url: format!("http://{addr}/sdk"),
        upstream: target,
        dropping,
    }
}

/// The long poll dropped on its way (502 from a proxy, several waits in a row): its owners
/// hear the VM is unwatched meanwhile, and once the waits go through again a power-off made
/// while they did not is reported — nothing missed — by a new collector, the old one destroyed
/// (none leaks).
#[tokio::test]
async fn a_dropped_long_poll_resumes_and_misses_nothing() {
    let sim = Vcsim::start_default().await;
    let proxy = flaky_proxy(sim.url()).await;
    let ours = client(&proxy.url);
    let vm0 = vm(&ours, "DC0_H0_VM0").await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let w = Watcher::start(ours.clone(), tx, options());
    w.set([vm0.clone()]);
    healthy(&w).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let first = w.collector().unwrap();

    proxy.dropping.store(true, Ordering::SeqCst);
    event_about(&mut rx, &vm0, |e| matches!(e, WatchEvent::Unwatched(_))).await;
    client(sim.url()).power_off_vm(&vm0).await.unwrap();
    // A few refused attempts (backoff 1 s, 2 s), then the waits go through again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.dropping.store(false, Ordering::SeqCst);
    event_about(&mut rx, &vm0, |e| {
        value(e, "runtime.powerState") == Some("poweredOff")
    })
    .await;
    healthy(&w).await;
    let second = w.collector().unwrap();
    assert_ne!(first, second, "a new collector after the failure");
    tokio::time::timeout(Duration::from_secs(10), async {
        while ours.collector_filters(&first).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the failed collector was not destroyed");
    assert_eq!(ours.collector_filters(&second).await.unwrap().len(), 1);
}

/// vCenter restarted under the watcher (the proxy's upstream switched to a fresh vcsim of the
/// same layout: the session is unknown there, every object is in its first state): the
/// watcher logs in again, watches the same objects, and reports what differs from what it
/// knew — the VM it knew powered off is powered on in the restarted vCenter.
#[tokio::test]
async fn after_vcenter_restarts_the_long_poll_resumes_and_reports_what_changed() {
    let sim = Vcsim::start_default().await;
    let proxy = flaky_proxy(sim.url()).await;
    let ours = client(&proxy.url);
    let vm0 = vm(&ours, "DC0_H0_VM0").await;
    ours.power_off_vm(&vm0).await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let w = Watcher::start(ours.clone(), tx, options());
    w.set([vm0.clone()]);
    healthy(&w).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let generation = ours.session_generation().await;

    let restarted = Vcsim::start_default().await;
    assert_eq!(
        vm(&client(restarted.url()), "DC0_H0_VM0").await,
        vm0,
        "the same layout gives the same VM its moref"
    );
    *proxy.upstream.lock().unwrap() = restarted.url().to_string();
    drop(sim);
    event_about(&mut rx, &vm0, |e| {
        value(e, "runtime.powerState") == Some("poweredOn")
    })
    .await;
    assert!(
        ours.session_generation().await > generation,
        "logged in again"
    );
    healthy(&w).await;
    let c = w.collector().unwrap();
    assert_eq!(ours.collector_filters(&c).await.unwrap().len(), 1);
    assert_eq!(
        ours.list_view_objects(&w.view().unwrap()).await.unwrap(),
        [vm0]
    );
}
