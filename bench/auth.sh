#!/usr/bin/env bash
# What authentication costs: one Portico process serving the same proxied route three ways, side by
# side, under the same TLS load, and the CPU each costs per request.
#
#   bench/auth.sh [seconds] [connections] [rounds]    (defaults 5 s, 32, 3)
#   PERF=1 bench/auth.sh ...                            also `perf record -g` the signed route
#   PERF=1 PERF_ROUTE=open bench/auth.sh ...            … or another route, to compare profiles
#   ROUTES="open signed" bench/auth.sh 3 32 16          only these runs (any of bare open keyed
#                                                       signed jwtes jwtrs sigv4, each once): on a
#                                                       noisy machine, many short adjacent pairs
#
# The routes, all in front of the same fast backend (nginx from memory, as bench/run.sh):
#   /open/1/…    auth: none
#   /keyed/1/…   auth: apiKey (X-API-Key)
#   /signed/1/…  auth: signature, signed by http-message-signatures (an independent RFC 9421
#                implementation, from PyPI) over six components: @method @authority @path @query
#                date content-digest (of the empty body), no nonce, so that wrk can replay it.
#   /jwtes/1/…   auth: jwt, a PyJWT token signed ES256 (keys from a JWK Set file)
#   /jwtrs/1/…   auth: jwt, a PyJWT token signed RS256 (2048-bit key)
#   /sigv4/1/…   auth: sigv4, signed by botocore's SigV4Auth (host and x-amz-date; clockSkew 1h, so
#                that wrk can replay it)
# The JWT and SigV4 routes carry their own Authorization field on top of the shared ones (the two
# cannot share one field): a bearer token of about 500 (ES256) or 700 (RS256) bytes, a SigV4
# Authorization of about 200 bytes and its x-amz-date.
# ("bare" is the open route sent only Date and Content-Digest.) Each round runs wrk on each route in
# turn, forwards in odd rounds and backwards in even ones, so an even number of rounds balances the
# order; the CPU of the gateway process (utime + stime from /proc) divided by the requests answered
# gives µs per request, and the report is each route's median round and the median of the per-round
# differences to the open route. Loopback only; it ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

DURATION=${1:-5}
CONNECTIONS=${2:-32}
ROUNDS=${3:-3}
BACKEND_PORT=18201
PORTICO_PORT=18202
RUNS=${ROUTES:-bare open keyed signed jwtes jwtrs sigv4}
for run in $RUNS; do
  case " bare open keyed signed jwtes jwtrs sigv4 " in *" $run "*) ;; *) echo "ROUTES: no route \"$run\" (bare open keyed signed jwtes jwtrs sigv4)" >&2; exit 2 ;; esac
  [ "$(printf '%s\n' $RUNS | grep -cx "$run")" = 1 ] || { echo "ROUTES: \"$run\" named twice" >&2; exit 2; }
done
WORK=$(mktemp -d /tmp/portico-auth.XXXXXX)
trap bench_kill_pids EXIT

bench_install wrk:wrk nginx:nginx-light curl:curl python3:python3
[ "${PERF:-0}" = 1 ] && bench_install perf:linux-perf
./scripts/interop/setup.sh
PYTHON=.build/interop/bin/python
[ -x "$PYTHON" ] || { echo "bench/auth.sh needs http-message-signatures, PyJWT and botocore (scripts/interop/setup.sh could not install them)" >&2; exit 1; }

echo "== building Portico (release)" >&2
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null

mkdir -p "$WORK/backend" "$WORK/policies"
./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
bench_backend_conf "$WORK/backend" "$BACKEND_PORT"
SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '\n')
printf '%s' "$SECRET" >"$WORK/bench.secret"
printf '%s' "$(head -c 32 /dev/urandom | base64 | tr -d '\n/+=')" >"$WORK/bench.apikey"
printf '%s' "$(head -c 32 /dev/urandom | base64 | tr -d '\n/+=')" >"$WORK/bench.aws"
# Two issuer keys made by PyJWT's side, their public halves as the issuer's JWK Set file.
"$PYTHON" scripts/interop/pyjwt-tool.py >"$WORK/jwt-keys.json" <<<'{"command": "keys", "keys": [{"kid": "es", "alg": "ES256"}, {"kid": "rs", "alg": "RS256"}]}'
"$PYTHON" -c 'import json, sys; keys = json.load(open(sys.argv[1])); json.dump({"keys": [k["jwk"] for k in keys.values()]}, open(sys.argv[2], "w"))' \
  "$WORK/jwt-keys.json" "$WORK/jwks.json"
