#!/usr/bin/env bash
# What the response cache and compression cost, next to their peers, on this machine.
#
#   bench/cache.sh [seconds] [connections] [rounds]    (defaults 5 s, 32, 3)
#   PORTICO_BIN=... bench/cache.sh ...                  measure a given build instead of building one
#
# 1. A hit's CPU per request against a proxied miss in the same Portico process, and against nginx
#    proxy_cache serving the same hit (one nginx worker per core, no access log), all in front of the
#    same fast backend (nginx answering BENCH_BODY from memory, as bench/run.sh). wrk drives each in
#    turn, every round; the CPU of the proxy's processes (utime + stime from /proc) over the requests
#    answered gives µs per request; the report is the median round with ratios. For scale, the
#    floor: the same process answering a request no service routes (its 404 problem, no backend,
#    no cache), what every request costs before any handler.
# 2. Coalescing: 1,000 clients ask at once for the same uncached target of a backend that takes a
#    second to answer and counts what it receives (a small Python server); how many requests
#    reached it.
# 3. Compression: a 16 KiB JSON body proxied (not cached) with `Accept-Encoding` identity, gzip, br
#    and zstd: CPU per request, the extra per KiB of body, and the bytes on the wire; then the
#    encoder's memory per response: 200 responses held open mid-stream (the backend sends a 1 KiB
#    chunk every 100 ms), the gateway's resident memory with each coding against identity.
# Loopback only; everything started is stopped on exit, and it ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

DURATION=${1:-5}
CONNECTIONS=${2:-32}
ROUNDS=${3:-3}
BACKEND_PORT=18221
PORTICO_PORT=18222
NGINX_PORT=18223
SLOW_PORT=18224
WORK=$(mktemp -d /tmp/portico-cache.XXXXXX)
trap bench_kill_pids EXIT

bench_install wrk:wrk nginx:nginx-light curl:curl python3:python3

if [ -z "${PORTICO_BIN:-}" ]; then
  echo "== building Portico (release)" >&2
  swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null
fi
PORTICO_BIN=${PORTICO_BIN:-.build/release/portico}

# The backend: BENCH_BODY at /v1/quotes/*, and a 16 KiB JSON array at /v1/big.
BIG=$(python3 -c 'import json; print(json.dumps([{"city": "city%d" % i, "temperature": i % 40, "conditions": "light rain"} for i in range(300)])[:16384 - 1] + "]")')
mkdir -p "$WORK/backend" "$WORK/nginx" "$WORK/policies" "$WORK/nginx/cache"
printf '%s' "$BIG" >"$WORK/backend/big.json"
# nginx's workers drop root for its default user: they must reach the cache and the body's file.
chmod 755 "$WORK" "$WORK/backend" "$WORK/nginx" && chmod 644 "$WORK/backend/big.json" && chmod 777 "$WORK/nginx/cache"
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
    location /v1/quotes/ { default_type application/json; return 200 '$BENCH_BODY'; }
    location = /v1/big { default_type application/json; alias $WORK/backend/big.json; }
  }
}
CONF

# The peer cache: nginx proxy_cache in front of the same backend. The backend sends no freshness,
# so proxy_cache_valid gives its 200s an hour, as defaultTTL does Portico's.
cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes auto;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx; proxy_temp_path $WORK/nginx; fastcgi_temp_path $WORK/nginx;
  uwsgi_temp_path $WORK/nginx; scgi_temp_path $WORK/nginx;
  keepalive_requests 1000000;
  proxy_cache_path $WORK/nginx/cache keys_zone=bench:10m max_size=256m;
  upstream backend { server 127.0.0.1:$BACKEND_PORT; keepalive 64; }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location /cached/ {
      proxy_pass http://backend/v1/quotes/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_cache bench;
      proxy_cache_valid 200 1h;
      proxy_cache_lock on;
    }
  }
}
CONF

cat >"$WORK/policies/cache.yaml" <<YAML
listeners:
  - { name: bench, address: 127.0.0.1, port: $PORTICO_PORT }
accessLog: { enabled: false }
upstream: { threads: 1, maxConnectionsPerHost: 64 }
limits: { maxConnectionsPerAddress: 4096 }
cache: { maxBytes: 64MiB, maxObjectBytes: 1MiB, maxWaiters: 4096, waitTimeout: 30s }
compression: { algorithms: [br, gzip, zstd], minBytes: 1KiB }
backends:
  quotes: { url: "http://127.0.0.1:$BACKEND_PORT", timeout: 5s }
  slow: { url: "http://127.0.0.1:$SLOW_PORT", timeout: 30s }
services:
  proxied:
    path: /proxied
    compression: false
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
  cached:
    path: /cached
    compression: false
    cache: { defaultTTL: 1h }
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
  big:
    path: /big
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/big } }
  slow:
    path: /slow
    cache: { defaultTTL: 1h }
    versions:
      1: { proxy: { backend: slow } }
  stream:
    path: /stream
    versions:
      1: { proxy: { backend: slow } }
