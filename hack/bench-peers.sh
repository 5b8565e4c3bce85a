#!/usr/bin/env bash
# The upstream peers and vsphere-provider, side by side on the same estate, measured in one run
# and printed as one table (issue #27):
#   zones      CAPV v1.16.1 vs us: N VSphereFailureDomain + VSphereDeploymentZone pairs on a
#              pre-tagged estate (CAPV v1.16 does not create tags: both only verify), kubectl
#              apply -> all ready, then the resync of a restarted controller (every zone
#              reconciled once, nothing to change);
#   openshift  machine-api-operator's vSphere machine controller vs us: N OpenShift Machines
#              created (-> Provisioned, VM powered on), resynced (restart), deleted;
#   capi       CAPV v1.16.1 vs us under Cluster API v1.14.2's own managers (core, kubeadm
#              bootstrap, kubeadm control plane, as processes): CAPV v1.17's default cluster
#              template (tests/fixtures/capv/v1.17, v1beta2; storagePolicyName dropped for
#              both: vcsim serves no /pbm) with 3 control plane machines and 3 workers, no
#              failure domains for either unless --capi-zones N (then N zones of the zones
#              row, ready before the apply, and the VSphereCluster `failureDomainSelector: {}`,
#              CAPV's own patch: KCP spreads the control plane over them; the workers have
#              none), the guests played by hack/workload-sim
#              (so KCP's machines after the first can join); phases: kubectl apply -> the first
#              control plane Machine provisioned (providerID set, infrastructure provisioned),
#              apply -> all 6 provisioned (counted from the same apply), then the resync of
#              the restarted infrastructure controller, then a control plane rollout (a new
#              VSphereMachineTemplate, numCPUs 4: KCP replaces the 3 machines one at a time ->
#              3 new ones provisioned and the old ones gone).
# Each row ends its resync with an idle window (--idle SECONDS, default 60; 0 skips it): what the
# controller reads from vCenter and the API server when nothing changes ("at rest"; long polls
# included, WaitForUpdatesEx shown apart).
#
#   hack/bench-peers.sh [--rows zones,openshift,capi] [--zone-sizes "3 100"]
#                       [--machine-sizes "3 30"] [--delay-ms 10] [--impls peer,ours]
#                       [--idle 60] [--capi-zones 0] [--debug] [--keep]
# (the defaults shown; the capi row has one size, 3+3). Ours is the release build, as the peers
# are optimized Go builds; --debug measures the debug build instead (quicker to build). `--impls ours` runs only ours (a change
# of ours measured without waiting for the peers again; quote the peers from a full run).
#
# Every run gets a fresh kube-apiserver + etcd (hack/kube/up.sh, audit log of the controller's
# ServiceAccount) and a fresh vcsim of the same layout, reached through the delaying proxy of
# tests/support/latency_proxy.rs (--delay-ms added to every request, SOAP and REST alike). Each
# controller runs as a process with its own CRDs, webhooks (served by the process, registered
# on 127.0.0.1) and RBAC as shipped: CAPV's `config/default` rendered by kubectl kustomize, ours
# `config/crd` + `config/webhook` + `config/rbac`, MAO's machine CRDs from its module's install/.
# Columns:
#   vCenter calls  SOAP + REST requests vcsim received (its /__vcsim/stats counters), SOAP/REST;
#   depth          how long at least one request was inside the proxy ÷ the delay: the number of
#                  round trips made one after another (only with --delay-ms > 0);
#   API requests   requests the controller's ServiceAccount made (kube-apiserver audit log);
#   wall           apply -> done, or restart -> the last vCenter call of the resync (the calls
#                  and requests of a phase are counted until vCenter is quiet for 5 s, so what
#                  a controller still does after its objects look done is in its phase);
#   peak RSS       VmHWM of the controller process (/proc/PID/status) at the end of the phase.
# A second table times each VM's power-off answer -> the destroy sent for it (vcsim -call-log):
# how soon a controller takes its next step once vCenter's task is done (p50, p99, max).
# In the capi row, Cluster API's managers and the workload simulator run as well: their API
# requests are not the controller's (not counted), and the simulator's own vCenter requests (it
# polls vcsim, reports guest IPs) are subtracted from vcsim's counters (it counts them itself,
# GET /vcenter-calls of its debug API).
# Builds what it needs (cached): CAPV and MAO (hack/peers/build.sh), vcsim, kube-apiserver,
# Cluster API (hack/capi/build.sh: its CRDs, managers, clusterctl), the workload simulator
# (hack/workload-sim/build.sh, capi row only), this crate. Progress on stderr, the table on stdout.
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

rows="zones,openshift,capi"
zone_sizes="3 100"
machine_sizes="3 30"
delay_ms=10
impls="peer,ours"
profile=release
idle=60
capi_zones=0
keep=""
while [ $# -gt 0 ]; do
	case "$1" in
	--rows | --zone-sizes | --machine-sizes | --delay-ms | --impls | --idle | --capi-zones) [ $# -ge 2 ] || die "$1 needs a value (see --help)" ;;&
	--rows) rows="$2"; shift 2 ;;
	--zone-sizes) zone_sizes="$2"; shift 2 ;;
	--machine-sizes) machine_sizes="$2"; shift 2 ;;
	--delay-ms) delay_ms="$2"; shift 2 ;;
	--impls) impls="$2"; shift 2 ;;
	--idle) idle="$2"; shift 2 ;;
	--capi-zones) capi_zones="$2"; shift 2 ;;
	--release) profile=release; shift ;;
	--debug) profile=debug; shift ;;
	--keep) keep=1; shift ;;
	-h | --help) sed -n '2,58p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
for v in $zone_sizes $machine_sizes "$delay_ms" "$idle" "$capi_zones"; do [[ "$v" =~ ^[0-9]+$ ]] || die "numbers only, got '$v'"; done
for i in ${impls//,/ }; do
	case "$i" in peer | ours) ;; *) die "unknown implementation '$i' (peer, ours)" ;; esac
done
# wanted IMPL: whether --impls asks for IMPL (capv and mao are the peer).
wanted() { case "$1" in ours) [[ ",$impls," == *,ours,* ]] ;; *) [[ ",$impls," == *,peer,* ]] ;; esac; }
for r in ${rows//,/ }; do
	case "$r" in zones | openshift | capi) ;; *) die "unknown row '$r' (zones, openshift, capi)" ;; esac
done

command -v jq >/dev/null 2>&1 || ensure_apt_packages jq
command -v openssl >/dev/null 2>&1 || ensure_apt_packages openssl
command -v python3 >/dev/null 2>&1 || ensure_apt_packages python3 # free_port

# --- what runs ----------------------------------------------------------------------------------
log "building or finding: vcsim, kube-apiserver, Cluster API, CAPV, MAO, vsphere-provider ($profile), the proxy"
export VCSIM_BIN KUBE_BIN_DIR CAPI_BIN_DIR PROVIDER_BIN
VCSIM_BIN="${VCSIM_BIN:-$(hack/setup.sh | tail -n1)}"
KUBE_BIN_DIR="${KUBE_BIN_DIR:-$(hack/kube/build.sh | tail -n1)}"
export KUBECTL="${KUBECTL:-$KUBE_BIN_DIR/kubectl}"
CAPI_BIN_DIR="${CAPI_BIN_DIR:-$(hack/capi/build.sh | tail -n1)}"
CAPV_DIR="$(hack/peers/build.sh capv | tail -n1)"
MAO_DIR="$(hack/peers/build.sh mao | tail -n1)"
if [[ ",$rows," == *,capi,* ]]; then
	WORKLOAD_SIM_BIN="$(hack/workload-sim/build.sh | tail -n1)/workload-sim"
