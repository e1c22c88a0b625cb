#!/usr/bin/env bash
# Streams that stay open, through the gateway (issue 34): the memory one idle WebSocket and one idle
# event stream hold, against an idle connection's, and the latency the gateway adds to a WebSocket
# message's round trip with many connections open.
#
#   bench/streams.sh [connections] [messages] [senders]   (defaults 1000, 20000, 50)
#   TLS=1 bench/streams.sh ...             the gateway's listener over TLS (the development
#                                          certificate), the issue's terms: "an idle TLS
#                                          connection's plus the upstream connection's"
#   PORTICO_BIN=... bench/streams.sh ...   measure a given build instead of building one
#   WARM=100 SETTLE=2 HOLD=5 ROUNDS=4      the connections kept open before the measured ones,
#                                          the seconds left for the memory to settle, the seconds
#                                          the backend holds idle-upstream's requests, the latency
#                                          rounds
#
# The backends are bench/streams-load.py's server (one Python process): a WebSocket echo server
# (`websockets`, from PyPI) and an HTTP/1.1 server whose /events/* answers a `text/event-stream`
# with one event and then stays open, silent, and whose other targets answer a small JSON body.
#
# 1. Memory. For each kind of connection, a freshly started gateway (so that no kind lands in
#    memory another freed), WARM connections of that kind opened and kept, the gateway's VmRSS
#    read, N more opened (at most 64 at a time, from one asyncio process), VmRSS read again: the
#    difference over N is one more connection's cost. The kinds: a WebSocket (the client
#    connection and the upstream connection the gateway opens for it); an event stream (its head
#    and first event read, then nothing: a client connection and a pooled upstream connection busy
#    with the stream); and, for comparison, an idle keep-alive connection whose one request was
#    answered, alone (opened one after another, so that the requests share one upstream
#    connection) and with an idle upstream connection of its own (the N requests held by the
#    backend until all are in flight, so that the gateway's pool opens one per request and keeps
#    them). The "upstream conns" column counts the gateway's established connections to the
#    backend, read from /proc/net/tcp, before and after.
# 2. Latency. A fresh gateway; N WebSocket connections through it and N straight to the echo server,
#    all open for the whole run; then `messages` 64-byte binary messages each way, `senders` at once
#    (each over its own share of the connections in turn), each round trip timed with
#    time.perf_counter_ns, in ROUNDS rounds alternating which path goes first. p50 and p99 of each
#    path and their difference: what the gateway adds. Client, echo server and gateway share this
#    machine's cores, so both paths include the Python client's own queueing; only the difference
#    is the gateway's. The senders keep that many messages in flight (a closed loop): with many, a
#    round trip is mostly waiting for the shared cores, and the difference is the gateway's CPU per
#    message times the queue ahead of it; `senders` 1 gives what one message alone is delayed.
#    With TLS=1 the direct path stays plain: the difference includes TLS.
#
# Loopback only; every step has a time limit, and every process started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

# The command as given, settings from the environment included, for the report.
COMMAND="bench/streams.sh $*"
for setting in TLS PORTICO_BIN WARM SETTLE HOLD ROUNDS SWIFT_BUILD_FLAGS; do
  if [ -n "${!setting:-}" ]; then COMMAND="$setting=${!setting} $COMMAND"; fi
done
COUNT=${1:-1000}
MESSAGES=${2:-20000}
SENDERS=${3:-50}
ROUNDS=${ROUNDS:-4}
WARM=${WARM:-100}
SETTLE=${SETTLE:-2}
HOLD=${HOLD:-5}
PORTICO_PORT=18241
WORK=$(mktemp -d /tmp/portico-streams.XXXXXX)
GATEWAY=

gateway_running() {
  local state
  state=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$GATEWAY/status" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# stop_gateway [SECONDS]: SIGTERM, then SIGKILL if it has not exited within SECONDS (default 30).
# With no connection open its drain ends at once; the bound is for an interrupted run.
stop_gateway() {
  [ -n "$GATEWAY" ] || return 0
  kill "$GATEWAY" 2>/dev/null || true
  for _ in $(seq $((${1:-30} * 10))); do gateway_running || break; sleep 0.1; done
  kill -9 "$GATEWAY" 2>/dev/null || true
  wait "$GATEWAY" 2>/dev/null || true
  GATEWAY=
}

cleanup() {
  stop_gateway 5
  bench_kill_pids
  rm -rf "$WORK"
}
trap cleanup EXIT

bench_install curl:curl python3:python3
if [ "${TLS:-0}" = 1 ]; then bench_install openssl:openssl; fi
./scripts/interop/setup.sh
PYTHON=.build/interop/bin/python
"$PYTHON" -c 'import websockets' 2>/dev/null || {
  echo "bench/streams.sh needs websockets (scripts/interop/setup.sh could not install it)" >&2
  exit 1
}

if [ -z "${PORTICO_BIN:-}" ]; then
  echo "== building Portico (release)" >&2
  swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null
fi
PORTICO_BIN=${PORTICO_BIN:-.build/release/portico}

# Every process here holds up to two descriptors per connection of the largest step (the latency
# step's client, echo server and gateway each hold 2 N); children inherit the raised limit.
NEED=$((2 * (COUNT + WARM) + 256))
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$NEED" ]; then
  echo "bench/streams.sh: $COUNT connections need about $NEED open files per process; ulimit -Hn is $(ulimit -Hn)" >&2
  exit 1
fi

"$PYTHON" bench/streams-load.py server >"$WORK/server.out" 2>"$WORK/server.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/server.out" ] && break; sleep 0.1; done
read -r WS_PORT HTTP_PORT <"$WORK/server.out" || { echo "the backends did not start:" >&2; cat "$WORK/server.log" >&2; exit 1; }

