#!/usr/bin/env bash
# A request's tracing CPU on its event loop, on one thread: unsampled (ratio 0, what 99 requests in
# 100 cost at 0.01) and sampled (a server span, three stage spans, an attempt's client span), as
# the gateway makes them. The whole process's figure, export included, is bench/tracing.sh's.
# Usage: bench/trace-cost.sh [requests per round, default 1,000,000]
set -euo pipefail
cd "$(dirname "$0")/operations-cost"
swift run -c release -Xswiftc -enable-testing -Xswiftc -cross-module-optimization TraceCost "${1:-1000000}"
