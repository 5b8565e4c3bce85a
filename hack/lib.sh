# shellcheck shell=bash
# Shared helpers for hack/*.sh. Source it; it defines functions only (plus REPO_ROOT).
# All progress output goes to stderr so scripts can print results on stdout.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO_ROOT

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() {
	printf '[%s] ERROR: %s\n' "$(basename "$0")" "$*" >&2
	exit 1
}

# Packages the vcsim build needs; each entry is "package:probe-path".
VCSIM_APT_PACKAGES=(
	"golang-go:/usr/bin/go"
	"golang-github-vmware-govmomi-dev:/usr/share/gocode/src/github.com/vmware/govmomi/simulator/simulator.go"
)

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

# ensure_vcsim_packages: the Go toolchain and govmomi sources, probing files first so that
# a machine with them installed some other way is not touched.
ensure_vcsim_packages() {
	local entry pkg probe need=()
	for entry in "${VCSIM_APT_PACKAGES[@]}"; do
		pkg="${entry%%:*}"
		probe="${entry#*:}"
		[ -e "$probe" ] || need+=("$pkg")
	done
	if [ "${#need[@]}" -gt 0 ]; then
		ensure_apt_packages "${need[@]}"
	fi
}
