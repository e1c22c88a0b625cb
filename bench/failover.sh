#!/usr/bin/env bash
# Failover under load: three targets behind Portico, nginx and HAProxy in turn, the same scenario
# for each. A steady keep-alive load runs (wrk); one target is killed (SIGKILL), a second is frozen
# (SIGSTOP), then the first is started again and the second resumed. Reported per proxy: requests,
# failed ones (non-2xx and socket errors), p99, how long after the recovery each recovered target
# serves its share of requests again (half its fair third, in a 250 ms window), and, in a second run with POSTs (each with its own id), how many
# POSTs reached two targets.
#
#   bench/failover.sh [seconds-per-phase] [connections]
#
# Each proxy has the same settings, as near as their options allow: health checks every second
# (one failure marks a target down, one pass up), connect and per-try timeouts of 500 ms, one retry
# on another target for what is safe to retry. Targets are single-process nginx instances
# (master_process off), so a signal reaches the process that serves. Loopback only; it stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

PHASE=${1:-6}
CONNECTIONS=${2:-16}
TARGETS=(18301 18302 18303)
PORTICO_PORT=18310
NGINX_PORT=18311
HAPROXY_PORT=18312
WORK=$(mktemp -d /tmp/portico-failover.XXXXXX)
TARGET_PIDS=(0 0 0)

cleanup() {
  bench_kill_pids
  for pid in "${TARGET_PIDS[@]}"; do [ "$pid" != 0 ] && { kill -CONT "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; } || true; done
  sleep 0.3
  rm -rf "$WORK"
}
trap cleanup EXIT

bench_install wrk:wrk nginx:nginx-light haproxy:haproxy
echo "== building Portico (release)"
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null

now_ms() { date +%s%3N; }

# target_conf INDEX: one nginx process answering on its port, logging when and what it served.
target_conf() {
  local index=$1 dir="$WORK/target$1" port=${TARGETS[$1]}
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<CONF
master_process off;
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log crit;
events { worker_connections 4096; }
http {
  log_format served '\$msec \$request_method \$http_x_bench_id \$uri';
  access_log $dir/access.log served;
  client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir; uwsgi_temp_path $dir; scgi_temp_path $dir;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port;
    location = /healthz { access_log off; return 200 'ok'; }
    location / { default_type application/json; return 200 '$BENCH_BODY'; }
  }
}
CONF
}

start_target() {
  local index=$1
  nginx -p "$WORK/target$index" -c "$WORK/target$index/nginx.conf" &
  TARGET_PIDS[$index]=$!
}

start_targets() {
  for index in 0 1 2; do
    [ "${TARGET_PIDS[$index]}" != 0 ] && { kill -CONT "${TARGET_PIDS[$index]}" 2>/dev/null; kill "${TARGET_PIDS[$index]}" 2>/dev/null; wait "${TARGET_PIDS[$index]}" 2>/dev/null || true; }
    target_conf "$index"
    : >"$WORK/target$index/access.log"
    start_target "$index"
  done
  sleep 0.5
}

# The three proxies.
mkdir -p "$WORK/portico" "$WORK/nginx" "$WORK/haproxy"
cat >"$WORK/portico/gateway.yaml" <<YAML
listeners:
  - { name: bench, address: 127.0.0.1, port: $PORTICO_PORT }
accessLog: { enabled: false }
backends:
  pool:
    targets:
      - { url: "http://127.0.0.1:${TARGETS[0]}" }
      - { url: "http://127.0.0.1:${TARGETS[1]}" }
      - { url: "http://127.0.0.1:${TARGETS[2]}" }
    connectTimeout: 500ms
    timeout: 5s
    healthCheck: { path: /healthz, interval: 1s, timeout: 500ms, healthyAfter: 1, unhealthyAfter: 1 }
    outlierDetection: { consecutiveFailures: 3, ejectFor: 10s, maxEjectedPercent: 67% }
    retries: { attempts: 2, on: [connect-failure, reset, timeout, 502, 503, 504], perTryTimeout: 500ms, budget: 100% }
services:
  api:
    path: /api
    versions: { 1: { proxy: { backend: pool } } }
YAML
cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes auto;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log crit;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx; proxy_temp_path $WORK/nginx; fastcgi_temp_path $WORK/nginx; uwsgi_temp_path $WORK/nginx; scgi_temp_path $WORK/nginx;
  keepalive_requests 1000000;
  upstream pool {
    server 127.0.0.1:${TARGETS[0]} max_fails=1 fail_timeout=1s;
    server 127.0.0.1:${TARGETS[1]} max_fails=1 fail_timeout=1s;
    server 127.0.0.1:${TARGETS[2]} max_fails=1 fail_timeout=1s;
    keepalive 64;
  }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location /api/ {
      proxy_pass http://pool;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_connect_timeout 500ms;
      proxy_read_timeout 500ms;
      proxy_send_timeout 500ms;
      proxy_next_upstream error timeout http_502 http_503 http_504;
      proxy_next_upstream_tries 2;
    }
  }
}
CONF
cat >"$WORK/haproxy/haproxy.cfg" <<CONF
global
  maxconn 4096
defaults
  mode http
  timeout connect 500ms
  timeout client 30s
  timeout server 500ms
  retries 1
  option redispatch
  retry-on conn-failure empty-response response-timeout 502 503 504
frontend bench
  bind 127.0.0.1:$HAPROXY_PORT
  default_backend pool
backend pool
  balance roundrobin
  option httpchk GET /healthz
  http-reuse safe
  server t0 127.0.0.1:${TARGETS[0]} check inter 1s fall 1 rise 1
  server t1 127.0.0.1:${TARGETS[1]} check inter 1s fall 1 rise 1
  server t2 127.0.0.1:${TARGETS[2]} check inter 1s fall 1 rise 1
