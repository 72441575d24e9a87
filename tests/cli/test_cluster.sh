#!/usr/bin/env bash
# `synapse cluster-config` and HAProxy in front of `synapse serve` nodes (issue 11), all on
# 127.0.0.1 with Debian's haproxy in master-worker mode on a free port:
#   - usage errors (exit 2); a node that is unreachable or answers garbage (exit 1, one line);
#     a pid file naming a process that is not HAProxy is never signalled;
#   - three nodes (model a on nodes 1 and 2, model b on node 3): each model only on its nodes, a
#     spread over both of its nodes (the nodes' /metrics); unknown model / no model: JSON errors;
#   - session affinity (X-Session-Id, then the body's "user"): every turn on the first turn's node,
#     reusing its prefix cache (usage and the node's metrics);
#   - streaming: the first chunk arrives long before the last;
#   - node 1 SIGKILLed during 200 curl requests and 200 openai-client requests: none hangs, every
#     curl request completes or fails clearly, every request sent after the kill is served by
#     node 2, and all 200 of the openai client (its own retries on) complete;
#   - a node added by a reload (SIGUSR2) receives requests, with none failing across the reload;
#   - --watch: a node gone is left out and HAProxy reloaded; a model loaded on a node at run time
#     (POST /admin/models) is spread over within two watch periods, no request failing; unloaded
#     (DELETE) again without a failure;
#   - the only node of a model down: 503 with an OpenAI-style JSON body.
set -u
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh
. tests/cli/serve_lib.sh

# Debian installs it in /usr/sbin, outside a normal user's PATH.
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$HAPROXY" ] || { fail "haproxy is not installed (scripts/install-deps.sh installs it)"; finish; }
if [ ! -d tests/serve/node_modules ] || [ tests/serve/package-lock.json -nt tests/serve/node_modules ]; then
    check "npm ci (openai)" sh -c "cd tests/serve && npm ci --no-audit --no-fund >'$tmp/npm.log' 2>&1 && touch node_modules"
fi