YAML

# The slow backend: /slow/* answers after a second; /stream/* sends a 1 KiB chunk every 100 ms for
# 10 s; /count says how many /slow requests it received.
cat >"$WORK/slow.py" <<'PY'
import http.server, socketserver, sys, threading, time
count = 0
lock = threading.Lock()
chunk = (b'{"reading": "' + b"x" * 1000 + b'"}\n')
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def do_GET(self):
        global count
        if self.path.startswith("/count"):
            with lock: body = str(count).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
        elif self.path.startswith("/slow"):
            with lock: count += 1
            time.sleep(1)
            body = b'{"slow": true}'
            self.send_response(200); self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
        else:
            self.send_response(200); self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked"); self.end_headers()
            try:
                for _ in range(100):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk)); self.wfile.flush(); time.sleep(0.1)
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError): pass
class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 4096
Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY

ulimit -n 65536 2>/dev/null || true
nginx -p "$WORK/backend" -c "$WORK/backend/nginx.conf" & PIDS+=($!)
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" & PIDS+=($!)
NGINX_MASTER=$!
python3 "$WORK/slow.py" "$SLOW_PORT" & PIDS+=($!)
"$PORTICO_BIN" serve --policies "$WORK/policies" --log-level warning & PIDS+=($!)
PORTICO_PID=$!
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$PORTICO_PORT/proxied/AAPL" >/dev/null 2>&1 && curl -fsS "http://127.0.0.1:$NGINX_PORT/cached/AAPL" >/dev/null 2>&1 && break
  sleep 0.1
done
nginx_pids() { echo "$NGINX_MASTER $(pgrep -P "$NGINX_MASTER" | tr '\n' ' ')"; }

# Every route answers the same bytes; the cached ones are hits from now on.
for url in "http://127.0.0.1:$PORTICO_PORT/proxied/AAPL" "http://127.0.0.1:$PORTICO_PORT/cached/AAPL" "http://127.0.0.1:$NGINX_PORT/cached/AAPL"; do
  [ "$(curl -fsS "$url")" = "$BENCH_BODY" ] || { echo "$url does not answer the backend's body" >&2; exit 1; }
done
STATUS=$(curl -fsS -D - -o /dev/null "http://127.0.0.1:$PORTICO_PORT/cached/AAPL" | tr -d '\r' | grep -i '^cache-status:' || true)
[ "$STATUS" = "Cache-Status: Portico; hit" ] || { echo "the cached route is not a hit: $STATUS" >&2; exit 1; }

HZ=$(getconf CLK_TCK)
run_wrk() { # name round url pids...
  local name=$1 round=$2 url=$3 before after
  shift 3
  wrk -t1 -c"$CONNECTIONS" -d2s "$url" >/dev/null  # warm-up
  before=$(bench_ticks "$@")
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "$url" >"$WORK/$name.$round.wrk"
  after=$(bench_ticks "$@")
  echo "$name $round $((after - before))" >>"$WORK/cpu"
}

echo "== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "== wrk: ${DURATION}s × $ROUNDS rounds, $CONNECTIONS keep-alive connections, 1 thread"
echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  run_wrk portico-miss "$round" "http://127.0.0.1:$PORTICO_PORT/proxied/AAPL" "$PORTICO_PID"
  run_wrk portico-hit "$round" "http://127.0.0.1:$PORTICO_PORT/cached/AAPL" "$PORTICO_PID"
  run_wrk portico-404 "$round" "http://127.0.0.1:$PORTICO_PORT/nowhere" "$PORTICO_PID"
  # shellcheck disable=SC2046
  run_wrk nginx-hit "$round" "http://127.0.0.1:$NGINX_PORT/cached/AAPL" $(nginx_pids)
done

