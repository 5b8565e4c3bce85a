# shellcheck shell=bash
# Shared helpers for hack/*.sh. Source it; it defines functions only (plus REPO_ROOT, GO_ROOT,
# GO_MIN_MINOR).
# All progress output goes to stderr so scripts can print results on stdout.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO_ROOT

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() {
	printf '[%s] ERROR: %s\n' "$(basename "$0")" "$*" >&2
	exit 1
}

pkg_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# ensure_apt_packages PKG... installs the missing ones (apt-get update only when needed).
ensure_apt_packages() {
	local missing=() p
	for p in "$@"; do
		pkg_installed "$p" || missing+=("$p")
	done
	if [ "${#missing[@]}" -eq 0 ]; then
		return 0
	fi
	command -v apt-get >/dev/null 2>&1 || die "missing packages ${missing[*]} and no apt-get; install them by hand"
	local sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || die "missing packages ${missing[*]}; run as root (or install sudo)"
		sudo=(sudo)
	fi
	log "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; then
		log "apt-get install failed; running apt-get update and retrying"
		"${sudo[@]}" apt-get update -q >&2 || die "apt-get update failed"
		"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
			die "apt-get install ${missing[*]} failed"
	fi
}

# Where the vcsim build expects its Go toolchain (not Debian's golang-go, which is too old for a
# current govmomi). Override with VSPHERE_PROVIDER_GOROOT for a Go installed elsewhere.
GO_ROOT="${VSPHERE_PROVIDER_GOROOT:-/usr/local/go}"
# The oldest Go that builds hack/vcsim (the `go` line of hack/vcsim/go.mod, set by govmomi).
GO_MIN_MINOR=25

# ensure_go: puts $GO_ROOT/bin first on PATH, pins the toolchain (GOTOOLCHAIN=local: never
# download another one; CGO_ENABLED=0) and checks the version. Dies with instructions when Go is
# missing or too old. Logs which go is used.
ensure_go() {
	local go_bin="$GO_ROOT/bin/go" ver minor
	if [ ! -x "$go_bin" ]; then
		die "Go not found at $go_bin. hack/vcsim needs Go 1.$GO_MIN_MINOR or newer (1.26 is what the project uses)
    installed at $GO_ROOT (the official tarball unpacked there, so that $go_bin exists),
    or set VSPHERE_PROVIDER_GOROOT to another Go root. Debian's golang-go (/usr/bin/go) is too old."
	fi
	PATH="$GO_ROOT/bin:$PATH"
	export PATH GOTOOLCHAIN=local CGO_ENABLED=0
	unset GOROOT # let the binary find its own root
	ver="$("$go_bin" env GOVERSION)" || die "$go_bin does not run"
	minor="${ver#go1.}"
	minor="${minor%%[!0-9]*}"
	if [ -z "$minor" ] || [ "$minor" -lt "$GO_MIN_MINOR" ]; then
		die "$go_bin is $ver; hack/vcsim needs Go 1.$GO_MIN_MINOR or newer at $GO_ROOT"
	fi
	[ "$(command -v go)" = "$go_bin" ] || die "PATH resolves go to $(command -v go), not $go_bin"
	log "using $go_bin ($ver)"
}

# The package version of Cargo.toml (e.g. 0.1.0) on stdout; dies if there is none.
cargo_version() {
	local v
	v="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_ROOT/Cargo.toml" | head -n1)"
	[ -n "$v" ] || die "no version in $REPO_ROOT/Cargo.toml"
	printf '%s\n' "$v"
}

# The manager image config/default ships (config/manager/kustomization.yaml; tag v<Cargo.toml
# version>): a placeholder nothing can pull, since no image is published. hack/release.sh replaces
# it by this name; hack/image.sh prints the commands that replace it with the image it built.
PLACEHOLDER_IMAGE_NAME=registry.invalid/vsphere-provider

# kubectl on stdout: $KUBECTL, else $KUBE_BIN_DIR/kubectl, else kubectl from PATH; dies if it
# cannot be found.
resolve_kubectl() {
	local k="${KUBECTL:-}"
	if [ -z "$k" ] && [ -n "${KUBE_BIN_DIR:-}" ]; then k="$KUBE_BIN_DIR/kubectl"; fi
	k="${k:-kubectl}"
	command -v "$k" >/dev/null 2>&1 || die "kubectl not found ('$k'); set KUBECTL, or KUBE_BIN_DIR to hack/kube/build.sh's directory"
	printf '%s\n' "$k"
}

# --- the real API server, vcsim and the controller (hack/demo-cluster.sh, hack/bench-cluster.sh) --
# These set globals (the pids and paths below) rather than print them, so the caller's EXIT trap
# can stop what was started. Each dies with a message when something does not come up.

