#!/usr/bin/env bash
# Round trips and wall time of the machine actuator: creating 3, 10 and 30 machines (clone,
# power on, node link) and a steady-state sweep over them, against vcsim with a per-call delay.
# For each N: vcsim with 3 compute clusters, one ComputeCluster zone per cluster, N machines
# placed round-robin by zone name; run 1 creates (with --simulate-nodes, to Running), run 2
# re-runs the same manifests and state and must write nothing.
# Kinds: `openshift` (N OpenShift Machines), `capi` (a Cluster API Cluster + VSphereCluster and
# one MachineDeployment per zone, N Machines in all, local mode playing CAPI; vcsim's guests
# report no IP, so they end Provisioning, VMs powered on), `mixed` (N/2 of each on the same
# server: one sweep for both kinds).
#
#   hack/bench-machines.sh [--delay-ms 10] [--sizes "3 10 30"] [--kinds "openshift capi mixed"] [--release]
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
kinds="openshift capi mixed"
profile=debug
while [ $# -gt 0 ]; do
	case "$1" in
	--delay-ms) delay_ms="$2"; shift 2 ;;
	--sizes) sizes="$2"; shift 2 ;;
	--kinds) kinds="$2"; shift 2 ;;
	--release) profile=release; shift ;;
	-h | --help) sed -n '2,16p' "$0"; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

VCSIM_BIN="$(hack/setup.sh | tail -n1)"
log "building vsphere-provider ($profile)"
if [ "$profile" = release ]; then cargo build --release --quiet >&2; else cargo build --quiet >&2; fi
BIN="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/$profile/vsphere-provider"

work="$(mktemp -d)"
vcsim_pid=""
cleanup() {
	[ -n "$vcsim_pid" ] && kill "$vcsim_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

manifests() { # OPENSHIFT CAPI DIR
	local n="$1" capi="$2" dir="$3" i z
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
	[ "$capi" -gt 0 ] || return 0
	# Cluster API: the user's Cluster, VSphereCluster, template, bootstrap Secret and one
	# MachineDeployment per zone (local mode runs no bootstrap provider: dataSecretName given).
	cat >"$dir/capi.yaml" <<YAML
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereCluster
metadata: {name: bench, namespace: default}
spec: {server: 127.0.0.1, failureDomainSelector: {}}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: bench, namespace: default}
spec:
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: VSphereCluster, name: bench}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereMachineTemplate
metadata: {name: bench, namespace: default}
spec:
  template:
    spec:
      template: DC0_H0_VM0
      network: {devices: [{networkName: VM Network, dhcp4: true}]}
---
apiVersion: v1
kind: Secret
metadata: {name: bench-bootstrap, namespace: default}
stringData: {value: "#cloud-config\n", format: cloud-config}
YAML
	for z in 0 1 2; do
		cat >>"$dir/capi.yaml" <<YAML
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: capi-$z, namespace: default}
spec:
  clusterName: bench
  replicas: $(((capi + 2 - z) / 3))
  template:
    spec:
      clusterName: bench
      failureDomain: zone-$z
      bootstrap: {dataSecretName: bench-bootstrap}
      infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: VSphereMachineTemplate, name: bench}
YAML
	done
}

# The machine part of the summary: "...; N machine change(s) in vCenter; R round trips (...)".
machine_part() { sed -n 's/.*machine change(s) in vCenter; \([0-9]*\) round trips (\([^)]*\)).*/\1|\2/p'; }

printf '| kind | machines | run | round trips | writes | per machine | wall s |\n|---|---:|---|---:|---:|---:|---:|\n'
for kind in $kinds; do
for n in $sizes; do
	case "$kind" in
	openshift) os=$n capi=0 ;;
	capi) os=0 capi=$n ;;
	mixed) os=$((n / 2)) capi=$((n - n / 2)) ;;
	*) die "unknown kind $kind (openshift, capi, mixed)" ;;
	esac
	url_file="$work/url-$kind-$n"
	"$VCSIM_BIN" -cluster 3 -host 1 -delay "$delay_ms" -url-file "$url_file" >"$work/vcsim-$kind-$n.log" 2>&1 &
	vcsim_pid=$!
	for _ in $(seq 100); do [ -s "$url_file" ] && break; sleep 0.1; done
	url="$(head -n1 "$url_file")"
	dir="$work/m-$kind-$n"
	manifests "$os" "$capi" "$dir"
	for run in create steady; do
		start=$(date +%s.%N)
		"$BIN" reconcile -f "$dir" --server "$url" --username bench --password bench \
			--state "$work/state-$kind-$n.json" --simulate-nodes -o json >/dev/null 2>"$work/err-$kind-$n-$run" || true
		end=$(date +%s.%N)
		err="$work/err-$kind-$n-$run"
		line="$(grep 'machine(s) running' "$err" | machine_part || true)"
		[ -n "$line" ] || die "run $run of $n $kind machines printed no summary: $(tail -5 "$err")"
		# Every machine made: OpenShift ones Running, Cluster API ones powered on (Provisioning:
		# no guest IP in vcsim) or Provisioned.
		grep -q "failed:\| is Failed\| waits:" "$err" &&
			die "run $run of $n $kind machines failed: $(grep 'failed:\| is Failed\| waits:' "$err" | head -3)"
		clones=$(grep -c '^done: .*: clone ' "$err" || true)
		want=$n
		[ "$run" = create ] || want=0
		[ "$clones" = "$want" ] || die "run $run of $n $kind machines cloned $clones VMs, not $want"
		rt="${line%%|*}"
		writes="$(grep -o '[0-9]* write' <<<"${line#*|}" | grep -o '[0-9]*' || echo 0)"
		per=$(awk -v r="$rt" -v n="$n" 'BEGIN{printf "%.2f", r/n}')
		wall=$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.2f", b-a}')
		printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$kind" "$n" "$run" "$rt" "$writes" "$per" "$wall"
	done
	kill "$vcsim_pid" 2>/dev/null || true
	vcsim_pid=""
done
done
