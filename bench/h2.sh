#!/usr/bin/env bash
# HTTP/2 to clients: Portico against nginx (and Caddy, unless CADDY=0) terminating TLS with ALPN h2,
# in front of the same fast backend, in the same run, alternating.
#
#   bench/h2.sh [duration-seconds] [connections] [streams-per-connection] [rounds]
#
# h2load (Debian's nghttp2-client) drives each proxy over TLS, HTTP/2, with `-c connections -m streams`
# concurrent streams: a proxied route (the backend is nginx answering a small JSON body from memory,
# reached over keep-alive HTTP/1.1 by every proxy) and a locally answered one (Portico's 404 problem
# for an unknown path; nginx and Caddy return the same bytes from their configuration). The CPU time
# each proxy's processes spent is read from /proc before and after its run; the median round is
# reported, with requests/s and CPU per request as ratios to nginx.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

DURATION=${1:-10}
CONNECTIONS=${2:-32}
STREAMS=${3:-10}
ROUNDS=${4:-3}
CADDY=${CADDY:-1}
BACKEND_PORT=18290
NGINX_PORT=18291
PORTICO_PORT=18292
CADDY_PORT=18293
WORK=$(mktemp -d /tmp/portico-h2bench.XXXXXX)
trap 'bench_kill_pids; sleep 0.3; rm -rf "$WORK"' EXIT

TOOLS=(h2load:nghttp2-client nginx:nginx-light)
[ "$CADDY" = 1 ] && TOOLS+=(caddy:caddy)
bench_install "${TOOLS[@]}"

echo "== building Portico (release)"
swift build -c release --product portico ${SWIFT_BUILD_FLAGS--Xswiftc -cross-module-optimization} >/dev/null

mkdir -p "$WORK/backend" "$WORK/proxy" "$WORK/policies" "$WORK/caddy"
./certs/make-dev-certs.sh "$WORK/certs" >/dev/null
CERT="$WORK/certs/server.pem"
KEY="$WORK/certs/server-key.pem"
bench_backend_conf "$WORK/backend" "$BACKEND_PORT"
bench_policy "$WORK/policies/bench.yaml" "$PORTICO_PORT" "$BACKEND_PORT" ", tls: { certificate: $CERT, privateKey: $KEY }"

nginx -p "$WORK/backend" -c "$WORK/backend/nginx.conf" & PIDS+=($!)
.build/release/portico serve --policies "$WORK/policies" --log-level warning & PIDS+=($!)
PORTICO_PID=$!
LOCAL_BODY=""
for _ in $(seq 50); do
  LOCAL_BODY=$(curl -s --cacert "$WORK/certs/ca.pem" "https://localhost:$PORTICO_PORT/nowhere" || true)
  [ -n "$LOCAL_BODY" ] && break
  sleep 0.1
done

# nginx 1.22 as the HTTP/2 peer: one worker per core, keep-alive to the backend, no access log.
bench_nginx_proxy_conf "$WORK/proxy" \
  "127.0.0.1:$NGINX_PORT ssl http2; ssl_certificate $CERT; ssl_certificate_key $KEY; ssl_protocols TLSv1.2 TLSv1.3" \
  "$BACKEND_PORT" "$LOCAL_BODY"
