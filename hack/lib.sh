# shellcheck shell=bash
# Shared helpers for hack/*.sh. Source it; it defines functions only (plus REPO_ROOT, GO_ROOT,
# GO_MIN_MINOR).
# All progress output goes to stderr so scripts can print results on stdout.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO_ROOT

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() {
	printf '[%s] ERROR: %s\n' "$(basename "$0")" "$*" >&2
	exit 1
}

pkg_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# ensure_apt_packages PKG... installs the missing ones (apt-get update only when needed).
ensure_apt_packages() {
	local missing=() p
	for p in "$@"; do
		pkg_installed "$p" || missing+=("$p")
	done
	if [ "${#missing[@]}" -eq 0 ]; then
		return 0
	fi
	command -v apt-get >/dev/null 2>&1 || die "missing packages ${missing[*]} and no apt-get; install them by hand"
	local sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || die "missing packages ${missing[*]}; run as root (or install sudo)"
		sudo=(sudo)
	fi
	log "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; then
		log "apt-get install failed; running apt-get update and retrying"
		"${sudo[@]}" apt-get update -q >&2 || die "apt-get update failed"
		"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
			die "apt-get install ${missing[*]} failed"
	fi
}

# Where the vcsim build expects its Go toolchain (not Debian's golang-go, which is too old for a
# current govmomi). Override with VSPHERE_PROVIDER_GOROOT for a Go installed elsewhere.
GO_ROOT="${VSPHERE_PROVIDER_GOROOT:-/usr/local/go}"
# The oldest Go that builds hack/vcsim (the `go` line of hack/vcsim/go.mod, set by govmomi).
GO_MIN_MINOR=25

# ensure_go: puts $GO_ROOT/bin first on PATH, pins the toolchain (GOTOOLCHAIN=local: never
# download another one; CGO_ENABLED=0) and checks the version. Dies with instructions when Go is
# missing or too old. Logs which go is used.
ensure_go() {
	local go_bin="$GO_ROOT/bin/go" ver minor
	if [ ! -x "$go_bin" ]; then
		die "Go not found at $go_bin. hack/vcsim needs Go 1.$GO_MIN_MINOR or newer (1.26 is what the project uses)
    installed at $GO_ROOT (the official tarball unpacked there, so that $go_bin exists),
    or set VSPHERE_PROVIDER_GOROOT to another Go root. Debian's golang-go (/usr/bin/go) is too old."
	fi
	PATH="$GO_ROOT/bin:$PATH"
	export PATH GOTOOLCHAIN=local CGO_ENABLED=0
	unset GOROOT # let the binary find its own root
	ver="$("$go_bin" env GOVERSION)" || die "$go_bin does not run"
	minor="${ver#go1.}"
	minor="${minor%%[!0-9]*}"
	if [ -z "$minor" ] || [ "$minor" -lt "$GO_MIN_MINOR" ]; then
		die "$go_bin is $ver; hack/vcsim needs Go 1.$GO_MIN_MINOR or newer at $GO_ROOT"
	fi
	[ "$(command -v go)" = "$go_bin" ] || die "PATH resolves go to $(command -v go), not $go_bin"
	log "using $go_bin ($ver)"
}

# The package version of Cargo.toml (e.g. 0.1.0) on stdout; dies if there is none.
cargo_version() {
	local v
	v="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_ROOT/Cargo.toml" | head -n1)"
	[ -n "$v" ] || die "no version in $REPO_ROOT/Cargo.toml"
	printf '%s\n' "$v"
}

# kubectl on stdout: $KUBECTL, else $KUBE_BIN_DIR/kubectl, else kubectl from PATH; dies if it
# cannot be found.
resolve_kubectl() {
	local k="${KUBECTL:-}"
	if [ -z "$k" ] && [ -n "${KUBE_BIN_DIR:-}" ]; then k="$KUBE_BIN_DIR/kubectl"; fi
	k="${k:-kubectl}"
	command -v "$k" >/dev/null 2>&1 || die "kubectl not found ('$k'); set KUBECTL, or KUBE_BIN_DIR to hack/kube/build.sh's directory"
	printf '%s\n' "$k"
}