# The controller's ServiceAccount, as config/rbac names it.
CONTROLLER_SA=vsphere-provider-system/vsphere-provider-controller-manager

# banner TEXT: a section title on stdout.
banner() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# provider_bin [debug|release]: builds vsphere-provider and prints the binary's path (under
# $CARGO_TARGET_DIR when set).
provider_bin() {
	local profile="${1:-debug}" flags=(--quiet --bin vsphere-provider)
	[ "$profile" = release ] && flags+=(--release)
	log "building vsphere-provider ($profile)"
	(cd "$REPO_ROOT" && cargo build "${flags[@]}" >&2) || die "cargo build failed"
	echo "${CARGO_TARGET_DIR:-$REPO_ROOT/target}/$profile/vsphere-provider"
}

# vcsim_start DIR VCSIM_FLAGS...: vcsim (hack/vcsim, built by hack/setup.sh unless $VCSIM_BIN is
# set) on a free port of 127.0.0.1, its log in DIR/vcsim.log. Sets VCSIM_PID and VCSIM_URL
# (http://127.0.0.1:PORT/sdk).
vcsim_start() {
	local dir="$1" _
	shift
	[ -n "${VCSIM_BIN:-}" ] || VCSIM_BIN="$("$REPO_ROOT/hack/setup.sh" | tail -n1)"
	rm -f "$dir/vcsim.url"
	"$VCSIM_BIN" -l 127.0.0.1:0 -url-file "$dir/vcsim.url" "$@" </dev/null >/dev/null 2>"$dir/vcsim.log" &
	VCSIM_PID=$!
	for _ in $(seq 1200); do
		[ -s "$dir/vcsim.url" ] && break
		kill -0 "$VCSIM_PID" 2>/dev/null || break
		sleep 0.05
	done
	[ -s "$dir/vcsim.url" ] || die "vcsim did not start: $(tail -n5 "$dir/vcsim.log")"
	# shellcheck disable=SC2034 # read by the caller
	VCSIM_URL="$(head -n1 "$dir/vcsim.url")"
}

# vcsim_tag_samples BIN URL USER PASSWORD: what an admin does before config/samples' zones can be
# verified (their failure domains do not autoConfigure): categories k8s-region and k8s-zone, tag
# region-a on /DC0 and zone-a/b/c on DC0_C0/1/2, through the REST tagging API (as govc tags.*).
vcsim_tag_samples() {
	local bin="$1" url="$2" user="$3" password="$4" base session region zone
	command -v jq >/dev/null 2>&1 || ensure_apt_packages jq
	base="${url%/sdk}"
	session="$(curl -fsS -X POST -u "$user:$password" "$base/rest/com/vmware/cis/session" | jq -r .value)" ||
		die "cannot log in to the tagging API of $base"
	_rest() { curl -fsS -H "vmware-api-session-id: $session" -H 'Content-Type: application/json' "$@"; }
	_category() { # NAME TYPE
		_rest -X POST "$base/rest/com/vmware/cis/tagging/category" \
			-d "{\"create_spec\":{\"name\":\"$1\",\"description\":\"\",\"cardinality\":\"MULTIPLE\",\"associable_types\":[\"$2\"]}}" | jq -r .value
	}
	_tag() { # CATEGORY_ID NAME TYPE PATH
		local id moref
		moref="$(VSPHERE_USERNAME="$user" VSPHERE_PASSWORD="$password" "$bin" inventory --server "$url" -o json 2>/dev/null |
			jq -r --arg p "$4" '.[] | select(.path == $p) | .moref')"
		[ -n "$moref" ] || die "no $4 in the inventory of $url"
		id="$(_rest -X POST "$base/rest/com/vmware/cis/tagging/tag" \
			-d "{\"create_spec\":{\"name\":\"$2\",\"description\":\"\",\"category_id\":\"$1\"}}" | jq -r .value)"
		_rest -X POST "$base/rest/com/vmware/cis/tagging/tag-association/id:$id?~action=attach" \
			-d "{\"object_id\":{\"type\":\"$3\",\"id\":\"$moref\"}}"
		echo "  tag $2 -> $4"
	}
	region="$(_category k8s-region Datacenter)"
	zone="$(_category k8s-zone ClusterComputeResource)"
	_tag "$region" region-a Datacenter /DC0
	_tag "$zone" zone-a ClusterComputeResource /DC0/host/DC0_C0
	_tag "$zone" zone-b ClusterComputeResource /DC0/host/DC0_C1
	_tag "$zone" zone-c ClusterComputeResource /DC0/host/DC0_C2
}