python3 - "$WORK" "$HZ" "$ROUNDS" "$DURATION" <<'PY'
import re, statistics, sys
work, hz, rounds, duration = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
cpu = {(name, int(r)): int(t) for name, r, t in (line.split() for line in open(f"{work}/cpu"))}
def run(name, r):
    text = open(f"{work}/{name}.{r}.wrk").read()
    total = int(re.search(r"(\d+) requests in", text).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return total, cpu[(name, r)] / hz * 1e6 / total, int(errors.group(1)) if errors else 0
print(f"{'route':<14}{'req/s':>10}{'CPU/req':>12}{'non-2xx':>9}   per round (µs/req)   (portico-404 is all non-2xx: a 404 by design)")
costs = {}
for name in ("portico-miss", "portico-hit", "portico-404", "nginx-hit"):
    runs = [run(name, r) for r in range(1, rounds + 1)]
    costs[name] = [c for _, c, _ in runs]
    rps = statistics.median(t for t, _, _ in runs) / duration
    print(f"{name:<14}{rps:>10.0f}{statistics.median(costs[name]):>9.1f} µs{sum(n for _, _, n in runs):>9}   "
          f"{[round(c, 1) for c in costs[name]]}")
def ratio(a, b):
    return statistics.median(x / y for x, y in zip(costs[a], costs[b]))
print(f"Portico hit / Portico miss CPU per request: {ratio('portico-hit', 'portico-miss'):.2f}× (goal: below 1)")
print(f"Portico hit / nginx proxy_cache hit CPU per request: {ratio('portico-hit', 'nginx-hit'):.2f}× (goal: at most 1)")
print(f"Portico hit - Portico 404 (the cache's own part of a hit): "
      f"{statistics.median(h - f for h, f in zip(costs['portico-hit'], costs['portico-404'])):.1f} µs")
PY

echo "== coalescing: 1,000 clients at once for one uncached target of a backend that answers after 1 s"
python3 - "$PORTICO_PORT" "$SLOW_PORT" <<'PY'
import socket, sys, time, urllib.request
port, slow = int(sys.argv[1]), int(sys.argv[2])
target = f"/slow/burst-{int(time.time())}"
sockets = []
for _ in range(1000):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(60); sockets.append(s)
request = f"GET {target} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
started = time.monotonic()
for s in sockets: s.sendall(request)
statuses, collapsed = [], 0
for s in sockets:
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk: break
        data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode()
    statuses.append(head.split(" ", 2)[1])
    collapsed += "collapsed" in head
    s.close()
elapsed = time.monotonic() - started
received = urllib.request.urlopen(f"http://127.0.0.1:{slow}/count").read().decode()
print(f"1000 requests: {statuses.count('200')} answered 200, {collapsed} answered from another's response (collapsed), "
      f"in {elapsed:.1f} s; the backend received {received} request(s)")
PY

echo "== compression of a ${#BIG}-byte JSON body (proxied, not cached)"
for round in $(seq 1 "$ROUNDS"); do
  for coding in identity gzip br zstd; do
    url="http://127.0.0.1:$PORTICO_PORT/big"
    before=$(bench_ticks "$PORTICO_PID")
    wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -H "Accept-Encoding: $coding" "$url" >"$WORK/big-$coding.$round.wrk"
    after=$(bench_ticks "$PORTICO_PID")
    echo "$coding $round $((after - before))" >>"$WORK/compression-cpu"
  done
done
for coding in identity gzip br zstd; do
  printf '%s %s\n' "$coding" "$(curl -fsS -H "Accept-Encoding: $coding" -o /dev/null -w '%{size_download}' "http://127.0.0.1:$PORTICO_PORT/big")" >>"$WORK/compression-size"
done
python3 - "$WORK" "$HZ" "$ROUNDS" "${#BIG}" <<'PY'
import re, statistics, sys
work, hz, rounds, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cpu = {(c, int(r)): int(t) for c, r, t in (line.split() for line in open(f"{work}/compression-cpu"))}
sizes = dict(line.split() for line in open(f"{work}/compression-size"))
def cost(coding, r):
    total = int(re.search(r"(\d+) requests in", open(f"{work}/big-{coding}.{r}.wrk").read()).group(1))
    return cpu[(coding, r)] / hz * 1e6 / total
identity = [cost("identity", r) for r in range(1, rounds + 1)]
print(f"{'coding':<9}{'CPU/req':>11}{'extra/KiB':>12}{'on the wire':>14}")
for coding in ("identity", "gzip", "br", "zstd"):
    costs = [cost(coding, r) for r in range(1, rounds + 1)]
    extra = statistics.median((c - i) / (size / 1024) for c, i in zip(costs, identity))
    print(f"{coding:<9}{statistics.median(costs):>8.1f} µs{extra:>9.2f} µs{int(sizes[coding]):>11} B")
PY

echo "== encoder memory: 200 responses held mid-stream, the gateway's resident memory"
python3 - "$PORTICO_PORT" "$PORTICO_PID" <<'PY'
import socket, sys, time
port, pid = int(sys.argv[1]), sys.argv[2]
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1])
def hold(coding, n=200):
    sockets = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /stream/{coding}-{i} HTTP/1.1\r\nHost: bench\r\nAccept-Encoding: {coding}\r\n\r\n".encode())
        sockets.append(s)
    time.sleep(3)  # every response has begun and carries a few chunks
    for s in sockets: s.recv(65536)
    time.sleep(1)
    value = rss()
    for s in sockets: s.close()
    time.sleep(2)
    return value
base = hold("identity")
print(f"identity: {base} KiB resident with 200 streams open")
for coding in ("gzip", "br", "zstd"):
    value = hold(coding)
    print(f"{coding:<8}: {value} KiB, {(value - base) / 200:.0f} KiB more per response than identity")
PY
