#!/usr/bin/env bash
# Where the CPU per request goes, user space against the kernel, Portico against nginx: the
# proxied route of bench/run.sh, with each process's user and system time apart, its context
# switches, and the TCP segments the machine sent per request (`/proc/net/snmp`, loopback).
#
#   bench/cpu-split.sh [seconds] [connections] [rounds]     (defaults 5 s, 32, 3)
#   TLS=1 bench/cpu-split.sh ...                             the client side over TLS
#
# Why apart: the kernel's share is the socket work (reads, writes, waking the peer), which a proxy
# making the same system calls and sending the same segments pays as nginx does; user time is
# the proxy's own. Rounds alternate nginx and Portico. Loopback only; it ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

DURATION=${1:-5}
CONNECTIONS=${2:-32}
ROUNDS=${3:-3}
BACKEND_PORT=18310
PORTICO_PORT=18311
NGINX_PORT=18312
WORK=$(mktemp -d /tmp/portico-cpu-split.XXXXXX)
trap bench_kill_pids EXIT

bench_install wrk:wrk nginx:nginx-light

echo "== building Portico (release)" >&2
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null

PATH_UNDER_TEST=/api/1/stockquote/AAPL
bench_start_peers "$WORK" "$BACKEND_PORT" "$NGINX_PORT" "$PORTICO_PORT" '{}'

# Every thread of the processes: user ticks, system ticks, voluntary and involuntary switches.
times_of() {
  local user=0 system=0 voluntary=0 involuntary=0 pid task u s
  for pid in "$@"; do
    for task in /proc/"$pid"/task/*; do
      read -r u s < <(awk '{print $14, $15}' "$task/stat")
      user=$((user + u)) system=$((system + s))
      voluntary=$((voluntary + $(awk '/^voluntary_ctxt_switches/ {print $2}' "$task/status")))
      involuntary=$((involuntary + $(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$task/status")))
    done
  done
  echo "$user $system $voluntary $involuntary"
}
segments_sent() { awk '/^Tcp:/ { if (++n == 2) print $12 }' /proc/net/snmp; }

HZ=$(getconf CLK_TCK)
echo "== wrk: ${DURATION}s × $ROUNDS rounds, $CONNECTIONS keep-alive $SCHEME connections, 1 thread, on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
for round in $(seq 1 "$ROUNDS"); do
  for name in nginx portico; do
    if [ $name = nginx ]; then
      port=$NGINX_PORT pids="$NGINX_MASTER $(pgrep -P "$NGINX_MASTER" | tr '\n' ' ')"
    else
      port=$PORTICO_PORT pids=$PORTICO_PID
    fi
    url="$SCHEME://127.0.0.1:$port$PATH_UNDER_TEST"
    wrk -t1 -c"$CONNECTIONS" -d2s "$url" >/dev/null  # warm-up
    read -r u0 s0 v0 i0 < <(times_of $pids)
    g0=$(segments_sent)
    wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "$url" >"$WORK/$name.$round.wrk"
    read -r u1 s1 v1 i1 < <(times_of $pids)
    g1=$(segments_sent)
    echo "$name $round $(awk '/requests in/ {print $1}' "$WORK/$name.$round.wrk") $((u1 - u0)) $((s1 - s0)) $((v1 - v0)) $((i1 - i0)) $((g1 - g0))" >>"$WORK/runs"
  done
done

python3 - "$WORK/runs" "$HZ" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, _, requests, user, system, voluntary, involuntary, segments = line.split()
    n, tick = int(requests), 1e6 / int(sys.argv[2])
    rows.setdefault(name, []).append({
        "user": int(user) * tick / n, "system": int(system) * tick / n, "switches": (int(voluntary) + int(involuntary)) / n,
        "segments": int(segments) / n, "rps": n})
print(f"{'proxy':<9}{'user µs/req':>13}{'system µs/req':>15}{'total':>9}{'switches/req':>14}{'segments/req':>14}")
median = {}
for name, runs in rows.items():
    m = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    median[name] = m
    print(f"{name:<9}{m['user']:>13.1f}{m['system']:>15.1f}{m['user'] + m['system']:>9.1f}{m['switches']:>14.2f}{m['segments']:>14.2f}")
p, n = median["portico"], median["nginx"]
print(f"\nPortico/nginx (medians): user {p['user'] / n['user']:.2f}x, system {p['system'] / n['system']:.2f}x, "
      f"total {(p['user'] + p['system']) / (n['user'] + n['system']):.2f}x")
PY
