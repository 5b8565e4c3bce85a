#!/usr/bin/env bash
# Dependency audit: cargo-audit over Cargo.lock and fuzz/Cargo.lock against the RustSec advisory
# database. CI has no network but the package registries, so the database cannot be fetched
# there: a snapshot is committed (hack/audit/advisory-db.tar.gz, its origin and date in
# hack/audit/SOURCE) and used offline. A machine that reaches GitHub refreshes it with
#   hack/audit.sh --refresh        (fetches rustsec/advisory-db, rewrites the snapshot)
# and any run with AUDIT_FETCH=1 audits against the live database instead. An advisory fails the
# run; the snapshot's age is printed so a stale one is seen.
#
# cargo-audit is installed from crates.io (pinned, --locked) into a cache keyed by its version:
# ~/.cache/vsphere-provider/cargo-audit-<version> (a cold build takes 5-8 minutes on 2 cores).
set -euo pipefail

# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

version="${CARGO_AUDIT_VERSION:-0.22.2}"
root="$HOME/.cache/vsphere-provider/cargo-audit-$version"
bin="$root/bin/cargo-audit"
snapshot="$REPO_ROOT/hack/audit/advisory-db.tar.gz"
source_file="$REPO_ROOT/hack/audit/SOURCE"

if [ "${1:-}" = "--refresh" ]; then
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	git clone --depth 1 https://github.com/rustsec/advisory-db "$tmp/db" || die "cannot fetch rustsec/advisory-db"
	(cd "$tmp/db" && git archive --format=tar HEAD crates rust LICENSE.txt README.md) | gzip -9n >"$snapshot"
	(cd "$tmp/db" && printf 'https://github.com/rustsec/advisory-db %s %s\n' \
		"$(git rev-parse HEAD)" "$(git log -1 --format=%cs)") >"$source_file"
	log "snapshot refreshed: $(cat "$source_file")"
	exit 0
fi

if [ ! -x "$bin" ]; then
	# Its TLS stack (aws-lc-sys) is built from C sources: a C compiler, and cmake where the
	# crate falls back to it.
	command -v cc >/dev/null 2>&1 || ensure_apt_packages gcc
	command -v cmake >/dev/null 2>&1 || ensure_apt_packages cmake
	log "installing cargo-audit $version from crates.io into $root (once)"
	cargo install cargo-audit --version "$version" --locked --root "$root" >&2 ||
		die "cargo install cargo-audit $version failed"
fi

args=()
if [ -z "${AUDIT_FETCH:-}" ]; then
	db="$(mktemp -d)"
	trap 'rm -rf "$db"' EXIT
	tar -xzf "$snapshot" -C "$db"
	read -r _ commit day <"$source_file"
	log "advisory database: snapshot of $day (rustsec/advisory-db $commit; hack/audit.sh --refresh to update)"
	args=(--db "$db" --no-fetch)
fi

"$bin" audit "${args[@]}" --file Cargo.lock
"$bin" audit "${args[@]}" --file fuzz/Cargo.lock
