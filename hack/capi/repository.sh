#!/usr/bin/env bash
# Writes an offline clusterctl local repository holding Cluster API's own providers (core,
# kubeadm bootstrap, kubeadm control plane), cert-manager's CRDs, and this provider (via
# hack/release.sh), plus the clusterctl config naming them all, and prints its directory as the last
# line on stdout. Then, with no network:
#   CLUSTERCTL_DISABLE_VERSIONCHECK=true clusterctl init --config <out>/clusterctl.yaml \
#     --core cluster-api --bootstrap kubeadm --control-plane kubeadm --infrastructure vsphere-provider
#
# Usage: hack/capi/repository.sh [--out DIR] [--image REF]
#   --out DIR    the repository (default: target/clusterctl-repository)
#   --image REF  this provider's manager image (passed to hack/release.sh)
# CAPI_BIN_DIR (else hack/capi/build.sh) supplies the kustomize sources of the pinned CAPI release;
# kubectl is $KUBECTL, else $KUBE_BIN_DIR/kubectl, else kubectl from PATH.
#
# Layout (clusterctl's local repository: {basepath}/{provider-label}/{version}/{file}):
#   cluster-api/<v>/core-components.yaml            kustomize build config/default (as upstream's
#   bootstrap-kubeadm/<v>/bootstrap-components.yaml  `make release-manifests`), images set to
#   control-plane-kubeadm/<v>/control-plane-components.yaml   registry.k8s.io/cluster-api/*:<v>
#   each with CAPI's metadata.yaml
#   cert-manager/<cm-version>/cert-manager.yaml     cert-manager's CRDs only (see below)
#   infrastructure-vsphere-provider/<ours>/...      hack/release.sh
#
# cert-manager: every provider's components carry cert-manager Issuers and Certificates, and
# clusterctl init installs cert-manager first unless its API answers (it creates a test Issuer and
# Certificate). Its release manifest is a GitHub download, so the repository holds instead the CRDs
# of the same version clusterctl would install (v1.21.1 for CAPI v1.14.2: CertManagerDefaultVersion), taken from the
# cert-manager Go module (deploy/crds, fetched through the Go module proxy and checked against the
# sum below), and clusterctl.yaml points `cert-manager.url` at them. That makes the API exist; no
# cert-manager controller runs, so no certificate is ever issued. On a real cluster, install
# cert-manager itself (or drop the cert-manager block from clusterctl.yaml and let clusterctl fetch
# it).
set -euo pipefail

# shellcheck source=../lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib.sh"

CERT_MANAGER_MODULE=github.com/cert-manager/cert-manager
CERT_MANAGER_VERSION=v1.21.1
CERT_MANAGER_SUM="h1:0LttV37Q5c2CBNoHkjuI8sLKTXWZDC2SwQkxrBMKV9w="

out="$REPO_ROOT/target/clusterctl-repository"
image_args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out="${2:?--out needs a directory}" && shift 2 ;;
	--image) image_args=(--image "${2:?--image needs a reference}") && shift 2 ;;
	-h | --help)
		sed -n '2,30p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown argument: $1 (try --help)" ;;
	esac
done

if [ -z "${CAPI_BIN_DIR:-}" ]; then
	CAPI_BIN_DIR="$("$REPO_ROOT/hack/capi/build.sh" | tail -n1)" || die "hack/capi/build.sh failed"
fi
[ -f "$CAPI_BIN_DIR/VERSIONS" ] && [ -d "$CAPI_BIN_DIR/config/core" ] ||
	die "CAPI_BIN_DIR=$CAPI_BIN_DIR holds no VERSIONS and config/ (run hack/capi/build.sh)"
