#!/usr/bin/env bash
# Retains and releases per request in the gateway, counted with uprobes on libswiftCore's
# swift_retain and swift_release (perf; root). The allocations harness (bench/allocations) runs
# the direct run (client straight to the backend) and then one route, each at N and at 2N requests
# after the same warm-up; the difference in the counts, over N, is what one request makes (setup
# and warm-up cancel out).
#
# Each hit is counted by the thread it ran on. The gateway's figure is its own event loop's
# (GATEWAY_THREADS, a prefix of the thread's name: the harness's third event loop group,
# `NIO-ELT-2-`) and its libcurl threads' (`portico-`). The harness's client and backend run on
# other threads: what they do for a routed request (their own parsing and writing of it) is not
# the gateway's and is shown apart, as "peers". Until the eleventh step of issue 35 this script
# printed the whole process's count less the direct run's: that subtracted the direct run the
# route's process makes before its route, not the peers' work on the route, so every figure
# carried the client's and backend's share (about 526 a proxied request). The last column is
# that figure still, to compare with the counts on record.
#
#   bench/retains.sh [requests] [routes…]     (default 2,000; routes open signed facade 404 tls;
#                                             also open3p signed3p: the third-party signer's shape)
#   SITES=30 bench/retains.sh 300 open        where they are: the 30 functions that call swift_retain
#                                             and swift_release most on the gateway's event loop, a
#                                             request's share of each (perf record with DWARF call chains)
#   STACK_BYTES=4096 MMAP_PAGES=1024 …        the stack copied per hit (default 512 bytes: enough for
#                                             the caller of a runtime entry point) and perf's buffer
#                                             (4,096 pages); with 4 KiB per hit perf lost a third to
#                                             three quarters of the hits, with 512 bytes none
#
# A probe hit traps into the kernel, so the runs are slow (1.5 min a route); the counts do not
# depend on speed. swift_retain_n, swift_release_n and the non-atomic variants are not counted.
# Loopback only; it ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-2000}
shift || true
ROUTES=${*:-open signed facade 404 tls}
WORK=$(mktemp -d /tmp/portico-retains.XXXXXX)
trap 'rm -rf "$WORK"; perf probe -q -d "probe_libswiftCore:*" 2>/dev/null || true' EXIT
LIBSWIFTCORE=$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")/lib/swift/linux/libswiftCore.so
for symbol in swift_retain swift_release; do
  perf probe -q -x "$LIBSWIFTCORE" --add "$symbol" 2>/dev/null || true
done

echo "== building bench/allocations (release)" >&2
swift build -c release --package-path bench/allocations ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null
./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
BINARY=bench/allocations/.build/release/Allocations

# One run's hits, by thread: "gateway" (GATEWAY_THREADS or portico-) and "peers" (every other
# thread: the client, the backend), retains and releases of each.
GATEWAY_THREADS=${GATEWAY_THREADS:-NIO-ELT-2-}
count() {
  local route=$1 requests=$2
  ROUTE=$route perf record -e probe_libswiftCore:swift_retain,probe_libswiftCore:swift_release --mmap-pages "${MMAP_PAGES:-4096}" -o "$WORK/count.data" \
    "$BINARY" "$requests" 200 "$WORK/certs/server.pem" "$WORK/certs/server-key.pem" >/dev/null 2>"$WORK/record.log"
  if grep -qi "lost" "$WORK/record.log"; then
    echo "perf lost hits in the $route run: the counts would be too low" >&2
    exit 1
  fi
  perf script -i "$WORK/count.data" -F comm,event 2>/dev/null | awk -v gateway="$GATEWAY_THREADS" '
    { side = (index($1, gateway) == 1 || index($1, "portico-") == 1) ? "g" : "p"
      kind = ($2 ~ /swift_retain/) ? "r" : "l"; n[side kind]++ }
    END { print n["gr"] + 0, n["gl"] + 0, n["pr"] + 0, n["pl"] + 0 }'
}

# Per request of one route's process (the direct run in it included): the difference between N
# and 2N, as gateway retains, releases, then peers' retains, releases.
per_request() {
  local a b
  a=$(count "$1" "$REQUESTS")
  b=$(count "$1" $((REQUESTS * 2)))
  awk -v n="$REQUESTS" -v a="$a" -v b="$b" 'BEGIN {
    split(a, x, " "); split(b, y, " ")
    printf "%.1f %.1f %.1f %.1f\n", (y[1] - x[1]) / n, (y[2] - x[2]) / n, (y[3] - x[3]) / n, (y[4] - x[4]) / n }'
}

# Which functions make the calls: each probe hit's first frame outside the runtime, on the gateway's
# thread, counted over a run of N requests after a warm-up of 200, then divided by those N + 200.
if [ -n "${SITES:-}" ]; then
  for route in $ROUTES; do
    ROUTE=$route perf record -e probe_libswiftCore:swift_retain,probe_libswiftCore:swift_release \
      --call-graph "dwarf,${STACK_BYTES:-512}" --mmap-pages "${MMAP_PAGES:-4096}" -o "$WORK/perf.data" \
      "$BINARY" "$REQUESTS" 200 "$WORK/certs/server.pem" "$WORK/certs/server-key.pem" >/dev/null 2>"$WORK/record.log"
    echo "== $route: the functions calling swift_retain / swift_release, per request"
    # perf drops samples when it cannot keep up (a busy machine): then the figures are too low.
    if grep -qi "lost" "$WORK/record.log"; then
      echo "   (perf lost samples, so these are too low: run it again on a quiet machine)"
      grep -i "lost" "$WORK/record.log" | head -3 | sed 's/^/   /'
    fi
    perf script -i "$WORK/perf.data" -F comm,event,ip,sym,dso 2>/dev/null | python3 bench/retain-sites.py \
      "$((REQUESTS + 200))" "$SITES"
  done
  exit 0
fi

read -r _ _ direct_r direct_l < <(per_request direct)
printf '%-9s %9s %9s %9s   %s\n' route retains releases total "peers (client and backend) on the route; whole process less the direct run, as recorded before"
printf '%-9s %9s %9s %9s   (the direct run: %s + %s, client and backend)\n' "" "" "" "" "$direct_r" "$direct_l"
for route in $ROUTES; do
  read -r gr gl pr pl < <(per_request "$route")
  # The route's process repeats the direct run, so its peers' count less the direct run's is
  # what the client and backend did for the routed request.
  awk -v route="$route" -v gr="$gr" -v gl="$gl" -v pr="$pr" -v pl="$pl" -v dr="$direct_r" -v dl="$direct_l" \
    'BEGIN { printf "%-9s %9.1f %9.1f %9.1f   %.1f; %.1f\n", route, gr, gl, gr + gl, pr + pl - dr - dl, gr + gl + pr + pl - dr - dl }'
done