haproxy_pid=""
watch_pid=""
cleanup() {
    [ -n "$watch_pid" ] && kill -9 "$watch_pid" 2>/dev/null
    [ -n "$haproxy_pid" ] && stop_haproxy
    { for p in "${servers[@]}"; do kill -9 "$p" && wait "$p"; done; } 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM # through cleanup: nothing is left running

# stop_haproxy: SIGTERM to the master (it stops its workers), SIGKILL after 3 s.
stop_haproxy() {
    kill -TERM "$haproxy_pid" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$haproxy_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$haproxy_pid" 2>/dev/null; then
        for w in $(pgrep -P "$haproxy_pid"); do kill -9 "$w" 2>/dev/null; done
        kill -9 "$haproxy_pid" 2>/dev/null
    fi
    wait "$haproxy_pid" 2>/dev/null
    haproxy_pid=""
}

# start_haproxy NODE_URL...: writes the configuration for the nodes on a free port (below the
# kernel's ephemeral range, where the nodes are) and starts HAProxy on it in master-worker mode;
# sets $lb (its URL), $lb_port and $haproxy_pid once /health answers through it.
start_haproxy() {
    for _ in $(seq 10); do
        lb_port=$((20000 + RANDOM % 12000))
        (exec 3<>"/dev/tcp/127.0.0.1/$lb_port") 2>/dev/null && continue # taken
        "$SYNAPSE" cluster-config --listen "127.0.0.1:$lb_port" -o "$tmp/haproxy.cfg" "$@" || return 1
        "$HAPROXY" -W -f "$tmp/haproxy.cfg" -p "$tmp/haproxy.pid" >>"$tmp/haproxy.log" 2>&1 &
        haproxy_pid=$!
        lb=http://127.0.0.1:$lb_port
        for _ in $(seq 50); do
            [ "$(curl -s -o /dev/null -w '%{http_code}' "$lb/health")" = 200 ] && return 0
            kill -0 "$haproxy_pid" 2>/dev/null || break
            sleep 0.1
        done
        stop_haproxy
    done
    return 1
}

# kill_node PID: SIGKILL, and the process reaped (without the shell's "Killed" notice).
kill_node() {
    { kill -9 "$1" && wait "$1"; } 2>/dev/null
}

# terminate PID: SIGTERM, at most 10 s to exit (then SIGKILL); its exit status in $rc.
terminate() {
    kill -TERM "$1"
    for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    rc=$?
}

# node_metric PORT NAME MODEL: the value of NAME{model="MODEL"} in that node's /metrics (0 when
# absent: the node does not hold the model).
node_metric() {
    curl -s "http://127.0.0.1:$1/metrics" |
        awk -v n="$2" -v m="model=\"$3\"" 'index($1, n "{") == 1 && index($1, m) {v = $2} END {print v + 0}'
}

# chat_body MODEL QUESTION [MAX_TOKENS]: a greedy chat request.
chat_body() {
    jq -cn --arg m "$1" --arg q "$2" --argjson n "${3:-4}" \
        '{model: $m, messages: [{role: "user", content: $q}], temperature: 0, max_tokens: $n}'
}

# lb_post PATH BODY [CURL ARGS...]: through the balancer; the body in $tmp/body, the status in
# $status, the node that answered (X-Synapse-Node: 127.0.0.1:PORT) in $node.
lb_post() {
    local path=$1 body=$2 out
    shift 2
    out=$(curl -s -o "$tmp/body" -w '%{http_code} %header{x-synapse-node}' --max-time 20 \
        -H 'Content-Type: application/json' "$@" --data-binary "$body" "$lb$path")
    status=${out%% *}
    node=${out#* }
}

# wait_until TENTHS CMD...: runs CMD every tenth of a second until it succeeds, at most TENTHS
# times; its last answer.
wait_until() {
    local tries=$1
    shift
    for _ in $(seq "$tries"); do "$@" && return 0; sleep 0.1; done
    "$@"
}

# wait_for_log FILE PATTERN TENTHS: a line matching PATTERN (grep -E) in FILE, within TENTHS
# tenths of a second.
wait_for_log() {
    wait_until "$3" grep -qsE -- "$2" "$1"
}

# logged_after FILE FIRST THEN: FILE has a line containing THEN after one containing FIRST.
logged_after() {
    awk -v a="$2" -v b="$3" 'index($0, a) {seen = 1} seen && index($0, b) {found = 1} END {exit !found}' "$1"
}

# wait_bounded SECONDS PID...: waits for the processes; any still running after SECONDS is
# killed, and the answer is 1.
wait_bounded() {
    local deadline=$((SECONDS + $1)) late=0 p
    shift
    for p in "$@"; do
        while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
        kill -0 "$p" 2>/dev/null && { kill -9 "$p" 2>/dev/null; late=1; }
        wait "$p" 2>/dev/null
    done
    return "$late"
}

question="Name three rivers."
expected=$("$SYNAPSE" run -m "$TINY_Q8" --chat -p "$question" --temp 0 -n 8 --json | jq -r .text)

# curl_load OUT MODEL COUNT [STOP_FILE]: COUNT greedy requests (8 tokens) one after another
# through the balancer, each on a new connection with a 20 s limit (or until STOP_FILE exists);
# then judges them. One line per request in OUT: "SENT_US CURL_RC STATUS NODE VERDICT", VERDICT
# "ok" (the greedy text), "clear" (a JSON error, or a connection error that is not a timeout) or
# "bad". The bodies are judged at the end, by one jq: the requests run at full speed.
curl_load() {
    local out=$1 model=$2 count=$3 stop=${4:-/nonexistent} i sent res body
    body=$(chat_body "$model" "$question" 8)
    : >"$out.raw"
    for ((i = 0; i < count; i++)); do
        [ -e "$stop" ] && break
        sent=${EPOCHREALTIME/./}
        res=$(curl -s -o "$out.body.$i" -w '%{http_code} %header{x-synapse-node}' --max-time 20 \
            -H 'Content-Type: application/json' --data-binary "$body" "$lb/v1/chat/completions")
        echo "$sent $? ${res:-000} - $i" >>"$out.raw"
    done
    # "I text|error|other" per body (each ended by a newline: jq -R joins the files' lines), then
    # the verdict per request.
    for i in "$out".body.*; do echo >>"$i"; done
    jq -rR --arg t "$expected" 'select(length > 0) | (input_filename | sub(".*[.]body[.]"; "")) + " " +
        ((fromjson? // {}) as $b | if $b.choices[0].message.content == $t then "text"
         elif ($b.error.message | type) == "string" then "error" else "other" end)' "$out".body.* >"$out.judged"
    awk 'NR == FNR {body[$1] = $2; next}
         {v = "bad"
          if ($2 == 0 && $3 == 200 && body[$NF] == "text") v = "ok"
          else if (($2 != 0 && $2 != 28) || ($2 == 0 && body[$NF] == "error")) v = "clear"
          print $1, $2, $3, ($4 == "-" ? "none" : $4), v}' "$out.judged" "$out.raw" >"$out"
}

# count_lines AWK_CONDITION FILE...: how many result lines satisfy the condition.
count_lines() {
    local cond=$1
    shift
    cat "$@" | awk "$cond {n++} END {print n + 0}"
}

# ---- usage errors and nodes that answer badly ---------------------------------------------
expect_exit 2 "no node: usage error" "$SYNAPSE" cluster-config
expect_exit 2 "https URL refused" "$SYNAPSE" cluster-config https://127.0.0.1:8080
expect_exit 2 "URL without a port refused" "$SYNAPSE" cluster-config http://127.0.0.1
expect_exit 2 "URL with a path refused" "$SYNAPSE" cluster-config http://127.0.0.1:8080/v1
expect_exit 2 "port out of range refused" "$SYNAPSE" cluster-config http://127.0.0.1:65536
expect_exit 2 "a node given twice" "$SYNAPSE" cluster-config http://127.0.0.1:8080 http://127.0.0.1:8080/
expect_exit 2 "--listen without a port" "$SYNAPSE" cluster-config --listen 127.0.0.1 http://127.0.0.1:8080
expect_exit 2 "--listen with a bad host" "$SYNAPSE" cluster-config --listen 'a b:80' http://127.0.0.1:8080
expect_exit 2 "--listen port 0" "$SYNAPSE" cluster-config --listen 127.0.0.1:0 http://127.0.0.1:8080
expect_exit 2 "--watch without -o" "$SYNAPSE" cluster-config --watch 1 --haproxy-pid-file x http://127.0.0.1:8080
expect_exit 2 "--haproxy-pid-file without --watch" "$SYNAPSE" cluster-config --haproxy-pid-file x http://127.0.0.1:8080
expect_exit 2 "an unknown option" "$SYNAPSE" cluster-config --bogus http://127.0.0.1:8080
expect_exit 0 "--help" "$SYNAPSE" cluster-config --help
echo "old" >"$tmp/kept.cfg"
expect_exit 1 "an unreachable node: exit 1" "$SYNAPSE" cluster-config -o "$tmp/kept.cfg" http://127.0.0.1:1
expect_error_mentions "http://127.0.0.1:1" "the error names the unreachable node"
check "the output file is left as it was" test "$(cat "$tmp/kept.cfg")" = old

node tests/serve/fake_node.mjs >"$tmp/fake.txt" 2>&1 &
servers+=("$!")
wait_for_log "$tmp/fake.txt" '^ready$' 50 || fail "the fake nodes did not start: $(head -c 300 "$tmp/fake.txt")"
while read -r misbehaviour fake_port; do
    [ "$misbehaviour" = ready ] && break
    [ "$misbehaviour" = valid ] && continue
    start=$SECONDS
    expect_exit 1 "a node answering $misbehaviour: exit 1" "$SYNAPSE" cluster-config --timeout 1 \
        "http://127.0.0.1:$fake_port"
    expect_error_mentions "node http://127.0.0.1:$fake_port: " "  ... naming the node"
    check "  ... within the timeout" test $((SECONDS - start)) -le 3
done <"$tmp/fake.txt"

# A node that answers well: the configuration on stdout, which HAProxy accepts.
valid=http://127.0.0.1:$(awk '$1 == "valid" {print $2}' "$tmp/fake.txt")
expect_exit 0 "one node, the configuration on stdout" "$SYNAPSE" cluster-config "$valid"
check "  ... HAProxy accepts it" "$HAPROXY" -c -q -f "$tmp/out"
check "  ... listening on the default 127.0.0.1:8000, model fake with 3 slots" \
    sh -c "grep -qx '    bind 127.0.0.1:8000' '$tmp/out' && grep -q '^    server .* maxconn 3\$' '$tmp/out'"
# --watch never signals a process that is not HAProxy (a stale pid file's pid reused).
sleep 30 &
bystander=$!
servers+=("$bystander")
echo "$bystander" >"$tmp/stale.pid"
: >"$tmp/stale.log"
"$SYNAPSE" cluster-config --watch 1 --haproxy-pid-file "$tmp/stale.pid" -o "$tmp/stale.cfg" "$valid" 2>"$tmp/stale.log" &
stale_watch=$!
servers+=("$stale_watch")
check "watch: a pid file naming another process is not signalled" wait_for_log "$tmp/stale.log" 'is not HAProxy' 30
check "  ... which is still running" kill -0 "$bystander"
check "  ... and the file was written" "$HAPROXY" -c -q -f "$tmp/stale.cfg"
terminate "$stale_watch"
check "  ... SIGTERM: exit 0" test "$rc" -eq 0
kill_node "$bystander"

# ---- three nodes behind HAProxy -----------------------------------------------------------
cp "$TINY_Q8" "$tmp/b.gguf"
node_args=(--parallel 2 -t 1 -c 512 --kv-budget 64)
start_server node1 -m "$TINY_Q8" --alias a "${node_args[@]}"
p1=$port pid1=$pid
start_server node2 -m "$TINY_Q8" --alias a "${node_args[@]}"
p2=$port
start_server node3 -m "$tmp/b.gguf" --alias b "${node_args[@]}"
p3=$port pid3=$pid
n1=127.0.0.1:$p1 n2=127.0.0.1:$p2 n3=127.0.0.1:$p3

check "HAProxy starts on the generated configuration" start_haproxy "http://$n1" "http://$n2" "http://$n3"
[ -n "$haproxy_pid" ] || finish
check "haproxy -c accepts it" "$HAPROXY" -c -q -f "$tmp/haproxy.cfg"
check "model a: nodes 1 and 2, 2 slots each" sh -c "sed -n '/^backend model_a/,/^\$/p' '$tmp/haproxy.cfg' |
    grep -c '^    server .* maxconn 2\$' | grep -qx 2"
check "model b: node 3 only" sh -c "sed -n '/^backend model_b/,/^\$/p' '$tmp/haproxy.cfg' | grep '^    server' |
    grep -q '$n3' && test \$(sed -n '/^backend model_b/,/^\$/p' '$tmp/haproxy.cfg' | grep -c '^    server') = 1"

b_nodes="" b_tokens=0
for i in 1 2 3 4 5 6; do
    lb_post /v1/chat/completions "$(chat_body b "Question $i")"
    [ "$status" = 200 ] && b_tokens=$((b_tokens + $(jq .usage.completion_tokens "$tmp/body")))
    b_nodes+="$status:$node "
done
check "6 requests for b: all answered by node 3 ($b_nodes)" test "$b_nodes" = "$(printf "200:$n3 %.0s" 1 2 3 4 5 6)"
check "node 3's metrics count b's $b_tokens generated tokens" test "$(node_metric "$p3" synapse_generated_tokens_total b)" = "$b_tokens"
check "nodes 1 and 2 have generated nothing for b" \
    test "$(node_metric "$p1" synapse_generated_tokens_total b)$(node_metric "$p2" synapse_generated_tokens_total b)" = 00

a_nodes="" a_tokens=0 a_ok=0
for i in 1 2 3 4 5 6 7 8; do
    lb_post /v1/chat/completions "$(chat_body a "Question $i")"
    [ "$status" = 200 ] && a_tokens=$((a_tokens + $(jq .usage.completion_tokens "$tmp/body")))
    [ "$status" = 200 ] && { [ "$node" = "$n1" ] || [ "$node" = "$n2" ]; } && a_ok=$((a_ok + 1))
    a_nodes+="$node "
done
a1=$(node_metric "$p1" synapse_generated_tokens_total a) a2=$(node_metric "$p2" synapse_generated_tokens_total a)
check "8 requests for a: all answered by node 1 or 2 ($a_nodes)" test "$a_ok" = 8
check "a's $a_tokens tokens are spread: node 1 $a1, node 2 $a2, both > 0, none on node 3" \
    test "$a1" -gt 0 -a "$a2" -gt 0 -a $((a1 + a2)) = "$a_tokens" -a "$(node_metric "$p3" synapse_generated_tokens_total a)" = 0

lb_post /v1/chat/completions "$(chat_body nosuch "hi")"
expect_status 503 "an unknown model: 503 with a JSON error"
check "  ... code model_not_found, naming the model" jqe '.error.code == "model_not_found" and
    (.error.message | contains("nosuch")) and .error.type and (.error | has("param"))' "$tmp/body"
lb_post /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}]}'
expect_status 400 "no model in the body: 400 with a JSON error"
lb_post /admin/models '{"path": "/x.gguf", "alias": "x"}'
expect_status 404 "/admin through the balancer: 404 with a JSON error"
status=$(curl -s -o "$tmp/body" -w '%{http_code}' "$lb/v1/models")
check "GET /v1/models through the balancer: every model of the cluster, a and b" \
    jqe '.object == "list" and ([.data[].id] == ["a", "b"])' "$tmp/body"