capi_version="$(awk '$1 == "cluster-api" { print $2 }' "$CAPI_BIN_DIR/VERSIONS")"
[[ "$capi_version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "no cluster-api version in $CAPI_BIN_DIR/VERSIONS"

kubectl="$(resolve_kubectl)"

mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$CAPI_BIN_DIR/config" "$work/src"
chmod -R u+w "$work/src"

# render LABEL FILE SOURCE-DIR STAGING-IMAGE RELEASE-IMAGE: kustomize build of SOURCE-DIR/default
# with the staging image replaced by the release one (upstream's set-manifest-image).
render() {
	local label="$1" file="$2" src="$3" from="$4" to="$5"
	mkdir -p "$work/overlay-$label" "$out/$label/$capi_version"
	local rel
	rel="$(realpath --relative-to="$work/overlay-$label" "$src/default")"
	cat >"$work/overlay-$label/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $rel
images:
  - name: $from
    newName: $to
    newTag: $capi_version
EOF
	"$kubectl" kustomize "$work/overlay-$label" >"$out/$label/$capi_version/$file" ||
		die "kubectl kustomize $src/default failed"
	cp "$CAPI_BIN_DIR/config/metadata.yaml" "$out/$label/$capi_version/metadata.yaml"
	log "wrote $label/$capi_version/$file ($(grep -c '^kind:' "$out/$label/$capi_version/$file") objects)"
}
render cluster-api core-components.yaml "$work/src/core" \
	gcr.io/k8s-staging-cluster-api/cluster-api-controller registry.k8s.io/cluster-api/cluster-api-controller
render bootstrap-kubeadm bootstrap-components.yaml "$work/src/bootstrap/kubeadm/config" \
	gcr.io/k8s-staging-cluster-api/kubeadm-bootstrap-controller registry.k8s.io/cluster-api/kubeadm-bootstrap-controller
render control-plane-kubeadm control-plane-components.yaml "$work/src/controlplane/kubeadm/config" \
	gcr.io/k8s-staging-cluster-api/kubeadm-control-plane-controller registry.k8s.io/cluster-api/kubeadm-control-plane-controller

# cert-manager's CRDs from its Go module (outside any module: nothing is added to a go.mod).
export PATH="/usr/local/go/bin:$PATH" GOTOOLCHAIN=local
mkdir -p "$work/gomod"
cm_json="$(cd "$work/gomod" && GOFLAGS='' go mod download -json "$CERT_MANAGER_MODULE@$CERT_MANAGER_VERSION")" ||
	die "go mod download $CERT_MANAGER_MODULE@$CERT_MANAGER_VERSION failed"
cm_sum="$(printf '%s\n' "$cm_json" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p')"
cm_dir="$(printf '%s\n' "$cm_json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[ "$cm_sum" = "$CERT_MANAGER_SUM" ] ||
	die "$CERT_MANAGER_MODULE@$CERT_MANAGER_VERSION has sum '$cm_sum', expected $CERT_MANAGER_SUM"
mkdir -p "$out/cert-manager/$CERT_MANAGER_VERSION"
cm_file="$out/cert-manager/$CERT_MANAGER_VERSION/cert-manager.yaml"
{
	printf '# cert-manager %s CustomResourceDefinitions only (deploy/crds of the Go module %s):\n' \
		"$CERT_MANAGER_VERSION" "$CERT_MANAGER_MODULE"
	printf '# the API clusterctl checks for, without cert-manager controllers. See hack/capi/repository.sh.\n'
	for f in "$cm_dir"/deploy/crds/*.yaml; do
		printf -- '---\n'
		grep -v '^---$' "$f"
	done
} >"$cm_file"
log "wrote cert-manager/$CERT_MANAGER_VERSION/cert-manager.yaml ($(grep -c '^kind: CustomResourceDefinition' "$cm_file") CRDs)"

cat >"$out/clusterctl.yaml" <<EOF
# Offline clusterctl configuration written by hack/capi/repository.sh and hack/release.sh.
providers:
  - name: cluster-api
    type: CoreProvider
    url: $out/cluster-api/$capi_version/core-components.yaml
  - name: kubeadm
    type: BootstrapProvider
    url: $out/bootstrap-kubeadm/$capi_version/bootstrap-components.yaml
  - name: kubeadm
    type: ControlPlaneProvider
    url: $out/control-plane-kubeadm/$capi_version/control-plane-components.yaml
cert-manager:
  url: $cm_file
  version: $CERT_MANAGER_VERSION
EOF
"$REPO_ROOT/hack/release.sh" --out "$out" "${image_args[@]}" >/dev/null || die "hack/release.sh failed"
log "clusterctl repository ready: $out (config $out/clusterctl.yaml)"
echo "$out"
