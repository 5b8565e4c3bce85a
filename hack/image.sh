#!/usr/bin/env bash
# Builds the controller's OCI image as an OCI image layout directory, without a container daemon
# and without pulling a base image (Debian's `umoci`, installed when missing). Prints
# "<layout>:<tag>" as the last line on stdout, then on stderr the commands that push it and
# install it (skopeo copy; kustomize edit set image for config/default; hack/release.sh for
# clusterctl), with the registry of --registry (else the word REGISTRY, to replace).
#
# Usage: hack/image.sh [--binary PATH] [--layout DIR] [--tag TAG] [--registry REGISTRY] [--ca-bundle FILE] [--extra-ca FILE]...
#   --binary PATH    the vsphere-provider binary to ship (default: `cargo build --release --locked`)
#   --layout DIR     OCI layout to create or add the tag to (default: target/oci/vsphere-provider)
#   --tag TAG        image tag (default: v<Cargo.toml version>)
#   --registry R     where it will be pushed, e.g. registry.example.com/team: only for the commands
#                    printed at the end (the image is REGISTRY/vsphere-provider:TAG)
#   --ca-bundle FILE CA certificates to trust (default: /etc/ssl/certs/ca-certificates.crt)
#   --extra-ca FILE  PEM appended to the bundle (a private vCenter CA); may be repeated
#
# What the image holds (one layer): the binary at /usr/local/bin/vsphere-provider (entrypoint);
# the shared libraries `ldd` names for it, from this machine (glibc >= 2.34, whose libc carries the
# `files` and `dns` name services, so no libnss_* is needed); /etc/ssl/certs/ca-certificates.crt;
# /etc/passwd and /etc/group (root, nonroot 65532, nobody); /etc/nsswitch.conf (hosts: files dns);
# /etc/hosts (localhost) and an empty /etc/resolv.conf, both replaced by the kubelet's; /tmp (1777).
# The config runs as 65532:65532 and carries OCI labels (title, version, licenses, source...).
set -euo pipefail

# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

binary=""
layout="$REPO_ROOT/target/oci/vsphere-provider"
tag=""
registry=""
ca_bundle="/etc/ssl/certs/ca-certificates.crt"
extra_cas=()
while [ $# -gt 0 ]; do
	case "$1" in
	--binary) binary="${2:?--binary needs a path}" && shift 2 ;;
	--layout) layout="${2:?--layout needs a directory}" && shift 2 ;;
	--tag) tag="${2:?--tag needs a value}" && shift 2 ;;
	--registry) registry="${2:?--registry needs a value}" && shift 2 ;;
	--ca-bundle) ca_bundle="${2:?--ca-bundle needs a file}" && shift 2 ;;
	--extra-ca) extra_cas+=("${2:?--extra-ca needs a file}") && shift 2 ;;
	-h | --help)
		sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown argument: $1 (try --help)" ;;
	esac
done

