#!/usr/bin/env bash
# The boundary between the library and the tools (ARCHITECTURE.md, "Layers"): a tool source
# includes the public synapse.h, the library's one internal header synapse_internal.h and the
# tools' own headers, nothing else of src/; the library never includes anything of tools/; the
# tools' folders depend downwards only (cli, serve and cluster on common; common on nothing of
# theirs; main.c on the commands); no two files, in src/ or tools/, call each other.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

# includes FILE: the quoted includes of FILE, one a line.
includes() { sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1"; }

# scan: from inside a tree, prints one line per include of tools/ that crosses the boundary.
scan() {
    local f dir inc target from to
    for f in $(find tools -name '*.[ch]' | sort); do
        dir=$(dirname "$f")
        while read -r inc; do
            case "$inc" in "" | synapse.h | synapse_internal.h) continue ;; esac
            if [ ! -f "tools/$inc" ] && [ ! -f "$dir/$inc" ]; then
                echo "$f -> $inc (not the public or the internal header, nor a tools header)"
                continue
            fi
            target=$([ -f "$dir/$inc" ] && realpath --relative-to=. "$dir/$inc" || echo "tools/$inc")
            from=$(cut -d/ -f2 <<<"$f")
            to=$(cut -d/ -f2 <<<"$target")
            [ "$from" = "${f#tools/}" ] && from=main
            # Downwards only: common includes only common; a program's folder includes common
            # and itself (and commands.h, which main.c dispatches through).
            [ "$from" = common ] && [ "$to" != common ] && echo "$f -> $target (common depends on no program)"
            case "$from:$to" in cli:serve | cli:cluster | serve:cli | serve:cluster | cluster:cli | cluster:serve)
                echo "$f -> $target (one program's folder into another's)" ;;
            esac
        done < <(includes "$f")
    done
}

report=$(scan)
check "tools/ includes only synapse.h, synapse_internal.h and its own headers, downwards" test -z "$report"
[ -n "$report" ] && echo "$report"

# The scan itself catches each kind of violation, in a copy of the tree.
cp -r tools "$tmp/tools"
printf '#include "model/model.h"\n' >"$tmp/tools/cli/probe_src.c"
printf '#include "serve/server.h"\n' >"$tmp/tools/cli/probe_sideways.c"
printf '#include "cli/run.h"\n' >"$tmp/tools/common/probe_up.c"
probe=$(cd "$tmp" && scan)
check "a tool including model/model.h is reported" grep -q 'probe_src.c -> model/model.h' <<<"$probe"
check "cli including serve's header is reported" grep -q 'probe_sideways.c.*another' <<<"$probe"
check "common including cli's header is reported" grep -q 'probe_up.c.*no program' <<<"$probe"

# No two files call each other (the layers call downwards only), in the library or the tools.
cycles=$(python3 tests/tools/call_cycles.py src tools)
check "no two files of src/ or tools/ call each other" test -z "$cycles"
[ -n "$cycles" ] && echo "$cycles"
mkdir -p "$tmp/cyc"
printf 'void b(void);\nvoid a(void) { b(); }\n' >"$tmp/cyc/a.c"
printf 'void a(void);\nvoid b(void) { a(); }\n' >"$tmp/cyc/b.c"
check "two files calling each other are reported" \
    sh -c "! python3 tests/tools/call_cycles.py '$tmp/cyc' >/dev/null"

lib_to_tools=$(grep -rlE '#[[:space:]]*include[[:space:]]*"[^"]*tools/' src include || true)
check "the library includes nothing of tools/" test -z "$lib_to_tools"
check "the public header includes no project header" \
    test -z "$(includes include/synapse.h)"
finish