nginx -p "$WORK/proxy" -c "$WORK/proxy/nginx.conf" & PIDS+=($!)
NGINX_MASTER=$!
if [ "$CADDY" = 1 ]; then
  cat >"$WORK/Caddyfile" <<CONF
{
  admin off
  auto_https off
  storage file_system $WORK/caddy
}
https://127.0.0.1:$CADDY_PORT {
  tls $CERT $KEY
  handle /nowhere {
    header Content-Type application/problem+json
    respond \`$(printf '%s' "$LOCAL_BODY")\` 404
  }
  handle_path /api/1/stockquote/* {
    rewrite * /v1/quotes{path}
    reverse_proxy 127.0.0.1:$BACKEND_PORT {
      header_up X-Forwarded-Host {host}
    }
  }
}
CONF
  XDG_DATA_HOME="$WORK/caddy" XDG_CONFIG_HOME="$WORK/caddy" caddy run --adapter caddyfile --config "$WORK/Caddyfile" >"$WORK/caddy.log" 2>&1 & PIDS+=($!)
  CADDY_PID=$!
fi
sleep 1.5

PEERS=(nginx portico)
[ "$CADDY" = 1 ] && PEERS+=(caddy)
port_of() { case $1 in nginx) echo $NGINX_PORT ;; portico) echo $PORTICO_PORT ;; caddy) echo $CADDY_PORT ;; esac; }
pids_of() {
  case $1 in
    nginx) echo "$NGINX_MASTER $(pgrep -P "$NGINX_MASTER" | tr '\n' ' ')" ;;
    portico) echo $PORTICO_PID ;;
    caddy) echo $CADDY_PID ;;
  esac
}
for peer in "${PEERS[@]}"; do
  for path in /api/1/stockquote/AAPL /nowhere; do
    version=""
    for _ in $(seq 50); do
      version=$(curl -s --http2 --cacert "$WORK/certs/ca.pem" -o /dev/null -w '%{http_version}' "https://localhost:$(port_of "$peer")$path" || true)
      [ "$version" = 2 ] && break
      sleep 0.2
    done
    if [ "$version" != 2 ]; then
      echo "$peer does not answer $path over HTTP/2 (got '$version')" >&2
      [ "$peer" = caddy ] && tail -5 "$WORK/caddy.log" >&2
      exit 1
    fi
  done
done

HZ=$(getconf CLK_TCK)

run_h2load() { # peer kind round path
  local peer=$1 kind=$2 round=$3 path=$4 url before after
  url="https://127.0.0.1:$(port_of "$peer")$path"
  h2load -c "$CONNECTIONS" -m "$STREAMS" -D 2 "$url" >/dev/null 2>&1  # warm-up
  before=$(bench_ticks $(pids_of "$peer"))
  h2load -c "$CONNECTIONS" -m "$STREAMS" -D "$DURATION" "$url" >"$WORK/$peer-$kind.$round.h2load" 2>&1
  after=$(bench_ticks $(pids_of "$peer"))
  local rps failed
  rps=$(awk '/^finished in/ {gsub(",", "", $4); print $4}' "$WORK/$peer-$kind.$round.h2load")
  failed=$(awk '/^requests:/ {print $10}' "$WORK/$peer-$kind.$round.h2load")
  echo "$peer $kind $round $rps $((after - before)) $failed" >>"$WORK/results"
}

echo "== h2load: ${DURATION}s × $ROUNDS rounds, $CONNECTIONS TLS connections × $STREAMS streams, on $(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo))"
for round in $(seq 1 "$ROUNDS"); do
  for kind in proxied local; do
    path=/api/1/stockquote/AAPL
    [ "$kind" = local ] && path=/nowhere
    for peer in "${PEERS[@]}"; do run_h2load "$peer" "$kind" "$round" "$path"; done
  done
done

# The median round of each peer and kind: requests/s, CPU µs per request, failures.
printf "%-8s %-8s %12s %14s %9s %12s %12s\n" peer route requests/s "CPU µs/req" "non-2xx" rps/nginx CPU/nginx
awk -v hz="$HZ" -v duration="$DURATION" '
  { key = $1 " " $2; n[key]++; rps[key, n[key]] = $4; us[key, n[key]] = ($5 / hz) * 1e6 / ($4 * duration); failed[key] += $6 }
  function median(arr, key, count,   i, j, t, v) {
    for (i = 1; i <= count; i++) v[i] = arr[key, i]
    for (i = 1; i <= count; i++) for (j = i + 1; j <= count; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return v[int((count + 1) / 2)]
  }
  END {
    for (key in n) { split(key, parts, " "); r[key] = median(rps, key, n[key]); c[key] = median(us, key, n[key]) }
    for (key in n) {
      split(key, parts, " "); base = "nginx " parts[2]
      printf "%-8s %-8s %12.0f %14.1f %9d %12.2f %12.2f\n", parts[1], parts[2], r[key], c[key], failed[key], r[key] / r[base], c[key] / c[base]
    }
  }' "$WORK/results" | sort -k2,2 -k1,1