# ---- session affinity and the prefix cache --------------------------------------------------
# converse KIND: a 4-turn conversation keyed by the X-Session-Id header (KIND header) or by the
# body's "user" field (KIND user), one unique long system prompt; every turn after the first
# must land on the first turn's node, reuse cached tokens and raise that node's hit count.
converse() {
    local kind=$1 key="conv-$1-$RANDOM" first="" t messages reply hits hits_after same=0 cached=0 grew=0 args=()
    [ "$kind" = header ] && args=(-H "X-Session-Id: $key")
    messages=$(jq -cn --arg s "You are assistant $key. Answer every question about rivers, lakes and seas in one line." \
        '[{role: "system", content: $s}, {role: "user", content: "Turn 1: name a river."}]')
    for t in 1 2 3 4; do
        local body
        body=$(jq -cn --argjson m "$messages" --arg u "$key" --arg k "$kind" \
            '{model: "a", messages: $m, temperature: 0, max_tokens: 6} + (if $k == "user" then {user: $u} else {} end)')
        [ -n "$first" ] && hits=$(node_metric "${first#*:}" synapse_prefix_cache_hit_tokens_total a)
        lb_post /v1/chat/completions "$body" "${args[@]}"
        [ "$status" = 200 ] || { fail "$kind conversation, turn $t: status $status: $(head -c 200 "$tmp/body")"; return; }
        if [ -z "$first" ]; then
            first=$node
        else
            hits_after=$(node_metric "${first#*:}" synapse_prefix_cache_hit_tokens_total a)
            [ "$node" = "$first" ] && same=$((same + 1))
            jqe '.usage.prompt_tokens_details.cached_tokens > 0' "$tmp/body" && cached=$((cached + 1))
            [ "$hits_after" -gt "$hits" ] && grew=$((grew + 1))
        fi
        reply=$(jq -r '.choices[0].message.content' "$tmp/body")
        messages=$(jq -cn --argjson m "$messages" --arg r "$reply" --arg n "Turn $((t + 1)): and another?" \
            '$m + [{role: "assistant", content: $r}, {role: "user", content: $n}]')
    done
    check "conversation keyed by $kind: turns 2-4 on the first turn's node ($same of 3)" test "$same" = 3
    check "  ... each reusing the prefix cache (cached_tokens > 0: $cached of 3; node's hit metric grew: $grew of 3)" \
        test "$cached$grew" = 33
}
converse header
converse user

