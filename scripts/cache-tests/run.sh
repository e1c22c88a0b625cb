#!/usr/bin/env bash
# Runs the HTTP caching test suite http-tests/cache-tests (the suite behind cache-tests.fyi)
# against shared caches on this machine, and prints pass counts by section (summarize.mjs).
#
#   scripts/cache-tests/run.sh [options] [target...]
#
# Targets (default: varnish nginx):
#   varnish   Debian's varnish, builtin VCL, the origin as its only backend, default parameters
#   varnish-fyi  the same with the parameters the suite's own docker image gives varnishd for
#             cache-tests.fyi (default_ttl=0 default_grace=0 default_keep=3600: no caching of
#             responses without freshness, no serving stale, keep stale objects to revalidate)
#   nginx     Debian's nginx with proxy_cache in front of the origin
#   portico   the gateway: see start_portico below (PORTICO_URL or PORTICO_START)
#   origin    only start the origin and wait (Ctrl-C ends it), to point a proxy at it by hand
# Options:
#   --proxy-url URL  also test an already-running cache at URL (which must forward every path to
#                    the origin, http://127.0.0.1:$ORIGIN_PORT); its results are named by --name
#   --name NAME      the name for --proxy-url's results (default: proxy). The no-cache baseline
#                    (what passes with no cache at all): --proxy-url http://127.0.0.1:18600 --name no-cache
#   --id TEST_ID     run one test only, print the suite's request/response dump, save nothing
#   --no-install     do not apt-get install varnish/nginx nor npm install the suite's deps
#
# Environment:
#   CACHE_TESTS_DIR   the suite's checkout (default: .build/cache-tests in this repo, git-ignored)
#   CACHE_TESTS_SRC   where to clone it from when CACHE_TESTS_DIR has no checkout: a git URL, a
#                     bare mirror or another checkout. Without either the script stops and says so
#                     (CI has no network for GitHub)
#   CACHE_TESTS_REF   commit to check out after cloning (default: the source's HEAD)
#   CACHE_TESTS_OUT   where results go (default: bench/results/cache-tests, git-ignored)
#   CACHE_TESTS_TIMEOUT  seconds one run of the suite may take (default 900; one takes ~60 s)
#   ORIGIN_PORT / VARNISH_PORT / NGINX_PORT / PORTICO_PORT  loopback ports (18600..18603)
#
# Each run writes NAME.json (the suite's own result JSON, as its CLI prints it), NAME.log (the CLI's
# stderr) and NAME.meta.json (version, suite commit, node version, seconds) to the output folder.
# Everything it starts (origin, varnishd, nginx, a gateway it started) is stopped on exit.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/../.." && pwd)
SUITE_DIR=${CACHE_TESTS_DIR:-$REPO/.build/cache-tests}
SUITE_SRC=${CACHE_TESTS_SRC:-}
SUITE_REF=${CACHE_TESTS_REF:-}
OUT_DIR=${CACHE_TESTS_OUT:-$REPO/bench/results/cache-tests}
RUN_TIMEOUT=${CACHE_TESTS_TIMEOUT:-900}
ORIGIN_PORT=${ORIGIN_PORT:-18600}
VARNISH_PORT=${VARNISH_PORT:-18601}
NGINX_PORT=${NGINX_PORT:-18602}
PORTICO_PORT=${PORTICO_PORT:-18603}
ORIGIN_URL="http://127.0.0.1:$ORIGIN_PORT"

log() { echo "cache-tests: $*" >&2; }
die() { log "$*"; exit 1; }

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; }

TARGETS=()
PROXY_URL=""
PROXY_NAME="proxy"
TEST_ID=""
INSTALL=1
while [ $# -gt 0 ]; do
  case "$1" in
    --proxy-url) PROXY_URL=${2:?--proxy-url needs a URL}; shift 2 ;;
    --proxy-url=*) PROXY_URL=${1#*=}; shift ;;
    --name) PROXY_NAME=${2:?--name needs a name}; shift 2 ;;
    --name=*) PROXY_NAME=${1#*=}; shift ;;
    --id) TEST_ID=${2:?--id needs a test id}; shift 2 ;;
    --id=*) TEST_ID=${1#*=}; shift ;;
    --no-install) INSTALL=0; shift ;;
    -h|--help) usage; exit 0 ;;
    varnish|varnish-fyi|nginx|portico|origin) TARGETS+=("$1"); shift ;;
    *) usage; die "unknown argument: $1" ;;
  esac
