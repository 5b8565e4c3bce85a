//! The client's retries are bounded in count and in time: a vCenter answering 503 again and
//! again gets no retry that would end past `retry_deadline`, however many attempts the policy
//! allows, and the error stays typed (transient).
#[path = "support/vcsim.rs"]
mod vcsim;

use std::time::{Duration, Instant};

use secrecy::SecretString;
use vcsim::{FaultKind, FaultSpec, Vcsim};
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials, Error, RetryPolicy};

#[tokio::test]
async fn retries_stop_at_the_overall_deadline() {
    let sim = Vcsim::start_default().await;
    let options = ClientOptions {
        retry: RetryPolicy {
            attempts: 50,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(400),
        },
        retry_deadline: Duration::from_secs(1),
        ..ClientOptions::default()
    };
    let c = Client::new(
        sim.url(),
        Credentials::new("admin", SecretString::from("secret")),
        options,
    )
    .unwrap();
    c.login().await.unwrap();
    sim.inject(
        FaultSpec::new(FaultKind::Http503)
            .method("FindByInventoryPath")
            .count(100),
    )
    .await;
    let started = Instant::now();
    let err = c.find_by_inventory_path("/DC0").await.unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, Error::Http { status: 503, .. }), "{err}");
    assert!(err.is_transient());
    // The deadline bounds when the last attempt *starts*; that attempt's reply (an instant 503
    // from vcsim) still arrives after it. A retry past the deadline would add at least a
    // 200 ms wait plus a request, so half a second of slack tells the two apart even on a
    // loaded CI machine (CI once measured 1.0013 s here).
    assert!(
        took < Duration::from_millis(1500),
        "{took:?}: no retry started past the 1 s deadline"
    );
    let attempts = sim.stats().await.soap("FindByInventoryPath");
    // Waits of 50-100, 100-200, 200-400, 200-400 ms … fit at most 8 attempts into 1 s.
    assert!((2..=8).contains(&attempts), "{attempts} attempts");
    sim.clear_faults().await;
}
