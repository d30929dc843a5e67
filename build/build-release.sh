#!/usr/bin/env bash
# Builds the release binary of virtwork with its version metadata embedded, and installs it.
#
# The Dockerfile's build stage RUNs this script, so the container build and a local release
# build are the same commands (tests/packaging.rs runs it against a stub cargo, and for real
# when RUN_RELEASE_BUILD=1).
#
# Usage: build/build-release.sh [--out DIR]
#   --out DIR   copy the built binary to DIR/virtwork (default: dist/ under the repository)
#
# Environment:
#   VIRTWORK_GIT_COMMIT  commit the binary reports in `virtwork version`: 7-40 hex digits.
#                        Default: build.rs asks git (short HEAD), else "(unknown)".
#   VIRTWORK_BUILD_DATE  build date, UTC RFC 3339 (2026-01-31T12:00:00Z). Default: from
#                        SOURCE_DATE_EPOCH when set (reproducible builds), else build.rs uses
#                        the commit date from git, else "(unknown)".
#   CARGO                cargo executable (default: cargo)
#   CARGO_TARGET_DIR     cargo's target directory (default: target/ under the repository)
#
# Exit codes: 0 built; 2 bad argument or metadata; anything else is cargo's failure.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out_dir="$repo_root/dist"

die_input() {
    printf 'build-release: %s\n' "$*" >&2
    exit 2
}

while [ "$#" -gt 0 ]; do
    case "$1" in
        --out)
            [ "$#" -ge 2 ] || die_input "--out needs a directory"
            out_dir=$2
            shift 2
            ;;
        --out=*)
            out_dir=${1#--out=}
            shift
            ;;
        -h | --help)
            sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            die_input "unknown argument '$1' (accepted: --out DIR, --help)"
            ;;
    esac
done
[ -n "$out_dir" ] || die_input "--out needs a non-empty directory"

# Validate what was given; leave the rest to build.rs (git's short commit and commit date,
# else "(unknown)"), so a build from a git checkout needs no arguments at all.
commit=${VIRTWORK_GIT_COMMIT:-}
if [ -n "$commit" ] && ! [[ "$commit" =~ ^[0-9a-f]{7,40}$ ]]; then
    die_input "VIRTWORK_GIT_COMMIT='$commit' is not a commit id: expected 7-40 lowercase hex digits (e.g. \$(git rev-parse HEAD))"
fi

build_date=${VIRTWORK_BUILD_DATE:-}
if [ -z "$build_date" ] && [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    [[ "$SOURCE_DATE_EPOCH" =~ ^[0-9]+$ ]] ||
        die_input "SOURCE_DATE_EPOCH='$SOURCE_DATE_EPOCH' is not a number of seconds since 1970"
    build_date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
fi
if [ -n "$build_date" ] && ! [[ "$build_date" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]; then
    die_input "VIRTWORK_BUILD_DATE='$build_date' is not a UTC RFC 3339 time: expected YYYY-MM-DDTHH:MM:SSZ (e.g. \$(date -u +%Y-%m-%dT%H:%M:%SZ))"
fi

cargo=${CARGO:-cargo}
target_dir=${CARGO_TARGET_DIR:-$repo_root/target}

printf 'build-release: commit %s, date %s, target %s\n' \
    "${commit:-from git}" "${build_date:-from git}" "$target_dir" >&2

# build.rs reads these two variables (empty = work it out itself); export them to cargo only.
(
    cd "$repo_root"
    VIRTWORK_GIT_COMMIT=$commit VIRTWORK_BUILD_DATE=$build_date CARGO_TARGET_DIR=$target_dir \
        "$cargo" build --release --locked --bin virtwork
)

built="$target_dir/release/virtwork"
[ -x "$built" ] || {
    printf 'build-release: cargo succeeded but %s is missing\n' "$built" >&2
    exit 1
}
mkdir -p "$out_dir"
install -m 0755 "$built" "$out_dir/virtwork"
printf 'build-release: installed %s\n' "$out_dir/virtwork" >&2
