# What the bench scripts share: the background processes they end on exit, the tools they
# install, the fast backend they put behind the proxies, and Portico's policy in front of it.
# Sourced, not run.

# The small JSON body the backend answers every request with, from memory.
BENCH_BODY='{"symbol":"AAPL","name":"Apple Inc.","currentPrice":189.84}'

# PIDS: the background processes a script starts; bench_kill_pids, its EXIT trap, ends them.
PIDS=()
bench_kill_pids() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
}

# bench_install COMMAND:PACKAGE ...: installs the Debian packages of the commands that are missing
# (as root), or says which to install and exits.
bench_install() {
  local missing=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "$(basename "$0") needs: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
}

# bench_ticks PID...: the CPU ticks (utime + stime, all threads) the processes have spent so far;
# one per 1/`getconf CLK_TCK` s. Read before and after a run for the CPU it cost.
bench_ticks() {
  local total=0 pid
  for pid in "$@"; do
    [ -r "/proc/$pid/stat" ] || continue
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo $total
}

# bench_backend_conf DIR PORT: nginx.conf in DIR for one worker answering BENCH_BODY on PORT; with
# BENCH_BODY_BYTES=N set, a JSON string of N bytes instead (from a file it writes in DIR: nginx sends
# it with sendfile, the proxies read and forward it).
bench_backend_conf() {
  local dir=$1 port=$2
  local answer="default_type application/json; return 200 '$BENCH_BODY';" user=""
  if [ "${BENCH_BODY_BYTES:-0}" -gt 0 ]; then
    # The workers read the file from under a mktemp directory (mode 700): as root, they run as root.
    user="user root;"
    mkdir -p "$dir/static"
    python3 -c "import sys; n = int(sys.argv[1]); sys.stdout.write('\"' + 'x' * (n - 2) + '\"')" "$BENCH_BODY_BYTES" >"$dir/static/body.json"
    answer="default_type application/json; root $dir/static; try_files /body.json =404;"
  fi
  cat >"$dir/nginx.conf" <<CONF
$user
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir;
  uwsgi_temp_path $dir; scgi_temp_path $dir;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port;
    location / { $answer }
  }
}
CONF
}

# bench_nginx_proxy_conf DIR LISTEN BACKEND_PORT LOCAL_BODY: nginx.conf in DIR for nginx as the peer
# proxy: one worker per core, no access log, `listen LISTEN` (with `ssl`, `http2` and certificates when
# the caller puts them there), /api/1/stockquote/ proxied over keep-alive to the backend's /v1/quotes/
# with the forwarding headers Portico adds, and /nowhere answering LOCAL_BODY (Portico's 404 problem).
bench_nginx_proxy_conf() {
  local dir=$1 listen=$2 backend_port=$3 local_body=$4
  cat >"$dir/nginx.conf" <<CONF
worker_processes auto;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir;
  uwsgi_temp_path $dir; scgi_temp_path $dir;
  keepalive_requests 1000000;
  upstream backend { server 127.0.0.1:$backend_port; keepalive 64; }
  server {
    listen $listen;
    location = /nowhere {
      default_type application/problem+json;
      return 404 '$(printf '%s' "$local_body")';
    }
    location /api/1/stockquote/ {
      proxy_pass http://backend/v1/quotes/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto \$scheme;
      proxy_set_header X-Forwarded-Host \$host;
    }
  }
}
CONF
}

# bench_policy FILE PORT BACKEND_PORT [LISTENER_EXTRA] [BACKEND_EXTRA]: Portico's policy: one
# listener on PORT (LISTENER_EXTRA: e.g. its tls section), access log off, the backend on
# BACKEND_PORT, and /api/{version}/stockquote proxied to its /v1/quotes.
bench_policy() {
  local file=$1 port=$2 backend_port=$3 listener_extra=${4:-} backend_extra=${5:-}
  cat >"$file" <<YAML
listeners:
  - { name: bench, address: 127.0.0.1, port: $port$listener_extra }
accessLog: { enabled: false }
upstream: { threads: 1, maxConnectionsPerHost: 64 }
backends:
  quotes: { url: "http://127.0.0.1:$backend_port", timeout: 5s$backend_extra }
services:
  stockQuote:
    path: /api/{version}/stockquote
    versions:
      1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
YAML
}

# bench_start_peers WORK BACKEND_PORT NGINX_PORT PORTICO_PORT LOCAL_BODY: the fast backend, nginx as
# the peer proxy and Portico in front of it, each in WORK, over TLS to the clients when TLS=1 (the
# same development certificate on both), and waits until both proxies answer PATH_UNDER_TEST.
# Sets SCHEME (http or https), NGINX_MASTER and PORTICO_PID; the processes join PIDS.
bench_start_peers() {
  local work=$1 backend_port=$2 nginx_port=$3 portico_port=$4 local_body=$5
  local listen="127.0.0.1:$nginx_port" tls_section=""
  mkdir -p "$work/backend" "$work/proxy" "$work/policies"
  ./certs/make-dev-certs.sh "$work/certs" >/dev/null
  SCHEME=http
  if [ "${TLS:-0}" = 1 ]; then
    SCHEME=https
    listen="127.0.0.1:$nginx_port ssl; ssl_certificate $work/certs/server.pem; ssl_certificate_key $work/certs/server-key.pem; ssl_protocols TLSv1.2 TLSv1.3"
    tls_section=", tls: { certificate: $work/certs/server.pem, privateKey: $work/certs/server-key.pem }"
  fi
  bench_backend_conf "$work/backend" "$backend_port"
  bench_nginx_proxy_conf "$work/proxy" "$listen" "$backend_port" "$local_body"
  bench_policy "$work/policies/bench.yaml" "$portico_port" "$backend_port" "$tls_section"
  nginx -p "$work/backend" -c "$work/backend/nginx.conf" & PIDS+=($!)
  nginx -p "$work/proxy" -c "$work/proxy/nginx.conf" & PIDS+=($!)
  NGINX_MASTER=$!
  .build/release/portico serve --policies "$work/policies" --log-level warning & PIDS+=($!)
  PORTICO_PID=$!
  local port
  for port in "$portico_port" "$nginx_port"; do
    for _ in $(seq 100); do
      curl -ksS -o /dev/null "$SCHEME://127.0.0.1:$port$PATH_UNDER_TEST" 2>/dev/null && break
      sleep 0.1
    done
    curl -ksS -o /dev/null "$SCHEME://127.0.0.1:$port$PATH_UNDER_TEST" || { echo "no answer from port $port" >&2; exit 1; }
  done
}
