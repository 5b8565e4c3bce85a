#!/usr/bin/env bash
# Round trips and wall time of zone reconciliation for 1, 10 and 100 zones against vcsim with a
# per-call delay. For each N: vcsim with N compute clusters; N ComputeCluster zones (one per
# cluster) under one Datacenter region, all with autoConfigure. Run 1 configures (creates the
# categories and tags, attaches them); run 2 only verifies and must write nothing.
#
#   hack/bench.sh [--delay-ms 10] [--sizes "1 10 100"]
#
# Upstream CAPV spends about 35-45 round trips per zone reconcile (reference §5).
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

delay_ms=10
sizes="1 10 100"
while [ $# -gt 0 ]; do
	case "$1" in
	--delay-ms) delay_ms="$2"; shift 2 ;;
	--sizes) sizes="$2"; shift 2 ;;
	-h | --help) sed -n '2,11p' "$0"; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

VCSIM_BIN="$(hack/setup.sh | tail -n1)"
log "building vsphere-provider (release)"
cargo build --release --quiet >&2
BIN="$REPO_ROOT/target/release/vsphere-provider"

work="$(mktemp -d)"
vcsim_pid=""
cleanup() {
	[ -n "$vcsim_pid" ] && kill "$vcsim_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

manifests() { # N DIR
	local n="$1" dir="$2" i
	mkdir -p "$dir"
	for ((i = 0; i < n; i++)); do
		cat >"$dir/zone-$i.yaml" <<YAML
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata:
  name: zone-$i
spec:
  region: {name: region-a, type: Datacenter, tagCategory: k8s-region, autoConfigure: true}
  zone: {name: zone-$i, type: ComputeCluster, tagCategory: k8s-zone, autoConfigure: true}
  topology:
    datacenter: DC0
    computeCluster: DC0_C$i
    datastore: LocalDS_0
    networks: [VM Network]
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata:
  name: zone-$i
spec:
  server: 127.0.0.1
  failureDomain: zone-$i
  placementConstraint: {resourcePool: DC0_C${i}_RP1, folder: vm}
YAML
	done
}

# Prints "round_trips writes seconds" for one reconcile run.
measure() { # DIR URL
	local start end out
	start=$(date +%s.%N)
	out="$("$BIN" reconcile -f "$1" --server "$2" 2>/dev/null | tail -n1)" || true
	end=$(date +%s.%N)
	local trips writes
	trips=$(sed -n 's/.*; \([0-9]*\) round trips (.*/\1/p' <<<"$out")
	writes=$(sed -n 's/.* \([0-9]*\) write).*/\1/p' <<<"$out")
	echo "${trips:-?} ${writes:-?} $(echo "$end - $start" | bc -l | xargs printf '%.2f')"
}

command -v bc >/dev/null 2>&1 || ensure_apt_packages bc
export VSPHERE_USERNAME=bench VSPHERE_PASSWORD=bench-password
printf '\n| zones | run | round trips | writes | trips/zone | wall s | upstream trips (35-45/zone) |\n'
printf '|---:|---|---:|---:|---:|---:|---:|\n'
for n in $sizes; do
	rm -f "$work/url"
	"$VCSIM_BIN" -l 127.0.0.1:0 -cluster "$n" -host 1 -pool 1 -vm 0 -standalone-host 0 \
		-delay "$delay_ms" -url-file "$work/url" </dev/null >/dev/null 2>&1 &
	vcsim_pid=$!
	for _ in $(seq 200); do [ -s "$work/url" ] && break; sleep 0.05; done
	[ -s "$work/url" ] || die "vcsim did not start"
	url="$(cat "$work/url")"
	rm -rf "$work/m" && manifests "$n" "$work/m"
	for run in configure verify; do
		read -r trips writes secs <<<"$(measure "$work/m" "$url")"
		per=$(echo "$trips / $n" | bc -l | xargs printf '%.2f')
		printf '| %d | %s | %s | %s | %s | %s | %d-%d |\n' "$n" "$run" "$trips" "$writes" "$per" "$secs" $((35 * n)) $((45 * n))
	done
	kill "$vcsim_pid" 2>/dev/null || true
	wait "$vcsim_pid" 2>/dev/null || true
	vcsim_pid=""
done
printf '\nvcsim -delay %s ms applies to SOAP calls only (REST tagging is not delayed by vcsim).\n' "$delay_ms"