fi
PROVIDER_BIN="$(provider_bin "$profile")"
PROXY_BIN="$(cargo test --test bench_peers --no-run --message-format=json 2>/dev/null |
	jq -r 'select(.reason == "compiler-artifact" and .target.name == "bench_peers" and .executable != null) | .executable' | tail -n1)"
[ -x "$PROXY_BIN" ] || die "cannot build tests/bench_peers.rs (cargo test --test bench_peers --no-run)"

work="$(mktemp -d "${TMPDIR:-/tmp}/vsphere-provider-bench-peers.XXXXXX")"
RESULTS="$work/results.tsv"
GAPS="$work/gaps.tsv"
: >"$RESULTS"
: >"$GAPS"
# The processes of the current run: stopped by run_end, or by the EXIT trap.
CONTROLLER_PID=""
VCSIM_PID=""
PROXY_PID=""
KUBE_DIR=""
CAPI_PIDS=()
WSIM_PID=""
WSIM_DEBUG=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	run_end
	if [ -n "$keep" ] || [ "$rc" -ne 0 ]; then log "logs kept in $work"; else rm -rf "$work"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- the estate ---------------------------------------------------------------------------------
# estate_start CLUSTERS [tls]: vcsim with CLUSTERS compute clusters of one host and one pool
# each (and vcsim's standalone host DC0_H0 with the template VM DC0_H0_VM0), categories
# k8s-region (Datacenter) and k8s-zone (ClusterComputeResource), region-a on DC0 and zone-I on
# DC0_CI (what an admin does before zones that do not autoConfigure), then the proxy in front of
# it. With `tls`, vcsim serves HTTPS (MAO's actuator only speaks https: it builds the URL from
# the provider spec's host name and the cloud config's port). Sets VC_BASE (vcsim, for its
# counters), VC_PORT (the proxy's port) and VC_URL (the proxy's /sdk URL: what the controllers
# are given).
estate_start() {
	local n="$1" tls="${2:-}" session region zone inv i id flags=()
	[ -z "$tls" ] || flags=(-tls -cert-file "$run/vcsim.pem")
	vcsim_start "$run" -cluster "$n" -host 1 -pool 1 -vm 1 -username bench -password bench -call-log "$run/vcsim-calls.jsonl" "${flags[@]}"
	VC_BASE="${VCSIM_URL%/sdk}"
	session="$(curl -kfsS -X POST -u bench:bench "$VC_BASE/rest/com/vmware/cis/session" | jq -r .value)" ||
		die "cannot log in to the tagging API of $VC_BASE"
	_rest() { curl -kfsS -H "vmware-api-session-id: $session" -H 'Content-Type: application/json' "$@"; }
	_category() {
		_rest -X POST "$VC_BASE/rest/com/vmware/cis/tagging/category" \
			-d "{\"create_spec\":{\"name\":\"$1\",\"description\":\"\",\"cardinality\":\"MULTIPLE\",\"associable_types\":[\"$2\"]}}" | jq -r .value
	}
	_tag() { # CATEGORY NAME TYPE MOREF
		id="$(_rest -X POST "$VC_BASE/rest/com/vmware/cis/tagging/tag" \
			-d "{\"create_spec\":{\"name\":\"$2\",\"description\":\"\",\"category_id\":\"$1\"}}" | jq -r .value)"
		_rest -X POST "$VC_BASE/rest/com/vmware/cis/tagging/tag-association/id:$id?~action=attach" \
			-d "{\"object_id\":{\"type\":\"$3\",\"id\":\"$4\"}}" >/dev/null
	}
	inv="$(VSPHERE_USERNAME=bench VSPHERE_PASSWORD=bench "$PROVIDER_BIN" inventory --server "$VCSIM_URL" ${tls:+--insecure} -o json 2>/dev/null)" ||
		die "cannot read the inventory of $VCSIM_URL"
	moref() { jq -r --arg p "$1" '.[] | select(.path == $p) | .moref' <<<"$inv"; }
	region="$(_category k8s-region Datacenter)"
	zone="$(_category k8s-zone ClusterComputeResource)"
	_tag "$region" region-a Datacenter "$(moref /DC0)"
	for ((i = 0; i < n; i++)); do _tag "$zone" "zone-$i" ClusterComputeResource "$(moref "/DC0/host/DC0_C$i")"; done
	# The template powered off and at hardware version 15 (vcsim's VMs are vmx-13 and running):
	# MAO's actuator refuses to clone anything older ("Hardware lower than 15 is not
	# supported"), as OpenShift requires, and vSphere upgrades only a powered-off VM. An admin
	# step on the estate, the same for every controller.
	_soap() {
		curl -kfsS -b "$run/vcsim.cookies" -c "$run/vcsim.cookies" -H 'Content-Type: text/xml' -H 'SOAPAction: urn:vim25/8.0' \
			-d "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" xmlns:urn=\"urn:vim25\"><soapenv:Body>$1</soapenv:Body></soapenv:Envelope>" "$VCSIM_URL"
	}
	_soap '<urn:Login><urn:_this type="SessionManager">SessionManager</urn:_this><urn:userName>bench</urn:userName><urn:password>bench</urn:password></urn:Login>' >/dev/null ||
		die "cannot log in to $VCSIM_URL"
	_soap "<urn:PowerOffVM_Task><urn:_this type=\"VirtualMachine\">$(moref /DC0/vm/DC0_H0_VM0)</urn:_this></urn:PowerOffVM_Task>" >/dev/null ||
		die "cannot power off the template DC0_H0_VM0"
	sleep 0.5
	_soap "<urn:UpgradeVM_Task><urn:_this type=\"VirtualMachine\">$(moref /DC0/vm/DC0_H0_VM0)</urn:_this><urn:version>vmx-15</urn:version></urn:UpgradeVM_Task>" >/dev/null ||
		die "cannot upgrade the template DC0_H0_VM0 to vmx-15"
	sleep 0.5
	log "  vcsim $VCSIM_URL: $n clusters, tagged region-a and zone-0..$((n - 1))"

	rm -f "$run/proxy.state"
	BENCH_PEERS_UPSTREAM="${VC_BASE#*://}" BENCH_PEERS_DELAY_MS="$delay_ms" BENCH_PEERS_STATE="$run/proxy.state" \
		"$PROXY_BIN" --ignored --exact proxy --nocapture </dev/null >"$run/proxy.log" 2>&1 &
	PROXY_PID=$!
	for _ in $(seq 200); do [ -s "$run/proxy.state" ] && break; sleep 0.05; done
	[ -s "$run/proxy.state" ] || die "the proxy did not start: $(tail -n5 "$run/proxy.log")"
	VC_PORT="$(head -n1 "$run/proxy.state" | sed 's/.*://')"
	VC_URL="${VC_BASE%%://*}://127.0.0.1:$VC_PORT/sdk"
}

