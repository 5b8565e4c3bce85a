#!/usr/bin/env bash
# Builds the real kube-apiserver and etcd pinned by hack/kube/go.mod (through the Go module proxy)
# into ${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/kube/<hash>/ and prints that directory as
# the last line on stdout. It holds `kube-apiserver`, `etcd` and `VERSIONS`.
#
# The hash covers go.mod, go.sum, this script, `go version` and the target platform, so a cached
# build is reused until one of them changes. Progress and timings go to stderr. Safe to run
# concurrently (flock); binaries are built in a temporary directory that is renamed into place only
# when both are done. Older builds are left alone (see README.md to clean up).
#
# Go: /usr/local/go/bin/go first in PATH, GOTOOLCHAIN=local (a go line newer than the local Go fails
# instead of downloading a toolchain), CGO_ENABLED=0, -mod=readonly (go.sum is enforced).
# GOPROXY, GOMODCACHE and GOCACHE are taken from the environment / `go env` as usual.
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

MOD_DIR="$REPO_ROOT/hack/kube"
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
	go env GOOS GOARCH GOAMD64 GOARM64 # `go version` names the host platform, not the target
} | sha256sum | cut -c1-16)"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/kube"
OUT="$CACHE_ROOT/$hash"

complete() { [ -x "$OUT/kube-apiserver" ] && [ -x "$OUT/etcd" ] && [ -x "$OUT/kubectl" ]; }

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
if complete; then # built by someone else while we waited
	log "cached: $OUT"
	echo "$OUT"
	exit 0
fi

cd "$MOD_DIR"
# Versions as resolved by the module graph (no network needed once the module cache is filled).
kube_version="$(go list -mod=readonly -m -f '{{.Version}}' k8s.io/kubernetes)"
etcd_version="$(go list -mod=readonly -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
[[ "$kube_version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "unexpected k8s.io/kubernetes version '$kube_version'"
kube_major="${BASH_REMATCH[1]}"
kube_minor="${BASH_REMATCH[2]}"

# As upstream's release build (hack/lib/golang.sh): static, stripped, trimmed; version stamped so
# /version and the compatibility version report the release built, not v0.0.0-master.
tags="selinux,notest,grpcnotrace"
kube_ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kube_ldflags+=" -X $p.gitVersion=$kube_version -X $p.gitMajor=$kube_major -X $p.gitMinor=$kube_minor"
	kube_ldflags+=" -X $p.gitTreeState=clean"
done
# etcd's own build sets GitSHA; there is no commit here, so name the module version instead.
etcd_ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd_version"
# Same tags for etcd as for the apiserver so the packages they share are compiled once.
build_flags=(-mod=readonly -trimpath -buildvcs=false -tags "$tags")

log "building kube-apiserver $kube_version and etcd $etcd_version -> $OUT"
log "GOMODCACHE=$(go env GOMODCACHE) GOCACHE=$(go env GOCACHE) GOPROXY=$(go env GOPROXY)"
tmp="$(mktemp -d "$CACHE_ROOT/.build-$hash.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
log "go mod download"
go mod download >&2 || die "go mod download failed"
log "modules ready in $((SECONDS - start))s"

t=$SECONDS
go build "${build_flags[@]}" -ldflags "$kube_ldflags" -o "$tmp/kube-apiserver" \
	k8s.io/kubernetes/cmd/kube-apiserver >&2 || die "go build kube-apiserver failed"
log "kube-apiserver built in $((SECONDS - t))s ($(du -h "$tmp/kube-apiserver" | cut -f1))"

t=$SECONDS
go build "${build_flags[@]}" -ldflags "$etcd_ldflags" -o "$tmp/etcd" \
	go.etcd.io/etcd/server/v3 >&2 || die "go build etcd failed"
log "etcd built in $((SECONDS - t))s ($(du -h "$tmp/etcd" | cut -f1))"

# kubectl of the same release: the tests apply manifests with it as users do, and a machine
# without one (or with one outside the version skew) still runs them.
t=$SECONDS
go build "${build_flags[@]}" -ldflags "$kube_ldflags" -o "$tmp/kubectl" \
	k8s.io/kubernetes/cmd/kubectl >&2 || die "go build kubectl failed"
log "kubectl built in $((SECONDS - t))s ($(du -h "$tmp/kubectl" | cut -f1))"

"$tmp/kube-apiserver" --version >&2
"$tmp/etcd" --version >&2
cat >"$tmp/VERSIONS" <<EOF
kube-apiserver $kube_version (k8s.io/kubernetes)
kubectl $kube_version (k8s.io/kubernetes)
etcd $etcd_version (go.etcd.io/etcd/server/v3)
$go_version
tags $tags
built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - start))s
EOF

chmod 0755 "$tmp"
[ ! -e "$OUT" ] || rm -rf "$OUT" # an incomplete leftover (we hold the lock)
mv -T "$tmp" "$OUT" || die "could not move $tmp to $OUT"
trap - EXIT
log "built in $((SECONDS - start))s: $OUT"
others="$(find "$CACHE_ROOT" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" ! -name '.*' | wc -l)"
if [ "$others" -gt 0 ]; then
	log "note: $others older build(s) in $CACHE_ROOT (remove them by hand when unused)"
fi
echo "$OUT"