done
if [ ${#TARGETS[@]} -eq 0 ] && [ -z "$PROXY_URL" ]; then TARGETS=(varnish nginx); fi

# ---------------------------------------------------------------------------------------------
# Processes started here, and their cleanup.
WORK=$(mktemp -d /tmp/cache-tests.XXXXXX)
# varnishd and nginx drop privileges to their own users; they need to reach their files in here.
chmod 755 "$WORK"
PIDS=()
# stop_from N: stops the processes started since PIDS had N entries (all of them: stop_from 0).
stop_from() {
  local pid i
  for ((i = $1; i < ${#PIDS[@]}; i++)); do kill -TERM "${PIDS[i]}" 2>/dev/null || true; done
  for ((i = $1; i < ${#PIDS[@]}; i++)); do
    pid=${PIDS[i]}
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  PIDS=("${PIDS[@]:0:$1}")
}
cleanup() {
  stop_from 0
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_port PORT SECONDS: waits until something accepts connections on 127.0.0.1:PORT.
wait_port() {
  local port=$1 deadline=$((SECONDS + $2))
  while [ $SECONDS -lt $deadline ]; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  return 1
}

# port_free PORT: fails when something already listens there (a leftover from another run).
port_free() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    die "port $1 is already in use; set ${2}_PORT to a free one"
  fi
}

# ---------------------------------------------------------------------------------------------
# The suite.
ensure_suite() {
  if [ ! -f "$SUITE_DIR/tests/index.mjs" ]; then
    [ -n "$SUITE_SRC" ] || die "no checkout of http-tests/cache-tests in $SUITE_DIR, and CACHE_TESTS_SRC is not set.
  Set CACHE_TESTS_DIR to an existing checkout, or CACHE_TESTS_SRC to a git URL / mirror / checkout to clone."
    log "cloning the suite from $SUITE_SRC into $SUITE_DIR"
    mkdir -p "$(dirname "$SUITE_DIR")"
    git clone -q "$SUITE_SRC" "$SUITE_DIR" || die "could not clone $SUITE_SRC"
    if [ -n "$SUITE_REF" ]; then git -C "$SUITE_DIR" checkout -q "$SUITE_REF"; fi
  fi
  [ -f "$SUITE_DIR/test-engine/cli.mjs" ] || die "$SUITE_DIR does not look like http-tests/cache-tests"
  command -v node >/dev/null || die "node is needed (Debian: apt-get install nodejs)"
  SUITE_COMMIT=$(git -C "$SUITE_DIR" rev-parse HEAD 2>/dev/null || echo unknown)
  # The CLI itself needs no package: it uses node's built-in fetch. Its one runtime import is
  # `undici`, loaded only by the four tests in tests/interim.mjs (1xx responses). liquidjs and
  # marked serve the HTML results page. So a failed install (no npm registry) only costs those
  # four tests, which then fail with "Cannot find package 'undici'" (see summarize.mjs).
  if [ ! -d "$SUITE_DIR/node_modules/undici" ] && [ "$INSTALL" = 1 ]; then
    command -v npm >/dev/null || { log "npm is missing: the interim (1xx) tests will error"; return 0; }
    log "installing the suite's npm dependencies"
    if ! (cd "$SUITE_DIR" && timeout 180 npm install --omit=dev --no-audit --no-fund --fetch-retries=0 \
        >"$WORK/npm.log" 2>&1); then
      log "npm install failed (no registry?); the interim (1xx) tests will error. Last lines:"
      tail -3 "$WORK/npm.log" >&2 || true
    fi
  fi
}

# The origin: the suite's own server. It keeps each test's configuration (PUT /config/UUID), answers
# /test/UUID as configured and records what it received (GET /state/UUID). It serves one
# implementation after another: every test uses a fresh UUID.
start_origin() {
  port_free "$ORIGIN_PORT" ORIGIN
  log "starting the origin on $ORIGIN_URL"
  (cd "$SUITE_DIR" && exec env npm_package_config_protocol=http npm_config_port="$ORIGIN_PORT" \
    npm_config_pidfile="$WORK/origin.pid" CACHE_TESTS_BIND_HOST=127.0.0.1 \
    node --import "file://$SCRIPT_DIR/loopback.mjs" test-engine/server/server.mjs) \
    >"$WORK/origin.log" 2>&1 &
  PIDS+=($!)
  wait_port "$ORIGIN_PORT" 20 || { cat "$WORK/origin.log" >&2; die "the origin did not start"; }
}

# ---------------------------------------------------------------------------------------------
# The caches. Each start_X sets BASE_URL and VERSION.

install_pkg() { # install_pkg COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  [ "$INSTALL" = 1 ] || die "$1 is missing (apt-get install $2)"
  [ "$(id -u)" -eq 0 ] || die "$1 is missing: sudo apt-get install -y $2"
  log "installing $2"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
  # Debian's packages may try to start the service; only ours may run here.
  command -v "$1" >/dev/null 2>&1 || die "installing $2 did not provide $1"
}

pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }

# Varnish with nothing but a backend: the builtin VCL decides, as on a fresh install. So it
# caches GET/HEAD only, passes requests with Authorization or Cookie, does not store responses
# with Set-Cookie, Vary: *, no-store/no-cache/private or a TTL <= 0, and gives responses without
# freshness information its default_ttl (120 s): the suite's check `freshness-none` reports that.
start_varnish() {
  local params=("$@")
  install_pkg varnishd varnish
  port_free "$VARNISH_PORT" VARNISH
  rm -rf "$WORK/varnish"
  cat >"$WORK/varnish.vcl" <<EOF
vcl 4.1;
backend origin {
  .host = "127.0.0.1";
  .port = "$ORIGIN_PORT";
}
EOF
  log "starting varnishd on 127.0.0.1:$VARNISH_PORT"
  # -F: stay in the foreground so that the PID is ours; -T none: no management port;
  # -s malloc: a memory store, nothing left on disk.
  varnishd -F -n "$WORK/varnish" -a "127.0.0.1:$VARNISH_PORT" -T none -f "$WORK/varnish.vcl" \
    -s malloc,256m "${params[@]}" >"$WORK/varnish.log" 2>&1 &
  PIDS+=($!)
  wait_port "$VARNISH_PORT" 60 || { cat "$WORK/varnish.log" >&2; die "varnishd did not start"; }
  BASE_URL="http://127.0.0.1:$VARNISH_PORT"
  VERSION="$(pkg_version varnish)"
}

start_varnish-fyi() {
  start_varnish -p default_ttl=0 -p default_grace=0 -p default_keep=3600
  VERSION="$VERSION (default_ttl=0 default_grace=0 default_keep=3600)"
}

# nginx as an operator would set up a caching reverse proxy:
# - proxy_cache with a zone on disk in a temporary folder;
# - no proxy_cache_valid, so only the origin's Cache-Control/Expires (and X-Accel-Expires) set
#   freshness, and responses without them are not stored;
# - proxy_cache_revalidate on: stale entries are revalidated with If-None-Match/If-Modified-Since
#   instead of being fetched again;
# - proxy_cache_lock left off (nginx's default): it only merges concurrent misses for one key,
#   which the suite does not send;
# - proxy_http_version 1.1 (the default, 1.0, would be an odd choice in front of an HTTP/1.1
#   origin); everything else (proxy_cache_methods GET HEAD, proxy_cache_key, no use of stale
#   responses, Set-Cookie responses not cached) is nginx's default.
start_nginx() {
  install_pkg nginx nginx
  port_free "$NGINX_PORT" NGINX
  local dir="$WORK/nginx" user=""
  mkdir -p "$dir/cache" "$dir/tmp"
  if [ "$(id -u)" -eq 0 ]; then
    # The workers run as nobody; they write the cache and the temporary files.
    user="user nobody nogroup;"
    chown -R nobody:nogroup "$dir/cache" "$dir/tmp"
  fi
  cat >"$dir/nginx.conf" <<EOF
$user
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  proxy_cache_path $dir/cache levels=1:2 keys_zone=cachetests:10m max_size=256m inactive=60m use_temp_path=off;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / {
      proxy_pass $ORIGIN_URL;
      proxy_http_version 1.1;
      proxy_cache cachetests;
      proxy_cache_revalidate on;
    }
  }
}
EOF
  log "starting nginx on 127.0.0.1:$NGINX_PORT"
  nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" >"$WORK/nginx.log" 2>&1 &
  PIDS+=($!)
  wait_port "$NGINX_PORT" 20 || { cat "$WORK/nginx.log" "$dir/error.log" >&2; die "nginx did not start"; }
  BASE_URL="http://127.0.0.1:$NGINX_PORT"
  VERSION="$(pkg_version nginx)"
}

# The gateway, as a shared cache in front of the origin: one service at `/` (every path), no
# authentication, `cache: {}` (no defaultTTL: freshness only from the origin's fields, as RFC 9111
# asks), no compression (the suite compares bodies and lengths byte for byte). By default the
# newer of .build/release/portico (make build) and .build/debug/portico. Or:
#   PORTICO_URL=http://127.0.0.1:PORT   a gateway already running, routed to $ORIGIN_URL
#   PORTICO_START='command ...'         run by bash in the background with CACHE_TESTS_ORIGIN_URL
#                                       and PORTICO_PORT exported; it must listen on
#                                       127.0.0.1:$PORTICO_PORT; it is stopped on exit
#   PORTICO_VERSION                     what to record as its version (default: git describe)
start_portico() {
  VERSION=${PORTICO_VERSION:-$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)}
  if [ -n "${PORTICO_URL:-}" ]; then
    BASE_URL=${PORTICO_URL%/}
    return
  fi
  local start=${PORTICO_START:-}
  if [ -z "$start" ]; then
    local binary
    binary=$(ls -t "$REPO/.build/release/portico" "$REPO/.build/debug/portico" 2>/dev/null | head -1)
    [ -n "$binary" ] && [ -x "$binary" ] || die "portico: build it first (make build), or set PORTICO_URL or PORTICO_START"
    mkdir -p "$WORK/portico-policy"
    cat >"$WORK/portico-policy/policy.yaml" <<EOF
listeners:
  - { name: public, address: 127.0.0.1, port: $PORTICO_PORT }
accessLog: { enabled: false }
cache: { maxBytes: 64MiB, maxObjectBytes: 1MiB }
backends:
  origin: { url: "$ORIGIN_URL", timeout: 10s }
services:
  everything:
    path: /
    cache: {}
    versions:
      1: { proxy: { backend: origin } }
EOF
    start="$binary serve --policies $WORK/portico-policy"
  fi
  port_free "$PORTICO_PORT" PORTICO
  log "starting the gateway: $start"
  CACHE_TESTS_ORIGIN_URL=$ORIGIN_URL PORTICO_PORT=$PORTICO_PORT \
    bash -c "exec $start" >"$WORK/portico.log" 2>&1 &
  PIDS+=($!)
  wait_port "$PORTICO_PORT" 60 || { tail -20 "$WORK/portico.log" >&2; die "the gateway did not start"; }
  BASE_URL="http://127.0.0.1:$PORTICO_PORT"
}

start_proxy_url() {
  BASE_URL=${PROXY_URL%/}
  VERSION=${PROXY_VERSION:-unknown}
}

# ---------------------------------------------------------------------------------------------
# run_suite NAME: runs the suite's CLI against $BASE_URL and saves NAME.json/.log/.meta.json.
# The CLI reads its options from npm's environment (npm_config_*, then npm_package_config_*);
# it is run with node directly so that npm is not needed at run time.
FAILED=()
RESULT_FILES=()
run_suite() {
  local name=$1 start rc=0 seconds
  if [ -n "$TEST_ID" ]; then
    log "$name ($BASE_URL): test $TEST_ID"
    (cd "$SUITE_DIR" && npm_config_base="$BASE_URL" npm_config_id="$TEST_ID" \
      timeout -k 10 "$RUN_TIMEOUT" node --no-warnings test-engine/cli.mjs) || FAILED+=("$name")
    return 0
  fi
  mkdir -p "$OUT_DIR"
  log "$name ($VERSION) at $BASE_URL: running the suite (at most ${RUN_TIMEOUT}s)"
  start=$SECONDS
  (cd "$SUITE_DIR" && env -u npm_config_base -u npm_config_id npm_package_config_base="$BASE_URL" \
    npm_package_config_id="" timeout -k 10 "$RUN_TIMEOUT" node --no-warnings test-engine/cli.mjs) \
    >"$OUT_DIR/$name.json.tmp" 2>"$OUT_DIR/$name.log" || rc=$?
  seconds=$((SECONDS - start))
  if [ $rc -ne 0 ] || ! node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' \
      "$OUT_DIR/$name.json.tmp" 2>/dev/null; then
    log "$name: the suite failed (exit $rc after ${seconds}s; 124 = timed out); see $OUT_DIR/$name.log"
    mv "$OUT_DIR/$name.json.tmp" "$OUT_DIR/$name.failed.out"
    FAILED+=("$name")
    return 0
  fi
  mv "$OUT_DIR/$name.json.tmp" "$OUT_DIR/$name.json"
  NAME="$name" VERSION="$VERSION" BASE="$BASE_URL" COMMIT="$SUITE_COMMIT" SECS="$seconds" node -e '
    const e = process.env
    console.log(JSON.stringify({ name: e.NAME, version: e.VERSION, base_url: e.BASE,
      suite_commit: e.COMMIT, node: process.version, seconds: Number(e.SECS),
      finished: new Date().toISOString() }, null, 2))' >"$OUT_DIR/$name.meta.json"
  log "$name: done in ${seconds}s -> $OUT_DIR/$name.json"
  RESULT_FILES+=("$OUT_DIR/$name.json")
}

ensure_suite
start_origin
for target in "${TARGETS[@]}"; do
  if [ "$target" = origin ]; then
    log "origin running at $ORIGIN_URL; Ctrl-C to stop"
    wait "${PIDS[0]}"
    exit 0
  fi
  started=${#PIDS[@]}
  "start_$target"
  run_suite "$target"
  stop_from "$started" # one cache at a time, each on a port of its own all the same
done
if [ -n "$PROXY_URL" ]; then
  start_proxy_url
  run_suite "$PROXY_NAME"
fi

if [ ${#RESULT_FILES[@]} -gt 0 ]; then
  node "$SCRIPT_DIR/summarize.mjs" --suite "$SUITE_DIR" "${RESULT_FILES[@]}"
fi
if [ ${#FAILED[@]} -gt 0 ]; then die "failed: ${FAILED[*]}"; fi
