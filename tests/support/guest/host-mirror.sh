#!/usr/bin/env bash
# Prints the Debian archive the guest image and the local repository are built from:
# VIRTWORK_GUEST_MIRROR when set, else the first URI ending in /debian in the host's apt
# sources (one-line and deb822 files), else deb.debian.org.
set -euo pipefail
if [ -n "${VIRTWORK_GUEST_MIRROR:-}" ]; then
    echo "${VIRTWORK_GUEST_MIRROR%/}"
    exit 0
fi
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(grep -v '^[[:space:]]*#' "$f" | grep -oE 'https?://[^[:space:]]+' | sed 's:/*$::' | grep -E '/debian$' | head -n 1 || true)
    if [ -n "$uri" ]; then
        echo "$uri"
        exit 0
    fi
done
echo http://deb.debian.org/debian
