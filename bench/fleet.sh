#!/usr/bin/env bash
# What fleet mode costs: two Portico processes with the same policy in front of the same fast
# backend, one keeping its rate limits in memory, the other in Redis on loopback (a `cluster`
# section), under the same plain-HTTP load; the gateway CPU per request and wrk's latency.
#
#   bench/fleet.sh [seconds] [connections] [rounds]    (defaults 5 s, 16, 3)
#   PERF=1 bench/fleet.sh ...                            also `perf record -g` the Redis-backed gateway
#
# The route is API-key authenticated and draws from two buckets, the key's tier and the backend's
# limit, both far above what wrk sends (nothing is refused: the script checks it), so each request
# in fleet mode is one EVALSHA deciding two GCRA buckets. Nonces are not measured end to end: wrk
# replays one request, and a nonce can be used once (their part of the script runs in Redis; the
# gateway adds four arguments to the same command). Loopback only; it ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

DURATION=${1:-5}
CONNECTIONS=${2:-16}
ROUNDS=${3:-3}
BACKEND_PORT=18301
LOCAL_PORT=18302
FLEET_PORT=18303
REDIS_PORT=18304
ADMIN_PORT=18305
WORK=$(mktemp -d /tmp/portico-fleet.XXXXXX)
trap bench_kill_pids EXIT

bench_install wrk:wrk nginx:nginx-light curl:curl redis-server:redis-server
[ "${PERF:-0}" = 1 ] && bench_install perf:linux-perf

echo "== building Portico (release)" >&2
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null

mkdir -p "$WORK/backend" "$WORK/local" "$WORK/fleet"
bench_backend_conf "$WORK/backend" "$BACKEND_PORT"
KEY=$(head -c 32 /dev/urandom | base64 | tr -d '\n/+=')
printf '%s' "$KEY" >"$WORK/bench.key"
policy() { # file port cluster-line
  cat >"$1" <<YAML
listeners:
  - { name: bench, address: 127.0.0.1, port: $2 }
accessLog: { enabled: false }
backends:
  quotes: { url: "http://127.0.0.1:$BACKEND_PORT", timeout: 5s, rateLimit: { rate: 1000000/s, burst: 100000 } }
tiers:
  bench: { rate: 1000000/s, burst: 100000 }
keys:
  bench: { secretFile: $WORK/bench.key, services: [limited], tier: bench }
services:
  limited:
    path: /api/{version}/stockquote
    auth: apiKey
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
$3
YAML
}
policy "$WORK/local/gateway.yaml" "$LOCAL_PORT" ""
policy "$WORK/fleet/gateway.yaml" "$FLEET_PORT" "cluster: { redis: \"redis://127.0.0.1:$REDIS_PORT\", onFailure: { limits: deny } }
admin: { port: $ADMIN_PORT }"

timeout 600 redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning & PIDS+=($!)
nginx -p "$WORK/backend" -c "$WORK/backend/nginx.conf" & PIDS+=($!)
.build/release/portico serve --policies "$WORK/local" --log-level warning & PIDS+=($!)
LOCAL_PID=$!
.build/release/portico serve --policies "$WORK/fleet" --log-level warning & PIDS+=($!)
FLEET_PID=$!
TARGET="/api/1/stockquote/AAPL"
HEADER=(-H "X-API-Key: bench.$KEY")
for port in "$LOCAL_PORT" "$FLEET_PORT"; do
  for _ in $(seq 50); do
    curl -fsS "${HEADER[@]}" "http://127.0.0.1:$port$TARGET" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS "${HEADER[@]}" "http://127.0.0.1:$port$TARGET" | grep -q currentPrice || { echo "port $port does not answer" >&2; exit 1; }
