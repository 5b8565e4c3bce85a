#!/usr/bin/env bash
# Smoke test of hack/workload-sim against our vcsim, with kubectl on the workload API server:
#   1. vcsim (hack/vcsim; $VCSIM_BIN or hack/vcsim/build.sh) and workload-sim on free ports;
#   2. VM A gets CABPK-shaped `kubeadm init` cloud-config (fresh CA and etcd CA, control plane
#      endpoint 127.0.0.1:<free port>) + metadata, is powered on → Node, static pods, kubeadm-config
#      appear through https://127.0.0.1:<port> (TLS verified against the CA);
#   3. VM B gets broken user data → no Node, the refusal is logged;
#   4. a bootstrap token Secret is created in the workload cluster, VM C gets a worker `kubeadm
#      join` → worker Node; VM D a control plane join → 2 etcd members, read as KCP does (kubectl
#      port-forward to etcd-<node>:2379 through the workload API server, TLS SNI etcd-<node>);
#   5. VM A powered off → its Node Ready=Unknown with the unreachable NoExecute taint;
#   6. VM C destroyed → its Node is gone; VM A (the etcd leader) destroyed → its Node, pods and
#      member are gone, demo-cp-1 leads and serves the API.
# kubectl: $KUBECTL, else a cached build under ~/.cache/vsphere-provider/kube/, else
# hack/kube/build.sh. Set KEEP=1 to keep the work directory. Exits non-zero on the first failure.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/wsim-smoke.XXXXXX")"
VCSIM_PID=""
SIM_PID=""
cleanup() {
	local rc=$?
	[ -z "$SIM_PID" ] || kill "$SIM_PID" 2>/dev/null || true
	[ -z "$VCSIM_PID" ] || kill "$VCSIM_PID" 2>/dev/null || true
	wait 2>/dev/null || true
	if [ "$rc" -ne 0 ] && [ -s "$work/sim.log" ]; then
		log "workload-sim log:"
		tail -n 40 "$work/sim.log" >&2
	fi
	if [ "${KEEP:-}" = 1 ]; then log "kept $work"; else rm -rf "$work"; fi
	exit "$rc"
}
trap cleanup EXIT

step() { printf '== %s\n' "$*"; }
ok() { printf '   ok: %s\n' "$*"; }

# --- binaries
SIM="$("$REPO_ROOT/hack/workload-sim/build.sh" | tail -n1)/workload-sim"
[ -n "${VCSIM_BIN:-}" ] || VCSIM_BIN="$("$REPO_ROOT/hack/vcsim/build.sh" | tail -n1)"
if [ -z "${KUBECTL:-}" ]; then
	KUBECTL="$(ls -t "${XDG_CACHE_HOME:-$HOME/.cache}"/vsphere-provider/kube/*/kubectl 2>/dev/null | head -n1 || true)"
	[ -n "$KUBECTL" ] || KUBECTL="$("$REPO_ROOT/hack/kube/build.sh" | tail -n1)/kubectl"
fi
command -v openssl >/dev/null || die "openssl is needed"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# --- vcsim and the simulator
step "vcsim and workload-sim"
vcsim_start "$work"
PORT="$(free_port)"
"$SIM" --vcenter "$VCSIM_URL" --listen-host 127.0.0.1 --ports "$PORT" --debug-addr 127.0.0.1:0 --poll 500ms \
	</dev/null >"$work/sim.out" 2>"$work/sim.log" &
SIM_PID=$!
for _ in $(seq 100); do
	grep -q '^ready ' "$work/sim.out" 2>/dev/null && break
	kill -0 "$SIM_PID" 2>/dev/null || die "workload-sim exited: $(tail -n5 "$work/sim.log")"
	sleep 0.1
done
grep -q '^ready ' "$work/sim.out" || die "workload-sim not ready"
DEBUG="$(sed -n 's/^ready debug=//p' "$work/sim.out")"
ok "vcsim $VCSIM_URL, workload-sim $(cat "$work/sim.out"), control plane port $PORT"

