#!/usr/bin/env bash
# The provider as it is deployed: `vsphere-provider run` against Kubernetes' own kube-apiserver
# (etcd + kube-apiserver v1.37 on 127.0.0.1, hack/kube/up.sh) and a vCenter simulator (vcsim),
# everything applied with kubectl as a user would:
#   1. the API server with config/crd and config/rbac, unmodified; the controller's ServiceAccount;
#   2. vcsim with the samples' topology (3 compute clusters), tagged by the admin;
#   3. `vsphere-provider run` as that ServiceAccount (its token, so exactly config/rbac's role is
#      enforced), serving its admission webhooks on 127.0.0.1;
#   4. config/webhook and config/crd's conversion webhook registered with the API server
#      (clientConfig.url + caBundle instead of the Service and cert-manager: a local overlay, as
#      tests/realapi_controller.rs does);
#   5. config/samples (kubectl apply -k): zones verified and published as failure domains, the
#      ControlPlaneMachineSet creating three Machines in the three zones, a worker Machine;
#   6. waits, with progress, until every zone is ready and every Machine Running, then shows
#      `kubectl get vspheredeploymentzones,vsphereclusters,machines,controlplanemachinesets`,
#      the failure domains, the VMs in vCenter and the events.
#
# What is simulated: there are no kubelets, so this script plays them (simulate_kubelets in
# hack/lib.sh): once a Machine has a VM (providerID), it registers a Node with that providerID and
# posts Ready=True, which is what makes the Machine Running. vCenter is vcsim. There is no
# kube-controller-manager (no garbage collection) and no scheduler.
#
#   hack/demo-cluster.sh [--keep]    --keep: leave everything running until Ctrl-C
#
# Safe to re-run; everything it starts is stopped on exit.
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

keep=""
case "${1:-}" in
--keep) keep=1 ;;
"") ;;
-h | --help) sed -n '2,24p' "$0"; exit 0 ;;
*) die "unknown argument $1 (see --help)" ;;
esac

command -v jq >/dev/null 2>&1 || ensure_apt_packages jq
command -v openssl >/dev/null 2>&1 || ensure_apt_packages openssl
export VCSIM_BIN
VCSIM_BIN="$(hack/setup.sh | tail -n1)"
export PROVIDER_BIN
PROVIDER_BIN="$(provider_bin)"

cluster_session demo-cluster

banner "Kubernetes' own kube-apiserver + etcd on 127.0.0.1 (hack/kube/up.sh): config/crd and config/rbac applied"
kube_up "$work/kube" config/crd
echo "API server: $(k config view -o jsonpath='{.clusters[0].cluster.server}') ($(k version -o json | jq -r .serverVersion.gitVersion))"
echo "controller identity: $(k --kubeconfig "$CONTROLLER_KUBECONFIG" auth whoami -o jsonpath='{.status.userInfo.username}')"
k get crds

banner "vcsim: 1 datacenter, 3 clusters x 3 hosts, 1 pool each, 2 datastores (the samples' topology)"
vcsim_start "$work" -cluster 3 -host 3 -pool 1 -ds 2 -vm 1
echo "vcsim at $VCSIM_URL"
vcsim_tag_samples "$PROVIDER_BIN" "$VCSIM_URL" demo-admin demo-password

banner "vsphere-provider run, as the ServiceAccount, with its admission webhooks on 127.0.0.1"
webhook_cert "$work/certs"
controller_start "$work/controller.log" --webhook-addr 127.0.0.1:0 --webhook-cert-dir "$work/certs"
webhook_addr="$(sed -n 's/.*admission webhooks listening.*addr=\([0-9.:]*\).*/\1/p' "$work/controller.log" | head -n1)"
[ -n "$webhook_addr" ] || die "the controller did not say where its webhooks listen"
grep -E 'became leader|caches synced|controllers started|webhooks listening' "$work/controller.log" | cut -c1-160