cat >"$WORK/policies/auth.yaml" <<YAML
listeners:
  - { name: bench, address: 127.0.0.1, port: $PORTICO_PORT, tls: { certificate: $WORK/certs/server.pem, privateKey: $WORK/certs/server-key.pem } }
accessLog: { enabled: false }
backends:
  quotes: { url: "http://127.0.0.1:$BACKEND_PORT", timeout: 5s }
signatures: { maxClockSkew: 1h, requireNonce: false }
jwt:
  issuers:
    bench: { issuer: "https://id.bench.test/", keysFile: $WORK/jwks.json, audiences: [portico], algorithms: [ES256, RS256] }
keys:
  bench: { secretFile: $WORK/bench.secret, services: [open, keyed, signed] }
  other: { secretFile: $WORK/bench.apikey, services: [keyed] }
  aws: { accessKeyId: AKIDBENCH, secretFile: $WORK/bench.aws, services: [sigv4] }
services:
  open:
    path: /open/{version}/stockquote
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
  keyed:
    path: /keyed/{version}/stockquote
    auth: apiKey
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
  signed:
    path: /signed/{version}/stockquote
    auth: signature
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
  jwtes:
    path: /jwtes/{version}/stockquote
    auth: jwt
    jwt: { issuers: [bench], scopes: [quotes.read], forwardClaims: { sub: X-User-Id } }
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
  jwtrs:
    path: /jwtrs/{version}/stockquote
    auth: jwt
    jwt: { issuers: [bench], scopes: [quotes.read], forwardClaims: { sub: X-User-Id } }
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
  sigv4:
    path: /sigv4/{version}/stockquote
    auth: sigv4
    sigv4: { region: eu-west-1, service: quotes, clockSkew: 1h }
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
YAML

nginx -p "$WORK/backend" -c "$WORK/backend/nginx.conf" & PIDS+=($!)
.build/release/portico serve --policies "$WORK/policies" --log-level warning & PIDS+=($!)
PORTICO_PID=$!
BASE="https://localhost:$PORTICO_PORT"
CURL=(curl -fsS --cacert "$WORK/certs/ca.pem")
for _ in $(seq 50); do
  "${CURL[@]}" "$BASE/open/1/stockquote/AAPL" >/dev/null 2>&1 && break
  sleep 0.1
done

TARGET="/stockquote/AAPL?fields=price"
DATE=$(date -u '+%a, %d %b %Y %H:%M:%S GMT')
EMPTY_DIGEST="sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"
SIGNED_FIELDS=$("$PYTHON" scripts/interop/pyhms-sign.py <<JSON
{"method": "GET", "url": "$BASE/signed/1$TARGET", "headers": [["Host", "localhost:$PORTICO_PORT"], ["Date", "$DATE"]],
 "body": "", "key_id": "bench", "secret": "$SECRET", "nonce": null, "label": "sig1", "include_alg": true,
 "covered": ["@method", "@authority", "@path", "@query", "date", "content-digest"]}
JSON
)
# The signer adds Content-Digest (of the empty body), Signature-Input and Signature. Every route gets
# the very same request fields (the API key and the signature included: the open route ignores both,
# the keyed route the signature), so that the differences are the work of authenticating and not of
# receiving and forwarding more bytes. A fourth run, "bare", sends the open route only Date and
# Content-Digest: what carrying the signature's ~230 bytes costs on its own.
mapfile -t ADDED < <("$PYTHON" -c 'import json, sys; [print(f"{k}: {v}") for k, v in json.loads(sys.argv[1]).items() if k.lower() in ("signature", "signature-input")]' "$SIGNED_FIELDS")
grep -q "$EMPTY_DIGEST" <<<"$SIGNED_FIELDS" || { echo "the signer computed another Content-Digest: $SIGNED_FIELDS" >&2; exit 1; }
BARE=(-H "Date: $DATE" -H "Content-Digest: $EMPTY_DIGEST")
ALL=("${BARE[@]}" -H "X-API-Key: other.$(cat "$WORK/bench.apikey")" -H "${ADDED[0]}" -H "${ADDED[1]}")

