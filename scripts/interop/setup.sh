#!/usr/bin/env bash
# Installs http-message-signatures (an independent RFC 9421 implementation, from PyPI) into
# .build/interop, for the interoperability tests. Without network access the tests that need it are
# skipped, and say so.
set -uo pipefail
cd "$(dirname "$0")/../.."
VENV=.build/interop
VERSION=3.0.0
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import http_message_signatures" 2>/dev/null; then exit 0; fi
if ! python3 -c "import venv, ensurepip" 2>/dev/null; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null 2>&1 || true
  fi
fi
mkdir -p .build
if python3 -m venv "$VENV" >/dev/null 2>&1 && "$VENV/bin/pip" install -q "http-message-signatures==$VERSION" >/dev/null 2>&1; then
  echo "interop: http-message-signatures $VERSION installed in $VENV"
else
  echo "interop: could not install http-message-signatures; the interoperability tests will be skipped" >&2
  rm -rf "$VENV"
fi
exit 0
