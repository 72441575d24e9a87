#!/usr/bin/env bash
# Installs the Debian packages Synapse builds and tests with, when any is missing.
# Used by `make run`, `make test` and .ci/run. Uses sudo when not root.
set -euo pipefail

# Debian 12 (bookworm) names. Installed without Recommends, so what a Recommends would have brought
# is named here: libclang-rt-14-dev (clang's libFuzzer and sanitizer runtimes) and
# libc6-dev-arm64-cross (the aarch64 C library).
packages=(
    build-essential pkg-config clang libclang-rt-14-dev clang-format
    libpcre2-dev libutf8proc-dev libjansson-dev libcmocka-dev libmicrohttpd-dev
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user gnuplot-nox
    jq time curl strace procps python3 ca-certificates nodejs chromium haproxy
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Debian's nodejs comes without npm (its own package); NodeSource's nodejs brings it, and there
# Debian's npm would conflict, so npm is asked for only where the command is missing. Debian 12's
# nodejs is 18: enough for the openai and browser tests; the agent client tests
# (tests/cli/test_serve_agents.sh: LangChain 1.x, the AI SDK) need Node 20, which that test
# installs from the npm registry (tests/serve/node20, pinned) where the system's node is older.
command -v npm >/dev/null || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
