#!/usr/bin/env bash
# Portico against nginx as reverse proxies in front of one fast backend, in the same run.
#
#   bench/run.sh [duration-seconds] [connections] [rounds]
#   SIGNED=1 bench/run.sh ...   also runs Portico verifying an RFC 9421 signature on every request
#   TLS=1 bench/run.sh ...      nginx and Portico both terminate TLS (the same certificate, keep-alive)
#   LIMITS=1 bench/run.sh ...   also runs Portico with rate limits on (an address limit and a backend
#                               rate limit and concurrency cap, all too high to refuse: their cost only)
#   ACCESS_LOG=1 bench/run.sh ...  also runs Portico with its access log on (ACCESS_LOG_FORMAT=json or
#                               logfmt, written by its batched writer to a file): the difference is its cost
#   CLIENT=curl bench/run.sh ...  Portico reaches the backend through libcurl instead of its NIO client
#   LOCAL=1 bench/run.sh ...    also measures an answer given without a backend (Portico's 404 problem,
#                               nginx returning the same bytes from its config)
#   POOL=1 bench/run.sh ...     also runs Portico with the backend as a pool of two targets (the same nginx on
#                               two ports: round robin, a health check every second, outlier detection and
#                               retries on): the difference is what balancing costs
#   BASELINE=<git revision> bench/run.sh ...  also runs Portico as built from that revision (in a git
#                               worktree at BASELINE_DIR, default /tmp/portico-baseline, built there in
#                               release with the same flags; later runs build incrementally), with the
#                               same policy, in the same alternating rounds: a change's cost, as a ratio
#   BENCH_BODY_BYTES=N bench/run.sh ...  the backend answers a body of N bytes (a file) instead of the small
#                               JSON one: what large responses cost each proxy
#   BASELINE_BUILD_FLAGS=...    the baseline's build flags instead (BASELINE=HEAD with other flags for HEAD
#                               measures a compiler flag, e.g. -enforce-exclusivity=unchecked)
#
# Caddy (Debian's caddy, Go: the class of Tyk, KrakenD and Traefik) runs as a third peer with the same
# routes, unless CADDY=0.
#
# The backend is nginx answering a small JSON body from memory (so the backend costs the same for
# both proxies). Each proxy forwards over keep-alive connections. wrk drives keep-alive load at
# the backend directly, at nginx-as-proxy and at Portico, in alternating rounds; the CPU time each
# proxy's processes spent is read from /proc before and after its run. The median round is reported.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

DURATION=${1:-10}
CONNECTIONS=${2:-32}
ROUNDS=${3:-3}
BACKEND_PORT=18190
NGINX_PORT=18191
PORTICO_PORT=18192
SIGNED_PORT=18193
LIMITS_PORT=18194
CADDY_PORT=18195
ACCESS_PORT=18196
BASE_PORT=18197
POOL_PORT=18198
POOL=${POOL:-0}
BASELINE=${BASELINE:-}
BASELINE_DIR=${BASELINE_DIR:-/tmp/portico-baseline}
SIGNED=${SIGNED:-0}
LIMITS=${LIMITS:-0}
ACCESS_LOG=${ACCESS_LOG:-0}
ACCESS_LOG_FORMAT=${ACCESS_LOG_FORMAT:-json}
TLS=${TLS:-0}
LOCAL=${LOCAL:-0}
CADDY=${CADDY:-1}
CLIENT=${CLIENT:-}
SCHEME=http
[ "$TLS" = 1 ] && SCHEME=https
WORK=$(mktemp -d /tmp/portico-bench.XXXXXX)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.3
  rm -rf "$WORK"
}
trap cleanup EXIT

TOOLS=(wrk:wrk nginx:nginx-light)
[ "$CADDY" = 1 ] && TOOLS+=(caddy:caddy)
bench_install "${TOOLS[@]}"

