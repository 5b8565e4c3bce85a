//! Independent reads go out concurrently (issue 10): a cold tag catalog of many names costs a
//! few round-trip latencies, not one per name. A fault injected into one of the concurrent reads
//! (vcsim fault injection) must be retried, re-logged-in or reported exactly as it is when the
//! same reads go one at a time (`reads_in_flight: 1`, the behaviour before).
#[path = "support/latency_proxy.rs"]
mod latency_proxy;
#[path = "support/vcsim.rs"]
mod vcsim;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use secrecy::SecretString;
use vcsim::{FaultKind, FaultSpec, Vcsim};
use vsphere_provider::vcenter::model::tags::CategorySpec;
use vsphere_provider::vcenter::model::tags::TagCatalog;
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials};

const TAGS: usize = 24;

fn client(url: &str, in_flight: usize) -> Client {
    Client::new(
        url,
        Credentials::new("admin", SecretString::from("secret")),
        ClientOptions {
            reads_in_flight: in_flight,
            ..ClientOptions::default()
        },
    )
    .unwrap()
}

/// One category with [`TAGS`] tags; returns the tag ids in creation order.
async fn seed(sim: &Vcsim) -> Vec<String> {
    let c = client(sim.url(), 1);
    let cat = c
        .create_category(&CategorySpec {
            name: "k8s-zone".into(),
            description: String::new(),
            cardinality: "MULTIPLE".into(),
            associable_types: vec![],
        })
        .await
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..TAGS {
        ids.push(c.create_tag(&format!("zone-{i}"), &cat, "").await.unwrap());
    }
    c.logout().await.unwrap();
    ids
}

/// Fill a fresh catalog from the attached tag ids with a fresh client, `fault` queued against
/// the get of one tag in the middle. Returns the outcome, the catalog, the requests the client
/// sent and the REST logins vcsim saw.
async fn fill(
    sim: &Vcsim,
    ids: &[String],
    in_flight: usize,
    fault: Option<(FaultKind, u32)>,
) -> (Result<(), String>, TagCatalog, u64, u64) {
    sim.clear_faults().await;
    // Log in first so the fault hits the read, not the session create.
    let c = client(sim.url(), in_flight);
    c.rest_dialect().await.unwrap();
    sim.reset_stats().await;
    if let Some((kind, count)) = fault {
        let victim = &ids[TAGS / 2];
        sim.inject(
            FaultSpec::new(kind)
                .method(&format!("tagging/tag/id:{victim}"))
                .count(count),
        )
        .await;
    }
    let mut catalog = TagCatalog::default();
    let tag_ids: BTreeSet<String> = ids.iter().cloned().collect();
    let before = c.requests_sent();
    let result = c
        .fill_tag_catalog(&mut catalog, &BTreeSet::new(), &tag_ids)
        .await
        .map_err(|e| e.to_string());
    let sent = c.requests_sent() - before;
    let logins = sim
        .stats()
        .await
        .rest_matching("POST /rest/com/vmware/cis/session");
    let _ = c.logout().await;
    (result, catalog, sent, logins)
}

#[tokio::test]
async fn a_fault_in_one_concurrent_read_is_retried_or_reported_as_when_sequential() {
    let sim = Vcsim::builder().clusters(1).hosts(1).start().await;
    let ids = seed(&sim).await;

    // No fault: the same catalog from the same requests (every tag, then its one category).
    let (seq, want, seq_sent, _) = fill(&sim, &ids, 1, None).await;
    let (conc, got, conc_sent, _) = fill(&sim, &ids, 16, None).await;
    assert_eq!((seq, conc), (Ok(()), Ok(())));
    assert_eq!(got, want);
    assert_eq!(want.tags().count(), TAGS);
    assert_eq!((seq_sent, conc_sent), (TAGS as u64 + 1, TAGS as u64 + 1));

    // A 503 on one get: retried, the same catalog, one request more, either way.
    let (seq, seq_cat, seq_sent, _) = fill(&sim, &ids, 1, Some((FaultKind::Http503, 1))).await;
    let (conc, conc_cat, conc_sent, _) = fill(&sim, &ids, 16, Some((FaultKind::Http503, 1))).await;
    assert_eq!((seq, conc), (Ok(()), Ok(())));
    assert_eq!((&seq_cat, &conc_cat), (&want, &want));
    assert_eq!((seq_sent, conc_sent), (TAGS as u64 + 2, TAGS as u64 + 2));

    // The session killed under one get (vcsim terminates it and answers 401): one re-login,
    // shared by every read that saw the dead session, then the same catalog.
    let (seq, seq_cat, _, seq_logins) =
        fill(&sim, &ids, 1, Some((FaultKind::NotAuthenticated, 1))).await;
    let (conc, conc_cat, _, conc_logins) =
        fill(&sim, &ids, 16, Some((FaultKind::NotAuthenticated, 1))).await;
    assert_eq!((seq, conc), (Ok(()), Ok(())));
    assert_eq!((&seq_cat, &conc_cat), (&want, &want));
    assert_eq!(
        (seq_logins, conc_logins),
        (1, 1),
        "exactly one re-login each"
    );

    // More 503s than the retry policy allows: the same error, reported, either way.
    let (seq, _, _, _) = fill(&sim, &ids, 1, Some((FaultKind::Http503, 20))).await;
    let (conc, _, _, _) = fill(&sim, &ids, 16, Some((FaultKind::Http503, 20))).await;
    let seq = seq.expect_err("sequential reports the fault");
    assert_eq!(conc.expect_err("concurrent reports the fault"), seq);
    assert!(seq.contains("503"), "{seq}");
}

#[tokio::test]
async fn concurrent_gets_cost_latencies_not_gets() {
    let sim = Vcsim::builder().clusters(1).hosts(1).start().await;
    let ids = seed(&sim).await;
    let delay = Duration::from_millis(40);
    let proxy = latency_proxy::LatencyProxy::start(sim.host_port().parse().unwrap(), delay);
    let url = proxy.url_for(sim.url());
    let tag_ids: BTreeSet<String> = ids.iter().cloned().collect();
    let c = client(&url, 8);
    c.rest_dialect().await.unwrap();
    let started = Instant::now();
    let mut catalog = TagCatalog::default();
    c.fill_tag_catalog(&mut catalog, &BTreeSet::new(), &tag_ids)
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(catalog.tags().count(), TAGS);
    // 24 tag gets 8 at a time (3 latencies, one more for the new connections' handshakes) and
    // the category behind the first tag of it: about 5 latencies, not 25.
    assert!(took >= delay * 4, "{took:?}");
    assert!(took < delay * 12, "{took:?}: the gets did not overlap");
    c.logout().await.unwrap();
}
