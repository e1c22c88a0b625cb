#!/usr/bin/env bash
# What a facade costs next to a proxy: one Portico process serving the same backend two ways over
# the same listener, under the same load, and the CPU each costs per request.
#
#   bench/facade.sh [seconds] [connections] [rounds]    (defaults 5 s, 32, 3)
#   TLS=1 bench/facade.sh ...                             the listener terminates TLS
#   PERF=1 bench/facade.sh ...                            also `perf record -g` the facade route
#
# The routes, both in front of the same fast backend (nginx answering BENCH_BODY, a small JSON
# quote, from memory, as bench/run.sh):
#   /proxied/1/stockquote/AAPL   a proxy to the backend's /v1/quotes/AAPL
#   /facade/1/stockquote/AAPL    a facade with one JSON source on that backend
#                                (/v1/quotes/{symbol}), its three fields reformed into a contract
# Each round runs wrk on the two in turn; the CPU of the gateway process (utime + stime from
# /proc) divided by the requests answered gives µs per request, and the report is the median
# round's facade/proxy ratio (the issue's target: at most 2). Loopback only; it ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

DURATION=${1:-5}
CONNECTIONS=${2:-32}
ROUNDS=${3:-3}
BACKEND_PORT=18211
PORTICO_PORT=18212
WORK=$(mktemp -d /tmp/portico-facade.XXXXXX)
trap bench_kill_pids EXIT

bench_install wrk:wrk nginx:nginx-light curl:curl python3:python3
[ "${PERF:-0}" = 1 ] && bench_install perf:linux-perf

if [ -z "${PORTICO_BIN:-}" ]; then
  echo "== building Portico (release)" >&2
  swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null
fi
PORTICO_BIN=${PORTICO_BIN:-.build/release/portico}

mkdir -p "$WORK/backend" "$WORK/policies"
bench_backend_conf "$WORK/backend" "$BACKEND_PORT"
LISTENER_TLS=""
SCHEME=http
CURL=(curl -fsS)
if [ "${TLS:-0}" = 1 ]; then
  ./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
  LISTENER_TLS=", tls: { certificate: $WORK/certs/server.pem, privateKey: $WORK/certs/server-key.pem }"
  SCHEME=https
  CURL=(curl -fsS --cacert "$WORK/certs/ca.pem")
fi
cat >"$WORK/policies/facade.yaml" <<YAML
listeners:
  - { name: bench, address: 127.0.0.1, port: $PORTICO_PORT$LISTENER_TLS }
accessLog: { enabled: false }
upstream: { threads: 1, maxConnectionsPerHost: 64 }
backends:
  quotes: { url: "http://127.0.0.1:$BACKEND_PORT", timeout: 5s }
services:
  proxied:
    path: /proxied/{version}/stockquote
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
  facade:
    path: /facade/{version}/stockquote
    versions:
      1:
        facade:
          parameters: /{symbol}
          contract: { symbol: string, name: string, currentPrice: number }
          sources:
            json:
              backend: quotes
              request: /v1/quotes/{symbol}
              format: json
              fields: { symbol: /symbol, name: /name, currentPrice: /currentPrice }
          active: json
YAML

nginx -p "$WORK/backend" -c "$WORK/backend/nginx.conf" & PIDS+=($!)
"$PORTICO_BIN" serve --policies "$WORK/policies" --log-level warning & PIDS+=($!)
PORTICO_PID=$!
HOST=localhost
[ "$SCHEME" = http ] && HOST=127.0.0.1
BASE="$SCHEME://$HOST:$PORTICO_PORT"
for _ in $(seq 100); do
  "${CURL[@]}" "$BASE/proxied/1/stockquote/AAPL" >/dev/null 2>&1 && break
  sleep 0.1
done

# Both routes answer the backend's quote: the proxy as is, the facade reformed into its contract.
PROXIED=$("${CURL[@]}" "$BASE/proxied/1/stockquote/AAPL")
FACADE=$("${CURL[@]}" "$BASE/facade/1/stockquote/AAPL")
[ "$PROXIED" = "$BENCH_BODY" ] || { echo "the proxied route answers $PROXIED" >&2; exit 1; }
[ "$FACADE" = "$BENCH_BODY" ] || { echo "the facade route answers $FACADE" >&2; exit 1; }

ticks() { awk '{print $14 + $15}' "/proc/$PORTICO_PID/stat"; }
HZ=$(getconf CLK_TCK)
run_wrk() { # name round
  local name=$1 round=$2 before after
  wrk -t1 -c"$CONNECTIONS" -d2s "$BASE/$name/1/stockquote/AAPL" >/dev/null  # warm-up
  before=$(ticks)
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "$BASE/$name/1/stockquote/AAPL" >"$WORK/$name.$round.wrk"
  after=$(ticks)
  echo "$name $round $((after - before))" >>"$WORK/cpu"
}

echo "== wrk: ${DURATION}s × $ROUNDS rounds, $CONNECTIONS keep-alive $SCHEME connections, 1 thread, on $(nproc) cores"
echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  run_wrk proxied "$round"
  run_wrk facade "$round"
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$HZ" "$ROUNDS" "$DURATION" <<'PY'
import re, statistics, sys
work, hz, rounds, duration = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
cpu = {(name, int(r)): int(t) for name, r, t in (line.split() for line in open(f"{work}/cpu"))}
def run(name, r):
    text = open(f"{work}/{name}.{r}.wrk").read()
    total = int(re.search(r"(\d+) requests in", text).group(1))
    refused = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return total, cpu[(name, r)] / hz * 1e6 / total, int(refused.group(1)) if refused else 0
print(f"{'route':<9}{'req/s':>10}{'CPU/req':>11}{'non-2xx':>9}   per round (µs/req)")
costs = {}
for name in ("proxied", "facade"):
    runs = [run(name, r) for r in range(1, rounds + 1)]
    costs[name] = [c for _, c, _ in runs]
    rps = statistics.median(t for t, _, _ in runs) / duration
    print(f"{name:<9}{rps:>10.0f}{statistics.median(costs[name]):>8.1f} µs{sum(n for _, _, n in runs):>9}   "
          f"{[round(c, 1) for c in costs[name]]}")
ratios = [f / p for f, p in zip(costs["facade"], costs["proxied"])]
print(f"facade/proxied CPU per request: {statistics.median(ratios):.2f}× (median of the rounds' ratios "
      f"{[round(r, 2) for r in ratios]}; target ≤ 2×)")
print("(CPU of the gateway process only: utime + stime from /proc, over the requests wrk counted)")
PY

if [ "${PERF:-0}" = 1 ]; then
  echo "== perf record -g on the facade route, ${DURATION}s" >&2
  wrk -t1 -c"$CONNECTIONS" -d"$((DURATION + 2))s" "$BASE/facade/1/stockquote/AAPL" >/dev/null &
  WRK=$!
  sleep 1
  perf record -g -o "$WORK/perf.data" -p "$PORTICO_PID" -- sleep "$DURATION" 2>/dev/null >/dev/null
  wait "$WRK"
  demangle() { if command -v swift-demangle >/dev/null; then swift-demangle --simplified; else cat; fi; }
  perf report -i "$WORK/perf.data" --no-children --stdio -g none --sort dso,sym --percent-limit "${PERCENT:-0.4}" 2>/dev/null |
    grep -v '^#' | grep -v '^$' | demangle | cut -c1-170 | sort -rn
  echo "(perf.data kept in $WORK)" >&2
fi