echo "== building Portico (release)"
# The same flags as `make build` (cross-module optimisation), unless SWIFT_BUILD_FLAGS says otherwise.
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null
if [ -n "$BASELINE" ]; then
  BASELINE_REV=$(git rev-parse --short "$BASELINE^{commit}")
  echo "== building the baseline, $BASELINE_REV (release, in $BASELINE_DIR)"
  if [ ! -e "$BASELINE_DIR/.git" ]; then git worktree add --detach "$BASELINE_DIR" "$BASELINE_REV" >/dev/null; fi
  git -C "$BASELINE_DIR" checkout -q --detach "$BASELINE_REV"
  (cd "$BASELINE_DIR" && swift build -c release --product portico ${BASELINE_BUILD_FLAGS-${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization}} >/dev/null)
fi

mkdir -p "$WORK/backend" "$WORK/proxy" "$WORK/policies"
./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
CURL_TLS=(--cacert "$WORK/certs/ca.pem")
NGINX_LISTEN="127.0.0.1:$NGINX_PORT"
PORTICO_TLS=""
if [ "$TLS" = 1 ]; then
  # The same certificate and protocol versions on both sides; nginx keeps its default ciphers.
  NGINX_LISTEN="127.0.0.1:$NGINX_PORT ssl; ssl_certificate $WORK/certs/server.pem; ssl_certificate_key $WORK/certs/server-key.pem; ssl_protocols TLSv1.2 TLSv1.3"
  PORTICO_TLS=", tls: { certificate: $WORK/certs/server.pem, privateKey: $WORK/certs/server-key.pem }"
fi
bench_backend_conf "$WORK/backend" "$BACKEND_PORT"
# The pool's second target: the same backend on a second port.
sed -i "s|    listen 127.0.0.1:$BACKEND_PORT;|    listen 127.0.0.1:$BACKEND_PORT;\n    listen 127.0.0.1:$((BACKEND_PORT + 100));|" "$WORK/backend/nginx.conf"
bench_policy "$WORK/policies/bench.yaml" "$PORTICO_PORT" "$BACKEND_PORT" "$PORTICO_TLS" "${CLIENT:+, client: $CLIENT}"

# The same service behind signature auth, on its own listener. wrk replays one signature, so the
# nonce is off here (the nonce store's insert, ~0.3 µs, is measured by the micro-benchmarks).
mkdir -p "$WORK/signed-policies"
head -c 32 /dev/urandom | base64 | tr -d '\n' >"$WORK/bench.secret"
sed -e "s/name: bench, address: 127.0.0.1, port: $PORTICO_PORT/name: bench, address: 127.0.0.1, port: $SIGNED_PORT/" \
    -e "s|    path: /api/{version}/stockquote|    path: /api/{version}/stockquote\n    auth: signature|" \
    "$WORK/policies/bench.yaml" >"$WORK/signed-policies/bench.yaml"
cat >>"$WORK/signed-policies/bench.yaml" <<YAML
signatures: { maxClockSkew: 1h, requireNonce: false }
keys:
  bench: { secretFile: $WORK/bench.secret, services: [stockQuote] }
YAML

# The same service with every kind of limit that applies to it: a bucket per client address, the
# backend's rate limit and its concurrency cap. The limits are far above what wrk can send, so no
# request is refused: what is measured is what checking them costs.
mkdir -p "$WORK/limited-policies"
sed -e "s/name: bench, address: 127.0.0.1, port: $PORTICO_PORT/name: bench, address: 127.0.0.1, port: $LIMITS_PORT/" \
    -e "s|  quotes: { url: \"http://127.0.0.1:$BACKEND_PORT\", timeout: 5s|  quotes: { url: \"http://127.0.0.1:$BACKEND_PORT\", timeout: 5s, rateLimit: { rate: 1000000000/s, burst: 1000000 }, maxConcurrent: 100000|" \
    -e "s|    path: /api/{version}/stockquote|    path: /api/{version}/stockquote\n    addressRateLimit: { rate: 1000000000/s, burst: 1000000 }|" \
    "$WORK/policies/bench.yaml" >"$WORK/limited-policies/bench.yaml"

