//! The Rust half of `hack/bench-peers.sh`, which runs the upstream peers (CAPV v1.16.1, OpenShift
//! machine-api-operator's vSphere machine controller) and vsphere-provider against the same vcsim
//! and prints one table. The script drives the processes (API server, vcsim, controllers); this
//! test binary lends it what only the Rust harness has: the delaying proxy of
//! tests/support/latency_proxy.rs, which adds the same latency to SOAP and REST requests (vcsim's
//! `-delay` delays SOAP only) and measures how long at least one request was in flight, so the
//! script can report sequential depth (busy time ÷ delay) beside vcsim's own request counts.
//!
//! `#[ignore]`d: it only runs when the script asks for it, with its environment set:
//!
//! ```text
//! BENCH_PEERS_UPSTREAM=127.0.0.1:PORT BENCH_PEERS_DELAY_MS=10 BENCH_PEERS_STATE=FILE \
//!   bench_peers-HASH --ignored --exact proxy --nocapture
//! ```
//!
//! It writes `http://127.0.0.1:PORT` (the proxy) as the first line of FILE, then keeps
//! rewriting FILE's second line with the busy time in milliseconds, until it is killed or the
//! script that started it is gone.
#[path = "support/latency_proxy.rs"]
mod latency_proxy;

use std::time::Duration;

use latency_proxy::LatencyProxy;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set (run by hack/bench-peers.sh)"))
}

#[test]
#[ignore = "a tool of hack/bench-peers.sh, not a test"]
fn proxy() {
    let upstream = env("BENCH_PEERS_UPSTREAM")
        .parse()
        .expect("BENCH_PEERS_UPSTREAM is HOST:PORT");
    let delay = Duration::from_millis(
        env("BENCH_PEERS_DELAY_MS")
            .parse()
            .expect("BENCH_PEERS_DELAY_MS is a number"),
    );
    let state = std::path::PathBuf::from(env("BENCH_PEERS_STATE"));
    let proxy = LatencyProxy::start(upstream, delay);
    let url = format!("http://{}", proxy.addr());
    // The script waits for the file; write it whole (rename) so it never reads half a line.
    let write = |busy: Duration| {
        let tmp = state.with_extension("tmp");
        std::fs::write(&tmp, format!("{url}\n{}\n", busy.as_millis())).expect("state file");
        std::fs::rename(&tmp, &state).expect("state file rename");
    };
    write(Duration::ZERO);
    // The script kills it; should the script die first, it is reparented: stop then.
    let parent = std::os::unix::process::parent_id();
    while std::os::unix::process::parent_id() == parent {
        write(proxy.busy());
        std::thread::sleep(Duration::from_millis(50));
    }
}