# ---- streaming passes through unbuffered ---------------------------------------------------
# Chunks spread over the generation (a buffering proxy would deliver them together at its end):
# the first before a third of the span, the span itself at least 20 ms (the tiny model streams
# 400 tokens in under 100 ms on a CPU with the interleaved kernels).
stream_body=$(jq -cn '{model: "a", messages: [{role: "user", content: "Tell a long story."}], temperature: 0,
    max_tokens: 400, stream: true}')
t0=${EPOCHREALTIME/./}
curl -sN --max-time 20 -H 'Content-Type: application/json' --data-binary "$stream_body" "$lb/v1/chat/completions" |
    while IFS= read -r line; do
        case $line in "data: {"*) echo "${EPOCHREALTIME/./}" ;; esac
    done >"$tmp/stream.times"
chunks=$(wc -l <"$tmp/stream.times")
first_ms=$((($(head -n 1 "$tmp/stream.times") - t0) / 1000))
last_ms=$((($(tail -n 1 "$tmp/stream.times") - t0) / 1000))
check "a 400-token stream through HAProxy: $chunks chunks, the first after $first_ms ms, the last after $last_ms ms" \
    test "$chunks" -gt 100 -a $((last_ms - first_ms)) -ge 20 -a $((first_ms * 3)) -lt "$last_ms"