# The same policy with the access log on, on a port of its own.
mkdir -p "$WORK/logged-policies"
sed -e "s/name: bench, address: 127.0.0.1, port: $PORTICO_PORT/name: bench, address: 127.0.0.1, port: $ACCESS_PORT/" \
    -e "s/accessLog: { enabled: false }/accessLog: { enabled: true, format: $ACCESS_LOG_FORMAT }/" \
    "$WORK/policies/bench.yaml" >"$WORK/logged-policies/bench.yaml"

# The same service in front of a pool of two targets, on a port of its own.
mkdir -p "$WORK/pool-policies"
sed -e "s/name: bench, address: 127.0.0.1, port: $PORTICO_PORT/name: bench, address: 127.0.0.1, port: $POOL_PORT/" \
    -e "s|  quotes: { url: \"http://127.0.0.1:$BACKEND_PORT\", timeout: 5s|  quotes: { targets: [{ url: \"http://127.0.0.1:$BACKEND_PORT\" }, { url: \"http://127.0.0.1:$((BACKEND_PORT + 100))\" }], healthCheck: { path: /, interval: 1s }, retries: { attempts: 2, on: [connect-failure, 503] }, timeout: 5s|" \
    "$WORK/policies/bench.yaml" >"$WORK/pool-policies/bench.yaml"

# The baseline: the same policy on a port of its own.
if [ -n "$BASELINE" ]; then
  mkdir -p "$WORK/base-policies"
  sed -e "s/name: bench, address: 127.0.0.1, port: $PORTICO_PORT/name: bench, address: 127.0.0.1, port: $BASE_PORT/" \
      "$WORK/policies/bench.yaml" >"$WORK/base-policies/bench.yaml"
fi

# The Go peer: Caddy as a keep-alive reverse proxy with the same route, headers and (with TLS=1)
# certificate. Its admin endpoint and automatic HTTPS are off; it logs no requests by default.
CADDY_SITE="http://127.0.0.1:$CADDY_PORT"
CADDY_TLS=""
if [ "$TLS" = 1 ]; then
  CADDY_SITE="https://127.0.0.1:$CADDY_PORT"
  CADDY_TLS="tls $WORK/certs/server.pem $WORK/certs/server-key.pem"