# kube_up DIR CRDS UP_FLAGS...: Kubernetes' own etcd + kube-apiserver (hack/kube/up.sh
# --background) with state in DIR, the controller's ServiceAccount created, CRDS (config/crd, whose
# conversion webhook apply_conversion then points at the controller, or crds/, without one) and
# config/rbac applied unmodified. Sets KUBE_DIR, KUBECTL, exports KUBECONFIG (admin), sets
# CONTROLLER_KUBECONFIG (the ServiceAccount's token). kube_down stops both servers.
kube_up() {
	local dir="$1" crds="$2"
	shift 2
	[ -n "${KUBE_BIN_DIR:-}" ] || KUBE_BIN_DIR="$("$REPO_ROOT/hack/kube/build.sh" | tail -n1)"
	export KUBE_BIN_DIR
	export KUBECTL="${KUBECTL:-$KUBE_BIN_DIR/kubectl}"
	KUBE_DIR="$dir"
	"$REPO_ROOT/hack/kube/up.sh" --background --dir "$dir" --bin-dir "$KUBE_BIN_DIR" \
		--sa "$CONTROLLER_SA" --apply "$REPO_ROOT/$crds" --apply "$REPO_ROOT/config/rbac" "$@" >/dev/null ||
		die "hack/kube/up.sh failed (logs in $dir)"
	export KUBECONFIG="$dir/admin.kubeconfig"
	CONTROLLER_KUBECONFIG="$dir/${CONTROLLER_SA#*/}.kubeconfig"
}
# Quiet when it stops both; a refusal (a server it could not stop, so etcd's data is kept) is
# shown, since the servers then outlive the script.
kube_down() {
	local out
	if [ -n "${KUBE_DIR:-}" ] && [ -x "$KUBE_DIR/down.sh" ]; then
		out="$("$KUBE_DIR/down.sh" 2>&1)" || log "$KUBE_DIR/down.sh refused: $out"
	fi
	return 0
}
k() { "$KUBECTL" "$@"; }
# bind_secrets NS: the controller may read Secrets in NS, as an admin opens a tenant namespace to
# it (config/rbac binds ClusterRole vsphere-provider-secrets in the manager's namespace only).
bind_secrets() {
	k -n "$1" create rolebinding vsphere-provider-secrets --clusterrole=vsphere-provider-secrets \
		--serviceaccount="${CONTROLLER_SA/\//:}" >/dev/null || die "cannot bind the Secret role in $1"
}

# webhook_cert DIR: DIR/tls.crt + DIR/tls.key for a webhook server on 127.0.0.1, signed by the API
# server's CA (KUBE_DIR/pki), which is therefore the webhooks' caBundle.
webhook_cert() {
	local dir="$1" pki="$KUBE_DIR/pki"
	mkdir -p "$dir"
	(
		umask 077
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/tls.key" 2>/dev/null &&
			openssl req -new -key "$dir/tls.key" -subj /CN=vsphere-provider-webhook -out "$dir/tls.csr" &&
			printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
				"extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$dir/tls.ext" &&
			openssl x509 -req -in "$dir/tls.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAserial "$pki/ca.srl" \
				-days 7 -sha256 -extfile "$dir/tls.ext" -out "$dir/tls.crt" 2>/dev/null
	) || die "cannot sign the webhook certificate"
	rm -f "$dir/tls.csr" "$dir/tls.ext"
}

# apply_webhooks ADDR: config/webhook/manifests.yaml as the API server must see it without
# cert-manager and a Service: every clientConfig.service becomes url https://ADDR/<its path> with
# the API server's CA as caBundle (the same overlay tests/realapi_controller.rs applies).
apply_webhooks() {
	local addr="$1" ca
	ca="$(base64 -w0 <"$KUBE_DIR/pki/ca.crt")"
	k create --dry-run=client -o json -f "$REPO_ROOT/config/webhook/manifests.yaml" |
		jq --arg base "https://$addr" --arg ca "$ca" \
			'.webhooks |= map(.clientConfig = {url: ($base + .clientConfig.service.path), caBundle: $ca})' |
		k apply -f - >&2 || die "cannot apply the webhook configurations"
}

# apply_conversion ADDR: config/crd's conversion webhooks (clientConfig.service /convert) pointed
# at https://ADDR/convert with the API server's CA, as apply_webhooks does for admission.
apply_conversion() {
	local addr="$1" ca crd
	ca="$(base64 -w0 <"$KUBE_DIR/pki/ca.crt")"
	for crd in $(k get crds -o json | jq -r '.items[] | select(.spec.conversion.strategy == "Webhook") | .metadata.name'); do
		k patch crd "$crd" --type=merge -p "$(jq -cn --arg url "https://$addr/convert" --arg ca "$ca" \
			'{spec: {conversion: {webhook: {clientConfig: {service: null, url: $url, caBundle: $ca}}}}}')" >&2 ||
			die "cannot point the conversion webhook of $crd at $addr"
	done
}

