#!/usr/bin/env bash
# Where Portico's CPU goes as a TLS reverse proxy: `perf record -g` on the gateway under wrk load.
#
#   bench/profile.sh [seconds] [connections]     (defaults 10 s, 32)
#   PLAIN=1 bench/profile.sh ...                  the same over plain HTTP
#   PERCENT=1 bench/profile.sh ...                report symbols down to this share (default 0.5 %)
#
# Builds Portico in release mode (the flags of `make build`), starts nginx as the fast backend (a small
# JSON body from memory, as bench/run.sh does) and Portico in front of it (access log off, TLS on the
# development certificate), warms up, then records the gateway's process while wrk drives keep-alive
# load for the given time. Prints the symbols with the most self time, and keeps perf.data in the
# printed directory for `perf report -i` afterwards. Loopback only; it ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-10}
CONNECTIONS=${2:-32}
PERCENT=${PERCENT:-0.5}
BACKEND_PORT=18196
PORTICO_PORT=18197
SCHEME=https
[ "${PLAIN:-0}" = 1 ] && SCHEME=http
WORK=$(mktemp -d /tmp/portico-profile.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

MISSING=()
command -v wrk >/dev/null || MISSING+=(wrk)
command -v nginx >/dev/null || MISSING+=(nginx-light)
command -v perf >/dev/null || MISSING+=(linux-perf)
if [ ${#MISSING[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq "${MISSING[@]}" >/dev/null
  else
    echo "profile needs: sudo apt-get install -y ${MISSING[*]}" >&2; exit 1
  fi
fi

echo "== building Portico (release)" >&2
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null

mkdir -p "$WORK/backend" "$WORK/policies"
./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
TLS_SECTION=""
[ "$SCHEME" = https ] && TLS_SECTION=", tls: { certificate: $WORK/certs/server.pem, privateKey: $WORK/certs/server-key.pem }"
BODY='{"symbol":"AAPL","name":"Apple Inc.","currentPrice":189.84}'
cat >"$WORK/backend/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/backend/nginx.pid;
error_log $WORK/backend/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/backend; proxy_temp_path $WORK/backend; fastcgi_temp_path $WORK/backend;
  uwsgi_temp_path $WORK/backend; scgi_temp_path $WORK/backend;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$BACKEND_PORT;
    location / { default_type application/json; return 200 '$BODY'; }
  }
}
CONF
cat >"$WORK/policies/profile.yaml" <<YAML
listeners:
  - { name: profile, address: 127.0.0.1, port: $PORTICO_PORT$TLS_SECTION }
accessLog: { enabled: false }
backends:
  quotes: { url: "http://127.0.0.1:$BACKEND_PORT", timeout: 5s }
services:
  stockQuote:
    path: /api/{version}/stockquote
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
YAML

nginx -p "$WORK/backend" -c "$WORK/backend/nginx.conf" & PIDS+=($!)
.build/release/portico serve --policies "$WORK/policies" --log-level warning & PIDS+=($!)
PORTICO_PID=$!
URL="$SCHEME://127.0.0.1:$PORTICO_PORT/api/1/stockquote/AAPL"
for _ in $(seq 50); do
  curl -fsS --cacert "$WORK/certs/ca.pem" "${URL/127.0.0.1/localhost}" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS --cacert "$WORK/certs/ca.pem" "${URL/127.0.0.1/localhost}" >/dev/null

wrk -t1 -c"$CONNECTIONS" -d2s "$URL" >/dev/null  # warm-up
echo "== perf record -g on Portico (pid $PORTICO_PID), ${DURATION}s of wrk: $CONNECTIONS keep-alive $SCHEME connections" >&2
wrk -t1 -c"$CONNECTIONS" -d"$((DURATION + 2))s" "$URL" >"$WORK/wrk.txt" &
WRK=$!
sleep 1
perf record -g -o "$WORK/perf.data" -p "$PORTICO_PID" -- sleep "$DURATION" 2>"$WORK/perf-record.log" >/dev/null
wait "$WRK"
grep -E "Requests/sec" "$WORK/wrk.txt" >&2

# Self time per shared object, then per symbol (all threads together), most first; Swift's mangled
# names demangled when the toolchain's demangler is there.
demangle() { if command -v swift-demangle >/dev/null; then swift-demangle --simplified; else cat; fi; }
report() { perf report -i "$WORK/perf.data" --no-children --stdio -g none "$@" 2>/dev/null | grep -v '^#' | grep -v '^$' | sed 's/ *$//'; }
echo "== self time by shared object"
report --sort dso --percent-limit 1 | sort -rn
echo "== self time by symbol (≥ $PERCENT %)"
report --sort dso,sym --percent-limit "$PERCENT" | demangle | cut -c1-160 | sort -rn
echo "(perf.data kept in $WORK)" >&2