# --- measuring ----------------------------------------------------------------------------------
# sim_calls: '{"soap":N,"waitForUpdates":M}', the SOAP requests the workload simulator made
# (all since it started; zeros without one). Counted once answered, so never ahead of vcsim.
sim_calls() {
	if [ -n "$WSIM_DEBUG" ]; then curl -fsS "http://$WSIM_DEBUG/vcenter-calls"; else echo '{"soap":0,"waitForUpdates":0}'; fi
}
# vc_stats: vcsim's counters minus the simulator's requests since vc_reset, as
# {"soap":{op:n},"rest":{..},"sim":{"soap":N,"waitForUpdates":M}}; the simulator is read before
# and after vcsim, until both agree (it polls about once a second).
vc_stats() {
	local a b st
	for _ in $(seq 20); do
		a="$(sim_calls)"
		st="$(curl -kfsS "$VC_BASE/__vcsim/stats")"
		b="$(sim_calls)"
		[ "$a" != "$b" ] || break
	done
	jq -c --argjson now "$b" --argjson base "$SIM_BASE" \
		'. + {sim: {soap: ($now.soap - $base.soap), waitForUpdates: ($now.waitForUpdates - $base.waitForUpdates)}}' <<<"$st"
}
vc_reset() {
	local a
	for _ in $(seq 20); do
		a="$(sim_calls)"
		curl -kfsS -X POST "$VC_BASE/__vcsim/stats/reset" >/dev/null
		SIM_BASE="$(sim_calls)"
		[ "$a" != "$SIM_BASE" ] || break
	done
}
SIM_BASE='{"soap":0,"waitForUpdates":0}'
# vc_calls: "SOAP REST" requests vcsim received since vc_reset, the simulator's not counted.
vc_calls() { vc_stats | jq -r '"\(([.soap[]] | add // 0) - .sim.soap) \([.rest[]] | add // 0)"'; }
# vc_active: the requests other than long polls (WaitForUpdatesEx returns every few seconds
# with nothing to say, also when idle): what wait_quiet watches.
vc_active() {
	vc_stats | jq '([.soap | to_entries[] | select(.key != "WaitForUpdatesEx") | .value] | add // 0) + ([.rest[]] | add // 0)
		- (.sim.soap - .sim.waitForUpdates)'
}
busy_ms() { sed -n 2p "$run/proxy.state"; }
audit_mark() { wc -l <"$KUBE_DIR/audit.log"; }
# api_requests FROM: the controller's requests that arrived after audit line FROM.
api_requests() { tail -n "+$(($1 + 1))" "$KUBE_DIR/audit.log" | grep -c '"stage":"RequestReceived"' || true; }
hwm_mib() { awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$CONTROLLER_PID/status" 2>/dev/null || echo "?"; }
now() { date +%s.%N; }

# phase_begin / phase_end ROW SIZE IMPL PHASE FAILURES: one line of the table.
phase_begin() {
	P_NS0="$(date +%s%N)"
	vc_reset
	P_BUSY0="$(busy_ms)"
	P_AUDIT0="$(audit_mark)"
	P_T0="$(now)"
}
phase_end() {
	local t1="${P_T1:-$(now)}" calls soap rest depth
	calls="$(vc_calls)"
	soap="${calls% *}"
	rest="${calls#* }"
	if [ "$delay_ms" -gt 0 ]; then
		depth="$(awk -v a="$P_BUSY0" -v b="$(busy_ms)" -v d="$delay_ms" 'BEGIN { printf "%.0f", (b - a) / d }')"
	else
		depth="-"
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$((soap + rest))" "$soap/$rest" "$depth" \
		"$(api_requests "$P_AUDIT0")" "$(awk -v a="$P_T0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" "$(hwm_mib)" "${5:-}" >>"$RESULTS"
	# Where the phase's API requests went (verb, resource, name), kept with the run's logs.
	tail -n "+$((P_AUDIT0 + 1))" "$KUBE_DIR/audit.log" |
		jq -r 'select(.stage == "RequestReceived") | "\(.verb) \(.objectRef.resource // .requestURI)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end) \(.objectRef.name // "")"' |
		sort | uniq -c | sort -rn >"$run/api-requests-${4//[^a-z0-9]/-}.txt" || true
	log "  $4: $((soap + rest)) vCenter calls ($soap SOAP, $rest REST), depth $depth, $(api_requests "$P_AUDIT0") API requests, $(awk -v a="$P_T0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, VmHWM $(hwm_mib) MiB${5:+, failed: $5}"
	P_T1=""
}

# wait_quiet LIMIT: until vcsim has seen no request but long polls for 5 s (the resync is
# over); sets P_T1 to the time of the last change. Fails after LIMIT seconds. 5 s, not more:
# our controller looks at a Provisioned machine without a Node every 10 s (--task-poll-interval),
# which is not part of the resync.
wait_quiet() {
	local limit="$1" start=$SECONDS last=-1 n since
	since="$(now)"
	while :; do
		n="$(vc_active)"
		if [ "$n" != "$last" ]; then last="$n"; since="$(now)"; P_T1="$since"; fi
		if [ "$n" -gt 0 ] && awk -v a="$since" -v b="$(now)" 'BEGIN { exit !(b - a >= 5) }'; then return 0; fi
		[ $((SECONDS - start)) -lt "$limit" ] || return 1
		sleep 1
	done
}

# settle: the phase's wall time ends now, its counts once vCenter is quiet (what a controller
# still does after the objects look done, e.g. powering on, belongs to the phase).
settle() {
	local t1 limit="${1:-300}"
	t1="$(now)"
	wait_quiet "$limit" || log "  still calling vCenter $limit s later"
	P_T1="$t1"
}

# step_gaps ROW SIZE IMPL PHASE: how soon each VM's next step followed the end of its power-off
# in this phase (vcsim's -call-log: from the PowerOffVM_Task's answer, which comes when vcsim's
# task is done, to the Destroy_Task on the same VM), one line of the second table: what a
# controller that looks at its task again only after a delay pays per step, whoever it is.
step_gaps() {
	[ -s "$run/vcsim-calls.jsonl" ] || return 0
	jq -rs --argjson from "$P_NS0" --arg row "$1" --arg size "$2" --arg impl "$3" --arg phase "$4" '
		[.[] | select(.start >= $from)] | group_by(.this)
		| map((map(select(.op == "PowerOffVM_Task")) | last) as $off
			| (map(select(.op == "Destroy_Task")) | last) as $d
			| select($off != null and $d != null and $d.start > $off.end)
			| ($d.start - $off.end) / 1e9) | sort
		| if length == 0 then empty else
			[$row, $size, $impl, $phase, length,
			 (.[((length - 1) * 0.5 | floor)] | . * 100 | round / 100),
			 (.[((length * 0.99 | ceil) - 1)] | . * 100 | round / 100),
			 (last | . * 100 | round / 100)] | @tsv end' "$run/vcsim-calls.jsonl" >>"$GAPS" || true
}

# at_rest ROW SIZE IMPL: the idle window (--idle s) after a resync, one line of the table; its
# phase says how many of its vCenter calls were long polls (WaitForUpdatesEx, which return
# every few seconds with nothing to say).
at_rest() {
	[ "$idle" -gt 0 ] || return 0
	log "  at rest for $idle s"
	phase_begin
	sleep "$idle"
	local polls
	polls="$(vc_stats | jq '(.soap.WaitForUpdatesEx // 0) - .sim.waitForUpdates')"
	phase_end "$1" "$2" "$3" "at rest ${idle} s ($polls long polls)" ""
}

# --- the controllers ----------------------------------------------------------------------------
# kube_start IMPL: API server with IMPL's CRDs and RBAC, the audit log of IMPL's ServiceAccount.
# Sets KUBE_DIR, KUBECONFIG (admin), SA_KUBECONFIG.
kube_start() {
	local impl="$1" sa applies=()
	# Ours with Secrets readable in every namespace (config/cluster-wide-secrets), as CAPV's and
	# MAO's RBAC grant theirs.
	case "$impl" in
	ours) sa="vsphere-provider-system/vsphere-provider-controller-manager"
		applies=(--apply "$REPO_ROOT/config/crd" --apply "$REPO_ROOT/config/rbac" --apply "$REPO_ROOT/config/cluster-wide-secrets" --apply "$REPO_ROOT/config/webhook/manifests.yaml") ;;
	capv) sa="capv-system/capv-manager"
		capv_manifests >"$run/capv.yaml"
		applies=(--apply "$run/capv.yaml") ;;
	mao) sa="openshift-machine-api/machine-api-controllers"
		mao_manifests "$run/mao"
		applies=(--apply "$run/mao") ;;
	esac
	if [ "$ROW" = capi ]; then
		capi_manifests >"$run/capi.yaml"
		applies+=(--apply "$run/capi.yaml")
	fi
	KUBE_DIR="$run/kube"
	# The controller's requests at the Metadata level, each logged when it arrives
	# (RequestReceived) as well as when it completes: a watch (controller-runtime's informers
	# list through a watch stream) completes only when it ends, so it is counted by its start.
	cat >"$run/audit-policy.yaml" <<YAML
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted]
rules:
  - level: Metadata
    users: ["system:serviceaccount:${sa%/*}:${sa#*/}"]
  - level: None