token() { # kid
  "$PYTHON" - "$WORK/jwt-keys.json" "$1" <<'PY'
import json, subprocess, sys, time
keys = json.load(open(sys.argv[1])); key = keys[sys.argv[2]]
request = {"command": "sign", "alg": key["alg"], "private": key["private"], "kid": sys.argv[2], "headers": {},
           "claims": {"iss": "https://id.bench.test/", "aud": "portico", "sub": "bench-user", "exp": int(time.time()) + 3600,
                      "iat": int(time.time()), "scope": "quotes.read"}}
out = subprocess.run([sys.executable, "scripts/interop/pyjwt-tool.py"], input=json.dumps(request), capture_output=True, text=True, check=True)
print(json.loads(out.stdout)["token"])
PY
}
JWTES=("${ALL[@]}" -H "Authorization: Bearer $(token es)")
JWTRS=("${ALL[@]}" -H "Authorization: Bearer $(token rs)")
mapfile -t AWSFIELDS < <("$PYTHON" scripts/interop/botocore-sign.py <<JSON | "$PYTHON" -c 'import json, sys; [print(f"{k}: {v}") for k, v in json.load(sys.stdin)["headers"]]'
{"method": "GET", "url": "$BASE/sigv4/1$TARGET", "access_key": "AKIDBENCH", "secret": "$(cat "$WORK/bench.aws")",
 "region": "eu-west-1", "service": "quotes"}
JSON
)
SIGV4=("${ALL[@]}" -H "${AWSFIELDS[0]}" -H "${AWSFIELDS[1]}")

# Each route answers 200 as configured, and the authenticated ones refuse what they should.
"${CURL[@]}" "${ALL[@]}" "$BASE/open/1$TARGET" >/dev/null
"${CURL[@]}" "${ALL[@]}" "$BASE/keyed/1$TARGET" >/dev/null
"${CURL[@]}" "${ALL[@]}" "$BASE/signed/1$TARGET" >/dev/null || { echo "the signed request is refused" >&2; exit 1; }
for route in jwtes jwtrs sigv4; do
  declare -n fields=${route^^}
  "${CURL[@]}" "${fields[@]}" "$BASE/$route/1$TARGET" >/dev/null || { echo "the $route request is refused" >&2; exit 1; }
  [ "$(curl -s --cacert "$WORK/certs/ca.pem" -o /dev/null -w '%{http_code}' "${ALL[@]}" "$BASE/$route/1$TARGET")" = 401 ] ||
    { echo "the $route route answers a request without its credentials" >&2; exit 1; }
  unset -n fields
done
[ "$(curl -s --cacert "$WORK/certs/ca.pem" -o /dev/null -w '%{http_code}' "${BARE[@]}" "$BASE/signed/1$TARGET")" = 401 ] ||
  { echo "the signed route answers unsigned requests" >&2; exit 1; }
[ "$(curl -s --cacert "$WORK/certs/ca.pem" -o /dev/null -w '%{http_code}' "${BARE[@]}" -H "X-API-Key: other.wrong" "$BASE/keyed/1$TARGET")" = 401 ] ||
  { echo "the keyed route answers a wrong key" >&2; exit 1; }

ticks() { awk '{print $14 + $15}' "/proc/$PORTICO_PID/stat"; }
HZ=$(getconf CLK_TCK)
run_wrk() { # name route round headers-array-name
  local name=$1 route=$2 round=$3
  local -n headers=$4
  local before after
  wrk -t1 -c"$CONNECTIONS" -d2s "${headers[@]}" "$BASE/$route/1$TARGET" >/dev/null  # warm-up
  before=$(ticks)
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "${headers[@]}" "$BASE/$route/1$TARGET" >"$WORK/$name.$round.wrk"
  after=$(ticks)
  echo "$name $round $((after - before))" >>"$WORK/cpu"
}

