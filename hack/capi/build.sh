#!/usr/bin/env bash
# Builds Cluster API's own binaries pinned by hack/capi/go.mod (through the Go module proxy) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/capi/<hash>/ and prints that directory as the
# last line on stdout. It holds `manager` (core: Cluster, Machine, MachineSet, MachineDeployment,
# MachineHealthCheck... controllers), `kubeadm-bootstrap-manager`, `kubeadm-control-plane-manager`,
# `clusterctl`, `VERSIONS`, and `config/` (the module's kustomize sources: core/config/ as
# config/core, bootstrap/kubeadm/config/, controlplane/kubeadm/config/ and metadata.yaml, read by
# hack/capi/repository.sh).
#
# The hash covers go.mod, go.sum, this script, `go version` and the target platform. Progress and
# timings go to stderr. Safe to run concurrently (flock); the result is renamed into place only when
# complete. Go as hack/kube/build.sh: GOTOOLCHAIN=local, CGO_ENABLED=0, -mod=readonly.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib.sh"

case "${1:-}" in
-h | --help)
	sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
"") ;;
*) die "unknown argument: $1 (try --help)" ;;
esac

MOD_DIR="$REPO_ROOT/hack/capi"
SELF="$MOD_DIR/build.sh"
export PATH="/usr/local/go/bin:$PATH"
export GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null 2>&1 || die "no go in PATH (expected /usr/local/go/bin/go, Go >= the go line of $MOD_DIR/go.mod)"
go_version="$(go version)"
log "using $(command -v go): $go_version"

for f in "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"; do
	[ -f "$f" ] || die "missing $f"
done

hash="$({
	cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$SELF"
	printf '\n%s\n' "$go_version"
	go env GOOS GOARCH GOAMD64 GOARM64
} | sha256sum | cut -c1-16)"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/capi"
OUT="$CACHE_ROOT/$hash"
BINS=(manager kubeadm-bootstrap-manager kubeadm-control-plane-manager clusterctl)

complete() {
	local b
	for b in "${BINS[@]}"; do [ -x "$OUT/$b" ] || return 1; done
	[ -f "$OUT/VERSIONS" ] && [ -f "$OUT/config/metadata.yaml" ]
}

if complete; then
	log "cached: $OUT"
	echo "$OUT"
	exit 0
fi

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.build.lock"
if ! flock -n 9; then
	log "another build holds $CACHE_ROOT/.build.lock; waiting"
	flock 9
fi
if complete; then
	log "cached: $OUT"
	echo "$OUT"
	exit 0
fi

cd "$MOD_DIR"
capi_version="$(go list -mod=readonly -m -f '{{.Version}}' sigs.k8s.io/cluster-api)"
[[ "$capi_version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "unexpected sigs.k8s.io/cluster-api version '$capi_version'"
capi_major="${BASH_REMATCH[1]}"
capi_minor="${BASH_REMATCH[2]}"

# As upstream's Makefile (hack/scripts/release/version.sh): -trimpath and the version stamps.
# clusterctl reads its own version (e.g. to pick the contract it installs), so it must not say
# v0.0.0. There is no git commit in a module zip; the module version stands in for it.
ldflags="-s -w"
for kv in "gitVersion=$capi_version" "gitMajor=$capi_major" "gitMinor=$capi_minor" \
	"gitTreeState=clean" "gitCommit=$capi_version" "gitReleaseCommit=$capi_version" \
	"buildDate=1970-01-01T00:00:00Z"; do
	ldflags+=" -X sigs.k8s.io/cluster-api/version.$kv"
done
build_flags=(-mod=readonly -trimpath -buildvcs=false)

log "building Cluster API $capi_version -> $OUT"
log "GOMODCACHE=$(go env GOMODCACHE) GOCACHE=$(go env GOCACHE) GOPROXY=$(go env GOPROXY)"
tmp="$(mktemp -d "$CACHE_ROOT/.build-$hash.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
log "go mod download"
go mod download >&2 || die "go mod download failed"
log "modules ready in $((SECONDS - start))s"

build() { # build OUTPUT PACKAGE
	local t=$SECONDS
	go build "${build_flags[@]}" -ldflags "$ldflags" -o "$tmp/$1" "$2" >&2 || die "go build $2 failed"
	log "$1 built in $((SECONDS - t))s ($(du -h "$tmp/$1" | cut -f1))"
}
# Since v1.11 the core manager is the package core/ (before, the module root).
build manager sigs.k8s.io/cluster-api/core
build kubeadm-bootstrap-manager sigs.k8s.io/cluster-api/bootstrap/kubeadm
build kubeadm-control-plane-manager sigs.k8s.io/cluster-api/controlplane/kubeadm
build clusterctl sigs.k8s.io/cluster-api/cmd/clusterctl

# The kustomize sources of the release manifests (upstream's `make release-manifests` runs
# `kustomize build` on these three). Copied out of the read-only module cache so the cache dir is
# self-contained.
src="$(go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
mkdir -p "$tmp/config/bootstrap/kubeadm" "$tmp/config/controlplane/kubeadm"
cp -r "$src/core/config" "$tmp/config/core"
cp -r "$src/bootstrap/kubeadm/config" "$tmp/config/bootstrap/kubeadm/config"
cp -r "$src/controlplane/kubeadm/config" "$tmp/config/controlplane/kubeadm/config"
cp "$src/metadata.yaml" "$tmp/config/metadata.yaml"
chmod -R u+w "$tmp/config"

"$tmp/clusterctl" version >&2
cat >"$tmp/VERSIONS" <<EOV
cluster-api $capi_version (sigs.k8s.io/cluster-api)
$go_version
built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start))s
EOV

chmod 0755 "$tmp"
[ ! -e "$OUT" ] || rm -rf "$OUT"
mv -T "$tmp" "$OUT" || die "could not move $tmp to $OUT"
trap - EXIT
log "built in $((SECONDS - start))s: $OUT"
others="$(find "$CACHE_ROOT" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" ! -name '.*' | wc -l)"
if [ "$others" -gt 0 ]; then
	log "note: $others older build(s) in $CACHE_ROOT (remove them by hand when unused)"
fi
echo "$OUT"