vm() { "$SIM" vm --vcenter "$VCSIM_URL" "$@"; }
b64file() { base64 -w0 >"$1"; }

# --- PKI as CABPK generates it (RSA CAs)
for ca in ca etcd-ca; do
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/$ca.key" -out "$work/$ca.crt" \
		-subj "/CN=$ca" -days 1 -addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,digitalSignature,keyEncipherment 2>/dev/null
done
CA_HASH="sha256:$(openssl x509 -in "$work/ca.crt" -pubkey -noout | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)"
ind() { sed 's/^/      /' "$1"; }
pki_files() {
	local f
	for f in "ca.crt:/etc/kubernetes/pki/ca.crt" "ca.key:/etc/kubernetes/pki/ca.key" \
		"etcd-ca.crt:/etc/kubernetes/pki/etcd/ca.crt" "etcd-ca.key:/etc/kubernetes/pki/etcd/ca.key"; do
		printf -- "-   path: %s\n    owner: root:root\n    permissions: '0600'\n    content: |\n" "${f#*:}"
		ind "$work/${f%%:*}"
	done
}
metadata() { printf 'instance-id: %s\nlocal-hostname: %s\nwait-on-network:\n  ipv4: true\n  ipv6: false\n' "$1" "$1"; }

{
	printf '## template: jinja\n#cloud-config\n\nwrite_files:\n'
	pki_files
	cat <<EOF
-   path: /run/kubeadm/kubeadm.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiServer: {}
      apiVersion: kubeadm.k8s.io/v1beta4
      clusterName: demo
      controlPlaneEndpoint: 127.0.0.1:$PORT
      controllerManager: {}
      dns: {}
      etcd: {}
      kind: ClusterConfiguration
      kubernetesVersion: v1.33.4
      networking: {}
      scheduler: {}

      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: InitConfiguration
      localAPIEndpoint: {}
      nodeRegistration:
        imagePullPolicy: IfNotPresent
        name: '{{ ds.meta_data.local_hostname }}'
runcmd:
  - 'kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'
EOF
} >"$work/init.yaml"
cat >"$work/join.yaml" <<EOF
## template: jinja
#cloud-config

write_files:
-   path: /run/kubeadm/kubeadm-join-config.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      caCertPath: /etc/kubernetes/pki/ca.crt
      discovery:
        bootstrapToken:
          apiServerEndpoint: 127.0.0.1:$PORT
          caCertHashes:
          - $CA_HASH
          token: abcdef.0123456789abcdef
      kind: JoinConfiguration
      nodeRegistration:
        name: '{{ ds.meta_data.local_hostname }}'
runcmd:
  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete
EOF

{
	printf '## template: jinja\n#cloud-config\n\nwrite_files:\n'
	pki_files
	sed -n '/^-   path: \/run\/kubeadm/,$p' "$work/join.yaml" | sed 's|^      caCertPath: .*|&\n      controlPlane:\n        localAPIEndpoint: {}|'
} >"$work/cp-join.yaml"

# etcd_members MEMBER: MemberList/Status as KCP asks them: a port-forward through the workload API
# server to kube-system/etcd-MEMBER:2379, then TLS with SNI etcd-MEMBER against the etcd CA.
etcd_members() {
	local pf="$work/pf-$1.out" pfpid lp="" _
	k -n kube-system port-forward "pod/etcd-$1" :2379 >"$pf" 2>&1 &
	pfpid=$!
	for _ in $(seq 50); do
		lp="$(sed -n 's/^Forwarding from 127.0.0.1:\([0-9]*\) -> 2379$/\1/p' "$pf")"
		[ -z "$lp" ] || break
		sleep 0.1
	done
	[ -n "$lp" ] || { kill "$pfpid"; die "kubectl port-forward to etcd-$1 failed: $(cat "$pf")"; }
	"$SIM" etcd --address "127.0.0.1:$lp" --member "etcd-$1" --ca "$work/etcd-ca.crt" || { kill "$pfpid"; die "etcd through the port-forward failed"; }
	kill "$pfpid" 2>/dev/null || true
	wait "$pfpid" 2>/dev/null || true
}