SCHEME=http WS_SCHEME=ws LISTENER_TLS= CA=
if [ "${TLS:-0}" = 1 ]; then
  ./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
  SCHEME=https WS_SCHEME=wss CA=$WORK/certs/ca.pem
  LISTENER_TLS=", tls: { certificate: $WORK/certs/server.pem, privateKey: $WORK/certs/server-key.pem }"
fi
GATEWAY_URL=$SCHEME://127.0.0.1:$PORTICO_PORT
# Room for every connection of a step from this one address (the default per-address cap is
# 1,024); client connections never idle out during a run (idleTimeout); one upstream connection
# per held request in each event loop's pool, kept while the memory is read.
MAX_CONNECTIONS=$((2 * COUNT + WARM + 1024))
mkdir -p "$WORK/policies"
cat >"$WORK/policies/gateway.yaml" <<YAML
listeners:
  - { name: bench, address: 127.0.0.1, port: $PORTICO_PORT$LISTENER_TLS }
accessLog: { enabled: false }
limits: { maxConnections: $MAX_CONNECTIONS, maxConnectionsPerAddress: $MAX_CONNECTIONS, idleTimeout: 600s }
upstream: { maxConnectionsPerHost: $((COUNT + WARM + 64)), idleConnectionTimeout: 600s }
backends:
  chat: { url: "http://127.0.0.1:$WS_PORT", timeout: 30s }
  # An event stream's timeout bounds each wait for its next event: longer than a run lasts.
  events: { url: "http://127.0.0.1:$HTTP_PORT", timeout: 900s }
services:
  chat:
    path: /chat
    websocket: true
    versions: { 1: { proxy: { backend: chat } } }
  events:
    path: /events
    versions: { 1: { proxy: { backend: events, rewrite: /events } } }
  plain:
    path: /plain
    versions: { 1: { proxy: { backend: events, rewrite: /plain } } }
YAML

start_gateway() {
  : >"$WORK/gateway.log.new"
  "$PORTICO_BIN" serve --policies "$WORK/policies" --log-level warning 2>"$WORK/gateway.log.new" &
  GATEWAY=$!
  for _ in $(seq 100); do
    curl -fsS ${CA:+--cacert "$CA"} "$GATEWAY_URL/plain/ready" >/dev/null 2>&1 && return 0
    gateway_running || break
    sleep 0.1
  done
  echo "the gateway did not start; its log:" >&2
  cat "$WORK/gateway.log.new" >&2
  exit 1
}

# After each gateway: its warnings, kept for the end of the report.
keep_gateway_log() {
  stop_gateway
  cat "$WORK/gateway.log.new" >>"$WORK/gateway.log"
}

# measure_memory KIND URL UPSTREAM_PORT DESCRIPTION
measure_memory() {
  echo "== memory: $COUNT $4" >&2
  start_gateway
  timeout 600 "$PYTHON" bench/streams-load.py memory --kind "$1" --url "$2" --pid "$GATEWAY" --upstream-port "$3" \
    --count "$COUNT" --warm "$WARM" --settle "$SETTLE" ${CA:+--ca "$CA"} >>"$WORK/results.jsonl"
  keep_gateway_log
}

echo "== command: $COMMAND"
echo "== $(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $PORTICO_BIN"
echo "== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "== $COUNT connections per step ($WARM more kept open before them), $MESSAGES messages of 64 bytes, $SENDERS senders, $ROUNDS rounds, $([ "$SCHEME" = https ] && echo "TLS" || echo "plain HTTP") to the gateway"
echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)"

: >"$WORK/gateway.log"
measure_memory websocket "$WS_SCHEME://127.0.0.1:$PORTICO_PORT/chat/bench" "$WS_PORT" "idle WebSockets"
measure_memory events "$GATEWAY_URL/events/bench" "$HTTP_PORT" "idle event streams"
measure_memory idle "$GATEWAY_URL/plain/bench" "$HTTP_PORT" "idle keep-alive connections"
measure_memory idle-upstream "$GATEWAY_URL/plain/bench?hold=$HOLD" "$HTTP_PORT" \
  "idle keep-alive connections, each with an upstream connection (requests held ${HOLD} s)"

echo "== latency: $MESSAGES WebSocket round trips through the gateway and as many straight, $COUNT connections open to each" >&2
start_gateway
timeout 900 "$PYTHON" bench/streams-load.py latency --gateway "$WS_SCHEME://127.0.0.1:$PORTICO_PORT/chat/bench" \
  --direct "ws://127.0.0.1:$WS_PORT/chat/bench" --pid "$GATEWAY" --count "$COUNT" --messages "$MESSAGES" \
  --senders "$SENDERS" --rounds "$ROUNDS" ${CA:+--ca "$CA"} >>"$WORK/results.jsonl"
keep_gateway_log

echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PYTHON" bench/streams-load.py report "$WORK/results.jsonl"
if [ -s "$WORK/gateway.log" ]; then
  echo
  echo "the gateway logged $(wc -l <"$WORK/gateway.log") warning line(s); the first:"
  head -5 "$WORK/gateway.log"
fi
