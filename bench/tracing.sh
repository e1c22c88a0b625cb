#!/usr/bin/env bash
# What tracing costs: three Portico processes in front of the same fast backend, the same proxied
# route, tracing off, sampling 1 trace in 100, and sampling every trace, exported over OTLP/HTTP to a
# collector that takes everything (a sink on loopback), and the CPU each costs per request. A fourth,
# ratio 0, traces nothing: what an unsampled request costs (its ids, its traceparent) on its own.
#
#   bench/tracing.sh [seconds] [connections] [rounds]    (defaults 5 s, 32, 4)
#
# Each round runs wrk against each gateway in turn (forwards in odd rounds, backwards in even ones);
# the CPU of each gateway process (utime + stime from /proc) over the requests it answered gives µs
# per request. The report gives each setting's median round and the median of the per-round
# differences to "off". The collector's own CPU is not counted: it is a separate process, as a real
# collector is. Loopback only; it ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

DURATION=${1:-5}
CONNECTIONS=${2:-32}
ROUNDS=${3:-4}
BACKEND_PORT=18211
COLLECTOR_PORT=18212
declare -A PORTS=([off]=18213 [ratio0]=18216 [ratio001]=18214 [ratio1]=18215)
SETTINGS="off ratio0 ratio001 ratio1"
WORK=$(mktemp -d /tmp/portico-tracing.XXXXXX)
trap bench_kill_pids EXIT

bench_install wrk:wrk nginx:nginx-light curl:curl python3:python3

echo "== building Portico (release)" >&2
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null

mkdir -p "$WORK/backend"
bench_backend_conf "$WORK/backend" "$BACKEND_PORT"
nginx -p "$WORK/backend" -c "$WORK/backend/nginx.conf" & PIDS+=($!)

# The collector: accepts every export (an empty ExportTraceServiceResponse is an empty body) and
# counts the bytes it was sent, so the report can say the spans went somewhere.
cat >"$WORK/sink.py" <<'PY'
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
received = 0
class Sink(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        global received
        n = int(self.headers.get("Content-Length", "0")); self.rfile.read(n); received += n
        self.send_response(200); self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0"); self.end_headers()
    def do_GET(self):
        body = str(received).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
PY
python3 "$WORK/sink.py" "$COLLECTOR_PORT" & PIDS+=($!)

declare -A PID
for setting in $SETTINGS; do
  mkdir -p "$WORK/$setting"
  case $setting in
    off) tracing="" ;;
    ratio0) tracing="tracing: { otlp: { endpoint: \"http://127.0.0.1:$COLLECTOR_PORT\" }, sampler: { ratio: 0 } }" ;;
    ratio001) tracing="tracing: { otlp: { endpoint: \"http://127.0.0.1:$COLLECTOR_PORT\" }, sampler: { ratio: 0.01 } }" ;;
    ratio1) tracing="tracing: { otlp: { endpoint: \"http://127.0.0.1:$COLLECTOR_PORT\" }, sampler: { ratio: 1 } }" ;;
  esac
  cat >"$WORK/$setting/gateway.yaml" <<YAML
listeners:
  - { name: bench, address: 127.0.0.1, port: ${PORTS[$setting]} }
accessLog: { enabled: false }
backends:
  quotes: { url: "http://127.0.0.1:$BACKEND_PORT", timeout: 5s }
services:
  quotes:
    path: /api/{version}/stockquote
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
$tracing
YAML
  .build/release/portico serve --policies "$WORK/$setting" --log-level warning & PIDS+=($!)
  PID[$setting]=$!
done
for setting in $SETTINGS; do
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:${PORTS[$setting]}/api/1/stockquote/AAPL" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS "http://127.0.0.1:${PORTS[$setting]}/api/1/stockquote/AAPL" >/dev/null
done

run_wrk() { # setting round
  local setting=$1 round=$2 url="http://127.0.0.1:${PORTS[$1]}/api/1/stockquote/AAPL" before after
  wrk -t1 -c"$CONNECTIONS" -d2s "$url" >/dev/null  # warm-up
  before=$(bench_ticks "${PID[$setting]}")
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "$url" >"$WORK/$setting.$round.wrk"
  after=$(bench_ticks "${PID[$setting]}")
  echo "$setting $round $((after - before))" >>"$WORK/cpu"
}

echo "== wrk: ${DURATION}s × $ROUNDS rounds, $CONNECTIONS keep-alive connections, 1 thread, on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
REVERSED=$(printf '%s\n' $SETTINGS | tac | tr '\n' ' ')
for round in $(seq 1 "$ROUNDS"); do
  order=$SETTINGS
  [ $((round % 2)) = 0 ] && order=$REVERSED
  for setting in $order; do run_wrk "$setting" "$round"; done
done
sleep 2  # the last batch's export
HZ=$(getconf CLK_TCK)
python3 - "$WORK" "$HZ" "$ROUNDS" "$(curl -fsS "http://127.0.0.1:$COLLECTOR_PORT/")" <<'PY'
import re, statistics, sys
work, hz, rounds, received = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cpu = {}
for line in open(f"{work}/cpu"):
    setting, round_, ticks = line.split()
    text = open(f"{work}/{setting}.{round_}.wrk").read()
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    cpu[(setting, int(round_))] = (int(ticks) / hz * 1e6 / requests, rate)
names = {"off": "tracing off", "ratio0": "ratio 0", "ratio001": "ratio 0.01", "ratio1": "ratio 1.0"}
print(f"{'setting':<12} {'µs CPU/request':>15} {'requests/s':>11} {'Δ vs off (µs, median of rounds)':>34}")
for setting in ("off", "ratio0", "ratio001", "ratio1"):
    per = [cpu[(setting, r)][0] for r in range(1, rounds + 1)]
    rates = [cpu[(setting, r)][1] for r in range(1, rounds + 1)]
    deltas = [cpu[(setting, r)][0] - cpu[("off", r)][0] for r in range(1, rounds + 1)]
    delta = "" if setting == "off" else f"{statistics.median(deltas):+.2f} (rounds: {', '.join(f'{d:+.1f}' for d in deltas)})"
    print(f"{names[setting]:<12} {statistics.median(per):>15.1f} {statistics.median(rates):>11.0f} {delta:>34}")
print(f"the collector received {received} bytes of OTLP")
PY