done
# The fleet gateway's buckets are Redis's, and a dead Redis would be a 503 (onFailure: deny), never a
# silent fallback to memory.
redis-cli -p "$REDIS_PORT" --scan --pattern 'portico:rl:*' | grep -q . || { echo "no bucket in Redis" >&2; exit 1; }

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
run_wrk() { # name port pid round
  local name=$1 port=$2 pid=$3 round=$4 before after
  wrk -t1 -c"$CONNECTIONS" -d2s "${HEADER[@]}" "http://127.0.0.1:$port$TARGET" >/dev/null  # warm-up
  before=$(ticks "$pid")
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "${HEADER[@]}" "http://127.0.0.1:$port$TARGET" >"$WORK/$name.$round.wrk"
  after=$(ticks "$pid")
  echo "$name $round $((after - before))" >>"$WORK/cpu"
}

echo "== wrk: ${DURATION}s × $ROUNDS rounds, $CONNECTIONS keep-alive connections, 1 thread, on $(nproc) cores"
for round in $(seq 1 "$ROUNDS"); do
  run_wrk memory "$LOCAL_PORT" "$LOCAL_PID" "$round"
  run_wrk redis "$FLEET_PORT" "$FLEET_PID" "$round"
done

python3 - "$WORK" "$HZ" "$ROUNDS" "$DURATION" <<'PY'
import re, statistics, sys
work, hz, rounds, duration = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
cpu = {(name, int(r)): int(t) for name, r, t in (line.split() for line in open(f"{work}/cpu"))}
def ms(text, pct):
    value, unit = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)", text, re.M).groups()
    return float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
def run(name, r):
    text = open(f"{work}/{name}.{r}.wrk").read()
    total = int(re.search(r"(\d+) requests in", text).group(1))
    refused = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return dict(total=total, cpu=cpu[(name, r)] / hz * 1e6 / total, p50=ms(text, 50), p99=ms(text, 99),
                refused=int(refused.group(1)) if refused else 0)
print(f"{'limits':<8}{'req/s':>10}{'CPU/req':>11}{'p50':>10}{'p99':>10}{'non-2xx':>9}   CPU per round (µs/req)")
runs = {name: [run(name, r) for r in range(1, rounds + 1)] for name in ("memory", "redis")}
for name, rs in runs.items():
    med = lambda key: statistics.median(x[key] for x in rs)
    print(f"{name:<8}{med('total') / duration:>10.0f}{med('cpu'):>8.1f} µs{med('p50'):>7.2f} ms{med('p99'):>7.2f} ms"
          f"{sum(x['refused'] for x in rs):>9}   {[round(x['cpu'], 1) for x in rs]}")
paired = lambda key: statistics.median(b[key] - a[key] for a, b in zip(runs["memory"], runs["redis"]))
print(f"added by Redis (median of the per-round differences): CPU {paired('cpu'):+.1f} µs/request, "
      f"p50 {paired('p50') * 1000:+.0f} µs, p99 {paired('p99') * 1000:+.0f} µs")
print("(CPU of each gateway process only; Redis's own CPU is not counted; one EVALSHA per request)")
PY
# Refusals in the Redis run are Redis failing within the 50 ms timeout (onFailure: deny answers 503):
# what the client counted.
curl -fsS "http://127.0.0.1:$ADMIN_PORT/metrics" | grep -E '^portico_redis_(errors_total|breakers_open|duration_seconds_count)' | grep -v ' 0$' || true

if [ "${PERF:-0}" = 1 ]; then
  echo "== perf record -g on the Redis-backed gateway, ${DURATION}s" >&2
  wrk -t1 -c"$CONNECTIONS" -d"$((DURATION + 2))s" "${HEADER[@]}" "http://127.0.0.1:$FLEET_PORT$TARGET" >/dev/null &
  WRK=$!
  sleep 1
  perf record -g -o "$WORK/perf.data" -p "$FLEET_PID" -- sleep "$DURATION" 2>/dev/null >/dev/null
  wait "$WRK"
  demangle() { if command -v swift-demangle >/dev/null; then swift-demangle --simplified; else cat; fi; }
  perf report -i "$WORK/perf.data" --no-children --stdio -g none --sort dso,sym --percent-limit "${PERCENT:-0.5}" 2>/dev/null |
    grep -v '^#' | grep -v '^$' | demangle | cut -c1-170 | sort -rn
  echo "(perf.data kept in $WORK)" >&2
fi
