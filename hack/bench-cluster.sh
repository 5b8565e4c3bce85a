#!/usr/bin/env bash
# The controller against Kubernetes' own kube-apiserver (hack/kube/up.sh) and vcsim, measured:
#   1. time from `kubectl apply` of a 3-replica ControlPlaneMachineSet to 3 Running Machines;
#   2. API server requests the controller makes, counted by verb and resource from the
#      kube-apiserver audit log (up.sh --audit-user: only the controller's ServiceAccount is
#      recorded, at the Metadata level):
#      a. per machine created (the CPMS's 3, then the bulk of the machines),
#      b. during an idle window with ZONES zones and MACHINES machines in the caches, long enough
#         for every periodic resync (zones, clusters and sets every 300 s, machines every 600 s):
#         must be zero writes apart from the leader Lease renewals,
#      c. during the resync of a restarted controller (every object reconciled once, nothing
#         changed): zero writes apart from taking the Lease;
#   3. the controller's resident memory (VmRSS, VmHWM from /proc) with those objects cached;
#   4. the vCenter calls of the idle window, by SOAP method or REST path (the controller's
#      vsphere_provider_vcenter_requests_total): the long poll (WaitForUpdatesEx) and the periodic
#      full reads; with the long poll nothing else is read unless vCenter changes.
#
#   hack/bench-cluster.sh [--zones 100] [--machines 300] [--idle 630] [--release]
#
# Layout: vcsim with ZONES compute clusters of one host and one pool each; ZONES failure domains
# (autoConfigure: the controller tags vCenter itself) and deployment zones, one per cluster; a
# VSphereCluster publishing them all; a CPMS of 3 over zone-0..2, then MACHINES-3 Machines placed
# round-robin by zone name. The CRDs are config/crd's, with their conversion webhook served by
# the controller (the API server stores v1beta2 and the controller writes some kinds at
# v1beta1: without the webhook those writes would be stored unconverted, and the controller
# refuses to start); no admission webhooks (calls from the API server to the controller, not the
# controller's requests). What is simulated: vCenter (vcsim) and the kubelets: this script
# registers a Node with each Machine's providerID and posts Ready=True (simulate_kubelets in
# hack/lib.sh), polling every 0.5 s, so the CPMS time includes up to 0.5 s of that.
# Exits non-zero when the idle window or the restart resync wrote anything but the Lease.
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

zones=100
machines=300
idle=630
profile=debug
while [ $# -gt 0 ]; do
	case "$1" in
	--zones) zones="$2"; shift 2 ;;
	--machines) machines="$2"; shift 2 ;;
	--idle) idle="$2"; shift 2 ;;
	--release) profile=release; shift ;;
	-h | --help) sed -n '2,25p' "$0"; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
for v in "$zones" "$machines" "$idle"; do [[ "$v" =~ ^[0-9]+$ ]] || die "numbers only, got '$v'"; done
[ "$zones" -ge 3 ] || die "--zones must be at least 3 (the CPMS uses three)"
[ "$machines" -ge 3 ] || die "--machines must be at least 3 (the CPMS's)"

command -v jq >/dev/null 2>&1 || ensure_apt_packages jq
export VCSIM_BIN
VCSIM_BIN="$(hack/setup.sh | tail -n1)"
export PROVIDER_BIN
PROVIDER_BIN="$(provider_bin "$profile")"
NS=bench
SA_USER="system:serviceaccount:${CONTROLLER_SA%/*}:${CONTROLLER_SA#*/}"

cluster_session bench-cluster

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# --- audit log windows --------------------------------------------------------------------------
# mark: the audit log's current line count (a window starts after it).
mark() { wc -l <"$KUBE_DIR/audit.log"; }
# requests FROM [TO]: "VERB RESOURCE[/SUBRESOURCE]" per controller request in the window.
requests() {
	local from="$1" to="${2:-$(mark)}"
	sed -n "$((from + 1)),${to}p" "$KUBE_DIR/audit.log" | jq -r --arg u "$SA_USER" \
		'select(.user.username == $u) | "\(.verb) \(.objectRef.resource // .requestURI)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end)"'
}
is_write() { grep -E '^(create|update|patch|delete|deletecollection) '; }
# summary FROM TO: "N requests (verb n, ...)"
summary() {
	local r
	r="$(requests "$1" "$2")"
	printf '%s requests (%s)' "$(grep -c . <<<"$r" || true)" \
		"$(cut -d' ' -f1 <<<"$r" | sort | uniq -c | sort -rn | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1}')"
}
# by_resource FROM TO: a "count verb resource" table of the window.
by_resource() { requests "$1" "$2" | sort | uniq -c | sort -rn | sed 's/^/    /'; }

