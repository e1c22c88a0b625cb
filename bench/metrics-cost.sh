#!/usr/bin/env bash
# The metrics' CPU cost per request on the request path: one finished exchange counted (its
# status-class counter and its request and upstream duration histograms), on one thread.
# Usage: bench/metrics-cost.sh [exchanges per round, default 10,000,000]
set -euo pipefail
cd "$(dirname "$0")/operations-cost"
swift run -c release -Xswiftc -enable-testing -Xswiftc -cross-module-optimization MetricsCost "${1:-10000000}"
