#!/usr/bin/env bash
# Dependency check: cargo-deny (advisories, licences, bans, sources; deny.toml) over Cargo.lock
# and fuzz/Cargo.lock, every warning an error (`check -D warnings`): an unmaintained, unsound or
# yanked crate fails the run unless deny.toml ignores it with a reason.
#
# Usage: hack/deny.sh [MANIFEST...]  the check (a step of hack/test.sh); MANIFEST defaults to
#                                    Cargo.toml and fuzz/Cargo.toml
#        hack/deny.sh --age          print the advisory snapshot's age; fail if it is too old
#        hack/deny.sh --refresh      maintainer, where GitHub is reachable: rewrite the snapshot
#
# CI reaches the package registries only, so the RustSec database cannot be fetched there: a
# snapshot is committed (hack/deny/advisory-db.tar.gz; its origin, commit and date in
# hack/deny/SOURCE) and cargo-deny reads it with --offline. Every run prints the snapshot's age in
# days and fails past MAX_AGE_DAYS (180), naming the refresh command. Yanked versions are read from
# cargo's own copy of the crates.io index, which the `cargo fetch` below brings up to date.
#
# cargo-deny is installed from crates.io (pinned, --locked) once, into
# ~/.cache/vsphere-provider/cargo-deny-<version> (a cold build: see docs/release.md).
set -euo pipefail

# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

version="${CARGO_DENY_VERSION:-0.20.2}"
MAX_AGE_DAYS=180
snapshot="$REPO_ROOT/hack/deny/advisory-db.tar.gz"
source_file="$REPO_ROOT/hack/deny/SOURCE"
refresh_cmd="hack/deny.sh --refresh"
# Where cargo-deny looks for the database of deny.toml's db-urls under its db-path:
# "<last path segment>-<xxhash64 of the lowercased URL>" (url_to_db_path in cargo-deny).
db_dir_name="advisory-db-3157b0e258782691"

refresh() {
	local tmp
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	git clone --depth 1 https://github.com/rustsec/advisory-db "$tmp/db" || die "cannot fetch rustsec/advisory-db"
	(cd "$tmp/db" && git archive --format=tar HEAD crates rust LICENSE.txt README.md) | gzip -9n >"$snapshot"
	(cd "$tmp/db" && printf 'https://github.com/rustsec/advisory-db %s %s\n' \
		"$(git rev-parse HEAD)" "$(git log -1 --format=%cs)") >"$source_file"
	log "snapshot refreshed: $(cat "$source_file")"
	log "commit hack/deny/, then run hack/deny.sh: advisories published since the last snapshot may fail it"
}

# Prints the snapshot's age; dies past MAX_AGE_DAYS. Sets snapshot_day and snapshot_commit.
check_age() {
	[ -f "$source_file" ] && [ -f "$snapshot" ] || die "no advisory snapshot (hack/deny/): run $refresh_cmd"
	local url
	read -r url snapshot_commit snapshot_day <"$source_file" || true
	[[ "$snapshot_day" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] ||
		die "hack/deny/SOURCE: expected '<url> <commit> <YYYY-MM-DD>', got '$(cat "$source_file")'"
	local then now age
	then="$(date -u -d "$snapshot_day" +%s)" || die "hack/deny/SOURCE: bad date '$snapshot_day'"
	now="$(date -u +%s)"
	age=$(((now - then) / 86400))
	log "advisory database: snapshot of $snapshot_day, $age days old (limit $MAX_AGE_DAYS; $url $snapshot_commit)"
	if [ "$age" -gt "$MAX_AGE_DAYS" ]; then
		die "the advisory snapshot is $age days old (more than $MAX_AGE_DAYS): advisories published since $snapshot_day are not checked.
    Refresh it where GitHub is reachable and commit the result:
      $refresh_cmd"
	fi
}

case "${1:-}" in
--refresh)
	refresh
	exit 0
	;;
--age)
	check_age
	exit 0
	;;
-h | --help)
	sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
-*) die "unknown option: $1 (try --help)" ;;
esac
manifests=("$@")
[ "${#manifests[@]}" -gt 0 ] || manifests=(Cargo.toml fuzz/Cargo.toml)

check_age

root="${XDG_CACHE_HOME:-$HOME/.cache}/vsphere-provider/cargo-deny-$version"
bin="$root/bin/cargo-deny"
if [ ! -x "$bin" ]; then
	mkdir -p "$(dirname "$root")"
	exec 9>"$root.lock"
	flock 9
	if [ ! -x "$bin" ]; then
		# ring, its one C dependency, needs a C compiler.
		command -v cc >/dev/null 2>&1 || ensure_apt_packages gcc libc6-dev
		log "installing cargo-deny $version from crates.io into $root (once)"
		start=$SECONDS
		rm -rf "$root.tmp"
		# Its own target directory, removed after: nothing of it is reused.
		CARGO_TARGET_DIR="$root.tmp/target" cargo install cargo-deny --version "$version" --locked \
			--root "$root.tmp" >&2 || die "cargo install cargo-deny $version failed"
		rm -rf "$root.tmp/target"
		mv "$root.tmp" "$root"
		log "cargo-deny $version built in $((SECONDS - start))s"
	fi
	exec 9>&-
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
db="$work/$db_dir_name"
mkdir -p "$db/.git"
tar -xzf "$snapshot" -C "$db"
# cargo-deny dates an offline database by .git/FETCH_HEAD: the snapshot's own day.
touch -d "${snapshot_day}T00:00:00Z" "$db/.git/FETCH_HEAD"
export VSPHERE_PROVIDER_ADVISORY_DBS="$work"

for manifest in "${manifests[@]}"; do
	[ -f "$manifest" ] || die "no manifest $manifest"
	# Sources for cargo metadata, and cargo's index cache (the yanked flags) brought up to date:
	# the registry is reachable where the advisory database is not.
	cargo fetch --locked --manifest-path "$manifest" >&2 || die "cargo fetch --locked --manifest-path $manifest failed"
	log "cargo deny check ($manifest)"
	"$bin" --offline --locked --manifest-path "$manifest" --config "$REPO_ROOT/deny.toml" \
		--color never check -D warnings ||
		die "cargo deny found problems in ${manifest%Cargo.toml}Cargo.lock (above). Upgrade within the lock's semver range (cargo update -p CRATE), or add the advisory to deny.toml's ignore with a reason"
done
