#!/usr/bin/env bash
# Writes this provider's clusterctl release artifacts into a clusterctl *local repository*:
#   <out>/infrastructure-vsphere-provider/<version>/infrastructure-components.yaml
#   <out>/infrastructure-vsphere-provider/<version>/metadata.yaml   (copy of ./metadata.yaml)
#   <out>/infrastructure-vsphere-provider/<version>/cluster-template*.yaml (copies of templates/)
#   <out>/infrastructure-vsphere-provider/<version>/sbom.cdx.json  (CycloneDX 1.5: every crate the
#                          binary is built from, with version, purl and Cargo.lock's SHA-256;
#                          hack/sbom.py)
#   <out>/clusterctl.yaml  (a `providers:` entry naming that repository; merged into, not replaced)
# and prints <out> as the last line on stdout. Then:
#   clusterctl init --infrastructure vsphere-provider --config <out>/clusterctl.yaml
# (CAPI's own providers too, offline: hack/capi/repository.sh writes them into the same layout.)
#
# Usage: hack/release.sh [--out DIR] [--version vX.Y.Z] [--image REF]
#   --out DIR      the local repository (default: target/clusterctl-repository); absolute or not
#   --version V    release version (default: v<Cargo.toml version>); metadata.yaml must list its
#                  major.minor
#   --image REF    the manager image, REGISTRY/NAME:TAG[@sha256:DIGEST] or REGISTRY/NAME@sha256:DIGEST (default: localhost/vsphere-provider:<version>;
#                  hack/image.sh tags <version>: push it and pass the registry reference).
#                  clusterctl refuses a name without a registry ("must be canonical").
#
# The components are `kubectl kustomize config/clusterctl` with the image set: one Namespace
# (vsphere-provider-system), the label cluster.x-k8s.io/provider: infrastructure-vsphere-provider
# on every object, and the clusterctl variables ${VSPHERE_USERNAME} / ${VSPHERE_PASSWORD}.
# kubectl: $KUBECTL, else $KUBE_BIN_DIR/kubectl, else kubectl from PATH.
set -euo pipefail

# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

out="$REPO_ROOT/target/clusterctl-repository"
version=""
image=""
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out="${2:?--out needs a directory}" && shift 2 ;;
	--version) version="${2:?--version needs a value}" && shift 2 ;;
	--image) image="${2:?--image needs a reference}" && shift 2 ;;
	-h | --help)
		sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown argument: $1 (try --help)" ;;
	esac
done

if [ -z "$version" ]; then
	version="v$(cargo_version)"
fi
[[ "$version" =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.-]+)?$ ]] ||
	die "--version '$version' is not a semantic version like v0.1.0 (clusterctl requires one)"
major="${BASH_REMATCH[1]}"
minor="${BASH_REMATCH[2]}"
image="${image:-localhost/vsphere-provider:$version}"
# NAME:TAG, NAME@sha256:<64 hex> or NAME:TAG@sha256:<64 hex> (a digest pins exactly what runs),
# split for kustomize's image transformer (newName, newTag, digest).
tag_re='[A-Za-z0-9_][A-Za-z0-9_.-]*'
image_tag=""
image_digest=""
if [[ "$image" =~ ^(([^@/]+/)*[^@/:]+)(:($tag_re))?@(sha256:[0-9a-f]{64})$ ]]; then
	image_name="${BASH_REMATCH[1]}"
	image_tag="${BASH_REMATCH[4]}"
	image_digest="${BASH_REMATCH[5]}"
elif [[ "$image" =~ ^([^@]*[^:@/]):($tag_re)$ ]]; then
	image_name="${BASH_REMATCH[1]}"
	image_tag="${BASH_REMATCH[2]}"
else
	die "--image '$image' must be NAME:TAG, NAME@sha256:<64 hex digits> or NAME:TAG@sha256:<64 hex digits> (e.g. registry.example.com/vsphere-provider:$version)"