fi
cat >"$WORK/Caddyfile" <<CONF
{
  admin off
  auto_https off
  storage file_system $WORK/caddy
}
$CADDY_SITE {
  $CADDY_TLS
  handle_path /api/1/stockquote/* {
    rewrite * /v1/quotes{path}
    reverse_proxy 127.0.0.1:$BACKEND_PORT {
      header_up X-Forwarded-Host {host}
    }
  }
}
CONF

nginx -p "$WORK/backend" -c "$WORK/backend/nginx.conf" & PIDS+=($!)
.build/release/portico serve --policies "$WORK/policies" --log-level warning & PIDS+=($!)
PORTICO_PID=$!
for _ in $(seq 50); do
  LOCAL_BODY=$(curl -s "${CURL_TLS[@]}" "$SCHEME://localhost:$PORTICO_PORT/nowhere" || true)
  [ -n "$LOCAL_BODY" ] && break
  sleep 0.1
done
# The peer: nginx as a keep-alive reverse proxy, one worker per core, no access log (Portico's is off too).
# Written once Portico runs: its /nowhere location returns the very bytes Portico answers there.
write_nginx_proxy_conf() { bench_nginx_proxy_conf "$WORK/proxy" "$NGINX_LISTEN" "$BACKEND_PORT" "$LOCAL_BODY"; }

write_nginx_proxy_conf
nginx -p "$WORK/proxy" -c "$WORK/proxy/nginx.conf" & PIDS+=($!)
NGINX_PROXY_MASTER=$!
if [ "$CADDY" = 1 ]; then
  XDG_DATA_HOME="$WORK/caddy" XDG_CONFIG_HOME="$WORK/caddy" caddy run --adapter caddyfile --config "$WORK/Caddyfile" >"$WORK/caddy.log" 2>&1 & PIDS+=($!)
  CADDY_PID=$!
fi
if [ "$SIGNED" = 1 ]; then
  .build/release/portico serve --policies "$WORK/signed-policies" --log-level warning & PIDS+=($!)
  SIGNED_PID=$!
fi
if [ "$LIMITS" = 1 ]; then
  .build/release/portico serve --policies "$WORK/limited-policies" --log-level warning & PIDS+=($!)
  LIMITS_PID=$!
fi
if [ "$ACCESS_LOG" = 1 ]; then
  .build/release/portico serve --policies "$WORK/logged-policies" --log-level warning --access-log "$WORK/access.log" & PIDS+=($!)
  ACCESS_PID=$!
fi
if [ "$POOL" = 1 ]; then
  .build/release/portico serve --policies "$WORK/pool-policies" --log-level warning & PIDS+=($!)
  POOL_PID=$!
fi
if [ -n "$BASELINE" ]; then
  "$BASELINE_DIR/.build/release/portico" serve --policies "$WORK/base-policies" --log-level warning & PIDS+=($!)
  BASE_PID=$!
fi
sleep 1.5

PATH_UNDER_TEST=/api/1/stockquote/AAPL
PORTS=($BACKEND_PORT $NGINX_PORT $PORTICO_PORT)
[ "$CADDY" = 1 ] && PORTS+=($CADDY_PORT)
[ -n "$BASELINE" ] && PORTS+=($BASE_PORT)
[ "$POOL" = 1 ] && PORTS+=($POOL_PORT)
for port in "${PORTS[@]}"; do
  url="$SCHEME://localhost:$port$PATH_UNDER_TEST"
  [ $port = $BACKEND_PORT ] && url="http://127.0.0.1:$port/v1/quotes/AAPL"
  curl -fsS "${CURL_TLS[@]}" "$url" >/dev/null || { echo "no answer from $url" >&2; exit 1; }
done

nginx_proxy_pids() { echo "$NGINX_PROXY_MASTER $(pgrep -P "$NGINX_PROXY_MASTER" | tr '\n' ' ')"; }
HZ=$(getconf CLK_TCK)

WRK_HEADERS=()
if [ "$SIGNED" = 1 ]; then
  SIGNED_URL="$SCHEME://localhost:$SIGNED_PORT$PATH_UNDER_TEST"
  mapfile -t SIGNATURE < <(.build/release/portico sign --key-id bench --secret-file "$WORK/bench.secret" --no-nonce "$SIGNED_URL")
  curl -fsS "${CURL_TLS[@]}" -H "${SIGNATURE[0]}" -H "${SIGNATURE[1]}" "$SIGNED_URL" >/dev/null || { echo "no answer from $SIGNED_URL" >&2; exit 1; }
  [ "$(curl -s "${CURL_TLS[@]}" -o /dev/null -w '%{http_code}' "$SIGNED_URL")" = 401 ] || { echo "$SIGNED_URL answers unsigned requests" >&2; exit 1; }
fi
if [ "$LIMITS" = 1 ]; then
  LIMITS_URL="$SCHEME://localhost:$LIMITS_PORT$PATH_UNDER_TEST"
  curl -fsS "${CURL_TLS[@]}" -D - -o /dev/null "$LIMITS_URL" | grep -qi '^ratelimit:' || { echo "$LIMITS_URL sends no RateLimit field" >&2; exit 1; }
fi

run_wrk() { # name round url pids...
  local name=$1 round=$2 url=$3; shift 3
  local headers=()
  if [ "$name" = portico-sig ]; then headers=(-H "${SIGNATURE[0]}" -H "${SIGNATURE[1]}"); fi
  wrk -t1 -c"$CONNECTIONS" -d2s "${headers[@]}" "$url" >/dev/null  # warm-up
  local before after
  before=$(bench_ticks "$@")
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "${headers[@]}" "$url" >"$WORK/$name.$round.wrk"
  after=$(bench_ticks "$@")
  echo "$name $round $((after - before))" >>"$WORK/cpu"
}

echo "== wrk: ${DURATION}s × $ROUNDS rounds, $CONNECTIONS keep-alive $SCHEME connections, 1 thread, on $(nproc) cores"
for round in $(seq 1 "$ROUNDS"); do
  run_wrk backend "$round" "http://127.0.0.1:$BACKEND_PORT/v1/quotes/AAPL"
  run_wrk nginx "$round" "$SCHEME://127.0.0.1:$NGINX_PORT$PATH_UNDER_TEST" $(nginx_proxy_pids)
  run_wrk portico "$round" "$SCHEME://127.0.0.1:$PORTICO_PORT$PATH_UNDER_TEST" $PORTICO_PID
  if [ "$POOL" = 1 ]; then run_wrk portico-pool "$round" "$SCHEME://127.0.0.1:$POOL_PORT$PATH_UNDER_TEST" $POOL_PID; fi
  if [ -n "$BASELINE" ]; then run_wrk portico-base "$round" "$SCHEME://127.0.0.1:$BASE_PORT$PATH_UNDER_TEST" $BASE_PID; fi
  if [ "$CADDY" = 1 ]; then run_wrk caddy "$round" "$SCHEME://127.0.0.1:$CADDY_PORT$PATH_UNDER_TEST" $CADDY_PID; fi
  if [ "$LOCAL" = 1 ]; then
    run_wrk nginx-404 "$round" "$SCHEME://127.0.0.1:$NGINX_PORT/nowhere" $(nginx_proxy_pids)
    run_wrk portico-404 "$round" "$SCHEME://127.0.0.1:$PORTICO_PORT/nowhere" $PORTICO_PID
  fi
  if [ "$SIGNED" = 1 ]; then run_wrk portico-sig "$round" "$SIGNED_URL" $SIGNED_PID; fi
  if [ "$LIMITS" = 1 ]; then run_wrk portico-lim "$round" "$LIMITS_URL" $LIMITS_PID; fi
  if [ "$ACCESS_LOG" = 1 ]; then run_wrk portico-log "$round" "$SCHEME://127.0.0.1:$ACCESS_PORT$PATH_UNDER_TEST" $ACCESS_PID; fi
done
if [ "$ACCESS_LOG" = 1 ]; then
  # Every request of every run has its line (the writer flushes every few ms).
  sleep 0.1
  echo "access log: $(wc -l <"$WORK/access.log") lines"
fi

if [ "$LOCAL" = 1 ]; then
  # The two local answers must be the same size for the comparison to be fair.
  n=$(curl -s "${CURL_TLS[@]}" "$SCHEME://127.0.0.1:$NGINX_PORT/nowhere" | wc -c)
  p=$(curl -s "${CURL_TLS[@]}" "$SCHEME://127.0.0.1:$PORTICO_PORT/nowhere" | wc -c)
  [ "$n" = "$p" ] || echo "warning: local answers differ in size (nginx $n bytes, Portico $p bytes)" >&2
fi

python3 - "$WORK" "$HZ" "$ROUNDS" "$SIGNED" "$LIMITS" "$CADDY" "$LOCAL" "$ACCESS_LOG" "${BASELINE_REV:-}" "$POOL" <<'PY'
import re, statistics, sys
work, hz, rounds, signed, limits = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5] == "1"
caddy, local, access, baseline = sys.argv[6] == "1", sys.argv[7] == "1", sys.argv[8] == "1", sys.argv[9]
pool = sys.argv[10] == "1"
cpu = {(name, int(r)): int(t) for name, r, t in (line.split() for line in open(f"{work}/cpu"))}
def parse(name, r):
    text = open(f"{work}/{name}.{r}.wrk").read()
    total = int(re.search(r"(\d+) requests in", text).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)),
        "lat": dict(re.findall(r"^\s+(50|90|99)%\s+(\S+)", text, re.M)),
        "cpu": cpu[(name, r)] / hz * 1e6 / total if name != "backend" else None,
        "errors": int(errors.group(1)) if errors and not name.endswith("-404") else 0,
    }
rows = {}
names = ("backend", "nginx", "portico") + (("portico-pool",) if pool else ()) + (("portico-base",) if baseline else ())
names += ("caddy",) if caddy else () + (("portico-sig",) if signed else ())
names += (("portico-lim",) if limits else ()) + (("nginx-404", "portico-404") if local else ())
names += ("portico-log",) if access else ()
for name in names:
    runs = sorted((parse(name, r) for r in range(1, rounds + 1)), key=lambda run: run["rps"])
    median = runs[len(runs) // 2]
    median["errors"] = sum(run["errors"] for run in runs)
    median["all_rps"] = [round(run["rps"]) for run in runs]
    if name != "backend":
        median["cpu"] = statistics.median(run["cpu"] for run in runs)
    rows[name] = median
print(f"{'target':<12}{'req/s':>10}{'p50':>10}{'p90':>10}{'p99':>10}{'proxy CPU/req':>16}{'non-2xx':>9}   rounds (req/s)")
for name, row in rows.items():
    cpu_text = f"{row['cpu']:.1f} µs" if row["cpu"] is not None else "-"
    lat = row["lat"]
    print(f"{name:<12}{row['rps']:>10.0f}{lat.get('50','-'):>10}{lat.get('90','-'):>10}{lat.get('99','-'):>10}{cpu_text:>16}{row['errors']:>9}   {row['all_rps']}")
p, n = rows["portico"], rows["nginx"]
def p99_ms(row):
    text = row["lat"].get("99", "0us")
    value = float(re.match(r"[\d.]+", text).group(0))
    return value * {"us": 1e-3, "ms": 1.0, "s": 1e3}[re.search(r"[a-z]+$", text).group(0)]
print(f"\nPortico/nginx (medians): throughput {p['rps']/n['rps']:.2f}x, CPU per request {p['cpu']/n['cpu']:.2f}x, p99 {p99_ms(p)/p99_ms(n):.2f}x")
if pool:
    o = rows["portico-pool"]
    print(f"Portico with a pool of two targets/one target (medians): throughput {o['rps']/p['rps']:.2f}x, CPU per request {o['cpu']/p['cpu']:.2f}x"
          f" (balancing adds {o['cpu'] - p['cpu']:.1f} µs of CPU per request)")
if baseline:
    b = rows["portico-base"]
    print(f"Portico/baseline {baseline} (medians): throughput {p['rps']/b['rps']:.2f}x, CPU per request {p['cpu']/b['cpu']:.2f}x, p99 {p99_ms(p)/p99_ms(b):.2f}x")
if caddy:
    c = rows["caddy"]
    print(f"Caddy/nginx (medians): throughput {c['rps']/n['rps']:.2f}x, CPU per request {c['cpu']/n['cpu']:.2f}x, p99 {p99_ms(c)/p99_ms(n):.2f}x")
if local:
    pl, nl = rows["portico-404"], rows["nginx-404"]
    print(f"Local answer (404 problem), Portico/nginx: throughput {pl['rps']/nl['rps']:.2f}x, CPU per request {pl['cpu']/nl['cpu']:.2f}x")
if signed:
    s = rows["portico-sig"]
    print(f"Portico with signature auth/nginx: throughput {s['rps']/n['rps']:.2f}x, CPU per request {s['cpu']/n['cpu']:.2f}x"
          f" (verification adds {s['cpu'] - p['cpu']:.1f} µs of CPU per request)")
if limits:
    l = rows["portico-lim"]
    print(f"Portico with rate limits/nginx: throughput {l['rps']/n['rps']:.2f}x, CPU per request {l['cpu']/n['cpu']:.2f}x"
          f" (checking the limits adds {l['cpu'] - p['cpu']:.1f} µs of CPU per request)")
if access:
    a = rows["portico-log"]
    print(f"Portico with its access log on/nginx: throughput {a['rps']/n['rps']:.2f}x, CPU per request {a['cpu']/n['cpu']:.2f}x"
          f" (the access log adds {a['cpu'] - p['cpu']:.1f} µs of CPU per request)")
PY
