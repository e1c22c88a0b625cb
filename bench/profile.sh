#!/usr/bin/env bash
# Where Portico's CPU goes as a TLS reverse proxy: `perf record -g` on the gateway under wrk load.
#
#   bench/profile.sh [seconds] [connections]     (defaults 10 s, 32)
#   PLAIN=1 bench/profile.sh ...                  the same over plain HTTP
#   H2=1 bench/profile.sh ...                     HTTP/2 over TLS, h2load with 10 streams per connection
#   PERCENT=1 bench/profile.sh ...                report symbols down to this share (default 0.5 %)
#
# Builds Portico in release mode (the flags of `make build`), starts nginx as the fast backend (a small
# JSON body from memory, as bench/run.sh does) and Portico in front of it (access log off, TLS on the
# development certificate), warms up, then records the gateway's process while wrk drives keep-alive
# load for the given time. Prints the symbols with the most self time, and keeps perf.data in the
# printed directory for `perf report -i` afterwards. Loopback only; it ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

DURATION=${1:-10}
CONNECTIONS=${2:-32}
PERCENT=${PERCENT:-0.5}
BACKEND_PORT=18196
PORTICO_PORT=18197
SCHEME=https
[ "${PLAIN:-0}" = 1 ] && SCHEME=http
WORK=$(mktemp -d /tmp/portico-profile.XXXXXX)
trap bench_kill_pids EXIT

bench_install wrk:wrk nginx:nginx-light perf:linux-perf h2load:nghttp2-client

echo "== building Portico (release)" >&2
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null

mkdir -p "$WORK/backend" "$WORK/policies"
./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
TLS_SECTION=""
[ "$SCHEME" = https ] && TLS_SECTION=", tls: { certificate: $WORK/certs/server.pem, privateKey: $WORK/certs/server-key.pem }"
bench_backend_conf "$WORK/backend" "$BACKEND_PORT"
bench_policy "$WORK/policies/profile.yaml" "$PORTICO_PORT" "$BACKEND_PORT" "$TLS_SECTION"

nginx -p "$WORK/backend" -c "$WORK/backend/nginx.conf" & PIDS+=($!)
.build/release/portico serve --policies "$WORK/policies" --log-level warning & PIDS+=($!)
PORTICO_PID=$!
URL="$SCHEME://127.0.0.1:$PORTICO_PORT/api/1/stockquote/AAPL"
for _ in $(seq 50); do
  curl -fsS --cacert "$WORK/certs/ca.pem" "${URL/127.0.0.1/localhost}" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS --cacert "$WORK/certs/ca.pem" "${URL/127.0.0.1/localhost}" >/dev/null

load() { # seconds
  if [ "${H2:-0}" = 1 ]; then
    h2load -c "$CONNECTIONS" -m 10 -D "$1" "$URL"
  else
    wrk -t1 -c"$CONNECTIONS" -d"$1s" "$URL"
  fi
}
load 2 >/dev/null  # warm-up
echo "== perf record -g on Portico (pid $PORTICO_PID), ${DURATION}s of ${H2:+h2load}${H2:-wrk}: $CONNECTIONS keep-alive $SCHEME connections" >&2
load "$((DURATION + 2))" >"$WORK/load.txt" &
LOAD=$!
sleep 1
perf record -g -o "$WORK/perf.data" -p "$PORTICO_PID" -- sleep "$DURATION" 2>"$WORK/perf-record.log" >/dev/null
wait "$LOAD"
grep -E "Requests/sec|^finished in" "$WORK/load.txt" >&2

# Self time per shared object, then per symbol (all threads together), most first; Swift's mangled
# names demangled when the toolchain's demangler is there.
demangle() { if command -v swift-demangle >/dev/null; then swift-demangle --simplified; else cat; fi; }
report() { perf report -i "$WORK/perf.data" --no-children --stdio -g none "$@" 2>/dev/null | grep -v '^#' | grep -v '^$' | sed 's/ *$//'; }
echo "== self time by shared object"
report --sort dso --percent-limit 1 | sort -rn
echo "== self time by symbol (≥ $PERCENT %)"
report --sort dso,sym --percent-limit "$PERCENT" | demangle | cut -c1-160 | sort -rn
echo "(perf.data kept in $WORK)" >&2
