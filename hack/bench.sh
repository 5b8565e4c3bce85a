#!/usr/bin/env bash
# Round trips, writes and wall time of zone reconciliation for 1, 10 and 100 zones against vcsim,
# cold (a fresh client and tag cache, as a new process) and warm (the same client and cache, as
# the controller in the cluster), with a latency added to every request, SOAP and REST alike, by
# a delaying proxy (tests/support/latency_proxy.rs; vcsim's -delay only delays SOAP). For each N:
# vcsim with N compute clusters; N ComputeCluster zones (one per cluster) under one Datacenter
# region, all with autoConfigure: configure (cold), then verify (cold) and verify (warm), which
# must write nothing. "trips of wall" is wall time divided by one round trip through the same
# proxy: the number of sequential round trips the run cost.
#
#   hack/bench.sh [--latency-ms 25] [--sizes "1 10 100"] [--in-flight 16] [--quick]
#
# --in-flight sets ClientOptions::reads_in_flight (1 = every read sequential). The default build
# is cargo's bench profile (release); --quick reuses the dev build's dependencies and compiles
# only this crate optimized (opt-level 2), which is how README's Cost table was measured.
# BENCH_TIMES=1 also prints each run's calls and time per method.
# Upstream CAPV spends about 35-45 round trips per zone reconcile (reference §5).
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

latency_ms=25
sizes="1 10 100"
in_flight=16
quick=""
while [ $# -gt 0 ]; do
	case "$1" in
	--latency-ms | --delay-ms) latency_ms="$2"; shift 2 ;;
	--sizes) sizes="$2"; shift 2 ;;
	--in-flight) in_flight="$2"; shift 2 ;;
	--quick) quick=1; shift ;;
	-h | --help) sed -n '2,16p' "$0"; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

VCSIM_BIN="$(hack/setup.sh | tail -n1)"
export VCSIM_BIN
args=(--latency-ms "$latency_ms" --sizes "$sizes" --in-flight "$in_flight")
if [ -n "$quick" ]; then
	log "running the zones bench (dev dependencies, this crate at opt-level 2)"
	CARGO_PROFILE_DEV_OPT_LEVEL=2 cargo bench --quiet --profile dev --bench zones -- "${args[@]}"
else
	log "running the zones bench (release)"
	cargo bench --quiet --bench zones -- "${args[@]}"
fi
