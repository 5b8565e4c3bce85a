#!/usr/bin/env bash
# Starts a real etcd + kube-apiserver (built by hack/kube/build.sh) on 127.0.0.1 for people: TLS,
# RBAC, client-certificate admin, ServiceAccount tokens. See --help.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib.sh"

usage() {
	cat <<'EOF'
Usage: hack/kube/up.sh [options] [-- extra kube-apiserver flags]

Starts etcd and kube-apiserver on 127.0.0.1 (free ports picked at random), with:
  - a fresh CA, an apiserver serving certificate (IP SAN 127.0.0.1, DNS localhost) and an admin
    client certificate (CN=admin, O=system:masters), made with openssl;
  - a ServiceAccount signing key pair (TokenRequest works: `kubectl create token`);
  - --authorization-mode=RBAC, so ServiceAccounts get only what their bindings grant.
It waits for /readyz, writes DIR/admin.kubeconfig and prints on stdout:
  DIR/admin.kubeconfig
  DIR/NAME.kubeconfig                      (one per --sa)
  export KUBECONFIG=DIR/admin.kubeconfig

There is no kube-controller-manager, scheduler or kubelet: no garbage collection, namespace
deletion stays Terminating, no `default` ServiceAccount (its admission plugin is disabled), pods
stay Pending. etcd listens on plain http on loopback; its data lives on /dev/shm when available.

Options:
  --dir DIR          state directory (certificates, kubeconfigs, logs, pids). Default: a new
                     mktemp directory, removed again when a --foreground run is stopped normally.
                     A --dir is never removed (only etcd's data is).
  --sa NS/NAME       create namespace NS and ServiceAccount NAME (if missing) and write
                     DIR/NAME.kubeconfig holding a token from `kubectl create token` (TokenRequest).
                     Repeatable. No role is bound: apply your RBAC with --apply or kubectl.
  --apply PATH       kubectl apply PATH as admin once the server is ready (a directory holding a
                     kustomization.yaml is applied with -k, anything else with -f), then wait for
                     every CRD to be Established. Repeatable; runs after the --sa namespaces exist
                     and before their tokens are made. Example for this project:
                       --sa vsphere-provider-system/vsphere-provider-controller-manager \
                       --apply crds --apply config/rbac
  --token-duration D token lifetime for --sa (kubectl duration, default 24h).
  --audit-user USER  record every request USER makes (e.g.
                     system:serviceaccount:vsphere-provider-system:vsphere-provider-controller-manager)
                     in DIR/audit.log: one JSON line per finished request at the Metadata level
                     (verb, resource, namespace, name, response code; never a body). Nobody
                     else's requests are recorded. Repeatable. Used by hack/bench-cluster.sh to
                     count the controller's requests by verb.
  --audit-policy FILE  audit with this policy file instead (also into DIR/audit.log).
  --foreground       (default) stay running until Ctrl-C (or SIGTERM), then stop both.
  --background       leave both running and exit; pids go to DIR/etcd.pid and
                     DIR/kube-apiserver.pid, and DIR/down.sh stops them.
  --bin-dir DIR      use kube-apiserver and etcd from DIR instead of running hack/kube/build.sh
                     (also: KUBE_BIN_DIR=DIR).
  --timeout SECONDS  how long to wait for etcd and for /readyz (default 60).
  -h, --help         this text.

Logs: DIR/etcd.log, DIR/kube-apiserver.log. kubectl (for --sa/--apply): $KUBECTL or kubectl.
EOF
}

DIR=""
MODE=foreground
SAS=()
APPLY=()
BIN_DIR="${KUBE_BIN_DIR:-}"
TIMEOUT=60
TOKEN_DURATION=24h
EXTRA_APISERVER_ARGS=()
AUDIT_USERS=()
AUDIT_POLICY=""
KUBECTL="${KUBECTL:-kubectl}"

need_arg() { if [ $# -lt 2 ] || [ -z "$2" ]; then die "$1 needs an argument (try --help)"; fi; }
while [ $# -gt 0 ]; do
	case "$1" in
	--dir) need_arg "$@"; DIR="$2"; shift 2 ;;
	--dir=*) DIR="${1#*=}"; shift ;;
	--sa) need_arg "$@"; SAS+=("$2"); shift 2 ;;
	--sa=*) SAS+=("${1#*=}"); shift ;;
	--apply) need_arg "$@"; APPLY+=("$2"); shift 2 ;;
	--apply=*) APPLY+=("${1#*=}"); shift ;;
	--token-duration) need_arg "$@"; TOKEN_DURATION="$2"; shift 2 ;;
	--token-duration=*) TOKEN_DURATION="${1#*=}"; shift ;;
	--bin-dir) need_arg "$@"; BIN_DIR="$2"; shift 2 ;;
	--bin-dir=*) BIN_DIR="${1#*=}"; shift ;;
	--timeout) need_arg "$@"; TIMEOUT="$2"; shift 2 ;;
	--timeout=*) TIMEOUT="${1#*=}"; shift ;;
	--audit-user) need_arg "$@"; AUDIT_USERS+=("$2"); shift 2 ;;
	--audit-user=*) AUDIT_USERS+=("${1#*=}"); shift ;;
	--audit-policy) need_arg "$@"; AUDIT_POLICY="$2"; shift 2 ;;
	--audit-policy=*) AUDIT_POLICY="${1#*=}"; shift ;;
	--foreground) MODE=foreground; shift ;;
	--background) MODE=background; shift ;;
	-h | --help) usage; exit 0 ;;
	--) shift; EXTRA_APISERVER_ARGS=("$@"); break ;;
	*) die "unknown argument: $1 (try --help)" ;;
	esac