YAML
	hack/kube/up.sh --background --dir "$KUBE_DIR" --bin-dir "$KUBE_BIN_DIR" --sa "$sa" \
		--apply "$CAPI_BIN_DIR/config/core/crd/bases" "${applies[@]}" \
		--audit-policy "$run/audit-policy.yaml" >/dev/null 2>"$run/up.log" ||
		die "hack/kube/up.sh failed: $(tail -n5 "$run/up.log")"
	export KUBECONFIG="$KUBE_DIR/admin.kubeconfig"
	SA_KUBECONFIG="$KUBE_DIR/${sa#*/}.kubeconfig"
	CONTROLLER_SA="$sa"
	aggregate_roles
}

# aggregate_roles: what kube-controller-manager's clusterrole-aggregation controller does (there
# is no controller manager here): every ClusterRole with an aggregationRule gets the rules of the
# ClusterRoles its selectors match. CAPV binds its manager to such a role
# (capv-aggregated-manager-role), which stays empty without this.
aggregate_roles() {
	local all name
	all="$(k get clusterroles -o json)"
	# Not the API server's own (admin, edit, view...): nothing here binds them.
	for name in $(jq -r '.items[] | select(.aggregationRule and .metadata.labels["kubernetes.io/bootstrapping"] == null) | .metadata.name' <<<"$all"); do
		jq --arg n "$name" '
			(.items[] | select(.metadata.name == $n)) as $agg
			| [.items[] | select(.metadata.name != $n) | . as $r
				| select(any($agg.aggregationRule.clusterRoleSelectors[]; .matchLabels as $m
					| all($m | to_entries[]; $r.metadata.labels[.key] == .value)))
				| .rules[]?] as $rules
			| $agg | .rules = $rules | del(.metadata.resourceVersion, .metadata.managedFields)' <<<"$all" |
			k apply -f - >/dev/null || die "cannot aggregate ClusterRole $name"
	done
}

# capv_manifests: CAPV's config/default as shipped (kubectl kustomize), without what only a
# Deployment needs (the Deployment, its Service, cert-manager's Issuer and Certificate, the
# bootstrap credentials Secret): the manager runs as a process here, its webhooks registered at
# 127.0.0.1 by register_webhooks.
capv_manifests() {
	"$KUBECTL" kustomize "$CAPV_DIR/config/default" 2>/dev/null |
		awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } !/(^|\n)kind: (Deployment|Service|Issuer|Certificate|Secret)\n/'
}

# register_webhooks PORT [SERVICE]: every webhook configuration and conversion webhook of the API
# server (or those that name Service SERVICE: the capi row runs four webhook servers) pointed at
# https://127.0.0.1:PORT (its path kept), trusting the API server's CA (webhook_cert signed the
# controller's certificate with it). Outside the capi row, Cluster API's CRDs have none (their
# bases).
register_webhooks() {
	local port="$1" svc="${2:-}" ca kind name crd
	ca="$(base64 -w0 <"$KUBE_DIR/pki/ca.crt")"
	for kind in validatingwebhookconfigurations mutatingwebhookconfigurations; do
		for name in $(k get "$kind" -o json | jq -r --arg s "$svc" '.items[] | select($s == "" or .webhooks[0].clientConfig.service.name == $s) | .metadata.name'); do
			k get "$kind" "$name" -o json | jq --arg base "https://127.0.0.1:$port" --arg ca "$ca" \
				'.webhooks |= map(.clientConfig = {url: ($base + .clientConfig.service.path), caBundle: $ca})' |
				k apply -f - >/dev/null || die "cannot point $name at 127.0.0.1:$port"
		done
	done
	for crd in $(k get crds -o json | jq -r --arg s "$svc" '.items[] | select(.spec.conversion.strategy == "Webhook")
		| select($s == "" or .spec.conversion.webhook.clientConfig.service.name == $s) | .metadata.name'); do
		k patch crd "$crd" --type=merge -p "$(jq -cn --arg url "https://127.0.0.1:$port/convert" --arg ca "$ca" \
			'{spec: {conversion: {webhook: {clientConfig: {service: null, url: $url, caBundle: $ca}}}}}')" >/dev/null ||
			die "cannot point the conversion webhook of $crd at 127.0.0.1:$port"
	done
}

