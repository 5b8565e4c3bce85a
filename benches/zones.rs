//! Round trips, writes and wall time of zone reconciliation for 1, 10 and 100 zones against
//! vcsim, cold and warm, with a latency added to every request (SOAP and REST alike) by a
//! delaying proxy (`tests/support/latency_proxy.rs`; vcsim's own `-delay` only delays SOAP).
//!
//!   cargo bench --bench zones -- [--latency-ms 25] [--sizes "1 10 100"] [--in-flight 16]
//!   hack/bench.sh --latency-ms 25          (the same, building vcsim first)
//!
//! Per size: vcsim with N compute clusters, N ComputeCluster zones under one Datacenter region,
//! all with autoConfigure. Runs:
//! * `configure (cold)`: a fresh client and tag cache creates the categories and tags and
//!   attaches them;
//! * `verify (cold)`: a fresh client and tag cache (what a new process pays) only verifies;
//! * `verify (warm)`: the same client and cache again (the in-cluster steady state).
//!
//! "trips of wall" is wall time ÷ the time of one round trip through the same path (the mean of
//! sequential SOAP `CurrentTime` and REST category-list calls on a logged-in client): how many
//! sequential round trips the run cost. Not a timed test: it prints a table and asserts only
//! that the zones end ready and the verify runs write nothing. Without any argument (as
//! `cargo test --all-targets` runs it) it only smoke-tests one zone at 5 ms. `BENCH_TIMES=1`
//! also prints each run's calls and time per method.
#[path = "../tests/support/latency_proxy.rs"]
mod latency_proxy;
#[path = "../tests/support/vcsim.rs"]
mod vcsim;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use secrecy::SecretString;
use vsphere_provider::api::deployment_zone::{
    PlacementConstraint, VSphereDeploymentZone, VSphereDeploymentZoneSpec,
};
use vsphere_provider::api::failure_domain::{
    FailureDomain, FailureDomainType, Topology, VSphereFailureDomain, VSphereFailureDomainSpec,
};
use vsphere_provider::reconcile::zones::reconcile_server;
use vsphere_provider::vcenter::model::tags::TagCatalog;
use vsphere_provider::vcenter::stats::CallKind;
use vsphere_provider::vcenter::{Client, ClientOptions, Credentials};

fn zones(
    n: usize,
) -> (
    Vec<VSphereDeploymentZone>,
    BTreeMap<String, VSphereFailureDomain>,
) {
    let side = |name: String, t, cat: &str| FailureDomain {
        name,
        type_: t,
        tag_category: cat.into(),
        auto_configure: Some(true),
    };
    let mut zs = Vec::new();
    let mut fds = BTreeMap::new();
    for i in 0..n {
        let name = format!("zone-{i}");
        fds.insert(
            name.clone(),
            VSphereFailureDomain::new(
                &name,
                VSphereFailureDomainSpec {
                    region: side(
                        "region-a".into(),
                        FailureDomainType::Datacenter,
                        "k8s-region",
                    ),
                    zone: side(name.clone(), FailureDomainType::ComputeCluster, "k8s-zone"),
                    topology: Topology {
                        datacenter: "DC0".into(),
                        compute_cluster: Some(format!("DC0_C{i}")),
                        datastore: Some("LocalDS_0".into()),
                        networks: Some(vec!["VM Network".into()]),
                        ..Topology::default()
                    },
                },
            ),
        );
        zs.push(VSphereDeploymentZone::new(
            &name,
            VSphereDeploymentZoneSpec {
                thumbprint: None,
                identity_ref: None,
                server: Some("127.0.0.1".into()),
                failure_domain: name.clone(),
                control_plane: None,
                placement_constraint: Some(PlacementConstraint {
                    resource_pool: Some(format!("DC0_C{i}_RP1")),
                    folder: Some("vm".into()),
                }),
            },
        ));
    }
    (zs, fds)
}

struct Args {
    latency: Duration,
    sizes: Vec<usize>,
    in_flight: usize,
}