done
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "--timeout wants whole seconds, got '$TIMEOUT'"
sa_names=" "
for sa in "${SAS[@]}"; do
	[[ "$sa" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$ ]] ||
		die "--sa wants NAMESPACE/NAME, got '$sa'"
	case "$sa_names" in *" ${sa#*/} "*) die "two --sa named ${sa#*/}: their kubeconfigs would collide" ;; esac
	sa_names+="${sa#*/} "
done
for p in "${APPLY[@]}"; do
	[ -e "$p" ] || die "--apply $p: no such file or directory"
done
if [ -n "$AUDIT_POLICY" ]; then
	[ -f "$AUDIT_POLICY" ] || die "--audit-policy $AUDIT_POLICY: no such file"
	[ "${#AUDIT_USERS[@]}" -eq 0 ] || die "--audit-user and --audit-policy exclude each other (put the users in the policy)"
	AUDIT_POLICY="$(cd "$(dirname "$AUDIT_POLICY")" && pwd)/$(basename "$AUDIT_POLICY")"
fi
for u in "${AUDIT_USERS[@]}"; do
	[[ "$u" =~ ^[A-Za-z0-9:._@-]+$ ]] || die "--audit-user wants a user name like system:serviceaccount:NS:NAME, got '$u'"
done
if [ "${#SAS[@]}" -gt 0 ] || [ "${#APPLY[@]}" -gt 0 ]; then
	command -v "$KUBECTL" >/dev/null 2>&1 || die "--sa/--apply need kubectl (set KUBECTL=/path/to/kubectl)"
fi

# Tools: openssl for the certificates, curl for the health checks.
command -v openssl >/dev/null 2>&1 || ensure_apt_packages openssl
command -v curl >/dev/null 2>&1 || ensure_apt_packages curl ca-certificates

# Binaries.
if [ -z "$BIN_DIR" ]; then
	BIN_DIR="$("$REPO_ROOT/hack/kube/build.sh" | tail -n1)"
fi
[ -d "$BIN_DIR" ] || die "--bin-dir $BIN_DIR: no such directory"
# Canonical (no trailing slash, no //, no symlink): down.sh recognises its processes by comparing
# /proc/PID/exe, which the kernel reports canonical, with these paths.
BIN_DIR="$(cd "$BIN_DIR" && pwd -P)"
ETCD_BIN="$BIN_DIR/etcd"
APISERVER_BIN="$BIN_DIR/kube-apiserver"
[ -x "$ETCD_BIN" ] || die "no etcd in $BIN_DIR"
[ -x "$APISERVER_BIN" ] || die "no kube-apiserver in $BIN_DIR"
ETCD_EXE="$(readlink -f "$ETCD_BIN")"
APISERVER_EXE="$(readlink -f "$APISERVER_BIN")"
log "binaries: $BIN_DIR ($("$APISERVER_BIN" --version), etcd $("$ETCD_BIN" --version | sed -n 's/^etcd Version: //p'))"

# State directory.
CREATED_DIR=0
if [ -z "$DIR" ]; then
	DIR="$(mktemp -d "${TMPDIR:-/tmp}/vsphere-provider-kube.XXXXXX")"
	CREATED_DIR=1
