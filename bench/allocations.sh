#!/usr/bin/env bash
# Allocations per proxied request, counted on the gateway's own threads.
#
#   bench/allocations.sh [requests] [warm-up]     (defaults 10,000 and 1,000)
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
bench/allocations/.build/release/Allocations "$REQUESTS" "$WARMUP" "$WORK/certs/server.pem" "$WORK/certs/server-key.pem"