fn args() -> Args {
    let mut a = Args {
        latency: Duration::from_millis(25),
        sizes: vec![1, 10, 100],
        in_flight: ClientOptions::default().reads_in_flight,
    };
    let given: Vec<String> = std::env::args().skip(1).collect();
    if given.is_empty() {
        // `cargo test --all-targets` runs benches without arguments (`cargo bench` passes
        // `--bench`): a smoke run of one zone, not the measurement.
        a.sizes = vec![1];
        a.latency = Duration::from_millis(5);
    }
    let mut it = given.into_iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--latency-ms" => a.latency = Duration::from_millis(value().parse().expect("ms")),
            "--sizes" => {
                a.sizes = value()
                    .split([' ', ','])
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().expect("a size"))
                    .collect()
            }
            "--in-flight" => a.in_flight = value().parse().expect("a count"),
            // cargo bench passes --bench to harness=false benches.
            _ => {}
        }
    }
    a
}

fn client(url: &str, in_flight: usize) -> Client {
    Client::new(
        url,
        Credentials::new("bench", SecretString::from("bench-password")),
        ClientOptions {
            reads_in_flight: in_flight,
            ..ClientOptions::default()
        },
    )
    .unwrap()
}

/// The time of one round trip through the proxy: the mean of sequential SOAP and REST reads on
/// a client that is already logged in to both.
async fn round_trip(url: &str) -> Duration {
    let c = client(url, 1);
    c.current_time().await.unwrap();
    c.list_categories().await.unwrap();
    let started = Instant::now();
    let n = 10;
    for _ in 0..n {
        c.current_time().await.unwrap();
        c.list_categories().await.unwrap();
    }
    let rtt = started.elapsed() / (2 * n);
    c.logout().await.unwrap();
    rtt
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let a = args();
    println!(
        "latency {} ms per request (SOAP and REST), {} reads in flight",
        a.latency.as_millis(),
        a.in_flight
    );
    println!(
        "\n| zones | run | round trips | writes | wall ms | 1 round trip ms | trips of wall |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for &n in &a.sizes {
        let sim = vcsim::Vcsim::builder()
            .clusters(n as u32)
            .hosts(1)
            .pools(1)
            .vms(0)
            .standalone_hosts(0)
            .start()
            .await;
        let upstream = sim.host_port().parse().expect("vcsim host:port");
        let proxy = latency_proxy::LatencyProxy::start(upstream, a.latency);
        let url = proxy.url_for(sim.url());
        let rtt = round_trip(&url).await;
        let (zs, fds) = zones(n);
        let refs: Vec<&VSphereDeploymentZone> = zs.iter().collect();
        let mut warm = (client(&url, a.in_flight), TagCatalog::default());
        for run in ["configure (cold)", "verify (cold)", "verify (warm)"] {
            if run.ends_with("(cold)") {
                warm.0.logout().await.unwrap();
                warm = (client(&url, a.in_flight), TagCatalog::default());
            }
            let (c, tags) = &mut warm;
            let before = c.stats().snapshot();
            let started = Instant::now();
            let result = reconcile_server(c, &refs, &fds, tags, false).await;
            let wall = started.elapsed();
            let d = c.stats().snapshot().since(&before);
            assert!(
                result.verdicts.values().all(|v| v.ready()),
                "{n} zones not ready"
            );
            if std::env::var_os("BENCH_TIMES").is_some() {
                for (m, st) in &d.methods {
                    eprintln!("  {run} {m}: {} calls, {:?}", st.calls, st.total);
                }
            }
            if run.starts_with("verify") {
                assert_eq!(d.kind(CallKind::Write), 0, "{run} wrote");
            }
            println!(
                "| {n} | {run} | {} | {} | {} | {:.1} | {:.1} |",
                d.total(),
                d.kind(CallKind::Write),
                wall.as_millis(),
                rtt.as_secs_f64() * 1e3,
                wall.as_secs_f64() / rtt.as_secs_f64()
            );
        }
        warm.0.logout().await.unwrap();
        drop(proxy);
    }
}