fi
# Quoted: a tag such as `y` or `1.10` is not a YAML bool or number.
image_fields="    newName: \"$image_name\""
[ -z "$image_tag" ] || image_fields+=$'\n'"    newTag: \"$image_tag\""
[ -z "$image_digest" ] || image_fields+=$'\n'"    digest: \"$image_digest\""
# The first path part must be a registry host (a dot, a port, or localhost), as clusterctl's image
# parser requires.
registry="${image_name%%/*}"
[ "$registry" != "$image_name" ] && { [[ "$registry" == *.* ]] || [[ "$registry" == *:* ]] || [ "$registry" = localhost ]; } ||
	die "--image '$image' must start with a registry host (e.g. registry.example.com/vsphere-provider:$version)"

metadata="$REPO_ROOT/metadata.yaml"
[ -f "$metadata" ] || die "missing $metadata"
# metadata.yaml must map this release series to a contract, or clusterctl init refuses it.
awk -v maj="$major" -v min="$minor" '
	/^[[:space:]]*-[[:space:]]*major:/ { m = $NF; n = ""; next }
	/^[[:space:]]*major:/ { m = $NF; next }
	/^[[:space:]]*minor:/ { n = $NF; next }
	/^[[:space:]]*contract:/ { if (m == maj && n == min) found = 1 }
	END { exit found ? 0 : 1 }' "$metadata" ||
	die "$metadata has no releaseSeries entry for $major.$minor (add one naming its contract)"

kubectl="$(resolve_kubectl)"

mkdir -p "$out"
out="$(cd "$out" && pwd)" # clusterctl wants absolute repository paths
dir="$out/infrastructure-vsphere-provider/$version"
mkdir -p "$dir"

# A throwaway overlay that only sets the image (kustomize has no command-line image flag), in place
# of the placeholder config/manager ships.
# Inside the repository: kustomize takes only relative paths to other kustomizations.
mkdir -p "$REPO_ROOT/target"
work="$(mktemp -d "$REPO_ROOT/target/.release.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cat >"$work/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../config/clusterctl
images:
  - name: $PLACEHOLDER_IMAGE_NAME
$image_fields
EOF
"$kubectl" kustomize "$work" >"$dir/infrastructure-components.yaml.tmp" ||
	die "kubectl kustomize config/clusterctl failed"
grep -qE "^ +image: $image\$" "$dir/infrastructure-components.yaml.tmp" ||
	die "the rendered manager image is not $image: config/manager/kustomization.yaml must ship $PLACEHOLDER_IMAGE_NAME (hack/lib.sh), which this script replaces"
mv "$dir/infrastructure-components.yaml.tmp" "$dir/infrastructure-components.yaml"
cp "$metadata" "$dir/metadata.yaml"
# Cluster templates (templates/cluster-template*.yaml), for `clusterctl generate cluster NAME
# --infrastructure vsphere-provider [--flavor F]`: clusterctl reads them from the version folder.
for t in "$REPO_ROOT"/templates/cluster-template*.yaml; do
	[ -e "$t" ] && cp "$t" "$dir/"
done

# The SBOM of the binary the image ships (not a clusterctl file: clusterctl ignores it).
command -v python3 >/dev/null 2>&1 || ensure_apt_packages python3
python3 "$REPO_ROOT/hack/sbom.py" --out "$dir/sbom.cdx.json" || die "hack/sbom.py failed"

# clusterctl.yaml: keep what other scripts (hack/capi/repository.sh) wrote, replace our entry.
config="$out/clusterctl.yaml"
entry="  - name: vsphere-provider
    type: InfrastructureProvider
    url: $dir/infrastructure-components.yaml"
if [ -f "$config" ] && grep -q '^providers:' "$config"; then
	awk -v entry="$entry" '
		/^providers:/ { print; print entry; inprov = 1; next }
		inprov && /^  - name: vsphere-provider$/ { skip = 1; next }
		inprov && skip && /^    / { next }
		{ skip = 0 }
		/^[^ ]/ { inprov = 0 }
		{ print }' "$config" >"$config.tmp"
	mv "$config.tmp" "$config"
else
	{
		[ ! -f "$config" ] || cat "$config"
		printf 'providers:\n%s\n' "$entry"
	} >"$config.tmp"
	mv "$config.tmp" "$config"
fi

log "wrote $dir/{infrastructure-components.yaml,metadata.yaml,cluster-template*.yaml,sbom.cdx.json} (image $image) and $config"
echo "$out"
