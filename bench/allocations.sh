#!/usr/bin/env bash
# Allocations per proxied request, counted on the gateway's own threads.
#
#   bench/allocations.sh [requests] [warm-up]     (defaults 10,000 and 1,000)
#
# With ACCESS_SITES=N, also the N exclusivity-check sites the open proxy runs most, named.
#
# Builds bench/allocations (release, cross-module optimisation, as `make build`) and runs it: the
# real gateway, a small backend and a blocking client in one process, N keep-alive requests straight
# to the backend, then through the gateway over HTTP and over TLS. A malloc counter in the executable
# counts every allocation, and separately those made on the gateway's event-loop thread; the
# backend and the client have threads of their own. The report gives both, and the all-threads
# difference from the direct run as a check. Loopback only; it ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-10000}
WARMUP=${2:-1000}
WORK=$(mktemp -d /tmp/portico-allocations.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

echo "== building bench/allocations (release)" >&2
swift build -c release --package-path bench/allocations ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null
./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
BINARY=bench/allocations/.build/release/Allocations
if [ -z "${ACCESS_SITES:-}" ]; then
  "$BINARY" "$REQUESTS" "$WARMUP" "$WORK/certs/server.pem" "$WORK/certs/server-key.pem"
  exit 0
fi
# ACCESS_SITES=N: also the N exclusivity-check sites the open proxy ran most, per request, each
# named by the function compiled and the one inlined into it where the access is (addr2line).
"$BINARY" "$REQUESTS" "$WARMUP" "$WORK/certs/server.pem" "$WORK/certs/server-key.pem" | while read -r line; do
  case "$line" in
    site\ *)
      set -- $line
      # -i lists the inlined functions innermost first: the last is the one compiled, the first
      # the source of the access.
      names=$(addr2line -f -i -e "$BINARY" "$3" | sed -n 'p;n' | swift demangle --simplified)
      outer=$(echo "$names" | tail -1 | cut -c1-90)
      inner=$(echo "$names" | head -1 | cut -c1-70)
      printf '%8s  %s  <  %s\n' "$4" "$outer" "$inner"
      ;;
    *) echo "$line" ;;
  esac
done