# controller_start LOG RUN_FLAGS...: `vsphere-provider run` ($PROVIDER_BIN) as the controller's
# ServiceAccount, leader election in vsphere-provider-system, /metrics on a free port, log in LOG
# (appended). Sets CONTROLLER_PID; returns once it leads and its caches are synced.
controller_start() {
	local log="$1" _
	shift
	env -u VSPHERE_SERVER -u VSPHERE_USERNAME -u VSPHERE_PASSWORD -u KUBERNETES_SERVICE_HOST \
		KUBECONFIG="$CONTROLLER_KUBECONFIG" NO_COLOR=1 POD_NAME="${CONTROLLER_POD_NAME:-controller-0}" \
		"$PROVIDER_BIN" --log-level info run --metrics-addr 127.0.0.1:0 --namespace "${CONTROLLER_SA%/*}" "$@" \
		</dev/null >>"$log" 2>&1 &
	CONTROLLER_PID=$!
	local start=$SECONDS
	until grep -q 'controllers started' "$log" 2>/dev/null; do
		kill -0 "$CONTROLLER_PID" 2>/dev/null || die "the controller exited: $(tail -n5 "$log")"
		[ $((SECONDS - start)) -lt 120 ] || die "the controller did not start in 120 s: $(tail -n5 "$log")"
		sleep 0.2
	done
}

# controller_stop: SIGTERM (graceful: drain, release the lease), then wait for it.
controller_stop() {
	[ -n "${CONTROLLER_PID:-}" ] || return 0
	kill -TERM "$CONTROLLER_PID" 2>/dev/null || true
	wait "$CONTROLLER_PID" 2>/dev/null || true
	CONTROLLER_PID=""
}

# simulate_kubelets NAMESPACE: plays the kubelets this cluster does not have. For each Machine of
# NAMESPACE with a providerID and no Node of that providerID, registers a Node named after the
# Machine and posts its status Ready=True, as a kubelet would once the VM booted. Prints the
# names of the Nodes it registered.
simulate_kubelets() {
	local ns="$1" tmp missing now rc=0
	tmp="$(mktemp -d)"
	k get machines.machine.openshift.io -n "$ns" -o json >"$tmp/machines.json" &&
		k get nodes -o json >"$tmp/nodes.json" || rc=1
	if [ "$rc" = 0 ]; then
		missing="$(jq -rn --slurpfile m "$tmp/machines.json" --slurpfile n "$tmp/nodes.json" '
			($n[0].items | map(.spec.providerID) | map(select(. != null))) as $have
			| $m[0].items[] | select(.spec.providerID != null and (.spec.providerID as $p | $have | index($p) | not))
			| "\(.metadata.name) \(.spec.providerID)"')" || rc=1
	fi
	if [ "$rc" = 0 ] && [ -n "$missing" ]; then
		now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
		jq -Rn --arg now "$now" '{apiVersion: "v1", kind: "List", items: [inputs | split(" ") |
			{apiVersion: "v1", kind: "Node", metadata: {name: .[0]}, spec: {providerID: .[1]},
			 status: {conditions: [{type: "Ready", status: "True", reason: "KubeletReady",
			   message: "posted by simulate_kubelets (no kubelet here)", lastHeartbeatTime: $now, lastTransitionTime: $now}]}}]}' \
			<<<"$missing" >"$tmp/nodes-new.json"
		if k create -f "$tmp/nodes-new.json" >/dev/null &&
			k apply --server-side --field-manager=simulated-kubelet --subresource=status -f "$tmp/nodes-new.json" >/dev/null; then
			cut -d' ' -f1 <<<"$missing"
		else
			rc=1
		fi
	fi
	rm -rf "$tmp"
	return "$rc"
}

# cluster_session NAME: the work directory (sets `work`) of a script that starts the real API
# server, vcsim and the controller, and the EXIT trap that stops all three and removes it (the
# controller's last log lines shown when the script fails).
cluster_session() {
	work="$(mktemp -d "${TMPDIR:-/tmp}/vsphere-provider-$1.XXXXXX")"
	VCSIM_PID=""
	CONTROLLER_PID=""
	trap _cluster_session_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}
_cluster_session_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ "$rc" -ne 0 ] && [ -s "$work/controller.log" ]; then
		log "last lines of the controller's log:"
		tail -n 20 "$work/controller.log" >&2
	fi
	controller_stop
	[ -z "$VCSIM_PID" ] || kill "$VCSIM_PID" 2>/dev/null || true
	kube_down
	rm -rf "$work"
	exit "$rc"
}
