#!/usr/bin/env bash
# Runs the JavaScript signer's tests with Node's built-in test runner (no packages needed):
# the shared signing vectors, the unit tests, and signedFetch against a local node:http server.
# Needs Node 20 or later (WebCrypto as globalThis.crypto, fetch, Blob, ReadableStream).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v node >/dev/null 2>&1; then
  echo "clients/js/test.sh: node is not installed; the JavaScript signer's tests need Node 20 or later" >&2
  exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "clients/js/test.sh: Node $(node --version) is too old; the JavaScript signer's tests need Node 20 or later" >&2
  exit 1
fi

# The files are named one by one: Node 20 searches a directory given to --test, later versions
# read their arguments as glob patterns instead.
exec node --test "$here"/test/*.test.mjs