# controller_up IMPL [first]: starts IMPL's controller as its ServiceAccount, against VC_URL;
# returns once it reconciles. The first start also registers its webhooks.
controller_up() {
	local impl="$1" first="${2:-}" start=$SECONDS ready insecure=()
	# vcsim's certificate is self-signed: every controller is told to skip verification.
	[[ "$VC_URL" != https://* ]] || insecure=(--insecure)
	log "  starting $impl"
	case "$impl" in
	ours)
		env -u VSPHERE_SERVER -u VSPHERE_USERNAME -u VSPHERE_PASSWORD -u KUBERNETES_SERVICE_HOST \
			KUBECONFIG="$SA_KUBECONFIG" NO_COLOR=1 POD_NAME=controller-0 \
			"$PROVIDER_BIN" --log-level info run --metrics-addr "127.0.0.1:$METRICS_PORT" \
			--webhook-addr "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$run/certs" \
			--namespace "${CONTROLLER_SA%/*}" --leader-elect=false --server "$VC_URL" --username bench --password bench \
			"${insecure[@]}" \
			</dev/null >>"$run/controller.log" 2>&1 &
		ready='controllers started'
		;;
	capv)
		printf 'username: bench\npassword: bench\n' >"$run/capv-credentials.yaml"
		# The Deployment's arguments (config/default), the ports on loopback, and no leader
		# election: out of a pod CAPV cannot tell its namespace (it has no flag for it), so
		# controller-runtime refuses to start. Ours runs without it too, to do the same work.
		env -u KUBERNETES_SERVICE_HOST POD_NAMESPACE=capv-system POD_NAME=capv-controller-manager-0 POD_UID=0 \
			"$CAPV_DIR/manager" --kubeconfig "$SA_KUBECONFIG" --leader-elect=false \
			--diagnostics-address "127.0.0.1:$METRICS_PORT" --insecure-diagnostics --v=4 \
			--feature-gates=MultiNetworks=false,NodeAntiAffinity=false,NamespaceScopedZones=false,NodeAutoPlacement=false,PriorityQueue=true,ReconcilerRateLimiting=true \
			--health-addr "127.0.0.1:$HEALTH_PORT" --webhook-port "$WEBHOOK_PORT" --webhook-cert-dir "$run/certs" \
			--credentials-file "$run/capv-credentials.yaml" \
			</dev/null >>"$run/controller.log" 2>&1 &
		ready='Starting workers'
		;;
	mao) mao_up; ready="${MAO_READY}" ;;
	esac
	CONTROLLER_PID=$!
	until grep -q "$ready" "$run/controller.log" 2>/dev/null; do
		kill -0 "$CONTROLLER_PID" 2>/dev/null || die "$impl exited: $(tail -n5 "$run/controller.log")"
		[ $((SECONDS - start)) -lt 120 ] || die "$impl did not start in 120 s: $(tail -n5 "$run/controller.log")"
		sleep 0.2
	done
	if [ -n "$first" ] && [ "$impl" != mao ]; then register_webhooks "$WEBHOOK_PORT" "$WEBHOOK_SERVICE"; fi
}

controller_down() {
	[ -n "$CONTROLLER_PID" ] || return 0
	kill -TERM "$CONTROLLER_PID" 2>/dev/null || true
	wait "$CONTROLLER_PID" 2>/dev/null || true
	CONTROLLER_PID=""
}

