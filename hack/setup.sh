#!/usr/bin/env bash
# Idempotent prerequisites for building and testing on a fresh Debian machine (run as root, or
# with sudo available, with apt and crates.io reachable):
#   - Debian packages: ca-certificates, git, curl, umoci (hack/image.sh builds the OCI image with it)
#   - Go 1.25+ at /usr/local/go (checked, not installed: see ensure_go in lib.sh); the vcsim build
#     fetches govmomi through the Go module proxy
#   - a Rust toolchain (rustup; cargo, rustfmt, clippy)
#   - the vcsim binary (hack/vcsim/build.sh, cached under ${XDG_CACHE_HOME:-~/.cache}/vsphere-provider/vcsim/)
# Progress goes to stderr; the last stdout line is the vcsim binary path.
set -euo pipefail

# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

command -v dpkg-query >/dev/null 2>&1 || die "this script expects Debian (dpkg/apt); install ca-certificates, git, curl and umoci by hand"

# 1. Debian packages.
base_missing=()
for p in ca-certificates git curl umoci; do
	pkg_installed "$p" || base_missing+=("$p")
done
if [ "${#base_missing[@]}" -gt 0 ]; then
	ensure_apt_packages "${base_missing[@]}"
else
	log "ok: ca-certificates git curl umoci"
fi
ensure_go
log "ok: $(go version) at $(command -v go), govmomi $(sed -n 's/^require github.com\/vmware\/govmomi //p' "$REPO_ROOT/hack/vcsim/go.mod")"

# 2. Rust toolchain (installed via rustup, not by this script).
if [ -d "$HOME/.cargo/bin" ]; then
	PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
	die "cargo not found. Install Rust with rustup, e.g.:
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy
    . \"\$HOME/.cargo/env\"
then re-run $0"
fi
for comp in rustfmt clippy; do
	if ! cargo "${comp/rustfmt/fmt}" --version >/dev/null 2>&1; then
		if command -v rustup >/dev/null 2>&1; then
			log "installing rustup component $comp"
			rustup component add "$comp" >&2 || die "rustup component add $comp failed"
		else
			die "cargo $comp is missing and rustup is not available to install it"
		fi
	fi
done
log "ok: $(cargo --version), $(rustc --version)"

# 3. vcsim.
vcsim_bin="$("$REPO_ROOT/hack/vcsim/build.sh")"
log "ok: vcsim $vcsim_bin"
echo "$vcsim_bin"