version="$(cargo_version)"
tag="${tag:-v$version}"
[[ "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "--tag '$tag' is not a valid OCI tag"
registry="${registry%/}"
# A registry host (a dot, a port or localhost: clusterctl refuses anything else), then lowercase
# repository path parts.
if [ -n "$registry" ]; then
	host="${registry%%/*}"
	{ [[ "$host" == *.* ]] || [[ "$host" == *:* ]] || [ "$host" = localhost ]; } &&
		[[ "$registry" =~ ^[A-Za-z0-9.:-]+(/[a-z0-9]+([._-][a-z0-9]+)*)*$ ]] ||
		die "--registry '$registry' must be a registry host with an optional path, e.g. registry.example.com/team (no scheme, no image name)"
fi

command -v umoci >/dev/null 2>&1 || ensure_apt_packages umoci
command -v umoci >/dev/null 2>&1 || die "umoci is not installed (apt-get install umoci)"

if [ -z "$binary" ]; then
	log "cargo build --release --locked"
	(cd "$REPO_ROOT" && cargo build --release --locked --bin vsphere-provider >&2) || die "cargo build failed"
	binary="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/vsphere-provider"
fi
[ -x "$binary" ] || die "--binary $binary: not an executable file"
[ -f "$ca_bundle" ] || die "--ca-bundle $ca_bundle: no such file (install ca-certificates)"
grep -q 'BEGIN CERTIFICATE' "$ca_bundle" || die "--ca-bundle $ca_bundle: no PEM certificate in it"
for f in "${extra_cas[@]}"; do
	grep -q 'BEGIN CERTIFICATE' "$f" 2>/dev/null || die "--extra-ca $f: no PEM certificate in it"
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"
install -m 0755 "$binary" "$root/usr/local/bin/vsphere-provider"

# Shared libraries, at the paths the dynamic loader looks for them (symlinks resolved: the image
# holds the files themselves). A static binary needs none.
if ldd_out="$(ldd "$binary" 2>&1)"; then
	glibc="$(ldd --version | head -n1 | grep -oE '[0-9]+\.[0-9]+$' || true)"
	[[ "$glibc" =~ ^2\.([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 34 ] ||
		die "glibc '$glibc' < 2.34: its name services live in libnss_* modules this script does not copy"
	while read -r lib; do
		[ -n "$lib" ] || continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
		log "library $lib"
	done < <(printf '%s\n' "$ldd_out" | sed -n 's/.*=> \(\/[^ ]*\) (0x.*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (0x.*/\1/p' | sort -u)
else
	log "static binary: no shared libraries"
fi

cat "$ca_bundle" >"$root/etc/ssl/certs/ca-certificates.crt"
for f in "${extra_cas[@]}"; do
	printf '\n' >>"$root/etc/ssl/certs/ca-certificates.crt"
	cat "$f" >>"$root/etc/ssl/certs/ca-certificates.crt"
done
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
nogroup:x:65534:
EOF
cat >"$root/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
: >"$root/etc/resolv.conf"
chmod 0644 "$root"/etc/*
chmod 0755 "$root" "$root/etc" "$root/etc/ssl" "$root/etc/ssl/certs" "$root/usr" "$root/usr/local" "$root/usr/local/bin"

# The OCI architecture of the binary (that of this machine: the binary was built here).
case "$(uname -m)" in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
*) die "unsupported machine $(uname -m)" ;;
esac
file -L "$binary" 2>/dev/null | grep -q "ELF" || log "note: 'file' could not confirm $binary is an ELF binary"

rootless=()
[ "$(id -u)" -eq 0 ] || rootless=(--rootless)
mkdir -p "$(dirname "$layout")"
[ -f "$layout/index.json" ] || umoci init --layout "$layout"
image="$layout:$tag"
umoci new --image "$image"
# Files are recorded as owned by root (the builder is root, or --rootless maps the user to 0).
umoci insert "${rootless[@]}" --image "$image" --history.created_by "hack/image.sh" "$root" /
source_url="$(git -C "$REPO_ROOT" config --get remote.origin.url 2>/dev/null || true)"
revision="$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || true)"
labels=(
	"org.opencontainers.image.title=vsphere-provider"
	"org.opencontainers.image.description=Kubernetes infrastructure provider for VMware vSphere"
	"org.opencontainers.image.version=$version"
	"org.opencontainers.image.licenses=Apache-2.0"
)
[ -z "$source_url" ] || labels+=("org.opencontainers.image.source=$source_url")
[ -z "$revision" ] || labels+=("org.opencontainers.image.revision=$revision")
config_args=(
	--config.entrypoint /usr/local/bin/vsphere-provider
	--config.user 65532:65532
	--config.workingdir /
	--config.env PATH=/usr/local/bin
	--os linux --architecture "$arch"
	--history.created_by "hack/image.sh: entrypoint, user, labels"
)
for l in "${labels[@]}"; do
	config_args+=(--config.label "$l" --manifest.annotation "$l")
done
umoci config --image "$image" "${config_args[@]}"
umoci gc --layout "$layout"
log "image $image ($(du -sh "$layout" | cut -f1) layout)"
echo "$image"

# What to do with it: config/default ships a placeholder image (config/manager/kustomization.yaml).
ref="${registry:-REGISTRY}/vsphere-provider:$tag"
here() { if [ "$PWD" = "$REPO_ROOT" ]; then echo "$1"; else echo "$REPO_ROOT/$1"; fi; }
{
	echo
	echo "Next: push the image, then install it."
	[ -n "$registry" ] || echo "(REGISTRY: where your cluster pulls from, e.g. registry.example.com/team; --registry prints it here)"
	echo "  skopeo copy oci:$image docker://$ref"
	echo "With kustomize (config/default runs $PLACEHOLDER_IMAGE_NAME:v$version until you set it):"
	echo "  (cd $(here config/manager) && kustomize edit set image vsphere-provider=$ref)"
	echo "  kubectl apply -k $(here config/default)"
	echo "  (no kustomize binary: an overlay that kubectl reads does the same)"
	echo "  mkdir -p $(here deploy) && printf '%s\n' 'resources: [../config/default]' 'images: [{name: $PLACEHOLDER_IMAGE_NAME, newName: ${ref%:*}, newTag: $tag}]' >$(here deploy)/kustomization.yaml"
	echo "  kubectl apply -k $(here deploy)"
	echo "With clusterctl:"
	echo "  $(here hack/release.sh) --image $ref"
} >&2