# --- the controller's memory and reconciles -------------------------------------------------------
memory() { # "VmRSS X MiB, VmHWM Y MiB"
	awk '/^VmRSS|^VmHWM/ { printf "%s%s %.1f MiB", (n++ ? ", " : ""), substr($1, 1, length($1) - 1), $2 / 1024 }' \
		"/proc/$CONTROLLER_PID/status"
}
metrics_url() { echo "http://$(sed -n 's/.*admin endpoints listening.*addr=\([0-9.:]*\).*/\1/p' "$work/controller.log" | tail -n1)/metrics"; }
# reconciles: "controller count" of vsphere_provider_reconciles_total, summed over results.
reconciles() {
	curl -fsS "$(metrics_url)" | sed -n 's/^vsphere_provider_reconciles_total{controller="\([^"]*\)".*} \([0-9]*\)$/\1 \2/p' |
		awk '{ n[$1] += $2 } END { for (c in n) print c, n[c] }' | sort
}
# vcenter_calls: "method count" of vsphere_provider_vcenter_requests_total.
vcenter_calls() {
	curl -fsS "$(metrics_url)" | sed -n 's/^vsphere_provider_vcenter_requests_total{method="\([^"]*\)"} \([0-9]*\)$/\1 \2/p' | sort
}
# vcenter_delta BEFORE AFTER: "N (Method +n, ...)" of the calls between two `vcenter_calls`.
vcenter_delta() {
	join -a2 -e0 -o 0,1.2,2.2 <(echo "$1") <(echo "$2") |
		awk '$3 > $2 { n += $3 - $2; s = s (s ? ", " : "") $1 " +" ($3 - $2) } END { printf "%d%s", n, (s ? " (" s ")" : "") }'
}
# reconciled BEFORE AFTER: "zone +N, machine +M, ..." between two `reconciles` outputs.
reconciled() {
	join -a2 -e0 -o 0,1.2,2.2 <(echo "$1") <(echo "$2") | awk '{ printf "%s%s +%d", (NR > 1 ? ", " : ""), $1, $3 - $2 }'
}

# --- the objects --------------------------------------------------------------------------------
zones_manifest() {
	local i
	for ((i = 0; i < zones; i++)); do
		cat <<YAML
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata: {name: zone-$i}
spec:
  region: {name: region-a, type: Datacenter, tagCategory: k8s-region, autoConfigure: true}
  zone: {name: zone-$i, type: ComputeCluster, tagCategory: k8s-zone, autoConfigure: true}
  topology: {datacenter: DC0, computeCluster: DC0_C$i, datastore: LocalDS_0, networks: [VM Network]}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata: {name: zone-$i}
spec:
  server: $VCSIM_URL
  identityRef: {kind: Secret, name: zone-credentials}
  failureDomain: zone-$i
  controlPlane: $([ "$i" -lt 3 ] && echo true || echo false)
  placementConstraint: {resourcePool: DC0_C${i}_RP1, folder: vm}
YAML
	done
}
provider_spec() {
	cat <<YAML
      apiVersion: machine.openshift.io/v1beta1
      kind: VSphereMachineProviderSpec
      template: DC0_H0_VM0
      numCPUs: 2
      memoryMiB: 2048
      network: {devices: []}
      userDataSecret: {name: worker-user-data}
      credentialsSecret: {name: vsphere-credentials}
      workspace: {}
YAML
}
cpms_manifest() {
	cat <<YAML
apiVersion: machine.openshift.io/v1
kind: ControlPlaneMachineSet
metadata: {name: cluster, namespace: $NS}
spec:
  replicas: 3
  state: Active
  strategy: {type: RollingUpdate}
  selector:
    matchLabels: {machine.openshift.io/cluster-api-machine-role: master, machine.openshift.io/cluster-api-machine-type: master}
  template:
    machineType: machines_v1beta1_machine_openshift_io
    machines_v1beta1_machine_openshift_io:
      failureDomains:
        platform: VSphere
        vsphere: [{name: zone-0}, {name: zone-1}, {name: zone-2}]
      metadata:
        labels: {machine.openshift.io/cluster-api-cluster: bench, machine.openshift.io/cluster-api-machine-role: master, machine.openshift.io/cluster-api-machine-type: master}
      spec:
        providerSpec:
          value:
$(provider_spec | sed 's/^/      /')
YAML
}
machines_manifest() { # FIRST COUNT
	local i
	for ((i = $1; i < $1 + $2; i++)); do
		cat <<YAML
---
apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  name: worker-$i
  namespace: $NS
  labels: {vsphere-provider.io/deployment-zone: zone-$((i % zones)), machine.openshift.io/cluster-api-cluster: bench}
spec:
  providerSpec:
    value:
$(provider_spec)
YAML
	done
}
running() { k get machines.machine.openshift.io -n "$NS" -o json | jq '[.items[] | select(.status.phase == "Running")] | length'; }
# wait_running N LIMIT: plays the kubelets until N Machines are Running, with progress.
wait_running() {
	local want="$1" limit="$2" start=$SECONDS n last=-1
	while :; do
		simulate_kubelets "$NS" >/dev/null || true
		n="$(running)"
		if [ "$n" != "$last" ]; then log "  $n/$want Machines Running ($((SECONDS - start)) s)"; last="$n"; fi
		[ "$n" -ge "$want" ] && return 0
		[ $((SECONDS - start)) -lt "$limit" ] || die "only $n of $want Machines Running after $limit s"
		sleep 0.5
	done
}

