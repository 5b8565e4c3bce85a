#!/usr/bin/env bash
# The project's test entry point (also what CI runs via .ci/run):
#   setup (hack/setup.sh, hack/kube/build.sh, hack/capi/build.sh, hack/workload-sim/build.sh)
#   -> cargo fmt --check -> cargo clippy -D warnings
#   -> hack/deny.sh (cargo-deny: advisories, licences, bans, sources, warnings as errors, against
#      the committed RustSec snapshot; fails past 180 days) -> cargo test
#   -> hack/fuzz.sh (FUZZ_SECONDS per target, default 10)
#   -> kubectl kustomize on every config/**/kustomization.yaml (skipped without kubectl)
#   -> the quick start's demos (hack/demo.sh, hack/demo-cluster.sh, hack/demo-capi.sh: the last is
#      also the whole-cluster end-to-end test, tests/capi_workload_cluster.rs).
# Fails fast with the name of the failing step.
set -euo pipefail

# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

if [ -d "$HOME/.cargo/bin" ]; then
	PATH="$HOME/.cargo/bin:$PATH"
fi

step() {
	local name="$1"
	shift
	log "==> $name: $*"
	local start=$SECONDS
	if ! "$@"; then
		die "step '$name' failed (command: $*)"
	fi
	log "<== $name ok ($((SECONDS - start))s)"
}

total_start=$SECONDS

VCSIM_BIN="$(hack/setup.sh | tail -n1)" || die "hack/setup.sh failed"
[ -x "$VCSIM_BIN" ] || die "hack/setup.sh did not produce a vcsim binary (got '$VCSIM_BIN')"
export VCSIM_BIN
log "VCSIM_BIN=$VCSIM_BIN"

# The real kube-apiserver and etcd of the realapi_* tests (tests/support/realapi.rs): built from
# the Go module proxy by hack/kube/build.sh (a cold build takes 8-12 min; cached after).
KUBE_BIN_DIR="$(hack/kube/build.sh | tail -n1)" || die "hack/kube/build.sh failed"
[ -x "$KUBE_BIN_DIR/kube-apiserver" ] && [ -x "$KUBE_BIN_DIR/etcd" ] ||
	die "hack/kube/build.sh did not produce kube-apiserver and etcd (got '$KUBE_BIN_DIR')"
export KUBE_BIN_DIR
log "KUBE_BIN_DIR=$KUBE_BIN_DIR"
# Cluster API's own managers and clusterctl (v1.14.2), built from the Go module proxy by
# hack/capi/build.sh, for tests/capi_clusterctl.rs (clusterctl init from an offline repository) and
# tests/capi_machines.rs (CAPI Machines, KubeadmControlPlane and CAPV's cluster template on vcsim)
# and tests/capi_clusterclass.rs (CAPV's ClusterClass under the topology controller, ~3 min).
# A cold build took 9m27s wall on two cores shared with other builds (388 s of CPU); cached after.
CAPI_BIN_DIR="$(hack/capi/build.sh | tail -n1)" || die "hack/capi/build.sh failed"
[ -x "$CAPI_BIN_DIR/clusterctl" ] || die "hack/capi/build.sh did not produce clusterctl (got '$CAPI_BIN_DIR')"
export CAPI_BIN_DIR
log "CAPI_BIN_DIR=$CAPI_BIN_DIR"
# The workload-cluster simulator (hack/workload-sim: Cluster API v1.14.2's in-memory API server and
# etcd, booting vcsim VMs from the guestinfo the provider wrote) for tests/capi_workload_cluster.rs
# (hack/demo-capi.sh) and tests/capi_clusterclass.rs (run by `cargo test` below). It shares most of its dependencies with the CAPI build above; cached after.
WORKLOAD_SIM_BIN="$(hack/workload-sim/build.sh | tail -n1)/workload-sim" || die "hack/workload-sim/build.sh failed"
[ -x "$WORKLOAD_SIM_BIN" ] || die "hack/workload-sim/build.sh did not produce workload-sim (got '$WORKLOAD_SIM_BIN')"
export WORKLOAD_SIM_BIN
log "WORKLOAD_SIM_BIN=$WORKLOAD_SIM_BIN"
# Those tests make their certificates with openssl and apply manifests with kubectl, as users do.
command -v openssl >/dev/null 2>&1 || ensure_apt_packages openssl
# kubectl: the one built with the server (same release, no version skew, present on a new
# machine), unless KUBECTL names another.
export KUBECTL="${KUBECTL:-$KUBE_BIN_DIR/kubectl}"
[ -x "$KUBECTL" ] || command -v "$KUBECTL" >/dev/null 2>&1 ||
	die "kubectl not found at $KUBECTL (hack/kube/build.sh builds one)"
log "KUBECTL=$KUBECTL"

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

step fmt cargo fmt --all -- --check
step clippy cargo clippy --all-targets -- -D warnings
# Both lock files under cargo-deny (deny.toml): vulnerable, unmaintained, unsound or yanked
# crates, licences, banned crates and sources; offline against the committed snapshot of the
# RustSec database (hack/deny/SOURCE says of when; the run fails past 180 days).
step deny hack/deny.sh
step test cargo test --all-targets
# The vCenter reply decoders under cargo-fuzz for a bounded time (fuzz/README.md; a long run is
# FUZZ_SECONDS=3600 hack/fuzz.sh, optimized, with AddressSanitizer on nightly). CI builds the
# targets on stable without a sanitizer (panics, aborts and hangs are what it looks for) and,
# since the run is short, unoptimized (`cargo fuzz build --dev`: 40% of the CPU of a cold optimized
# build) in their own target dir (fuzz/target).
step fuzz env FUZZ_SECONDS="${FUZZ_SECONDS:-10}" FUZZ_TOOLCHAIN="${FUZZ_TOOLCHAIN:-stable}" hack/fuzz.sh

if command -v "$KUBECTL" >/dev/null 2>&1; then
	found=0
	while IFS= read -r -d '' k; do
		found=1
		dir="$(dirname "$k")"
		step "kustomize $dir" bash -c '"$KUBECTL" kustomize "$1" >/dev/null' _ "$dir"
	done < <(find config -name kustomization.yaml -print0 2>/dev/null | sort -z)
	[ "$found" -eq 1 ] || log "note: no config/**/kustomization.yaml found"
else
	log "note: kubectl not installed; skipping kustomize checks of config/"
fi

# The README's quick start, as a newcomer runs it: each demo against its own vcsim (and, for
# demo-cluster, its own kube-apiserver), reusing the binaries built above; a demo that exits
# non-zero fails the run. SKIP_DEMOS=1 skips them (a quick local run; CI never sets it).
if [ -z "${SKIP_DEMOS:-}" ]; then
	for demo in hack/demo.sh hack/demo-cluster.sh hack/demo-capi.sh; do
		[ -e "$demo" ] || continue
		step "demo $demo" bash -c '"$1" </dev/null >"$2" 2>&1 || { tail -n 60 "$2" >&2; exit 1; }' _ "$demo" "${TMPDIR:-/tmp}/$(basename "$demo" .sh).log"
	done
else
	log "note: SKIP_DEMOS set; the quick-start demos were not run"
fi

log "all checks passed in $((SECONDS - total_start))s"
