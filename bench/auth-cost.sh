#!/usr/bin/env bash
# The authenticate stage's own CPU cost per request, on one thread: bench/auth.sh's request checked
# by RequestAuthenticator as each kind of route checks it (none, an API key, an RFC 9421 signature
# over six components). What it leaves out, the end-to-end figure has: bench/auth.sh. Also timed:
# the verification alone by both readings (verify: in place, as the gateway reads this request,
# and the general one it falls back to). `worst`: the most expensive heads a client without a key
# can send within the default limits (checks / 1,000 each), against the signed check; `worstN`
# times the Nth alone.
# Usage: bench/auth-cost.sh [checks per round, default 2,000,000] [verify|open|keyed|signed|worst|worstN ...]
set -euo pipefail
cd "$(dirname "$0")/operations-cost"
swift run -c release -Xswiftc -enable-testing -Xswiftc -cross-module-optimization AuthenticationCost "${1:-2000000}" "${@:2}"
