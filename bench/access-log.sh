#!/usr/bin/env bash
# The access log's CPU cost per line on the request path (format + queue), per format.
# Usage: bench/access-log.sh [lines per round, default 1,000,000]
set -euo pipefail
cd "$(dirname "$0")/operations-cost"
swift run -c release -Xswiftc -enable-testing -Xswiftc -cross-module-optimization AccessLogCost "${1:-1000000}"
