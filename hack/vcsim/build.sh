#!/usr/bin/env bash
# Builds hack/vcsim/main.go (GOPATH mode against Debian's govmomi 0.24.2) into
# .cache/vcsim/vcsim-<hash> and prints the absolute binary path on stdout.
# The hash covers main.go, the Go version and the govmomi package version, so a cached binary is
# reused until one of them changes. Progress goes to stderr. Safe to run concurrently.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lib.sh"

ensure_vcsim_packages

GOPATH_DIR=/usr/share/gocode
SRC="$REPO_ROOT/hack/vcsim/main.go"
CACHE_DIR="$REPO_ROOT/.cache/vcsim"
[ -f "$SRC" ] || die "missing $SRC"

go_version="$(go version)"
govmomi_version="$(dpkg-query -W -f='${Version}' golang-github-vmware-govmomi-dev 2>/dev/null || echo unknown)"
hash="$({
	cat "$SRC" "$REPO_ROOT/hack/vcsim/layout.go"
	printf '\n%s\n%s\n' "$go_version" "$govmomi_version"
} | sha256sum | cut -c1-16)"
BIN="$CACHE_DIR/vcsim-$hash"

if [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi

mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/.build.lock"
flock 9
if [ ! -x "$BIN" ]; then # someone else may have built it while we waited
	log "building vcsim ($go_version, govmomi $govmomi_version) -> $BIN"
	start=$SECONDS
	tmp="$(mktemp "$CACHE_DIR/.vcsim-build.XXXXXX")"
	trap 'rm -f "$tmp"' EXIT
	(
		cd "$REPO_ROOT/hack/vcsim"
		GO111MODULE=off GOPATH="$GOPATH_DIR" GOFLAGS= GOCACHE="${GOCACHE:-$REPO_ROOT/.cache/go-build}" \
			go build -o "$tmp" main.go layout.go
	) >&2 || die "go build failed"
	chmod +x "$tmp"
	mv -f "$tmp" "$BIN"
	trap - EXIT
	log "built in $((SECONDS - start))s"
	# Keep the cache small: drop binaries of older main.go versions.
	find "$CACHE_DIR" -maxdepth 1 -name 'vcsim-*' ! -name "vcsim-$hash" -type f -delete 2>/dev/null || true
fi
echo "$BIN"
