#!/usr/bin/env bash
# Installs http-message-signatures (an independent RFC 9421 implementation, from PyPI) and grpcio
# (gRPC's own Python server and client, for the gRPC pass-through tests) into .build/interop, for the
# interoperability tests, brotli (Google's Python binding) to decode compressed responses, PyJWT (tokens
# signed by someone else's JOSE code), botocore (AWS's own SigV4 signer), opentelemetry-proto
# (OpenTelemetry's own protobuf definitions, to decode the traces the gateway exports) and
# prometheus-client (Prometheus' own OpenMetrics parser, for the exemplars) and websockets (a
# WebSocket client and server no one here wrote, for the streams through the gateway), with h2 and
# wsproto (an HTTP/2 client and WebSocket frames, for WebSocket over HTTP/2, RFC 8441). Without
# network access the tests that need them are skipped, and say so.
set -uo pipefail
cd "$(dirname "$0")/../.."
VENV=.build/interop
VERSION=3.0.0
GRPC_VERSION=1.68.1
BROTLI_VERSION=1.1.0
PYJWT_VERSION=2.10.1
BOTOCORE_VERSION=1.35.99
OTEL_PROTO_VERSION=1.29.0
PROMETHEUS_CLIENT_VERSION=0.21.1
WEBSOCKETS_VERSION=15.0.1
H2_VERSION=4.2.0
WSPROTO_VERSION=1.2.0
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import http_message_signatures, grpc, brotli, jwt, botocore, opentelemetry.proto, prometheus_client, websockets, h2, wsproto" 2>/dev/null; then exit 0; fi
if ! python3 -c "import venv, ensurepip" 2>/dev/null; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null 2>&1 || true
  fi
fi
mkdir -p .build
if { [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV" >/dev/null 2>&1; } \
  && "$VENV/bin/pip" install -q "http-message-signatures==$VERSION" "grpcio==$GRPC_VERSION" "brotli==$BROTLI_VERSION" \
    "PyJWT==$PYJWT_VERSION" "botocore==$BOTOCORE_VERSION" "opentelemetry-proto==$OTEL_PROTO_VERSION" \
    "prometheus-client==$PROMETHEUS_CLIENT_VERSION" "websockets==$WEBSOCKETS_VERSION" "h2==$H2_VERSION" \
    "wsproto==$WSPROTO_VERSION" >/dev/null 2>&1; then
  echo "interop: http-message-signatures $VERSION, grpcio $GRPC_VERSION, brotli $BROTLI_VERSION, PyJWT $PYJWT_VERSION, botocore $BOTOCORE_VERSION, opentelemetry-proto $OTEL_PROTO_VERSION, prometheus-client $PROMETHEUS_CLIENT_VERSION, websockets $WEBSOCKETS_VERSION, h2 $H2_VERSION and wsproto $WSPROTO_VERSION installed in $VENV"
else
  echo "interop: could not install the interoperability packages; the interoperability tests will be skipped" >&2
  rm -rf "$VENV"
fi
exit 0
