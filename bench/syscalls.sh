#!/usr/bin/env bash
# System calls per proxied request, by kind, for Portico and for nginx as the peer proxy: the same
# backend, the same wrk load, counted by the kernel's tracepoints (perf stat on each proxy's
# processes while wrk runs), divided by the requests wrk completed. Counts, not times: they do not
# depend on the machine's speed, only on how requests batch under the load.
#
#   bench/syscalls.sh [seconds] [connections]     (defaults 5 s, 32)
#   TLS=1 bench/syscalls.sh ...                    both proxies terminate TLS (the same certificate)
#   PATH_UNDER_TEST=/nowhere bench/syscalls.sh     a local 404 instead of the proxied route
#
# Loopback only; it ends by itself. Needs root for the tracepoints.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

DURATION=${1:-5}
CONNECTIONS=${2:-32}
BACKEND_PORT=18186
NGINX_PORT=18187
PORTICO_PORT=18188
PATH_UNDER_TEST=${PATH_UNDER_TEST:-/api/1/stockquote/AAPL}
WORK=$(mktemp -d /tmp/portico-syscalls.XXXXXX)
trap 'bench_kill_pids; rm -rf "$WORK"' EXIT

bench_install wrk:wrk nginx:nginx-light perf:linux-perf

echo "== building Portico (release)" >&2
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null

bench_start_peers "$WORK" "$BACKEND_PORT" "$NGINX_PORT" "$PORTICO_PORT" '{"status":404}'

EVENTS=raw_syscalls:sys_enter
for call in read readv recvfrom recvmsg write writev sendto sendmsg epoll_wait epoll_pwait epoll_ctl futex; do
  EVENTS+=",syscalls:sys_enter_$call"
done

# measure NAME PORT PIDS: wrk against PORT while perf counts the system calls of PIDS (comma-separated).
measure() {
  local name=$1 port=$2 pids=$3
  wrk -t1 -c"$CONNECTIONS" -d2s "$SCHEME://127.0.0.1:$port$PATH_UNDER_TEST" >/dev/null  # warm-up
  perf stat -x, -e "$EVENTS" -p "$pids" -o "$WORK/$name.perf" &
  local perf=$!
  sleep 0.5
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "$SCHEME://127.0.0.1:$port$PATH_UNDER_TEST" >"$WORK/$name.wrk"
  kill -INT "$perf"
  wait "$perf" || true
}

sleep 0.5
NGINX_WORKERS=$(pgrep -P "$NGINX_MASTER" | paste -sd,)
measure nginx "$NGINX_PORT" "$NGINX_WORKERS"
measure portico "$PORTICO_PORT" "$PORTICO_PID"

python3 - "$WORK" "$SCHEME" "$PATH_UNDER_TEST" "$CONNECTIONS" <<'PY'
import re, sys
work, scheme, path, connections = sys.argv[1:]
def load(name):
    requests = int(re.search(r"(\d+) requests in", open(f"{work}/{name}.wrk").read()).group(1))
    counts = {}
    for line in open(f"{work}/{name}.perf"):
        fields = line.strip().split(",")
        if len(fields) > 2 and fields[0].replace(".", "").isdigit():
            counts[fields[2].split(":")[-1].replace("sys_enter_", "").replace("sys_enter", "all")] = float(fields[0])
    return requests, counts
nginx, portico = load("nginx"), load("portico")
print(f"system calls per request, {scheme} {path}, {connections} keep-alive connections (wrk -t1)")
print(f"{'call':<12}{'nginx':>10}{'Portico':>10}")
for call in nginx[1]:
    n, p = nginx[1][call] / nginx[0], portico[1].get(call, 0) / portico[0]
    if n >= 0.005 or p >= 0.005:
        print(f"{call:<12}{n:>10.2f}{p:>10.2f}")
print(f"requests: nginx {nginx[0]}, Portico {portico[0]}")
PY