# give VM USERDATA_FILE HOSTNAME [USERDATA_ENCODING]: power off, write guestinfo, power on.
give() {
	local name="$1" ud="$2" host="$3" enc="${4:-base64}"
	vm --name "$name" --power off
	if [ "$enc" = gzip+base64 ]; then gzip -c "$ud" | b64file "$work/$name.ud"; else b64file "$work/$name.ud" <"$ud"; fi
	metadata "$host" | b64file "$work/$name.md"
	vm --name "$name" --set "guestinfo.userdata=@$work/$name.ud" --set "guestinfo.userdata.encoding=$enc" \
		--set "guestinfo.metadata=@$work/$name.md" --set guestinfo.metadata.encoding=base64 --power on
}

cat >"$work/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster:
    server: https://127.0.0.1:$PORT
    certificate-authority: $work/ca.crt
users:
- name: smoke
  user:
    token: no-authentication-in-the-in-memory-server
contexts:
- name: demo
  context: {cluster: demo, user: smoke}
current-context: demo
EOF
k() { "$KUBECTL" --kubeconfig "$work/kubeconfig" --request-timeout 5s "$@"; }
# until_ok SECONDS CMD...: retries CMD every 0.5 s.
until_ok() {
	local end=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.5
	done
}

# --- 2. kubeadm init
VM_A=DC0_H0_VM0 VM_B=DC0_H0_VM1 VM_C=DC0_C0_RP0_VM0 VM_D=DC0_C0_RP0_VM1
step "kubeadm init on $VM_A (gzip+base64 user data)"
give "$VM_A" "$work/init.yaml" demo-cp-0 gzip+base64
UUID_A="$(vm --name "$VM_A" --uuid)"
until_ok 30 k get node demo-cp-0 || die "no Node demo-cp-0 through https://127.0.0.1:$PORT"
pid="$(k get node demo-cp-0 -o jsonpath='{.spec.providerID}')"
[ "$pid" = "vsphere://$UUID_A" ] || die "providerID $pid, want vsphere://$UUID_A"
ok "Node demo-cp-0 providerID $pid (TLS verified against the cloud-config's CA)"
ready="$(k get node demo-cp-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key} {.status.nodeInfo.kubeletVersion}')"
[ "$ready" = "True node-role.kubernetes.io/control-plane v1.33.4" ] || die "node status: $ready"
ok "Ready=True, control-plane taint, kubelet v1.33.4"
pods="$(k -n kube-system get pods -l tier=control-plane -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase} {end}')"
for c in etcd kube-apiserver kube-controller-manager kube-scheduler; do
	[[ " $pods" == *" $c-demo-cp-0=Running"* ]] || die "no running $c-demo-cp-0 in: $pods"
done
ok "static pods: $pods"
k -n kube-system get configmap kubeadm-config -o jsonpath='{.data.ClusterConfiguration}' | grep -q "clusterName: demo" ||
	die "kube-system/kubeadm-config has no ClusterConfiguration"
k get clusterrolebinding kubeadm:get-nodes >/dev/null || die "no kubeadm:get-nodes binding"
ok "kube-system/kubeadm-config and kubeadm:get-nodes"
curl -fsS "http://$DEBUG/listeners" | grep -q "wsim/demo" || die "debug server lists no wsim/demo"
ok "debug $DEBUG/listeners: $(curl -fsS "http://$DEBUG/listeners" | tr -d '\n ')"

