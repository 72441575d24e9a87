#!/usr/bin/env bash
# `make install` into a temporary DESTDIR installs a library people can link: the static and the
# versioned shared library (soname libsynapse.so.MAJOR, the usual symlinks), the header, the tool and
# synapse.pc; libsynapse.so exports exactly the header's SYN_API functions; the README's library
# example, built through `pkg-config --cflags --libs synapse` against the .so and fully static, runs
# on the tiny F32 model and prints llama.cpp's greedy next token; `make uninstall` removes it all.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

stage=$tmp/stage
prefix=/usr/local
lib=$stage$prefix/lib
major=$(sed -n 's/^#define SYN_VERSION_MAJOR \([0-9]*\)/\1/p' include/synapse.h)

check "make install DESTDIR=... PREFIX=$prefix" make -s install DESTDIR="$stage" PREFIX="$prefix"
for f in lib/libsynapse.a lib/libsynapse.so "lib/libsynapse.so.$major" include/synapse.h \
    lib/pkgconfig/synapse.pc bin/synapse; do
    check "installed $f" test -e "$stage$prefix/$f"
done
check "libsynapse.so -> libsynapse.so.$major" test "$(readlink "$lib/libsynapse.so")" = "libsynapse.so.$major"
real=$(readlink "$lib/libsynapse.so.$major")
check "libsynapse.so.$major -> a versioned file ($real)" test -f "$lib/$real" -a ! -L "$lib/$real"
soname=$(readelf -d "$lib/$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
check "the shared library's soname is libsynapse.so.$major ($soname)" test "$soname" = "libsynapse.so.$major"

# Exported symbols: exactly the SYN_API declarations of the header.
nm -D --defined-only "$lib/$real" | awk '{print $3}' | sort >"$tmp/exported"
# (a declaration may wrap after its return type, as clang-format lays long ones out)
tr '\n' ' ' <include/synapse.h | grep -oE 'SYN_API [^;(]*\bsyn_[a-z0-9_]+\(' |
    grep -oE 'syn_[a-z0-9_]+\($' | tr -d '(' | sort >"$tmp/declared"
check "nm -D lists only syn_* symbols" test -z "$(grep -v '^syn_' "$tmp/exported")"
check "nm -D lists every declared function ($(wc -l <"$tmp/declared") of them) and nothing else" \
    diff "$tmp/declared" "$tmp/exported"

# The README's example: the first C block after "## Using the library".
awk '/^## Using the library/ {f = 1} f && /^```c$/ {c = 1; next} c && /^```$/ {exit} c' README.md >"$tmp/example.c"
check "the README's library example was found" grep -q 'int main' "$tmp/example.c"

export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage
want=$(jq -r '.models["qwen2-tiny-synth-f32"].prompts[] | select(.prompt == "The capital of France is") |
    .generated_ids[0]' "$GREEDY_JSON")
# shellcheck disable=SC2046
check "the example builds against libsynapse.so with pkg-config" \
    gcc -std=c11 -Wall -Werror "$tmp/example.c" $(pkg-config --cflags --libs synapse) -o "$tmp/example_so"
check "the dynamic build needs libsynapse.so.$major" \
    sh -c "readelf -d '$tmp/example_so' | grep -q 'NEEDED.*\[libsynapse.so.$major\]'"
capture env LD_LIBRARY_PATH="$lib" "$tmp/example_so" "$TINY_F32"
check "the dynamic build prints llama.cpp's greedy token $want" grep -q "^next token: $want " "$tmp/out"

# shellcheck disable=SC2046
check "the example builds statically with pkg-config --static" \
    gcc -std=c11 -Wall -Werror -static "$tmp/example.c" $(pkg-config --cflags --libs --static synapse) \
    -o "$tmp/example_static"
check "the static build needs no shared library" \
    sh -c "! readelf -d '$tmp/example_static' 2>/dev/null | grep -q NEEDED"
capture "$tmp/example_static" "$TINY_F32"
check "the static build prints llama.cpp's greedy token $want" grep -q "^next token: $want " "$tmp/out"

check "the installed tool runs" sh -c "LD_LIBRARY_PATH='$lib' '$stage$prefix/bin/synapse' inspect -m '$TINY_F32' >/dev/null"

check "make uninstall" make -s uninstall DESTDIR="$stage" PREFIX="$prefix"
check "uninstall left no file behind" test -z "$(find "$stage" ! -type d)"
finish