# start_controller: controller_start with the conversion webhook served, and config/crd's
# conversion pointed at it (its address changes with each start).
start_controller() {
	local addr
	controller_start "$work/controller.log" --webhook-addr 127.0.0.1:0 --webhook-cert-dir "$work/certs"
	addr="$(sed -n 's/.*admission webhooks listening.*addr=\([0-9.:]*\).*/\1/p' "$work/controller.log" | tail -n1)"
	[ -n "$addr" ] || die "the controller did not say where its webhooks listen"
	apply_conversion "$addr" 2>/dev/null
}

# --- run ----------------------------------------------------------------------------------------
log "API server with the audit log of $SA_USER"
kube_up "$work/kube" config/crd --audit-user "$SA_USER"
log "vcsim with $zones compute clusters"
vcsim_start "$work" -cluster "$zones" -host 1 -pool 1 -vm 1
command -v openssl >/dev/null 2>&1 || ensure_apt_packages openssl
webhook_cert "$work/certs"
start_controller
log "controller pid $CONTROLLER_PID ($profile build): $(memory)"

k create namespace "$NS" >/dev/null
bind_secrets "$NS"
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Secret
metadata: {name: vsphere-credentials, namespace: $NS}
stringData: {username: bench, password: bench}
---
# The zones' own credentials, in the manager's namespace (zones never use a tenant's).
apiVersion: v1
kind: Secret
metadata: {name: zone-credentials, namespace: ${CONTROLLER_SA%/*}}
stringData: {username: bench, password: bench}
---
apiVersion: v1
kind: Secret
metadata: {name: worker-user-data, namespace: $NS}
stringData: {userData: '{"ignition":{"version":"3.2.0"}}'}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereCluster
metadata: {name: bench, namespace: $NS}
spec:
  server: $VCSIM_URL
  identityRef: {kind: Secret, name: vsphere-credentials}
  controlPlaneEndpoint: {host: 10.0.0.10, port: 6443}
  failureDomainSelector: {}
YAML

log "applying $zones failure domains and deployment zones"
m0="$(mark)"
t0="$(now)"
zones_manifest | k apply -f - >/dev/null
start=$SECONDS
until [ "$(k get vspheredeploymentzones -o json | jq '[.items[] | select(.status.ready == true)] | length')" -ge "$zones" ]; do
	[ $((SECONDS - start)) -lt 600 ] || die "not all $zones zones ready after 600 s"
	sleep 1
done
until [ "$(k get vsphereclusters bench -n "$NS" -o json | jq '.status.failureDomains // {} | length')" -ge "$zones" ]; do
	[ $((SECONDS - start)) -lt 600 ] || die "VSphereCluster bench does not publish $zones failure domains"
	sleep 1
done
t1="$(now)"
zones_time="$(secs "$t0" "$t1")"
zones_requests="$(summary "$m0" "$(mark)")"
log "$zones zones ready and published in $zones_time s: $zones_requests"

log "ControlPlaneMachineSet of 3 replicas"
sleep 5 # let the zone writes settle, so the window holds the machines' requests only
m0="$(mark)"
t0="$(now)"
cpms_manifest | k apply -f - >/dev/null
wait_running 3 300
t1="$(now)"
cpms_time="$(secs "$t0" "$t1")"
sleep 5 # the last status writes after Running
m1="$(mark)"
cpms_requests="$(summary "$m0" "$m1")"
cpms_per_machine="$(requests "$m0" "$m1" | grep -c . | awk '{ printf "%.1f", $1 / 3 }')"
cpms_writes_per_machine="$(requests "$m0" "$m1" | is_write | grep -c . | awk '{ printf "%.1f", $1 / 3 }')"
log "3 Running in $cpms_time s; $cpms_requests"

bulk=$((machines - 3))
if [ "$bulk" -gt 0 ]; then
	log "$bulk more Machines, round-robin over the zones"
	m0="$(mark)"
	t0="$(now)"
	machines_manifest 0 "$bulk" | k apply -f - >/dev/null
	wait_running "$machines" 1800
	t1="$(now)"
	sleep 10
	m1="$(mark)"
	bulk_time="$(secs "$t0" "$t1")"
	bulk_requests="$(summary "$m0" "$m1")"
	bulk_per_machine="$(requests "$m0" "$m1" | grep -c . | awk -v n="$bulk" '{ printf "%.1f", $1 / n }')"
	bulk_writes_per_machine="$(requests "$m0" "$m1" | is_write | grep -c . | awk -v n="$bulk" '{ printf "%.1f", $1 / n }')"
	log "$machines Running after $bulk_time s; $bulk_requests"
	by_resource "$m0" "$m1" >&2
fi

log "settling: waiting for 30 s without a write by the controller other than the Lease"
start=$SECONDS
while :; do
	m0="$(mark)"
	sleep 30
	[ -n "$(requests "$m0" | is_write | grep -v ' leases$' || true)" ] || break
	[ $((SECONDS - start)) -lt 600 ] || die "the controller still writes after 10 min: $(requests "$m0" | is_write | sort | uniq -c)"
done
mem_loaded="$(memory)"

log "idle window of $idle s with $zones zones and $machines machines cached (resyncs every 300 s and 600 s)"
before="$(reconciles)"
calls_before="$(vcenter_calls)"
m0="$(mark)"
sleep "$idle"
m1="$(mark)"
after="$(reconciles)"
idle_vcenter="$(vcenter_delta "$calls_before" "$(vcenter_calls)")"
idle_requests="$(summary "$m0" "$m1")"
idle_writes="$(requests "$m0" "$m1" | is_write | grep -v ' leases$' | sort | uniq -c || true)"
idle_lease="$(requests "$m0" "$m1" | is_write | grep -c ' leases$' || true)"
idle_reconciles="$(reconciled "$before" "$after")"
mem_idle="$(memory)"
log "idle: $idle_requests; reconciles $idle_reconciles; vCenter calls $idle_vcenter"
by_resource "$m0" "$m1" >&2

log "restart: the controller stopped (SIGTERM) and started again: every object reconciled once"
controller_stop
m0="$(mark)"
start_controller
restart_pid="$CONTROLLER_PID"
sleep 60
m1="$(mark)"
restart_requests="$(summary "$m0" "$m1")"
restart_writes="$(requests "$m0" "$m1" | is_write | grep -v ' leases$' | sort | uniq -c || true)"
restart_reconciles="$(reconciles | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }')"
mem_restart="$(memory)"
log "restart resync: $restart_requests; reconciles $restart_reconciles"
by_resource "$m0" "$m1" >&2

cores="$(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)), load $(cut -d' ' -f1-3 /proc/loadavg)"
cat <<EOF

## bench-cluster: $zones zones, $machines machines ($profile build; $cores)

| what | result |
|---|---|
| $zones zones ready and published (kubectl apply → all ready, failure domains on the VSphereCluster) | $zones_time s; $zones_requests |
| 3-replica CPMS: kubectl apply → 3 Machines Running | **$cpms_time s** |
| controller requests per machine, CPMS of 3 | **$cpms_per_machine** ($cpms_writes_per_machine writes); $cpms_requests |
| controller requests per machine, $bulk Machines at once | **${bulk_per_machine:-n/a}** (${bulk_writes_per_machine:-n/a} writes); ${bulk_requests:-} |
| idle window, $idle s ($idle_reconciles reconciles) | $idle_requests; **writes other than the Lease: $( [ -z "$idle_writes" ] && echo 0 || echo "$idle_writes" | tr '\n' ' ')**; Lease renewals $idle_lease |
| vCenter calls in the idle window, $idle s | $idle_vcenter |
| restart resync, first 60 s ($restart_reconciles reconciles) | $restart_requests; **writes other than the Lease: $( [ -z "$restart_writes" ] && echo 0 || echo "$restart_writes" | tr '\n' ' ')** |
| controller memory, caches loaded (before the idle window) | $mem_loaded |
| controller memory, after the idle window | $mem_idle |
| controller memory, restarted process after its resync (pid $restart_pid) | $mem_restart |
EOF
[ -z "$idle_writes" ] || die "the idle resync wrote: $idle_writes"
[ -z "$restart_writes" ] || die "the restart resync wrote: $restart_writes"
