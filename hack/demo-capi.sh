#!/usr/bin/env bash
# A whole Cluster API cluster on vcsim, for a person to watch: Cluster API v1.14.2's own
# controllers (core, kubeadm bootstrap, kubeadm control plane) and vsphere-provider as processes
# against Kubernetes' own kube-apiserver, `clusterctl init` from the offline repository, vcsim with
# three compute clusters as three zones, and the workload-cluster simulator (hack/workload-sim)
# that "boots" a VM into a Node only from the guestinfo the provider wrote.
#
# It runs the flow of tests/capi_workload_cluster.rs, printing each step:
#   1. three zones (VSphereFailureDomain + VSphereDeploymentZone, autoConfigure) verified;
#   2. CAPV v1.17's default cluster template, unchanged (variables only), with
#      `failureDomainSelector: {}` and one MachineDeployment per zone: KubeadmControlPlane of 3,
#      one control plane Machine per failure domain, a worker in each zone;
#   3. a rollout of the control plane (a new VSphereMachineTemplate, numCPUs 4), one at a time;
#   4. a MachineHealthCheck; one control plane VM powered off in vcsim -> remediated in its zone;
#      two off -> held back;
#   5. every VM of zone-2 powered off -> quorum kept, the control plane machine replaced;
#   then `clusterctl describe cluster` and a table Machine -> zone -> VM -> host;
#   6. the Cluster deleted: every VM destroyed, the zones left in place.
# Every step is asserted: this is also the end-to-end test (tests/capi_workload_cluster.rs), and
# hack/test.sh runs it among the demos.
#
# What is simulated: the guests (cloud-init, kubeadm, kubelet, etcd) by hack/workload-sim; no
# kube-controller-manager. vCenter is vcsim, over HTTPS with a pinned self-signed certificate.
#
#   hack/demo-capi.sh [--keep]    --keep: stop before step 6 and leave everything running until
#                                 Ctrl-C, printing how to reach the management cluster, the
#                                 workload cluster and vcsim
#
# Needs the builds hack/test.sh makes (cached after the first run: Cluster API ~10 min cold, the
# simulator 3-7 min more); runs about 5 minutes after that. Everything it starts stops on exit.
set -euo pipefail
# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

keep=""
case "${1:-}" in
--keep) keep=1 ;;
"") ;;
-h | --help) sed -n '2,30p' "$0"; exit 0 ;;
*) die "unknown argument $1 (see --help)" ;;
esac

if [ -d "$HOME/.cargo/bin" ]; then PATH="$HOME/.cargo/bin:$PATH"; fi
command -v openssl >/dev/null 2>&1 || ensure_apt_packages openssl
log "building (or finding cached) vcsim, kube-apiserver, Cluster API and the workload simulator"
VCSIM_BIN="$(hack/setup.sh | tail -n1)"
KUBE_BIN_DIR="$(hack/kube/build.sh | tail -n1)"
CAPI_BIN_DIR="$(hack/capi/build.sh | tail -n1)"
WORKLOAD_SIM_BIN="$(hack/workload-sim/build.sh | tail -n1)/workload-sim"
export VCSIM_BIN KUBE_BIN_DIR CAPI_BIN_DIR WORKLOAD_SIM_BIN
export KUBECTL="${KUBECTL:-$KUBE_BIN_DIR/kubectl}"
export DEMO_KEEP="$keep"

# The flow lives in one place, tests/capi_workload_cluster.rs.
exec cargo test --quiet --test capi_workload_cluster -- --ignored --nocapture --test-threads 1