# run_begin ROW SIZE IMPL CLUSTERS [tls]: a fresh API server, estate and controller.
run_begin() {
	run="$work/$1-$2-$3"
	ROW="$1"
	# Outside the capi row the controller serves every webhook there is.
	WEBHOOK_SERVICE=""
	if [ "$ROW" = capi ]; then
		case "$3" in capv) WEBHOOK_SERVICE=capv-webhook-service ;; ours) WEBHOOK_SERVICE=vsphere-provider-webhook-service ;; esac
	fi
	mkdir -p "$run"
	log "$1, $2, $3: API server, vcsim, controller (logs in $run)"
	kube_start "$3"
	webhook_cert "$run/certs"
	estate_start "$4" "${5:-}"
	WEBHOOK_PORT="$(free_port)"
	METRICS_PORT="$(free_port)"
	HEALTH_PORT="$(free_port)"
	controller_up "$3" first
}
# stop_pid PID: SIGTERM, then SIGKILL after 10 s. vcsim's shutdown (httptest.Server.Close)
# waits without end for a connection a handler still holds (seen once after CAPV's rollout:
# "blocked in Close after 5 seconds, waiting for connections").
stop_pid() {
	local i
	kill "$1" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

run_end() {
	controller_down
	capi_down
	[ -z "$PROXY_PID" ] || stop_pid "$PROXY_PID"
	[ -z "$VCSIM_PID" ] || stop_pid "$VCSIM_PID"
	wait 2>/dev/null || true
	PROXY_PID=""
	VCSIM_PID=""
	kube_down
	KUBE_DIR=""
}

# --- zones --------------------------------------------------------------------------------------
zones_manifest() { # N
	local i
	for ((i = 0; i < $1; i++)); do
		cat <<YAML
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata: {name: zone-$i}
spec:
  region: {name: region-a, type: Datacenter, tagCategory: k8s-region}
  zone: {name: zone-$i, type: ComputeCluster, tagCategory: k8s-zone}
  topology: {datacenter: DC0, computeCluster: DC0_C$i, datastore: LocalDS_0, networks: [VM Network]}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereDeploymentZone
metadata: {name: zone-$i}
spec:
  server: $VC_URL
  failureDomain: zone-$i
  controlPlane: true
  placementConstraint: {resourcePool: DC0_C${i}_RP1, folder: vm}
YAML
	done
}
# Ready at v1beta1 (status.ready) or v1beta2 (the Ready condition), whichever the server serves
# first.
zones_ready() {
	k get vspheredeploymentzones -o json |
		jq '[.items[] | select(.status.ready == true or any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length'
}

bench_zones() { # N IMPL
	local n="$1" impl="$2" start fail="" ready last=-1
	run_begin zones "$n" "$impl" "$n"
	phase_begin
	zones_manifest "$n" | k apply -f - 2>&1 >/dev/null | { grep -v '^Warning: .* is deprecated' >&2 || true; }
	[ "${PIPESTATUS[1]}" = 0 ] || die "kubectl apply of the zones failed"
	start=$SECONDS
	while :; do
		ready="$(zones_ready)"
		[ "$ready" = "$last" ] || log "  $ready/$n zones ready ($((SECONDS - start)) s)"
		last="$ready"
		[ "$ready" -lt "$n" ] || break
		if [ $((SECONDS - start)) -ge 600 ]; then fail="$ready/$n ready after 600 s"; break; fi
		sleep 0.5
	done
	settle
	phase_end zones "$n" "$impl" "apply → ready" "$fail"

	controller_down
	phase_begin
	controller_up "$impl"
	fail=""
	wait_quiet 600 || fail="still calling vCenter after 600 s"
	phase_end zones "$n" "$impl" "restart resync" "$fail"
	at_rest zones "$n" "$impl"
	run_end
}

# --- OpenShift machines -------------------------------------------------------------------------
NS_MAPI=openshift-machine-api

# mao_manifests DIR: what MAO's vSphere machine controller needs in the API server, as shipped
# by its module's install/ (the Machine and MachineSet CRDs of the Default feature set, the
# RBAC of its machine-api-controllers ServiceAccount) plus the Infrastructure CRD of
# openshift/api (tests/fixtures/crds, test-only). The namespaces its RBAC names come first (the
# cluster-version operator makes them in OpenShift).
mao_manifests() {
	local dir="$1" ns
	mkdir -p "$dir"
	for ns in openshift-config openshift-config-managed openshift-monitoring; do
		printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n---\n' "$ns"
	done >"$dir/00-namespaces.yaml"
	cp "$MAO_DIR/install/0000_30_machine-api-operator_02_machine.Default.crd.yaml" \
		"$MAO_DIR/install/0000_30_machine-api-operator_03_machineset.Default.crd.yaml" \
		"$MAO_DIR/install/0000_30_machine-api-operator_09_rbac.yaml" \
		"$REPO_ROOT/tests/fixtures/crds/config.openshift.io_infrastructures-Default.crd.yaml" "$dir/"
}

# openshift_setup IMPL: the objects both controllers read: the credentials Secret in MAO's
# format (`<server>.username`, which ours reads too), the user data, and for MAO the cluster's
# Infrastructure (platform VSphere) with its cloud config (the vCenter's port, insecure: vcsim's
# certificate is self-signed).
openshift_setup() {
	k get namespace "$NS_MAPI" >/dev/null 2>&1 || k create namespace "$NS_MAPI" >/dev/null
	k apply -f - >/dev/null <<YAML || die "cannot create the Secrets"
apiVersion: v1
kind: Secret
metadata: {name: vsphere-credentials, namespace: $NS_MAPI}
stringData: {127.0.0.1.username: bench, 127.0.0.1.password: bench}
---
apiVersion: v1
kind: Secret
metadata: {name: worker-user-data, namespace: $NS_MAPI}
stringData: {userData: '{"ignition":{"version":"3.2.0"}}'}
YAML
	[ "$1" = mao ] || return 0
	k apply -f - >/dev/null <<YAML || die "cannot create the Infrastructure and its cloud config"
apiVersion: v1
kind: ConfigMap
metadata: {name: cloud-provider-config, namespace: openshift-config}
data:
  config: |
    [Global]
    secret-name = "vsphere-creds"
    secret-namespace = "kube-system"
    insecure-flag = "1"

    [Workspace]
    server = "127.0.0.1"
    datacenter = "DC0"
    default-datastore = "LocalDS_0"
    folder = "/DC0/vm"

    [VirtualCenter "127.0.0.1"]
    datacenters = "DC0"
    port = "$VC_PORT"
---
apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata: {name: cluster}
spec:
  cloudConfig: {name: cloud-provider-config, key: config}
  platformSpec: {type: VSphere}
YAML
	k patch infrastructure cluster --subresource=status --type=merge \
		-p '{"status":{"infrastructureName":"bench","platform":"VSphere","platformStatus":{"type":"VSphere"},"controlPlaneTopology":"HighlyAvailable","infrastructureTopology":"HighlyAvailable","apiServerURL":"https://127.0.0.1:6443","apiServerInternalURI":"https://127.0.0.1:6443","etcdDiscoveryDomain":""}}' \
		>/dev/null || die "cannot set the Infrastructure's status"
}

# machines_manifest N IMPL: N Machines cloned from vcsim's DC0_H0_VM0 with a complete
# workspace, round-robin over the compute clusters' pools (3 of them). The one difference is how
# the workspace names the vCenter: MAO takes a host name and finds the port in the cloud config
# (and its credentials under `<host>.username` in the Secret); ours takes host:port and, with no
# credentialsSecret, acts as the manager (--username), bound to that server.
machines_manifest() {
	local i server=127.0.0.1 creds="credentialsSecret: {name: vsphere-credentials}"
	[ "$2" = mao ] || { server="127.0.0.1:$VC_PORT"; creds=""; }
	for ((i = 0; i < $1; i++)); do
		cat <<YAML
---
apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  name: bench-$i
  namespace: $NS_MAPI
  labels: {machine.openshift.io/cluster-api-cluster: bench, machine.openshift.io/cluster-api-machine-role: worker, machine.openshift.io/cluster-api-machine-type: worker}
spec:
  providerSpec:
    value:
      apiVersion: machine.openshift.io/v1beta1
      kind: VSphereMachineProviderSpec
      template: DC0_H0_VM0
      numCPUs: 2
      numCoresPerSocket: 1
      memoryMiB: 2048
      diskGiB: 10
      network: {devices: [{networkName: VM Network}]}
      userDataSecret: {name: worker-user-data}
      $creds
      workspace: {server: "$server", datacenter: DC0, datastore: LocalDS_0, folder: /DC0/vm, resourcePool: /DC0/host/DC0_C$((i % 3))/Resources}
YAML
	done
}

# machines_in PHASES: how many Machines are in one of PHASES (a jq array); "failed: NAME" when
# one went Failed (neither controller leaves that phase).
machines_in() {
	k get machines.machine.openshift.io -n "$NS_MAPI" -o json |
		jq -r --argjson p "$1" '([.items[] | select(.status.phase == "Failed") | .metadata.name] | first) as $f
			| if $f then "failed: \($f)" else [.items[] | select(.status.phase as $x | $p | index($x))] | length end'
}
machines_count() { k get machines.machine.openshift.io -n "$NS_MAPI" -o json | jq '.items | length'; }

mao_up() {
	# The operator's arguments for this container (--v=3, --namespace), ports on loopback; no
	# leader election, as the others. Its --kubeconfig is controller-runtime's.
	env -u KUBERNETES_SERVICE_HOST \
		"$MAO_DIR/machine-controller-manager" --kubeconfig "$SA_KUBECONFIG" --namespace "$NS_MAPI" \
		--metrics-bind-address "127.0.0.1:$METRICS_PORT" --health-addr "127.0.0.1:$HEALTH_PORT" --v=3 \
		</dev/null >>"$run/controller.log" 2>&1 &
	MAO_READY='Starting workers'
}

# wait_machines WHAT LIMIT COUNT-COMMAND: until the command prints the wanted number; prints
# progress. Returns 1 after LIMIT seconds.
wait_count() {
	local want="$1" limit="$2" start=$SECONDS n last=-1
	shift 2
	while :; do
		n="$("$@")"
		[ "$n" = "$last" ] || log "  $n (want $want) after $((SECONDS - start)) s"
		last="$n"
		[ "$n" != "$want" ] || return 0
		[[ "$n" != failed* ]] || return 1
		[ $((SECONDS - start)) -lt "$limit" ] || return 1
		sleep 0.5
	done
}

bench_openshift() { # N IMPL
	local n="$1" impl="$2" fail=""
	run_begin openshift "$n" "$impl" 3 tls
	openshift_setup "$impl"

	log "  $n Machines: apply → Provisioned (VM cloned and powered on)"
	phase_begin
	machines_manifest "$n" "$impl" | k apply -f - >/dev/null || die "kubectl apply of the Machines failed"
	wait_count "$n" 900 machines_in '["Provisioned","Running"]' ||
		fail="$(machines_in '["Provisioned","Running"]' | sed 's/^\([0-9]*\)$/\1 of '"$n"' Provisioned after 900 s/')"
	settle
	phase_end openshift "$n" "$impl" "create → Provisioned" "$fail"

	controller_down
	phase_begin
	controller_up "$impl"
	fail=""
	wait_quiet 600 || fail="still calling vCenter after 600 s"
	phase_end openshift "$n" "$impl" "restart resync" "$fail"
	at_rest openshift "$n" "$impl"

	log "  deleting the $n Machines"
	phase_begin
	k delete machines.machine.openshift.io -n "$NS_MAPI" --all --wait=false >/dev/null || die "kubectl delete failed"
	fail=""
	wait_count 0 900 machines_count || fail="Machines left after 900 s"
	P_T1="$(now)"
	phase_end openshift "$n" "$impl" "delete → gone" "$fail"
	step_gaps openshift "$n" "$impl" "delete"
	run_end
}

# --- Cluster API machines -----------------------------------------------------------------------
NS_CAPI=bench

# capi_manifests: Cluster API's three providers as shipped (kubectl kustomize of config/default,
# as clusterctl's release manifests are made), without what only their Deployments need (the
# Deployment, Service, cert-manager's Issuer and Certificate): the managers run as processes,
# their webhooks registered at 127.0.0.1 by register_webhooks. What clusterctl init would apply,
# minus its inventory.
capi_manifests() {
	local d
	for d in core bootstrap/kubeadm/config controlplane/kubeadm/config; do
		"$KUBECTL" kustomize "$CAPI_BIN_DIR/config/$d/default" 2>/dev/null ||
			die "kubectl kustomize $CAPI_BIN_DIR/config/$d/default failed"
		printf -- '---\n'
	done | awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } !/(^|\n)kind: (Deployment|Service|Issuer|Certificate)\n/'
}

