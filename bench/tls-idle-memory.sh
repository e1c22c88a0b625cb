#!/usr/bin/env bash
# Memory per idle TLS connection: opens N TLS connections to a Portico listener (each completes
# its handshake and one request, then stays open and idle), and compares the gateway's resident
# memory before and after.
#
#   bench/tls-idle-memory.sh [connections]     (default 5000)
#   PLAIN=1 bench/tls-idle-memory.sh ...        the same over plain HTTP, for comparison
#   BODY=65536 bench/tls-idle-memory.sh ...     each connection's one request is a POST of that many
#                                               bytes, which the echo backend answers with inside its
#                                               JSON: what an idle connection keeps of a large
#                                               exchange it once carried
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-5000}
PORT=18194
WORK=$(mktemp -d /tmp/portico-tls-memory.XXXXXX)
trap 'kill $PORTICO 2>/dev/null || true; rm -rf "$WORK"' EXIT

swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null
./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
mkdir -p "$WORK/policies"
cat >"$WORK/policies/p.yaml" <<YAML
listeners:
  - name: tls
    address: 127.0.0.1
    port: $PORT
    $([ "${PLAIN:-0}" = 1 ] || echo "tls: { certificate: $WORK/certs/server.pem, privateKey: $WORK/certs/server-key.pem }")
# Every connection comes from 127.0.0.1: lift the per-address and total caps above the count.
limits: { idleTimeout: 600s, maxConnections: $((COUNT + 1000)), maxConnectionsPerAddress: $((COUNT + 1000)) }
accessLog: { enabled: false }
backends:
  echo: { url: "http://127.0.0.1:18082" }
services:
  echo: { path: /echo, versions: { 1: { proxy: { backend: echo } } } }
YAML
.build/release/portico serve --policies "$WORK/policies" --demo-backends --log-level warning &
PORTICO=$!
sleep 1.5

python3 - "$PORTICO" "$PORT" "$COUNT" "$WORK/certs/ca.pem" "${PLAIN:-0}" "${BODY:-0}" <<'PY'
import resource, socket, ssl, sys, time
pid, port, count, ca, plain, body = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1", int(sys.argv[6])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])  # KiB
context = ssl.create_default_context(cafile=ca)
if body:
    request = b"POST /echo/x HTTP/1.1\r\nHost: localhost\r\ncontent-length: %d\r\n\r\n" % body + b"x" * body
else:
    request = b"GET /echo/x HTTP/1.1\r\nHost: localhost\r\n\r\n"
def open_one():
    connection = socket.create_connection(("127.0.0.1", port))
    if not plain: connection = context.wrap_socket(connection, server_hostname="localhost")
    connection.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")))
    while len(rest) < length:
        rest += connection.recv(65536)
    return connection
# Warm up pools, buffers and the upstream connection with a first batch that is closed again.
warm = [open_one() for _ in range(200)]
for connection in warm: connection.close()
time.sleep(1)
before = rss()
connections = [open_one() for _ in range(count)]
time.sleep(2)
after = rss()
print(f"{count} idle {'plain HTTP' if plain else 'TLS'} connections{f' (each after a POST of {body} bytes)' if body else ''}: RSS {before/1024:.1f} MiB -> {after/1024:.1f} MiB, "
      f"{(after - before) * 1024 / count / 1024:.1f} KiB per connection")
for connection in connections: connection.close()
PY