echo "== wrk: ${DURATION}s × $ROUNDS rounds, $CONNECTIONS keep-alive https connections, 1 thread, on $(nproc) cores"
REVERSED=$(printf '%s\n' $RUNS | tac | tr '\n' ' ')
for round in $(seq 1 "$ROUNDS"); do
  # Forwards in odd rounds, backwards in even ones (ABBA), so that a drift of the machine's speed
  # during a round does not always land on the same route.
  order=$RUNS
  [ $((round % 2)) = 0 ] && order=$REVERSED
  for run in $order; do
    case $run in
      bare) run_wrk bare open "$round" BARE ;;
      jwtes) run_wrk jwtes jwtes "$round" JWTES ;;
      jwtrs) run_wrk jwtrs jwtrs "$round" JWTRS ;;
      sigv4) run_wrk sigv4 sigv4 "$round" SIGV4 ;;
      *) run_wrk "$run" "$run" "$round" ALL ;;
    esac
  done
done

python3 - "$WORK" "$HZ" "$ROUNDS" "$DURATION" $RUNS <<'PY'
import re, statistics, sys
work, hz, rounds, duration = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
names = sys.argv[5:]
cpu = {(name, int(r)): int(t) for name, r, t in (line.split() for line in open(f"{work}/cpu"))}
def run(name, r):
    text = open(f"{work}/{name}.{r}.wrk").read()
    total = int(re.search(r"(\d+) requests in", text).group(1))
    refused = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return total, cpu[(name, r)] / hz * 1e6 / total, int(refused.group(1)) if refused else 0
print(f"{'route':<8}{'req/s':>10}{'CPU/req':>11}{'extra':>10}{'non-2xx':>9}   per round (µs/req)")
costs = {}
for name in names:
    runs = [run(name, r) for r in range(1, rounds + 1)]
    costs[name] = [c for _, c, _ in runs]
    cost = statistics.median(costs[name])
    rps = statistics.median(t for t, _, _ in runs) / duration
    extra = "-" if name in ("bare", "open") or "open" not in names else f"{cost - statistics.median(costs['open']):+.1f} µs"
    print(f"{name:<8}{rps:>10.0f}{cost:>8.1f} µs{extra:>10}{sum(n for _, _, n in runs):>9}   {[round(c, 1) for _, c, _ in runs]}")
paired = lambda a, b: statistics.median(x - y for x, y in zip(costs[a], costs[b]))
parts = []
if "open" in names:
    parts += [f"{name} {paired(name, 'open'):+.1f} µs over open" for name in ("keyed", "signed", "jwtes", "jwtrs", "sigv4") if name in names]
    if "bare" in names: parts.append(f"the fields alone (open minus bare) {paired('open', 'bare'):+.1f} µs")
if parts:
    print("paired by round (median of the per-round differences): " + "; ".join(parts))
print("(CPU of the gateway process only, median of the rounds; extra = over the open route, same request fields)")
PY

if [ "${PERF:-0}" = 1 ]; then
  PERF_ROUTE=${PERF_ROUTE:-signed}
  echo "== perf record -g on the $PERF_ROUTE route, ${DURATION}s" >&2
  case $PERF_ROUTE in jwtes | jwtrs | sigv4) declare -n PERF_FIELDS=${PERF_ROUTE^^} ;; *) declare -n PERF_FIELDS=ALL ;; esac
  wrk -t1 -c"$CONNECTIONS" -d"$((DURATION + 2))s" "${PERF_FIELDS[@]}" "$BASE/$PERF_ROUTE/1$TARGET" >/dev/null &
  WRK=$!
  sleep 1
  perf record -g -o "$WORK/perf.data" -p "$PORTICO_PID" -- sleep "$DURATION" 2>/dev/null >/dev/null
  wait "$WRK"
  demangle() { if command -v swift-demangle >/dev/null; then swift-demangle --simplified; else cat; fi; }
  perf report -i "$WORK/perf.data" --no-children --stdio -g none --sort dso,sym --percent-limit "${PERCENT:-0.4}" 2>/dev/null |
    grep -v '^#' | grep -v '^$' | demangle | cut -c1-170 | sort -rn
  echo "(perf.data kept in $WORK)" >&2
fi
