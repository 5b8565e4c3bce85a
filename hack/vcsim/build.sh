#!/usr/bin/env bash
# Builds hack/vcsim (module mode, against the govmomi pinned in go.mod/go.sum) into
#   ${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/vcsim/vcsim-<hash>
# and prints the absolute binary path as the last line on stdout (callers rely on that:
# hack/setup.sh, hack/test.sh -> VCSIM_BIN, tests/support/vcsim.rs).
# The hash covers hack/vcsim/*.go, go.mod, go.sum, this script and `go version`, so a cached binary
# is reused until one of them changes. Progress goes to stderr. Safe to run concurrently (flock).
# Go: $GO_ROOT/bin/go from hack/lib.sh (/usr/local/go), never Debian's /usr/bin/go.
# The first build downloads govmomi through the Go module proxy into the Go module cache.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib.sh"

ensure_go

SRC_DIR="$REPO_ROOT/hack/vcsim"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/vcsim"
for f in main.go layout.go go.mod go.sum; do
	[ -f "$SRC_DIR/$f" ] || die "missing $SRC_DIR/$f"
done

go_version="$(go version)"
hash="$({
	for f in "$SRC_DIR"/*.go "$SRC_DIR/go.mod" "$SRC_DIR/go.sum" "${BASH_SOURCE[0]}"; do
		printf '%s\n' "$(basename "$f")"
		cat "$f"
	done
	printf '\n%s\n' "$go_version"
} | sha256sum | cut -c1-16)"
BIN="$CACHE_DIR/vcsim-$hash"

if [ -x "$BIN" ]; then
	touch "$BIN" # keeps it out of the age-based pruning below
	echo "$BIN"
	exit 0
fi

mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/.build.lock"
flock 9
if [ ! -x "$BIN" ]; then # someone else may have built it while we waited
	govmomi="$(sed -n 's/^require github.com\/vmware\/govmomi \(v[^ ]*\).*/\1/p; s/^[[:space:]]*github.com\/vmware\/govmomi \(v[^ ]*\).*/\1/p' "$SRC_DIR/go.mod" | head -n1)"
	log "building vcsim ($go_version, govmomi ${govmomi:-?}) -> $BIN"
	start=$SECONDS
	tmp="$(mktemp "$CACHE_DIR/.vcsim-build.XXXXXX")"
	trap 'rm -f "$tmp"' EXIT
	(
		cd "$SRC_DIR"
		GO111MODULE=on GOFLAGS=-mod=readonly GOWORK=off \
			go build -trimpath -o "$tmp" .
	) >&2 || die "go build failed (module mode; go.mod/go.sum must be complete: run 'go mod tidy' in hack/vcsim with $GO_ROOT/bin/go)"
	chmod +x "$tmp"
	mv -f "$tmp" "$BIN"
	trap - EXIT
	log "built in $((SECONDS - start))s"
	# Keep the cache small. It is shared by every checkout of the project, so only binaries unused
	# for a week go (each cache hit touches its binary).
	find "$CACHE_DIR" -maxdepth 1 -name 'vcsim-*' ! -name "vcsim-$hash" -type f -mtime +7 -delete 2>/dev/null || true
fi
echo "$BIN"