# ---- node 1 killed during 200 curl requests and 200 openai-client requests -----------------
for w in 1 2 3 4; do
    curl_load "$tmp/kill.curl.$w" a 50 &
    eval "curl_pid$w=$!"
done
node tests/serve/cluster_retries.mjs "$lb/v1" a "$question" 200 4 "$tmp/kill.openai" >"$tmp/openai.log" 2>&1 &
openai_pid=$!
for _ in $(seq 300); do # kill once a quarter of the 400 have finished
    [ "$(cat "$tmp"/kill.curl.[1-4].raw "$tmp/kill.openai" 2>/dev/null | wc -l)" -ge 100 ] && break
    sleep 0.05
done
kill_node "$pid1"
kill_us=${EPOCHREALTIME/./}
check "the curl clients finish (none hangs)" wait_bounded 60 "$curl_pid1" "$curl_pid2" "$curl_pid3" "$curl_pid4"
check "the openai client finishes" wait_bounded 60 "$openai_pid"
curl_files=("$tmp"/kill.curl.[1-4])
check "curl: 200 requests made" test "$(count_lines 1 "${curl_files[@]}")" = 200
check "curl: every request completed with the greedy text or failed with a clear error, none timed out" \
    test "$(count_lines '$5 == "bad" || $2 == 28' "${curl_files[@]}")" = 0