# capi_up: Cluster API's core, kubeadm bootstrap and kubeadm control plane managers as processes
# (as admin, as tests/support/capi.rs runs them; no leader election), each once ready given its
# own webhooks and conversion webhooks.
capi_up() {
	local spec bin svc port health diag start
	for spec in manager:capi-webhook-service kubeadm-bootstrap-manager:capi-kubeadm-bootstrap-webhook-service \
		kubeadm-control-plane-manager:capi-kubeadm-control-plane-webhook-service; do
		bin="${spec%%:*}"
		svc="${spec#*:}"
		port="$(free_port)"
		health="$(free_port)"
		diag="$(free_port)"
		log "  starting Cluster API's $bin"
		env -u KUBERNETES_SERVICE_HOST KUBECONFIG="$KUBE_DIR/admin.kubeconfig" HOME="$run" \
			"$CAPI_BIN_DIR/$bin" --leader-elect=false --insecure-diagnostics --webhook-port="$port" \
			--webhook-cert-dir="$run/certs" --health-addr="127.0.0.1:$health" --diagnostics-address="127.0.0.1:$diag" \
			</dev/null >"$run/capi-$bin.log" 2>&1 &
		CAPI_PIDS+=("$!")
		start=$SECONDS
		until curl -fsS "http://127.0.0.1:$health/readyz" >/dev/null 2>&1; do
			kill -0 "${CAPI_PIDS[-1]}" 2>/dev/null || die "$bin exited: $(tail -n5 "$run/capi-$bin.log")"
			[ $((SECONDS - start)) -lt 120 ] || die "$bin not ready in 120 s: $(tail -n5 "$run/capi-$bin.log")"
			sleep 0.5
		done
		register_webhooks "$port" "$svc"
	done
}

# wsim_up PORT: the workload-cluster simulator against vcsim itself (not the proxy: it is not
# measured, and what it asks vcsim is subtracted, see vc_stats), one control plane endpoint on
# 127.0.0.1:PORT. Sets WSIM_DEBUG (its debug API).
wsim_up() {
	local start=$SECONDS
	VSPHERE_USERNAME=bench VSPHERE_PASSWORD=bench "$WORKLOAD_SIM_BIN" --vcenter "$VCSIM_URL" --listen-host 127.0.0.1 \
		--ports "$1" --debug-addr 127.0.0.1:0 --poll 1s </dev/null >"$run/workload-sim.out" 2>"$run/workload-sim.log" &
	WSIM_PID=$!
	until grep -q '^ready debug=' "$run/workload-sim.out" 2>/dev/null; do
		kill -0 "$WSIM_PID" 2>/dev/null || die "workload-sim exited: $(tail -n5 "$run/workload-sim.log")"
		[ $((SECONDS - start)) -lt 30 ] || die "workload-sim not ready in 30 s: $(tail -n5 "$run/workload-sim.log")"
		sleep 0.1
	done
	WSIM_DEBUG="$(sed -n 's/^ready debug=//p' "$run/workload-sim.out" | head -n1)"
}

capi_down() {
	local pid
	for pid in "${CAPI_PIDS[@]}" ${WSIM_PID:+"$WSIM_PID"}; do kill "$pid" 2>/dev/null || true; done
	for pid in "${CAPI_PIDS[@]}" ${WSIM_PID:+"$WSIM_PID"}; do wait "$pid" 2>/dev/null || true; done
	CAPI_PIDS=()
	WSIM_PID=""
	WSIM_DEBUG=""
	SIM_BASE='{"soap":0,"waitForUpdates":0}'
}

# capi_cluster CP WORKERS EP-PORT: `clusterctl generate cluster` of CAPV v1.17's default template
# (variables only: the values of tests/support/capi_world.rs's capv_variables; no failure
# domains: every machine in DC0_C0_RP1, folder vm), vCenter named by the proxy's URL and pinned
# by vcsim's SHA-256 thumbprint (the proxy passes TLS through). One edit, for both controllers:
# the VSphereMachineTemplates' storagePolicyName is dropped. CAPV resolves a storage policy
# through the SPBM endpoint (/pbm), which vcsim does not serve here (404: "unable to create pbm
# client"), and its schema refuses an empty name; ours records the name and does not act on it.
capi_cluster() {
	local thumb
	thumb="$(openssl x509 -in "$run/vcsim.pem" -noout -fingerprint -sha256 | cut -d= -f2)"
	env -u KUBECONFIG -u VSPHERE_USERNAME -u VSPHERE_PASSWORD HOME="$run" XDG_CONFIG_HOME="$run/clusterctl" \
		CLUSTERCTL_DISABLE_VERSIONCHECK=true NAMESPACE="$NS_CAPI" CLUSTER_NAME=bench \
		CONTROL_PLANE_ENDPOINT_IP=127.0.0.1 CONTROL_PLANE_ENDPOINT_PORT="$3" CPI_IMAGE_K8S_VERSION=v1.32.0 \
		VSPHERE_SERVER="$VC_URL" VSPHERE_TLS_THUMBPRINT="$thumb" VSPHERE_USERNAME=bench VSPHERE_PASSWORD=bench \
		VSPHERE_DATACENTER=DC0 VSPHERE_RESOURCE_POOL=DC0_C0_RP1 VSPHERE_DATASTORE=LocalDS_0 VSPHERE_FOLDER=vm \
		VSPHERE_NETWORK="VM Network" VSPHERE_TEMPLATE=/DC0/vm/DC0_C0_RP1_VM0 \
		VSPHERE_STORAGE_POLICY="vSAN Default Storage Policy" \
		VSPHERE_SSH_AUTHORIZED_KEY="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2e bench" \
		"$CAPI_BIN_DIR/clusterctl" generate cluster bench --kubeconfig "$KUBE_DIR/admin.kubeconfig" \
		--from "$REPO_ROOT/tests/fixtures/capv/v1.17/cluster-template.yaml" --target-namespace "$NS_CAPI" \
		--kubernetes-version v1.32.0 --control-plane-machine-count "$1" --worker-machine-count "$2" |
		grep -v '^      storagePolicyName: '
}