else
	mkdir -p "$DIR"
	DIR="$(cd "$DIR" && pwd)"
	for name in kube-apiserver etcd; do
		if [ -f "$DIR/$name.pid" ] && kill -0 "$(cat "$DIR/$name.pid")" 2>/dev/null; then
			die "$name from an earlier run is still running in $DIR (stop it with $DIR/down.sh)"
		fi
	done
fi
PKI="$DIR/pki"
mkdir -p "$PKI"
chmod 0700 "$DIR" "$PKI"
log "state directory: $DIR"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# --- certificates -------------------------------------------------------------------------------
ec_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
# sign NAME SUBJECT EXTENSIONS: NAME.key + NAME.crt signed by the CA, valid one year.
sign() {
	local name="$1" subject="$2" ext="$3"
	ec_key "$PKI/$name.key"
	printf '%s\n' "$ext" >"$PKI/$name.ext"
	openssl req -new -key "$PKI/$name.key" -subj "$subject" -out "$PKI/$name.csr"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
		-CAcreateserial -CAserial "$PKI/ca.srl" -days 365 -sha256 -extfile "$PKI/$name.ext" \
		-out "$PKI/$name.crt" 2>/dev/null
	rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}
t0="$(now)"
(
	umask 077
	ec_key "$PKI/ca.key"
	openssl req -x509 -new -key "$PKI/ca.key" -sha256 -days 365 -subj "/CN=vsphere-provider-kube-ca" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
		-out "$PKI/ca.crt"
	sign apiserver "/CN=kube-apiserver" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
	sign admin "/O=system:masters/CN=admin" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null
	openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"
) || die "openssl failed"
log "certificates and service-account keys in $PKI ($(since "$t0")s)"

# --- ports --------------------------------------------------------------------------------------
# free_port: a port nothing listens on now (another process may still take it before we do; then the
# server fails to start and says so in its log).
taken_ports=" "
free_port() {
	local port _
	for _ in $(seq 1 200); do
		port=$((20000 + RANDOM % 40000))
		case "$taken_ports" in *" $port "*) continue ;; esac
		if command -v ss >/dev/null 2>&1; then
			ss -Htan "sport = :$port" 2>/dev/null | grep -q . && continue
		elif (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			continue
		fi
		taken_ports+="$port "
		echo "$port"
		return 0
	done
	die "no free port found"
}
ETCD_PORT="$(free_port)"
taken_ports+="$ETCD_PORT "
ETCD_PEER_PORT="$(free_port)"
taken_ports+="$ETCD_PEER_PORT "
API_PORT="$(free_port)"
ETCD_URL="http://127.0.0.1:$ETCD_PORT"
SERVER="https://127.0.0.1:$API_PORT"

# --- process handling ---------------------------------------------------------------------------
ETCD_PID=""
API_PID=""
ETCD_DATA=""
# stop_pid PID NAME: TERM, up to 15 s for a clean exit, then KILL.
stop_pid() {
	local pid="$1" name="$2" _
	if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then return 0; fi
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 150); do
		kill -0 "$pid" 2>/dev/null || { log "stopped $name (pid $pid)"; return 0; }
		sleep 0.1
	done
	log "$name (pid $pid) ignored SIGTERM for 15s; killing it"
	kill -KILL "$pid" 2>/dev/null || true
}
# teardown KEEP_DIR: stop both, drop etcd's data, and the state directory unless KEEP_DIR is 1.
teardown() {
	local keep="$1"
	stop_pid "$API_PID" kube-apiserver
	stop_pid "$ETCD_PID" etcd
	wait 2>/dev/null || true
	if [ -n "$ETCD_PID" ] && kill -0 "$ETCD_PID" 2>/dev/null; then
		log "etcd (pid $ETCD_PID) is still running: its data $ETCD_DATA is kept"
	elif [ -n "$ETCD_DATA" ]; then
		rm -rf "$ETCD_DATA"
	fi
	rm -f "$DIR/etcd.pid" "$DIR/kube-apiserver.pid" "$DIR/down.sh"
	if [ "$keep" = 0 ] && [ "$CREATED_DIR" = 1 ]; then
		rm -rf "$DIR"
		log "removed $DIR"
	else
		log "state directory kept: $DIR"
	fi
}
on_failure() {
	local rc=$?
	trap - EXIT INT TERM HUP
	for name in etcd kube-apiserver; do
		if [ -s "$DIR/$name.log" ]; then
			log "last lines of $DIR/$name.log:"
			tail -n 15 "$DIR/$name.log" >&2
		fi
	done
	teardown 1
	exit "$((rc == 0 ? 1 : rc))"
}
trap on_failure EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# alive PID NAME: die (showing the log) when the process has exited.
alive() { kill -0 "$1" 2>/dev/null || die "$2 exited during startup (log: $DIR/$2.log)"; }