after=$(count_lines "\$1 > $kill_us" "${curl_files[@]}")
not_node2=$(cat "${curl_files[@]}" | awk "\$1 > $kill_us && !(\$5 == \"ok\" && \$4 == \"$n2\")")
check "curl: $after requests sent after the kill, all completed by node 2 ${not_node2:+(not: $not_node2)}" \
    test "$after" -ge 20 -a -z "$not_node2"
check "curl: node 1 served requests before the kill" test "$(count_lines "\$4 == \"$n1\"" "${curl_files[@]}")" -gt 0
check "openai client (its retries on): all 200 completed with the greedy text" \
    test "$(jq -s --arg t "$expected" '[.[] | select(.ok and .text == $t)] | length' "$tmp/kill.openai")" = 200
check "openai client: every request sent after the kill served by node 2" \
    test "$(jq -s --argjson k "$kill_us" --arg n "$n2" '[.[] | select(.sent_us > $k and .node != $n)] | length' \
        "$tmp/kill.openai")" = 0 -a "$(jq -s --argjson k "$kill_us" '[.[] | select(.sent_us > $k)] | length' "$tmp/kill.openai")" -ge 20

# ---- a node added by a reload ---------------------------------------------------------------
start_server node4 -m "$TINY_Q8" --alias a "${node_args[@]}"
p4=$port pid4=$pid n4=127.0.0.1:$port
for w in 1 2 3; do
    curl_load "$tmp/reload.$w" a 40 &
    eval "reload_pid$w=$!"
done
for _ in $(seq 100); do [ "$(cat "$tmp"/reload.[1-3].raw 2>/dev/null | wc -l)" -ge 20 ] && break; sleep 0.05; done
check "the configuration with node 4 (and without dead node 1)" "$SYNAPSE" cluster-config \
    --listen "127.0.0.1:$lb_port" -o "$tmp/haproxy.cfg" "http://$n2" "http://$n3" "http://$n4"
reload_us=${EPOCHREALTIME/./}
check "SIGUSR2 to the HAProxy master" kill -USR2 "$(cat "$tmp/haproxy.pid")"
check "the load finishes" wait_bounded 60 "$reload_pid1" "$reload_pid2" "$reload_pid3"
reload_files=("$tmp"/reload.[1-3])
check "120 requests across the reload, every one completed with the greedy text" \
    test "$(count_lines '$5 == "ok"' "${reload_files[@]}")" = 120
check "  ... some sent before the reload, some after" test "$(count_lines "\$1 < $reload_us" "${reload_files[@]}")" -gt 0 \
    -a "$(count_lines "\$1 > $reload_us" "${reload_files[@]}")" -ge 20
check "node 4 received requests after the reload" test "$(count_lines "\$4 == \"$n4\"" "${reload_files[@]}")" -gt 0
check "  ... as its metrics show" test "$(node_metric "$p4" synapse_generated_tokens_total a)" -gt 0