# capi_provisioned [control-plane]: how many Cluster API Machines (only control plane ones with
# an argument) have a providerID and their infrastructure provisioned.
capi_provisioned() {
	k get machines.cluster.x-k8s.io -n "$NS_CAPI" ${1:+-l cluster.x-k8s.io/control-plane} -o json |
		jq '[.items[] | select(.spec.providerID != null and .status.initialization.infrastructureProvisioned == true)] | length'
}

# capi_rolled OLD: the control plane Machines not named in OLD (a list of names) that are
# provisioned, or "N new, M in all" while there are not exactly 3 control plane Machines.
capi_rolled() {
	k get machines.cluster.x-k8s.io -n "$NS_CAPI" -l cluster.x-k8s.io/control-plane -o json |
		jq -r --arg old "$1" '($old | split(" ")) as $o
			| [.items[] | select(.metadata.name as $n | $o | index($n) | not)] as $new
			| ([$new[] | select(.spec.providerID != null and .status.initialization.infrastructureProvisioned == true)] | length) as $p
			| if (.items | length) == 3 then $p else "\($p) new, \(.items | length) in all" end'
}

bench_capi() { # IMPL
	local impl="$1" fail="" ep size="3+3" old i
	[ "$capi_zones" -eq 0 ] || size="3+3_${capi_zones}zones" # no space: it names the run directory
	run_begin capi "$size" "$impl" "$((capi_zones > 3 ? capi_zones : 3))" tls
	capi_up
	ep="$(free_port)"
	wsim_up "$ep"
	capi_cluster 3 3 "$ep" >"$run/cluster.yaml" 2>"$run/clusterctl.log" ||
		die "clusterctl generate cluster failed: $(tail -n5 "$run/clusterctl.log")"
	k create namespace "$NS_CAPI" >/dev/null
	if [ "$capi_zones" -gt 0 ]; then
		# The zones first, ready before the clock starts; the VSphereCluster selects them all.
		awk '/^---/ { vc = 0 } /^kind: VSphereCluster$/ { vc = 1 } { print } vc && /^spec:$/ { print "  failureDomainSelector: {}"; vc = 0 }' \
			"$run/cluster.yaml" >"$run/cluster-zonal.yaml" && mv "$run/cluster-zonal.yaml" "$run/cluster.yaml"
		grep -q '^  failureDomainSelector: {}$' "$run/cluster.yaml" || die "no VSphereCluster spec in the generated cluster"
		zones_manifest "$capi_zones" | k apply -f - 2>&1 >/dev/null | { grep -v '^Warning: .* is deprecated' >&2 || true; }
		for i in $(seq 300); do [ "$(zones_ready)" -ge "$capi_zones" ] && break; sleep 1; done
		[ "$(zones_ready)" -ge "$capi_zones" ] || die "$(zones_ready) of $capi_zones zones ready after 300 s"
		log "  $capi_zones zones ready"
	fi

	log "  CAPV's default cluster template, 3 control plane machines + 3 workers: apply → provisioned"
	phase_begin
	k apply -f "$run/cluster.yaml" >/dev/null || die "kubectl apply of the cluster failed"
	# The first control plane machine: counted at the moment it is provisioned (the machines
	# after it are being made already), not until vCenter is quiet.
	wait_count 1 600 capi_provisioned control-plane || fail="$(capi_provisioned control-plane) of 1 after 600 s"
	phase_end capi "$size" "$impl" "apply → 1st control plane" "$fail"
	# The same phase on: the calls and requests since the apply.
	fail=""
	wait_count 6 900 capi_provisioned || fail="$(capi_provisioned) of 6 provisioned after 900 s"
	settle 120
	phase_end capi "$size" "$impl" "apply → 3+3 provisioned" "$fail"

	controller_down
	phase_begin
	controller_up "$impl"
	fail=""
	wait_quiet 300 || fail="still calling vCenter after 300 s"
	phase_end capi "$size" "$impl" "restart resync" "$fail"
	at_rest capi "$size" "$impl"

	# The rollout of tests/capi_workload_cluster.rs: a copy of the control plane's template with
	# numCPUs 4, KCP pointed at it; it replaces the three machines one at a time (maxSurge 1).
	log "  control plane rollout (new VSphereMachineTemplate, numCPUs 4) → 3 new machines provisioned, the old ones gone"
	old="$(k get machines.cluster.x-k8s.io -n "$NS_CAPI" -l cluster.x-k8s.io/control-plane -o jsonpath='{.items[*].metadata.name}')"
	phase_begin
	k get vspheremachinetemplates.v1beta2.infrastructure.cluster.x-k8s.io bench -n "$NS_CAPI" -o json |
		jq --arg ns "$NS_CAPI" '.metadata = {name: "bench-cpu4", namespace: $ns} | .spec.template.spec.numCPUs = 4' |
		k apply -f - >/dev/null || die "cannot create the VSphereMachineTemplate bench-cpu4"
	k patch kubeadmcontrolplanes.controlplane.cluster.x-k8s.io bench -n "$NS_CAPI" --type merge \
		-p '{"spec":{"machineTemplate":{"spec":{"infrastructureRef":{"apiGroup":"infrastructure.cluster.x-k8s.io","kind":"VSphereMachineTemplate","name":"bench-cpu4"}}}}}' \
		>/dev/null || die "cannot point the KubeadmControlPlane at bench-cpu4"
	fail=""
	wait_count 3 900 capi_rolled "$old" || fail="$(capi_rolled "$old") after 900 s"
	settle 120
	phase_end capi "$size" "$impl" "control plane rollout" "$fail"
	step_gaps capi "$size" "$impl" "control plane rollout"
	run_end
}

# --- run ----------------------------------------------------------------------------------------
for r in ${rows//,/ }; do
	case "$r" in
	zones) for n in $zone_sizes; do for impl in capv ours; do ! wanted "$impl" || bench_zones "$n" "$impl"; done; done ;;
	openshift) for n in $machine_sizes; do for impl in mao ours; do ! wanted "$impl" || bench_openshift "$n" "$impl"; done; done ;;
	capi) for impl in capv ours; do ! wanted "$impl" || bench_capi "$impl"; done ;;
	esac
done

cores="$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
cat <<EOF

## bench-peers: upstream peers and vsphere-provider on the same estate

delay ${delay_ms} ms per vCenter request; vsphere-provider $profile build; at rest: ${idle} s idle after the resync; CAPV $(head -n1 "$CAPV_DIR/VERSIONS" | cut -d' ' -f2); $cores; $(date -u +%Y-%m-%d)

| row | size | controller | phase | vCenter calls | SOAP/REST | depth | API requests | wall s | peak RSS MiB | failed |
|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|
EOF
awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }' "$RESULTS" |
	sed 's/| capv |/| CAPV v1.16.1 |/; s/| mao |/| MAO vSphere |/; s/| ours |/| vsphere-provider |/'
if [ -s "$GAPS" ]; then
	cat <<EOF

Power-off done → destroy sent, per VM (vcsim's call log; includes the proxy's ${delay_ms} ms):

| row | size | controller | phase | VMs | p50 s | p99 s | max s |
|---|---:|---|---|---:|---:|---:|---:|
EOF
	awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$GAPS" |
		sed 's/| capv |/| CAPV v1.16.1 |/; s/| mao |/| MAO vSphere |/; s/| ours |/| vsphere-provider |/'
fi