# --- etcd ---------------------------------------------------------------------------------------
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
	ETCD_DATA="$(mktemp -d /dev/shm/vsphere-provider-etcd.XXXXXX)"
else
	ETCD_DATA="$DIR/etcd-data"
	rm -rf "$ETCD_DATA"
	mkdir -p "$ETCD_DATA"
fi
chmod 0700 "$ETCD_DATA"
echo "$ETCD_DATA" >"$DIR/etcd-data-dir"
t0="$(now)"
# setsid: both servers get their own session, so a Ctrl-C at the terminal reaches only this script,
# which then stops the apiserver before etcd.
setsid "$ETCD_BIN" \
	--name=vsphere-provider \
	--data-dir="$ETCD_DATA" \
	--listen-client-urls="$ETCD_URL" \
	--advertise-client-urls="$ETCD_URL" \
	--listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster="vsphere-provider=http://127.0.0.1:$ETCD_PEER_PORT" \
	--unsafe-no-fsync \
	--logger=zap --log-level=warn \
	</dev/null >"$DIR/etcd.log" 2>&1 &
ETCD_PID=$!
echo "$ETCD_PID" >"$DIR/etcd.pid"
deadline=$((SECONDS + TIMEOUT))
until curl -fsS --max-time 2 "$ETCD_URL/health" 2>/dev/null | grep -q '"health":"true"'; do
	alive "$ETCD_PID" etcd
	[ "$SECONDS" -lt "$deadline" ] || die "etcd not healthy after ${TIMEOUT}s (log: $DIR/etcd.log)"
	sleep 0.1
done
log "etcd (pid $ETCD_PID) healthy at $ETCD_URL in $(since "$t0")s; data in $ETCD_DATA"

# --- audit --------------------------------------------------------------------------------------
AUDIT_ARGS=()
if [ "${#AUDIT_USERS[@]}" -gt 0 ]; then
	AUDIT_POLICY="$DIR/audit-policy.yaml"
	{
		echo "# Written by hack/kube/up.sh --audit-user: who is recorded, at the Metadata level."
		echo "apiVersion: audit.k8s.io/v1"
		echo "kind: Policy"
		echo "omitStages: [RequestReceived, ResponseStarted]"
		echo "rules:"
		echo "  - level: Metadata"
		echo "    users:"
		for u in "${AUDIT_USERS[@]}"; do echo "      - \"$u\""; done
		echo "  - level: None"
	} >"$AUDIT_POLICY"
fi
if [ -n "$AUDIT_POLICY" ]; then
	: >"$DIR/audit.log"
	AUDIT_ARGS=(--audit-policy-file="$AUDIT_POLICY" --audit-log-path="$DIR/audit.log"
		--audit-log-format=json --audit-log-mode=blocking --audit-log-maxsize=0)
	log "audit log: $DIR/audit.log (policy $AUDIT_POLICY)"
fi

# --- kube-apiserver -----------------------------------------------------------------------------
t0="$(now)"
setsid "$APISERVER_BIN" \
	--etcd-servers="$ETCD_URL" \
	--bind-address=127.0.0.1 \
	--advertise-address=127.0.0.1 \
	--secure-port="$API_PORT" \
	--cert-dir="$PKI" \
	--tls-cert-file="$PKI/apiserver.crt" \
	--tls-private-key-file="$PKI/apiserver.key" \
	--client-ca-file="$PKI/ca.crt" \
	--authorization-mode=RBAC \
	--service-account-issuer="$SERVER" \
	--service-account-key-file="$PKI/sa.pub" \
	--service-account-signing-key-file="$PKI/sa.key" \
	--disable-admission-plugins=ServiceAccount \
	--service-cluster-ip-range=10.0.0.0/24 \
	--allow-privileged=true \
	--endpoint-reconciler-type=none \
	"${AUDIT_ARGS[@]}" \
	"${EXTRA_APISERVER_ARGS[@]}" \
	</dev/null >"$DIR/kube-apiserver.log" 2>&1 &
