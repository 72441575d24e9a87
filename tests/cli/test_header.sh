#!/usr/bin/env bash
# The public header compiles as C11 and as C++ (gcc and g++, all warnings as errors), and both
# programs link against libsynapse and run.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

lib=$(dirname "$SYNAPSE")/libsynapse.a
libs="$(pkg-config --libs libpcre2-8 libutf8proc jansson) -lpthread -lm"
# A sanitized library needs the sanitizer runtimes at link time.
san=""
nm "$lib" 2>/dev/null | grep -q __asan_ && san="-fsanitize=address,undefined"

# shellcheck disable=SC2086
check "synapse.h compiles as C11" \
    gcc -std=c11 -Wall -Wextra -Wpedantic -Werror $san -Iinclude tests/header/header_c.c "$lib" $libs -o "$tmp/header_c"
check "the C program runs" "$tmp/header_c"
# shellcheck disable=SC2086
check "synapse.h compiles as C++" \
    g++ -std=c++17 -Wall -Wextra -Wpedantic -Werror $san -Iinclude tests/header/header_cxx.cpp "$lib" $libs -o "$tmp/header_cxx"
check "the C++ program runs" "$tmp/header_cxx"
finish
