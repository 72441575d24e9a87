#!/usr/bin/env bash
# Installs the Debian packages Synapse builds and tests with, when any is missing.
# Used by `make run`, `make test` and .ci/run. Uses sudo when not root.
set -euo pipefail

packages=(
    build-essential pkg-config clang
    libpcre2-dev libutf8proc-dev libjansson-dev libcmocka-dev libmicrohttpd-dev
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user gnuplot-nox
    jq time curl strace nodejs chromium haproxy
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