API_PID=$!
echo "$API_PID" >"$DIR/kube-apiserver.pid"
deadline=$((SECONDS + TIMEOUT))
curl_admin=(curl -sS --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")
until [ "$("${curl_admin[@]}" "$SERVER/readyz" 2>/dev/null)" = ok ]; do
	alive "$API_PID" kube-apiserver
	alive "$ETCD_PID" etcd
	if [ "$SECONDS" -ge "$deadline" ]; then
		"${curl_admin[@]}" "$SERVER/readyz?verbose" 2>&1 | grep -v '\[+\]' >&2 || true
		die "kube-apiserver not ready after ${TIMEOUT}s (log: $DIR/kube-apiserver.log)"
	fi
	sleep 0.1
done
READY_SECONDS="$(since "$t0")"
log "kube-apiserver (pid $API_PID) ready at $SERVER in ${READY_SECONDS}s (start to /readyz ok)"

# --- kubeconfigs --------------------------------------------------------------------------------
b64() { base64 -w0 <"$1"; }
# write_kubeconfig FILE USER NAMESPACE USER-FIELDS
write_kubeconfig() {
	local file="$1" user="$2" ns="$3" fields="$4"
	(
		umask 077
		cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: vsphere-provider-kube
    cluster:
      server: $SERVER
      certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
  - name: $user
    user:
$fields
contexts:
  - name: $user
    context:
      cluster: vsphere-provider-kube
      user: $user
      namespace: $ns
current-context: $user
EOF
	)
}
ADMIN_KUBECONFIG="$DIR/admin.kubeconfig"
write_kubeconfig "$ADMIN_KUBECONFIG" admin default "      client-certificate-data: $(b64 "$PKI/admin.crt")
      client-key-data: $(b64 "$PKI/admin.key")"

kadmin() { "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
for sa in "${SAS[@]}"; do
	ns="${sa%%/*}"
	kadmin get namespace "$ns" >/dev/null 2>&1 || kadmin create namespace "$ns" >&2
done
for p in "${APPLY[@]}"; do
	if [ -d "$p" ] && [ -f "$p/kustomization.yaml" ]; then
		log "kubectl apply -k $p"
		kadmin apply -k "$p" >&2 || die "kubectl apply -k $p failed"
	else
		log "kubectl apply -f $p"
		kadmin apply -f "$p" >&2 || die "kubectl apply -f $p failed"
	fi
done
if [ "${#APPLY[@]}" -gt 0 ] && [ -n "$(kadmin get crd -o name 2>/dev/null)" ]; then
	kadmin wait --for=condition=Established crd --all --timeout="${TIMEOUT}s" >&2 ||
		die "CRDs not Established after ${TIMEOUT}s"
fi
SA_KUBECONFIGS=()
for sa in "${SAS[@]}"; do
	ns="${sa%%/*}"
	name="${sa#*/}"
	kadmin -n "$ns" get serviceaccount "$name" >/dev/null 2>&1 || kadmin -n "$ns" create serviceaccount "$name" >&2
	token="$(kadmin -n "$ns" create token "$name" --duration="$TOKEN_DURATION")" ||
		die "kubectl create token $name -n $ns failed"
	write_kubeconfig "$DIR/$name.kubeconfig" "system:serviceaccount:$ns:$name" "$ns" "      token: $token"
	SA_KUBECONFIGS+=("$DIR/$name.kubeconfig")
	log "ServiceAccount $ns/$name: $DIR/$name.kubeconfig (token valid $TOKEN_DURATION)"
done

# --- hand over ----------------------------------------------------------------------------------
print_result() {
	echo "$ADMIN_KUBECONFIG"
	for k in "${SA_KUBECONFIGS[@]}"; do echo "$k"; done
	echo "export KUBECONFIG=$ADMIN_KUBECONFIG"
}

if [ "$MODE" = background ]; then
	# down.sh knows them by /proc/PID/exe: make sure that is what it will read.
	for name_pid_exe in "etcd $ETCD_PID $ETCD_EXE" "kube-apiserver $API_PID $APISERVER_EXE"; do
		read -r name pid exe <<<"$name_pid_exe"
		[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ] ||
			die "$name (pid $pid) runs $(readlink "/proc/$pid/exe" 2>/dev/null || echo '?'), not $exe: down.sh could not stop it"
	done
	{
		cat <<'EOF'
#!/usr/bin/env bash
# Stops the etcd and kube-apiserver that hack/kube/up.sh --background started for this directory,
# then removes etcd's data. Never under a running process: when a pid file names another program,
# a server does not stop, or anything still has the data directory on its command line, the data,
# the pid files and this script stay, and it exits 1 naming the pid. The directory itself
# (certificates, logs) is kept.
set -euo pipefail
EOF
		printf 'DIR=%q\nDATA=%q\nAPISERVER_EXE=%q\nETCD_EXE=%q\n' \
			"$DIR" "$ETCD_DATA" "$APISERVER_EXE" "$ETCD_EXE"
		cat <<'EOF'
refused=0
refuse() {
	echo "down.sh: $*" >&2
	refused=1
}
# running PID: alive and not a zombie (a zombie answers kill -0 but holds nothing: where nobody
# reaps orphans, etcd stays one after it exits).
running() {
	local stat
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	stat="${stat##*) }"
	[ "${stat%% *}" != Z ] && [ "${stat%% *}" != X ]
}
# gone PID TENTHS: wait up to TENTHS tenths of a second for PID to exit.
gone() {
	local _
	for _ in $(seq 1 "$2"); do
		running "$1" || return 0
		sleep 0.1
	done
	! running "$1"
}
# stop NAME EXE: stop the process DIR/NAME.pid names, if it still runs EXE.
stop() {
	local name="$1" want="$2" pidfile="$DIR/$1.pid" pid exe
	[ -f "$pidfile" ] || return 0
	pid="$(cat "$pidfile")"
	if ! [[ "$pid" =~ ^[0-9]+$ ]]; then
		refuse "$pidfile holds '$pid', not a pid"
		return 0
	fi
	if ! running "$pid"; then
		echo "$name (pid $pid) had already exited" >&2
		rm -f "$pidfile"
		return 0
	fi
	exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
	if [ "$exe" != "$want" ]; then
		refuse "pid $pid (from $pidfile) runs ${exe:-a program that cannot be read}, not $want: not stopped"
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	if ! gone "$pid" 150; then
		echo "$name (pid $pid) ignored SIGTERM for 15s; killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
		gone "$pid" 50 || true
	fi
	if running "$pid"; then
		refuse "$name (pid $pid, $want) is still running after SIGKILL"
		return 0
	fi
	echo "stopped $name (pid $pid)" >&2
	rm -f "$pidfile"
}
stop kube-apiserver "$APISERVER_EXE"
stop etcd "$ETCD_EXE"
# Whatever the pid files say, nothing may still use the data (etcd started again by hand with
# it, or a pid file lost).
for cmdline in /proc/[0-9]*/cmdline; do
	pid="${cmdline#/proc/}"
	pid="${pid%/cmdline}"
	{ [ "$pid" != "$$" ] && running "$pid"; } || continue
	uses=0
	# (A process gone since the glob cannot be opened: quietly not a user.)
	while IFS= read -r -d '' arg; do
		if [ "$arg" = "--data-dir=$DATA" ] || [ "$arg" = "$DATA" ]; then
			uses=1
			break
		fi
	done 2>/dev/null <"$cmdline" || true
	[ "$uses" = 0 ] || refuse "pid $pid ($(readlink "/proc/$pid/exe" 2>/dev/null || echo '?')) still uses $DATA"
done
if [ "$refused" = 1 ]; then
	echo "down.sh: kept $DATA, the pid files left and $DIR/down.sh; stop the process(es) named above (or fix the pid file), then run $DIR/down.sh again" >&2
	exit 1
fi
rm -rf "$DATA"
echo "removed etcd data $DATA" >&2
rm -f "$DIR/down.sh"
EOF
	} >"$DIR/down.sh"
	chmod +x "$DIR/down.sh"
	trap - EXIT INT TERM HUP
	log "running in the background; stop with: $DIR/down.sh"
	print_result
	exit 0
fi

trap - EXIT
stopping=0
on_stop() {
	stopping=1
}
trap on_stop INT TERM HUP
log "running; Ctrl-C stops both (logs: $DIR/etcd.log, $DIR/kube-apiserver.log)"
print_result
while [ "$stopping" = 0 ]; do
	if ! kill -0 "$API_PID" 2>/dev/null || ! kill -0 "$ETCD_PID" 2>/dev/null; then
		log "a server exited on its own; see $DIR/kube-apiserver.log and $DIR/etcd.log"
		teardown 1
		exit 1
	fi
	sleep 1 &
	wait $! 2>/dev/null || true
done
trap - INT TERM HUP
log "stopping"
teardown 0
