#!/usr/bin/env bash
# check-deps.sh: proves, in a few seconds, that every toolchain and library the build and the tests
# use is present, by compiling (and where it matters, linking and running) one trivial file with each
# compiler and flag set the Makefile uses. On the first failure it prints one line naming the Debian
# package that provides what is missing (scripts/install-deps.sh installs them all) and exits 1, so a
# missing prerequisite never surfaces as an error deep inside a compile or a test.
#
#   scripts/check-deps.sh          everything `make test` needs
#   scripts/check-deps.sh --build  only what `make all` needs (the native build)
set -uo pipefail
cd "$(dirname "$0")/.."

scope=${1:-all}
case "$scope" in --build) scope=build ;; all) ;; *) echo "usage: scripts/check-deps.sh [--build]" >&2; exit 2 ;; esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'int main(void) { return 0; }\n' >"$work/trivial.c"

# need PACKAGE WHAT COMMAND...: runs COMMAND quietly; on failure names PACKAGE and exits.
need() {
    local package=$1 what=$2
    shift 2
    if ! "$@" >"$work/log" 2>&1; then
        echo "check-deps: missing Debian package '$package' ($what failed: $(grep -m1 -iE 'error|not found|cannot' "$work/log" | cut -c1-160)); run scripts/install-deps.sh"
        exit 1
    fi
}
have() { command -v "$1" >/dev/null; }

need build-essential "the C compiler" have gcc
need make "make" have make
need pkg-config "pkg-config" have pkg-config
need build-essential "compiling and linking a C11 program" gcc -std=c11 "$work/trivial.c" -o "$work/native"

# Each external library: its header compiles and its pkg-config name links.
lib_check() { # package pkg-config-name includes
    need "$1" "pkg-config --libs $2" pkg-config --exists "$2"
    printf '%s\nint main(void) { return 0; }\n' "$3" >"$work/lib.c"
    # shellcheck disable=SC2046
    need "$1" "including its header and linking $2" \
        gcc -std=c11 $(pkg-config --cflags "$2") "$work/lib.c" -o "$work/lib" $(pkg-config --libs "$2")
}
lib_check libpcre2-dev libpcre2-8 '#define PCRE2_CODE_UNIT_WIDTH 8
#include <stdint.h>
#include <pcre2.h>'
lib_check libutf8proc-dev libutf8proc '#include <utf8proc.h>'
lib_check libjansson-dev jansson '#include <jansson.h>'
lib_check libmicrohttpd-dev libmicrohttpd '#include <microhttpd.h>'
[ "$scope" = build ] && exit 0

# cmocka, for every unit test.
printf '#include <stdarg.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <setjmp.h>\n#include <cmocka.h>\nint main(void) { return 0; }\n' >"$work/cm.c"
need libcmocka-dev "including <cmocka.h> and linking -lcmocka" gcc "$work/cm.c" -o "$work/cm" -lcmocka

# The ASan + UBSan build (gcc's sanitizer runtimes come with build-essential's gcc).
need build-essential "an ASan+UBSan build" \
    gcc -fsanitize=address,undefined "$work/trivial.c" -o "$work/asan"
need build-essential "running an ASan+UBSan binary" "$work/asan"

# The libFuzzer target (clang with its compiler-rt runtimes).
need clang "clang" have clang
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$work/fz.c"
# The runtimes are not in Debian's clang package but in libclang-rt-MAJOR-dev (only a Recommends).
clang_major=$(clang -dumpversion | cut -d. -f1)
need "libclang-rt-$clang_major-dev" "a libFuzzer build (clang -fsanitize=address,undefined,fuzzer: its runtimes)" \
    clang -fsanitize=address,undefined,fuzzer "$work/fz.c" -o "$work/fz"

# The source layout check (make format-check): Debian 12's clang-format, version 14 (another
# version formats some constructs differently).
need clang-format "clang-format" have clang-format
need clang-format "clang-format version 14 (make format-check)" sh -c 'clang-format --version | grep -q "version 14\."'

# The aarch64 cross build of the ARM kernels, run under qemu-user.
need gcc-aarch64-linux-gnu "the aarch64 cross compiler" have aarch64-linux-gnu-gcc
printf '#include <stdint.h>\n#include <stdio.h>\n#include <math.h>\nint main(void) { return (int)sqrt(0.0); }\n' >"$work/arm.c"
need libc6-dev-arm64-cross "cross-compiling a static aarch64 program (the aarch64 C headers and libc)" \
    aarch64-linux-gnu-gcc -static -O2 "$work/arm.c" -o "$work/arm" -lm
need qemu-user "qemu-aarch64" have qemu-aarch64
need qemu-user "running an aarch64 program under qemu-aarch64" qemu-aarch64 -cpu max "$work/arm"

# Tools the command-line tests and plots call.
need jq "jq" have jq
need time "/usr/bin/time (peak-RSS test)" test -x /usr/bin/time
need gnuplot-nox "gnuplot (benchmark plots)" have gnuplot
need binutils "nm (exported-symbol test)" have nm
need curl "curl (server tests)" have curl
need strace "strace (pauses a model load in the file-truncation test)" have strace
need nodejs "node (the openai client and browser tests)" have node
need npm "npm (installs the pinned test packages)" have npm
need python3 "python3 (an independent check of gen-model's quantization)" have python3
need procps "pgrep / pkill (stopping servers' children in the tests)" have pkill
need chromium "chromium (the chat page test)" test -x /usr/bin/chromium
need haproxy "haproxy (the cluster test: HAProxy in front of synapse serve nodes)" test -x /usr/sbin/haproxy
exit 0
