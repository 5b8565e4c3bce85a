#!/usr/bin/env bash
# Builds hack/workload-sim (the workload-cluster simulator over Cluster API's in-memory server,
# pinned by hack/workload-sim/go.mod/go.sum) into
#   ${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/workload-sim/<hash>/workload-sim
# and prints that directory as the last line on stdout.
#
# The hash covers go.mod, go.sum, *.go, this script, `go version` and the target platform. Progress
# and timings go to stderr. Safe to run concurrently (flock); the result is renamed into place only
# when complete. Go as hack/capi/build.sh: GOTOOLCHAIN=local, CGO_ENABLED=0, -mod=readonly.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib.sh"

case "${1:-}" in
-h | --help)
	sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
"") ;;
*) die "unknown argument: $1 (try --help)" ;;
esac

MOD_DIR="$REPO_ROOT/hack/workload-sim"
SELF="$MOD_DIR/build.sh"
ensure_go
go_version="$(go version)"

for f in "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$MOD_DIR/main.go"; do
	[ -f "$f" ] || die "missing $f"
done

hash="$({
	for f in "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$MOD_DIR"/*.go "$SELF"; do
		printf '%s\n' "$(basename "$f")"
		cat "$f"
	done
	printf '\n%s\n' "$go_version"
	go env GOOS GOARCH GOAMD64 GOARM64
} | sha256sum | cut -c1-16)"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/workload-sim"
OUT="$CACHE_ROOT/$hash"

if [ -x "$OUT/workload-sim" ]; then
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
if [ -x "$OUT/workload-sim" ]; then
	log "cached: $OUT"
	echo "$OUT"
	exit 0
fi

tmp="$(mktemp -d "$CACHE_ROOT/.build-$hash.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
cd "$MOD_DIR"
log "building workload-sim -> $OUT (GOCACHE=$(go env GOCACHE))"
GOWORK=off go mod download >&2 || die "go mod download failed"
log "modules ready in $((SECONDS - start))s"
# The decoder's unit tests first (userdata_test.go), with the build's flags so they reuse its
# compiled dependencies: a simulator that misreads user data is not built.
GOWORK=off GOFLAGS=-mod=readonly go test -trimpath -count=1 . >&2 || die "go test failed"
GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$tmp/workload-sim" . >&2 ||
	die "go build failed (go.mod/go.sum must be complete: run 'go mod tidy' in hack/workload-sim with $GO_ROOT/bin/go)"
cat >"$tmp/VERSIONS" <<EOV
$(GOWORK=off go list -mod=readonly -m -f '{{.Path}} {{.Version}}' sigs.k8s.io/cluster-api/test sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/api github.com/vmware/govmomi)
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