# --- 3. broken user data
step "broken user data on $VM_B"
printf 'not a cloud-config at all\n' >"$work/broken.txt"
give "$VM_B" "$work/broken.txt" demo-broken
refusal="vm $VM_B .*does not boot: user data is not a #cloud-config"
until_ok 10 grep -q "$refusal" "$work/sim.log" || die "no refusal logged for $VM_B"
sleep 1
! k get node demo-broken >/dev/null 2>&1 || die "Node demo-broken exists"
ok "$(grep -m1 "$refusal" "$work/sim.log" | sed 's/^.*does not boot: /refused: /')"

# --- 4. worker join
step "kubeadm join (worker) on $VM_C"
give "$VM_C" "$work/join.yaml" demo-md-0
waiting="vm $VM_C .*bootstrap token abcdef"
until_ok 10 grep -q "$waiting" "$work/sim.log" || die "the join did not wait for its bootstrap token"
ok "join waits for its token: $(grep -m1 "$waiting" "$work/sim.log" | sed 's/^.*does not boot: //')"
k -n kube-system create secret generic bootstrap-token-abcdef --type bootstrap.kubernetes.io/token \
	--from-literal=token-id=abcdef --from-literal=token-secret=0123456789abcdef \
	--from-literal=usage-bootstrap-authentication=true >/dev/null
until_ok 15 k get node demo-md-0 || die "no Node demo-md-0"
taints="$(k get node demo-md-0 -o jsonpath='{.spec.taints}')"
[ -z "$taints" ] || die "worker has taints: $taints"
ok "worker Node demo-md-0 ($(k get node demo-md-0 -o jsonpath='{.spec.providerID}'))"

# --- 4b. control plane join, etcd through the port-forward
step "kubeadm join --control-plane on $VM_D"
give "$VM_D" "$work/cp-join.yaml" demo-cp-1
until_ok 15 k get node demo-cp-1 || die "no Node demo-cp-1"
k get node demo-cp-1 -o jsonpath='{.metadata.labels}' | grep -q node-role.kubernetes.io/control-plane || die "demo-cp-1 has no control-plane label"
members="$(etcd_members demo-cp-1)"
[ "$(grep -c '^member ' <<<"$members")" = 2 ] && grep -q '^member demo-cp-0 .* leader$' <<<"$members" ||
	die "etcd members: $members"
ok "etcd via port-forward + SNI etcd-demo-cp-1: $(tr '\n' ';' <<<"$members")"

# --- 5. power off
step "power off $VM_A"
vm --name "$VM_A" --power off
cond() { [ "$(k get node demo-cp-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = Unknown ]; }
until_ok 10 cond || die "Node demo-cp-0 not Ready=Unknown after power-off"
k get node demo-cp-0 -o jsonpath='{.spec.taints[?(@.effect=="NoExecute")].key}' | grep -q node.kubernetes.io/unreachable ||
	die "no unreachable:NoExecute taint"
ok "demo-cp-0 Ready=Unknown, taints $(k get node demo-cp-0 -o jsonpath='{.spec.taints[*].key}')"

# --- 6. destroy
step "destroy $VM_C"
vm --name "$VM_C" --destroy
gone() { ! k get node demo-md-0 >/dev/null 2>&1; }
until_ok 10 gone || die "Node demo-md-0 still there after destroy"
ok "Node demo-md-0 removed"

step "destroy $VM_A (the etcd leader; powered off)"
vm --name "$VM_A" --destroy
gone_a() { ! k get node demo-cp-0 >/dev/null 2>&1; }
until_ok 10 gone_a || die "Node demo-cp-0 still there after destroy"
left="$(k -n kube-system get pods -o jsonpath='{.items[*].metadata.name}')"
[[ "$left" != *demo-cp-0* ]] || die "pods of demo-cp-0 left: $left"
members="$(etcd_members demo-cp-1)"
[ "$members" = "$(grep '^member demo-cp-1 ' <<<"$members")" ] && grep -q ' leader$' <<<"$members" || die "etcd members: $members"
ok "demo-cp-0 Node and pods gone; API server still served by demo-cp-1; etcd: $members"
k get nodes -o wide
step "smoke passed"
