#!/usr/bin/env bash
# The aarch64 kernel tiers under qemu-user (make test-arm): dot-product and i8mm tiers against
# scalar on `-cpu max`, and the no-dot-product fallback on `-cpu cortex-a53`.
set -euo pipefail
cd "$(dirname "$0")/../.."
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
    command -v "$tool" >/dev/null || { echo "test_arm_kernels: $tool not installed (scripts/install-deps.sh)"; exit 1; }
done
make -s test-arm