CONF

# Each request a wrk thread sends carries its own id (X-Bench-Id), so a POST that reached two
# targets shows in their logs.
cat >"$WORK/ids.lua" <<'LUA'
local counter = 0
local prefix = tostring(math.random(1, 1000000000))
local method = os.getenv("WRK_METHOD") or "GET"
local body = nil
if method == "POST" then body = "order" end
request = function()
  counter = counter + 1
  return wrk.format(method, nil, { ["X-Bench-Id"] = prefix .. "-" .. counter }, body)
end
LUA

start_proxy() { # name
  case $1 in
    portico) .build/release/portico serve --policies "$WORK/portico" --log-level error & ;;
    nginx) nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" & ;;
    haproxy) haproxy -f "$WORK/haproxy/haproxy.cfg" -q & ;;
  esac
  PROXY_PID=$!
  PIDS+=("$PROXY_PID")
}

stop_proxy() {
  kill "$PROXY_PID" 2>/dev/null || true
  wait "$PROXY_PID" 2>/dev/null || true
}

# scenario NAME PORT METHOD: the kill, freeze and recovery under load; writes NAME.METHOD.* files.
scenario() {
  local name=$1 port=$2 method=$3 out="$WORK/$1.$3"
  start_targets
  start_proxy "$name"
  sleep 2  # the proxies' first health checks
  curl -fsS -o /dev/null -X "$method" "http://127.0.0.1:$port/api/warm" || { echo "$name does not answer" >&2; exit 1; }
  local wrk_args=(-t1 -c"$CONNECTIONS" -d"$((PHASE * 4))s" --latency -s "$WORK/ids.lua")
  [ "$method" = POST ] && wrk_args+=(-H "Content-Type: text/plain")
  WRK_METHOD=$method wrk "${wrk_args[@]}" "http://127.0.0.1:$port/api/q" >"$out.wrk" 2>&1 &
  local wrk_pid=$!
  sleep "$PHASE"
  kill -KILL "${TARGET_PIDS[0]}"; wait "${TARGET_PIDS[0]}" 2>/dev/null || true
  sleep "$PHASE"
  kill -STOP "${TARGET_PIDS[1]}"
  sleep "$PHASE"
  start_target 0
  kill -CONT "${TARGET_PIDS[1]}"
  local recovered=$(now_ms)
  wait "$wrk_pid" || true
  stop_proxy
  echo "$recovered" >"$out.recovered"
  for index in 0 1 2; do cp "$WORK/target$index/access.log" "$out.target$index.log"; done
}

echo "== failover: ${PHASE}s phases (steady, one killed, one frozen too, both back), $CONNECTIONS keep-alive connections, on $(nproc) cores"
for proxy in portico nginx haproxy; do
  port_var="$(echo "$proxy" | tr a-z A-Z)_PORT"
  for method in GET POST; do
    scenario "$proxy" "${!port_var}" "$method"
  done
done

python3 - "$WORK" <<'PY'
import collections, glob, re, sys
work = sys.argv[1]
def wrk(path):
    text = open(path).read()
    total = int(re.search(r"(\d+) requests in", text).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    p99 = re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1)
    failed = (int(non2xx.group(1)) if non2xx else 0) + (sum(map(int, errors.groups())) if errors else 0)
    return total, failed, p99
def served(log):
    times = []
    for line in open(log):
        parts = line.split()
        if len(parts) >= 2 and parts[1] != "-":
            times.append(float(parts[0]) * 1000)
    return times
def back_in_rotation(logs, index, moment, window=250):
    """Milliseconds after `moment` until the target serves at least half its fair share (a sixth
    of three targets' requests) in a 250 ms window: requests it held while frozen and answers at
    once do not count as it being back."""
    all_times = [served(log) for log in logs]
    end = max((t[-1] for t in all_times if t), default=moment)
    start = moment
    while start < end:
        counts = [sum(1 for t in times if start <= t < start + window) for times in all_times]
        total = sum(counts)
        if total and counts[index] * 6 >= total and counts[index] > 0:
            # Skip a window that is only the backlog a frozen target answers when it resumes.
            if start - moment >= window or index == 0:
                return start - moment
        start += window
    return None
print(f"{'proxy':<9}{'GET req':>9}{'GET failed':>12}{'GET p99':>9}{'killed back':>13}{'frozen back':>13}{'POST req':>10}{'POST failed':>13}{'POST twice':>12}")
for proxy in ("portico", "nginx", "haproxy"):
    total, failed, p99 = wrk(f"{work}/{proxy}.GET.wrk")
    recovered = int(open(f"{work}/{proxy}.GET.recovered").read())
    logs = [f"{work}/{proxy}.GET.target{i}.log" for i in (0, 1, 2)]
    back = [back_in_rotation(logs, i, recovered) for i in (0, 1)]
    ptotal, pfailed, _ = wrk(f"{work}/{proxy}.POST.wrk")
    seen = collections.Counter()
    for i in (0, 1, 2):
        for line in open(f"{work}/{proxy}.POST.target{i}.log"):
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "POST" and parts[2] != "-":
                seen[parts[2]] += 1
    twice = sum(1 for count in seen.values() if count > 1)
    show = lambda ms: "never" if ms is None else f"{ms / 1000:.1f} s"
    print(f"{proxy:<9}{total:>9}{failed:>12}{p99:>9}{show(back[0]):>13}{show(back[1]):>13}{ptotal:>10}{pfailed:>13}{twice:>12}")
PY
