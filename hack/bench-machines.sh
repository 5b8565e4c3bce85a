#!/usr/bin/env bash
# Round trips and wall time of the machine actuator: creating 3, 10 and 30 machines (clone,
# power on, node link) and a steady-state sweep over them, against vcsim with a per-call delay.
# For each N: vcsim with 3 compute clusters, one ComputeCluster zone per cluster, N machines
# placed round-robin by zone name; run 1 creates (with --simulate-nodes, to Running), run 2
# re-runs the same manifests and state and must write nothing.
#
#   hack/bench-machines.sh [--delay-ms 10] [--sizes "3 10 30"] [--release]
#
# The numbers are the machine part of the summary line (zones are measured by hack/bench.sh).
# Upstream (reference/machine-actuator.md §4) spends O(N) calls per resync: a task read,
# FindByUuid and a tag walk per machine, several dozen per machine cold.
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

delay_ms=10
sizes="3 10 30"
profile=debug
while [ $# -gt 0 ]; do
	case "$1" in
	--delay-ms) delay_ms="$2"; shift 2 ;;
	--sizes) sizes="$2"; shift 2 ;;
	--release) profile=release; shift ;;
	-h | --help) sed -n '2,12p' "$0"; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

VCSIM_BIN="$(hack/setup.sh | tail -n1)"
log "building vsphere-provider ($profile)"
if [ "$profile" = release ]; then cargo build --release --quiet >&2; else cargo build --quiet >&2; fi
BIN="$REPO_ROOT/target/$profile/vsphere-provider"

work="$(mktemp -d)"
vcsim_pid=""
cleanup() {
	[ -n "$vcsim_pid" ] && kill "$vcsim_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

manifests() { # N DIR
	local n="$1" dir="$2" i z
	mkdir -p "$dir"
	for z in 0 1 2; do
		cat >"$dir/zone-$z.yaml" <<YAML
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata:
  name: fd-$z
spec:
  region: {name: region-a, type: Datacenter, tagCategory: k8s-region, autoConfigure: true}
  zone: {name: zone-$z, type: ComputeCluster, tagCategory: k8s-zone, autoConfigure: true}
  topology:
    datacenter: DC0
    computeCluster: DC0_C$z
    datastore: LocalDS_0
    networks: [VM Network]
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata:
  name: zone-$z
spec:
  server: 127.0.0.1
  failureDomain: fd-$z
  placementConstraint: {folder: vm}
YAML
	done
	# The user data every Machine is cloned with (the provider spec's default Secret).
	cat >"$dir/user-data.yaml" <<YAML
apiVersion: v1
kind: Secret
metadata: {name: worker-user-data, namespace: openshift-machine-api}
stringData: {userData: '{"ignition":{"version":"3.2.0"}}'}
YAML
	for ((i = 0; i < n; i++)); do
		cat >"$dir/machine-$i.yaml" <<YAML
apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  name: bench-$i
  namespace: openshift-machine-api
  labels: {vsphere-provider.io/deployment-zone: zone-$((i % 3))}
spec:
  providerSpec:
    value:
      apiVersion: machine.openshift.io/v1beta1
      kind: VSphereMachineProviderSpec
      template: DC0_H0_VM0
      network: {devices: []}
YAML
	done
}

# The machine part of the summary: "...; N machine change(s) in vCenter; R round trips (...)".
machine_part() { sed -n 's/.*machine change(s) in vCenter; \([0-9]*\) round trips (\([^)]*\)).*/\1|\2/p'; }

printf '| machines | run | round trips | writes | per machine | wall s |\n|---:|---|---:|---:|---:|---:|\n'
for n in $sizes; do
	url_file="$work/url-$n"
	"$VCSIM_BIN" -cluster 3 -host 1 -delay "$delay_ms" -url-file "$url_file" >"$work/vcsim-$n.log" 2>&1 &
	vcsim_pid=$!
	for _ in $(seq 100); do [ -s "$url_file" ] && break; sleep 0.1; done
	url="$(head -n1 "$url_file")"
	dir="$work/m-$n"
	manifests "$n" "$dir"
	for run in create steady; do
		start=$(date +%s.%N)
		"$BIN" reconcile -f "$dir" --server "$url" --username bench --password bench \
			--state "$work/state-$n.json" --simulate-nodes -o json >/dev/null 2>"$work/err-$n-$run" || true
		end=$(date +%s.%N)
		line="$(grep 'machine(s) running' "$work/err-$n-$run" | machine_part || true)"
		[ -n "$line" ] || die "run $run of $n machines printed no summary: $(tail -5 "$work/err-$n-$run")"
		rt="${line%%|*}"
		writes="$(grep -o '[0-9]* write' <<<"${line#*|}" | grep -o '[0-9]*' || echo 0)"
		per=$(awk -v r="$rt" -v n="$n" 'BEGIN{printf "%.2f", r/n}')
		wall=$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.2f", b-a}')
		printf '| %s | %s | %s | %s | %s | %s |\n' "$n" "$run" "$rt" "$writes" "$per" "$wall"
	done
	kill "$vcsim_pid" 2>/dev/null || true
	vcsim_pid=""
done
