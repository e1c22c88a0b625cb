#!/usr/bin/env bash
# Retains and releases per request in the gateway, counted with uprobes on libswiftCore's
# swift_retain and swift_release (perf; root). The allocations harness (bench/allocations) runs
# one route twice, with N and 2N requests after the same warm-up; the difference in the process's
# counts, over N, is what one request makes (setup and warm-up cancel out), and the direct run's
# is subtracted.
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

# Every thread of the process counts (perf follows the harness's threads); the direct run alone
# (ROUTE=direct) is subtracted, as allocations' "all − direct" column is: what remains is the
# gateway's work, and what the backend does for the gateway's larger request.
count() {
  local route=$1 requests=$2
  ROUTE=$route perf stat -x, -e probe_libswiftCore:swift_retain,probe_libswiftCore:swift_release -o "$WORK/stat" \
    "$BINARY" "$requests" 200 "$WORK/certs/server.pem" "$WORK/certs/server-key.pem" >/dev/null
  awk -F, '$3 ~ /swift_retain/ { r = $1 } $3 ~ /swift_release/ { l = $1 } END { print r, l }' "$WORK/stat"
}

# Per request of one route (the direct run's share included): the difference between N and 2N.
per_request() {
  local r1 l1 r2 l2
  read -r r1 l1 < <(count "$1" "$REQUESTS")
  read -r r2 l2 < <(count "$1" $((REQUESTS * 2)))
  awk -v n="$REQUESTS" -v r1="$r1" -v r2="$r2" -v l1="$l1" -v l2="$l2" 'BEGIN { printf "%.1f %.1f\n", (r2 - r1) / n, (l2 - l1) / n }'
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

read -r direct_r direct_l < <(per_request direct)
printf '%-8s %10s %10s   (direct to the backend: %s retains, %s releases per request)\n' route retains releases "$direct_r" "$direct_l"
for route in $ROUTES; do
  read -r r l < <(per_request "$route")
  awk -v route="$route" -v r="$r" -v l="$l" -v dr="$direct_r" -v dl="$direct_l" \
    'BEGIN { printf "%-8s %10.1f %10.1f\n", route, r - dr, l - dl }'
done
