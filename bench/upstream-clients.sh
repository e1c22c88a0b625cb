#!/usr/bin/env bash
# The NIO and libcurl upstream clients, one after the other, against the same backend.
#
#   bench/upstream-clients.sh [requests] [concurrency...]     (defaults: 10000, then 1 and 32)
#
# The backend is nginx answering a small JSON body from memory, in its own process (one worker),
# so that what is measured is the client alone: bench/upstream's `UpstreamClients` sends the
# requests on one event loop and reports requests/s and its own CPU time per request (getrusage:
# user + system, every thread of the process: the event loop, and for curl its worker thread too).
# The backend's CPU per request is read from /proc and printed beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

REQUESTS=${1:-10000}
shift || true
CONCURRENCY=("$@")
[ ${#CONCURRENCY[@]} -eq 0 ] && CONCURRENCY=(1 32)
PORT=18195
WORK=$(mktemp -d /tmp/portico-upstream-bench.XXXXXX)
NGINX_PID=""
cleanup() {
  [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

bench_install nginx:nginx-light

echo "== building bench/upstream (release, cross-module optimisation)"
swift build -c release --package-path bench/upstream -Xswiftc -cross-module-optimization >/dev/null
BIN=$(swift build -c release --package-path bench/upstream --show-bin-path)/UpstreamClients

bench_backend_conf "$WORK" "$PORT"
nginx -c "$WORK/nginx.conf" -p "$WORK" &
NGINX_PID=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done

# CPU seconds (user + system) of the nginx master and its worker.
backend_cpu() {
  local total=0 pid
  for pid in $NGINX_PID $(pgrep -P "$NGINX_PID" || true); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$total"
}
TICKS=$(getconf CLK_TCK)

echo "== $REQUESTS requests per client, one event loop, backend nginx (1 worker) on loopback; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for concurrency in "${CONCURRENCY[@]}"; do
  for client in nio curl; do
    before=$(backend_cpu)
    "$BIN" --url "http://127.0.0.1:$PORT/v1/quotes/AAPL" --requests "$REQUESTS" --concurrency "$concurrency" --clients "$client" \
      | tr -d '\n'
    after=$(backend_cpu)
    awk -v t="$((after - before))" -v hz="$TICKS" -v n="$REQUESTS" 'BEGIN { printf "  (backend %.1f µs CPU/request)\n", t / hz / n * 1e6 }'
  done
done
