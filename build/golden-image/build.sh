#!/usr/bin/env bash
# Builds the virtwork golden container disk: image-builder turns blueprint.toml into a qcow2,
# then a FROM-scratch image carries it at /disk/disk.qcow2 for KubeVirt's containerDisk.
#
# Environment (defaults in brackets):
#   REGISTRY    [quay.io/opdev]       registry and organisation
#   IMAGE_NAME  [virtwork-disk]       repository name
#   TAG         [latest]              image tag
#   DISTRO      [fedora-42]           image-builder distribution
#   IMAGE_TYPE  [qcow2]               image-builder image type producing a .qcow2
#   PUSH        [false]               true: push the image after building
#   ENGINE      [podman]              container engine (podman or docker)
#
# Needs image-builder (root) and the engine. Re-executes itself with sudo when not root.
set -euo pipefail

REGISTRY=${REGISTRY:-quay.io/opdev}
IMAGE_NAME=${IMAGE_NAME:-virtwork-disk}
TAG=${TAG:-latest}
DISTRO=${DISTRO:-fedora-42}
IMAGE_TYPE=${IMAGE_TYPE:-qcow2}
PUSH=${PUSH:-false}
ENGINE=${ENGINE:-podman}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image="$REGISTRY/$IMAGE_NAME:$TAG"

# die MESSAGE [EXIT_CODE]: 2 for bad configuration, 1 (default) for a failed build.
die() {
    printf 'golden-image: %s\n' "$1" >&2
    exit "${2:-1}"
}

case "$PUSH" in
    true | false) ;;
    *) die "PUSH='$PUSH' must be 'true' or 'false'" 2 ;;
esac
for name in REGISTRY IMAGE_NAME TAG DISTRO IMAGE_TYPE; do
    [ -n "${!name}" ] || die "$name must not be empty" 2
done

for tool in image-builder "$ENGINE"; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found in PATH (install it, or set ENGINE for the container engine)" 2
done

if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "image-builder needs root and sudo is not available"
    exec sudo --preserve-env=REGISTRY,IMAGE_NAME,TAG,DISTRO,IMAGE_TYPE,PUSH,ENGINE "$0" "$@"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/virtwork-golden.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/output" "$work/context"

printf 'golden-image: building %s (%s) from %s\n' "$DISTRO" "$IMAGE_TYPE" "$here/blueprint.toml" >&2
image-builder build "$IMAGE_TYPE" \
    --distro "$DISTRO" \
    --blueprint "$here/blueprint.toml" \
    --output-dir "$work/output"

# image-builder's output layout differs between versions (flat or one subdirectory per image):
# search the whole output tree and insist on exactly one qcow2.
qcow2s=()
while IFS= read -r -d '' file; do
    qcow2s+=("$file")
done < <(find "$work/output" -type f -name '*.qcow2' -print0 | sort -z)
case "${#qcow2s[@]}" in
    0) die "image-builder produced no .qcow2 under $work/output (is IMAGE_TYPE='$IMAGE_TYPE' a qcow2 type?)" ;;
    1) ;;
    *) die "image-builder produced ${#qcow2s[@]} .qcow2 files, expected exactly one: ${qcow2s[*]}" ;;
esac

# The build context holds exactly the disk and the Containerfile, nothing else.
mv "${qcow2s[0]}" "$work/context/disk.qcow2"
cp "$here/Containerfile" "$work/context/Containerfile"

"$ENGINE" build --tag "$image" --file "$work/context/Containerfile" "$work/context"
printf 'golden-image: built %s\n' "$image" >&2

if [ "$PUSH" = true ]; then
    "$ENGINE" push "$image"
    printf 'golden-image: pushed %s\n' "$image" >&2
fi
