#!/usr/bin/env bash
# Runs dev.portico.signer.live.LiveCheck against a running gateway, after building (build.sh's
# output goes to stderr, so stdout is LiveCheck's one JSON line alone). Arguments are LiveCheck's:
#   clients/jvm/live-check.sh --url http://127.0.0.1:8080 --path /api/1/stockquote/AAPL \
#       --key-id demo-app --secret-file policies/secrets/demo-app.secret [--ca-file certs/dev/ca.pem]
# Set JVM_SKIP_BUILD=1 to reuse an existing build in $JVM_BUILD_DIR.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${JVM_BUILD_DIR:-$here/../../.build/jvm}"

if [[ "${JVM_SKIP_BUILD:-}" != 1 ]]; then
    "$here/build.sh" >&2
fi
classpath_file="$build/classpath"
[[ -f "$classpath_file" ]] || { echo "clients/jvm/live-check.sh: no build in $build; run clients/jvm/build.sh" >&2; exit 1; }
command -v java >/dev/null 2>&1 || { echo "clients/jvm/live-check.sh: java not found: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
exec java -cp "$(cat "$classpath_file")" dev.portico.signer.live.LiveCheck "$@"