# ---- --watch ---------------------------------------------------------------------------------
: >"$tmp/watch.log"
"$SYNAPSE" cluster-config --listen "127.0.0.1:$lb_port" -o "$tmp/haproxy.cfg" --watch 1 \
    --haproxy-pid-file "$tmp/haproxy.pid" "http://$n2" "http://$n3" "http://$n4" 2>"$tmp/watch.log" &
watch_pid=$!
check "watch: the first poll finds the configuration up to date" wait_for_log "$tmp/watch.log" 'is up to date' 30
check "  ... and does not reload" sh -c "! grep -q reloaded '$tmp/watch.log'"

# Model b loaded on node 2 at run time: needs synapse serve's /admin/models.
if "$SYNAPSE" serve --help | grep -q /admin/models; then
    rm -f "$tmp/stop"
    for w in 1 2; do
        curl_load "$tmp/watch.$w" b 400 "$tmp/stop" &
        eval "watch_load$w=$!"
    done
    sleep 0.3
    status=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "$(jq -cn --arg p "$tmp/b.gguf" '{path: $p, alias: "b"}')" "http://$n2/admin/models")
    check "POST /admin/models loads b on node 2 (201)" test "$status" = 201
    check "watch: within two periods, b on node 2 logged, then HAProxy reloaded" \
        wait_until 25 logged_after "$tmp/watch.log" "model b is on http://$n2 (2 slots)" "reloaded HAProxy"
    spread_us=${EPOCHREALTIME/./}
    sleep 1.5
    check "node 2's metrics show b's tokens" test "$(node_metric "$p2" synapse_generated_tokens_total b)" -gt 0
    status=$(curl -s -o "$tmp/body" -w '%{http_code}' -X DELETE "http://$n2/admin/models/b")
    check "DELETE /admin/models/b unloads it from node 2" test "$status" = 200
    check "watch: b no longer on node 2, HAProxy reloaded" \
        wait_until 25 logged_after "$tmp/watch.log" "model b is no longer on http://$n2" "reloaded HAProxy"
    sleep 1
    touch "$tmp/stop"
    check "the load of b finishes" wait_bounded 30 "$watch_load1" "$watch_load2"
    watch_files=("$tmp"/watch.[1-2])
    check "every request for b through the load and unload completed ($(count_lines 1 "${watch_files[@]}") requests)" \
        test "$(count_lines '$5 != "ok"' "${watch_files[@]}")" = 0
    check "requests for b after the reload were spread over nodes 2 and 3" \
        test "$(count_lines "\$1 > $spread_us && \$4 == \"$n2\"" "${watch_files[@]}")" -gt 0 \
        -a "$(count_lines "\$1 > $spread_us && \$4 == \"$n3\"" "${watch_files[@]}")" -gt 0
else
    echo "skip: model b loaded on node 2 at run time (synapse serve has no /admin/models yet)"
fi

# A node that goes away is left out at the next poll, and its model served by the others.
kill_node "$pid4"
check "watch: node 4 left out within two periods" wait_for_log "$tmp/watch.log" "node http://$n4 left out" 25
check "  ... a no longer on it, HAProxy reloaded" \
    wait_until 25 logged_after "$tmp/watch.log" "model a is no longer on http://$n4" "reloaded HAProxy"
check "  ... the file names node 4 as left out" wait_for_log "$tmp/haproxy.cfg" "$n4  did not answer" 25
a_after=""
for i in 1 2 3 4; do lb_post /v1/chat/completions "$(chat_body a "After $i")"; a_after+="$status:$node "; done
check "requests for a go to node 2 ($a_after)" test "$a_after" = "$(printf "200:$n2 %.0s" 1 2 3 4)"
terminate "$watch_pid"
watch_pid=""
check "watch: SIGTERM ends it with exit 0" test "$rc" -eq 0
check "  ... and the config it wrote passes haproxy -c" "$HAPROXY" -c -q -f "$tmp/haproxy.cfg"

# ---- the only node of a model down ----------------------------------------------------------
kill_node "$pid3"
lb_post /v1/chat/completions "$(chat_body b "hi")"
expect_status 503 "b's only node just killed: 503 with a JSON error"
check "  ... code model_unavailable" jqe '.error.code == "model_unavailable"' "$tmp/body"
sleep 2.5 # the health checks mark node 3 down
lb_post /v1/chat/completions "$(chat_body b "hi")"
expect_status 503 "b's only node marked down: 503 with a JSON error"

stop_haproxy
finish
