#!/usr/bin/env bash
# What a client without a key can make the gateway's CPU do, end to end: one Portico process (plain
# HTTP on loopback, release build), and a Python client sending, on one keep-alive connection,
# requests of each kind below; the gateway's CPU (every thread's schedstat, in ns) over the
# requests answered gives µs per request. The kinds:
#   unsigned    a signed route's request without any signature: 401 signature-required (the
#               "normal refusal" the other figures are compared with)
#   issue       the issue's head: a 700-parameter query, a Signature-Input covering @method
#               @authority @path @query and 300 @query-param (refused at signatures.maxComponents)
#   query32     the same query, 32 components covered (28 @query-param): base built, 2 MACs, 401
#   dictionary  an 8 KiB dictionary field of 900 members, 29 of them covered by ;key=: base, 2 MACs
#   base8k      a 7.9 KiB field covered: the base just under maxBaseBytes, 2 MACs over it
#   members     a 14 KiB Signature-Input of 800 members (refused at the 65th)
#   limited     the issue's head again with limits.authFailures at its default, once the address
#               has used its budget of failures: 429 without any verification
# Every request is checked for the expected status. Loopback only; it ends by itself.
#
#   bench/auth-abuse.sh [requests per kind, default 2000]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

COUNT=${1:-2000}
PORT=18231
WORK=$(mktemp -d /tmp/portico-abuse.XXXXXX)
trap bench_kill_pids EXIT
bench_install python3:python3

echo "== building Portico (release)" >&2
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null

run_gateway() {
  local auth_failures=$1
  mkdir -p "$WORK/policies"
  cat >"$WORK/policies/abuse.yaml" <<YAML
listeners:
  - { name: bench, address: 127.0.0.1, port: $PORT }
accessLog: { enabled: false }
limits: { maxHeadBytes: 16KiB, authFailures: $auth_failures }
backends:
  quotes: { url: "http://127.0.0.1:9", timeout: 1s }
signatures: { maxClockSkew: 1h, requireNonce: false }
keys:
  bench: { secret: "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz", demo: true, services: [signed] }
services:
  signed:
    path: /signed/{version}/stockquote
    auth: signature
    versions:
      1: { proxy: { backend: quotes } }
YAML
  .build/release/portico serve --policies "$WORK/policies" --log-level error 2>/dev/null & PIDS+=($!)
  PORTICO_PID=$!
  for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT)).close()" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "the gateway did not start" >&2
  exit 1
}

# abuse.py KIND COUNT: sends COUNT requests of KIND on one connection, checks each status, and
# prints the gateway's CPU ticks spent on them divided into µs per request.
cat >"$WORK/abuse.py" <<'PY'
import base64, os, socket, sys, time

kind, count, port, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
now = int(time.time())
zeros = "sig1=:" + base64.b64encode(bytes(32)).decode() + ":"
plain = ['"@method"', '"@authority"', '"@path"', '"@query"']
query = "&".join(f"p{i}={i}" for i in range(700))

def signature_input(components):
    return "sig1=(" + " ".join(components) + f');created={now};keyid="nobody"'

def request(target, fields):
    head = f"GET {target} HTTP/1.1\r\nHost: localhost:{port}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in fields)
    return (head + "\r\n").encode()

path = "/signed/1/stockquote/AAPL"
if kind == "unsigned":
    message, expected = request(path, []), 401
elif kind in ("issue", "limited"):
    components = plain + [f'"@query-param";name="p{i}"' for i in range(300)]
    message = request(path + "?" + query, [("Signature-Input", signature_input(components)), ("Signature", zeros)])
    expected = 401 if kind == "issue" else 429
elif kind == "query32":
    components = plain + [f'"@query-param";name="p{i * 25}"' for i in range(28)]
    message, expected = request(path + "?" + query, [("Signature-Input", signature_input(components)), ("Signature", zeros)]), 401
elif kind == "dictionary":
    dictionary = ", ".join(f"m{i}={i}" for i in range(900))
    components = plain[:3] + [f'"x-dict";key="m{i * 31}"' for i in range(29)]
    message = request(path, [("X-Dict", dictionary), ("Signature-Input", signature_input(components)), ("Signature", zeros)])
    expected = 401
elif kind == "base8k":
    components = plain[:3] + ['"x-big"']
    message = request(path, [("X-Big", "b" * 7900), ("Signature-Input", signature_input(components)), ("Signature", zeros)])
    expected = 401
elif kind == "members":
    members = ", ".join(f's{i}=("@method")' for i in range(800))
    message = request(path, [("Signature-Input", signature_input(plain[:3]) + ", " + members), ("Signature", zeros)])
    expected = 400
else:
    sys.exit(f"unknown kind {kind}")

def cpu_nanos():
    """The gateway's CPU time so far, every thread's, to the nanosecond (schedstat's first field)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total

connection = socket.create_connection(("127.0.0.1", port))
reader = connection.makefile("rb")

def exchange():
    connection.sendall(message)
    status = int(reader.readline().split()[1])
    length = 0
    while True:
        line = reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    reader.read(length)
    return status

if kind == "limited":
    # Use up the address's budget of failures first (the default burst is 100).
    while exchange() != 429:
        pass
# Past its budget, an address still gets one verification per 1/rate seconds (a 401 among the 429s).
allowed = {expected, 401} if kind == "limited" else {expected}
for _ in range(min(200, count)):  # warm-up
    status = exchange()
    if status not in allowed:
        sys.exit(f"{kind}: expected {expected}, got {status}")
start = cpu_nanos()
for _ in range(count):
    status = exchange()
    if status not in allowed:
        sys.exit(f"{kind}: expected {expected}, got {status}")
spent = cpu_nanos() - start
print(f"{kind} {len(message)} {expected} {spent / count / 1000:.1f}")
PY

results=()
run_gateway off
for kind in unsigned issue query32 dictionary base8k members; do
  results+=("$(python3 "$WORK/abuse.py" "$kind" "$COUNT" "$PORT" "$PORTICO_PID")")
done
kill "$PORTICO_PID"; wait "$PORTICO_PID" 2>/dev/null || true
run_gateway '{ rate: 10/s, burst: 100 }'
results+=("$(python3 "$WORK/abuse.py" limited "$COUNT" "$PORT" "$PORTICO_PID")")

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
baseline=$(printf '%s\n' "${results[@]}" | awk '$1 == "unsigned" { print $4 }')
printf '%-11s %10s %6s %14s %16s\n' kind "head bytes" status "µs CPU/request" "× unsigned 401"
printf '%s\n' "${results[@]}" | awk -v base="$baseline" '{ printf "%-11s %10d %6d %14.1f %16.1f\n", $1, $2, $3, $4, $4 / base }'
