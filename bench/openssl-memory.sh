#!/usr/bin/env bash
# What OpenSSL itself keeps per idle server connection, with Portico's settings: the floor under
# bench/tls-idle-memory.sh's figure. Builds bench/openssl-memory.c against the system OpenSSL and
# runs it on a fresh development certificate (the same kind the gateway's benchmarks use).
#
#   bench/openssl-memory.sh [connections]     (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d /tmp/portico-openssl-memory.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
cc -O2 -Wall -o "$WORK/openssl-memory" bench/openssl-memory.c -lssl -lcrypto
"$WORK/openssl-memory" "$WORK/certs/server.pem" "$WORK/certs/server-key.pem" "${1:-1000}"
