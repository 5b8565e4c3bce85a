#!/usr/bin/env bash
# Builds the upstream peers hack/bench-peers.sh measures us against, each from its pinned wrapper
# module (through the Go module proxy; no release downloads, no Docker, no upstream code in this
# repository), into ${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/peers/<peer>/<hash>/, and
# prints that directory as the last line on stdout:
#
#   hack/peers/build.sh capv   # CAPV v1.16.1: `manager`, `VERSIONS`, `config/` (its kustomize
#                              #   sources: CRDs, webhooks, RBAC as shipped)
#   hack/peers/build.sh mao    # OpenShift machine-api-operator's vSphere machine controller:
#                              #   `machine-controller-manager`, `VERSIONS`, `install/` (its manifests)
#
# The hash covers the peer's go.mod and go.sum, this script, `go version` and the target platform,
# so a second run is instant. Progress goes to stderr. Safe to run concurrently (flock); the result
# is renamed into place only when complete. Go as hack/capi/build.sh: GOTOOLCHAIN=local,
# CGO_ENABLED=0, -mod=readonly, -trimpath.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib.sh"

peer="${1:-}"
case "$peer" in
-h | --help)
	sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
capv)
	module=sigs.k8s.io/cluster-api-provider-vsphere
	package=sigs.k8s.io/cluster-api-provider-vsphere
	bin=manager
	;;
mao)
	module=github.com/openshift/machine-api-operator
	package=github.com/openshift/machine-api-operator/cmd/vsphere
	bin=machine-controller-manager
	;;
"") die "which peer? capv or mao (try --help)" ;;
*) die "unknown peer: $peer (capv or mao; try --help)" ;;
esac

MOD_DIR="$REPO_ROOT/hack/peers/$peer"
SELF="$REPO_ROOT/hack/peers/build.sh"
export PATH="/usr/local/go/bin:$PATH"
export GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null 2>&1 || die "no go in PATH (expected /usr/local/go/bin/go, Go >= the go line of $MOD_DIR/go.mod)"
go_version="$(go version)"

for f in "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"; do
	[ -f "$f" ] || die "missing $f"
done

hash="$({
	cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$SELF"
	printf '\n%s\n' "$go_version"
	go env GOOS GOARCH GOAMD64 GOARM64
} | sha256sum | cut -c1-16)"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/peers/$peer"
OUT="$CACHE_ROOT/$hash"

complete() { [ -x "$OUT/$bin" ] && [ -f "$OUT/VERSIONS" ]; }

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
version="$(go list -mod=readonly -m -f '{{.Version}}' "$module")"
ldflags="-s -w"
if [ "$peer" = capv ]; then
	# As CAPV's Makefile (hack/version.sh): the version stamps, so its logs and user agent say
	# which release this is.
	for kv in "gitVersion=$version" "gitCommit=$version" "gitTreeState=clean" \
		"buildDate=1970-01-01T00:00:00Z"; do
		ldflags+=" -X sigs.k8s.io/cluster-api-provider-vsphere/pkg/version.$kv"
	done
fi

log "building $module $version -> $OUT ($go_version)"
tmp="$(mktemp -d "$CACHE_ROOT/.build-$hash.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
# No `go mod download`: it fetches every module of the graph, and the proxy refuses some that
# only upstream's tests use. `go build` fetches what the binary needs.
log "go build $package"
go build -mod=readonly -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/$bin" "$package" >&2 ||
	die "go build $package failed"
log "$bin built in $((SECONDS - start))s ($(du -h "$tmp/$bin" | cut -f1))"

# The manifests as shipped, copied out of the read-only module cache so the cache dir is
# self-contained: CAPV's kustomize sources (CRDs, webhooks, RBAC), MAO's install/.
src="$(go list -mod=readonly -m -f '{{.Dir}}' "$module")"
case "$peer" in
capv)
	cp -r "$src/config" "$tmp/config"
	cp "$src/metadata.yaml" "$tmp/metadata.yaml"
	;;
mao) cp -r "$src/install" "$tmp/install" ;;
esac
chmod -R u+w "$tmp"

cat >"$tmp/VERSIONS" <<EOV
$module $version ($package)
$go_version
built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start))s
EOV
chmod 0755 "$tmp"
[ ! -e "$OUT" ] || rm -rf "$OUT"
mv -T "$tmp" "$OUT" || die "could not move $tmp to $OUT"
trap - EXIT
log "built in $((SECONDS - start))s: $OUT"
echo "$OUT"