banner "config/webhook and config/crd's conversion webhook registered with the API server, pointed at https://$webhook_addr"
apply_webhooks "$webhook_addr"
apply_conversion "$webhook_addr"
k get mutatingwebhookconfigurations,validatingwebhookconfigurations

banner "config/samples (kubectl apply -k), their vCenter server set to vcsim's URL"
# The samples name the server 127.0.0.1 (port 443); vcsim listens on a free port instead.
mkdir -p "$work/samples"
cp config/samples/*.yaml "$work/samples/"
sed -i "s#server: 127.0.0.1\$#server: $VCSIM_URL#" "$work/samples"/*.yaml
bind_secrets default # the samples' namespace, opened to the manager as an admin would
k apply -k "$work/samples"

banner "waiting for the zones to be ready and every Machine to run (this script plays the kubelets)"
deadline=$((SECONDS + 300))
while :; do
	zones="$(k get vspheredeploymentzones -o json | jq -r '[.items[] | select(.status.ready == true)] | length')"
	machines="$(k get machines.machine.openshift.io -A -o json)"
	total="$(jq '.items | length' <<<"$machines")"
	running="$(jq '[.items[] | select(.status.phase == "Running")] | length' <<<"$machines")"
	printf '  %3ss  zones ready %s/3  machines Running %s/%s  (%s)\n' "$SECONDS" "$zones" "$running" "$total" \
		"$(jq -r '[.items[] | "\(.metadata.name)=\(.status.phase // "-")"] | join(" ")' <<<"$machines")"
	for node in $(simulate_kubelets default); do echo "  simulated kubelet: Node $node registered, Ready=True"; done
	if [ "$zones" = 3 ] && [ "$total" -ge 4 ] && [ "$running" = "$total" ]; then break; fi
	[ "$SECONDS" -lt "$deadline" ] || die "not all zones ready and machines Running after 300 s"
	sleep 2
done

banner "kubectl get vspheredeploymentzones,vsphereclusters,machines,controlplanemachinesets"
k get vspheredeploymentzones,vsphereclusters,machines.machine.openshift.io,controlplanemachinesets -A

banner "the failure domains: VSphereFailureDomains and what VSphereCluster demo publishes"
k get vspherefailuredomains
k get vsphereclusters demo -n default -o json | jq -c '.status.failureDomains'

banner "Nodes (registered by this script standing in for kubelets) and the VMs in vCenter"
k get nodes
VSPHERE_USERNAME=demo-admin VSPHERE_PASSWORD=demo-password "$PROVIDER_BIN" inventory --server "$VCSIM_URL" 2>/dev/null |
	grep -E 'vm/demo-' || true

banner "kubectl get events -n default"
k get events -n default --sort-by=.lastTimestamp | tail -n 25

banner "the validating webhook at work: a failure domain whose region is a HostGroup (the CRD allows it, the webhook does not)"
if out="$(k apply -f - 2>&1 <<'YAML'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: VSphereFailureDomain
metadata: {name: zone-bad}
spec:
  region: {name: region-a, type: HostGroup, tagCategory: k8s-region}
  zone: {name: zone-x, type: ComputeCluster, tagCategory: k8s-zone}
  topology: {datacenter: DC0, computeCluster: DC0_C0}
YAML
)"; then
	die "the API server accepted a HostGroup region: $out"
fi
echo "$out"
grep -q 'admission webhook' <<<"$out" || die "refused, but not by the webhook: $out"

banner "the controller was never refused by RBAC"
if grep -qiE 'forbidden| 403' "$work/controller.log"; then
	grep -iE 'forbidden| 403' "$work/controller.log" | head -5
	die "the controller was refused something"
fi
echo "no 'Forbidden' / 403 in its log ($(wc -l <"$work/controller.log") lines)"

if [ -n "$keep" ]; then
	banner "running until Ctrl-C: export KUBECONFIG=$KUBECONFIG (kubectl: $KUBECTL)"
	while kill -0 "$CONTROLLER_PID" 2>/dev/null; do sleep 1; done
fi
banner "done"
