#!/usr/bin/env bash
# Runs the browser live check (browser/live-check.html) in headless Chromium against a running
# Portico gateway, and prints its one line of JSON on stdout:
#   {"accepted":{"status":S,"type":T},"tampered":{...},"replayFirst":{...},"replayed":{...}}
#
#   clients/js/browser-check.sh --gateway http://127.0.0.1:8080 --path /api/1/stockquote/AAPL \
#       --key-id demo-app --secret-file policies/secrets/demo-app.secret [--page-port 8099] \
#       [--app-version 2.4.1] [--platform web] [--chromium /usr/bin/chromium] [--timeout 60]
#
# The page is served by Python's http.server on 127.0.0.1:<page-port> (a free port when none is
# given), so it runs on another origin than the gateway, as a web app does: the gateway's service
# must allow exactly http://127.0.0.1:<page-port> in its CORS policy. Everything run-time goes to a
# temporary directory under /tmp; the server is always stopped. Like live-check.mjs it decides
# nothing: exit 0 after printing the JSON, non-zero only when the check could not run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage="usage: $0 --gateway URL --path PATH --key-id ID --secret-file FILE [--page-port N] [--app-version V] [--platform P] [--chromium PATH] [--timeout SECONDS]"

gateway="" path="" key_id="" secret_file="" page_port="" app_version="" platform="" chromium="${CHROMIUM:-}" limit=60
while [ $# -gt 0 ]; do
  case "$1" in
    --gateway) gateway="${2-}"; shift 2 ;;
    --path) path="${2-}"; shift 2 ;;
    --key-id) key_id="${2-}"; shift 2 ;;
    --secret-file) secret_file="${2-}"; shift 2 ;;
    --page-port) page_port="${2-}"; shift 2 ;;
    --app-version) app_version="${2-}"; shift 2 ;;
    --platform) platform="${2-}"; shift 2 ;;
    --chromium) chromium="${2-}"; shift 2 ;;
    --timeout) limit="${2-}"; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "browser-check: unknown argument $1" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done
for required in gateway path key_id secret_file; do
  if [ -z "${!required}" ]; then echo "browser-check: --${required//_/-} is required" >&2; echo "$usage" >&2; exit 2; fi
done
[ -r "$secret_file" ] || { echo "browser-check: cannot read the secret file $secret_file" >&2; exit 2; }
[[ "$limit" =~ ^[0-9]+$ ]] || { echo "browser-check: --timeout must be whole seconds" >&2; exit 2; }
if [ -n "$page_port" ] && ! [[ "$page_port" =~ ^[0-9]+$ ]]; then echo "browser-check: --page-port must be a port number" >&2; exit 2; fi
if [ -z "$chromium" ]; then
  for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null 2>&1; then chromium="$(command -v "$candidate")"; break; fi
  done
fi
[ -n "$chromium" ] && [ -x "$chromium" ] || { echo "browser-check: no Chromium found (give --chromium PATH)" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "browser-check: python3 is needed to serve the page" >&2; exit 2; }

work="$(mktemp -d /tmp/portico-browser-check.XXXXXX)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$page_port" ]; then
  page_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
fi

# http.server serving this directory; .mjs is mapped to JavaScript explicitly (module scripts are
# refused with any other type, and older mime tables do not know .mjs). Its log stays in $work.
python3 -u -c '
import functools, http.server, sys
handler = http.server.SimpleHTTPRequestHandler
handler.extensions_map = {**handler.extensions_map, ".mjs": "text/javascript", ".js": "text/javascript"}
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), functools.partial(handler, directory=sys.argv[2]))
print("serving", flush=True)
server.serve_forever()
' "$page_port" "$here" >"$work/server.log" 2>&1 &
server_pid=$!

for _ in $(seq 1 50); do
  if grep -q '^serving' "$work/server.log" 2>/dev/null; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "browser-check: the page server could not start on 127.0.0.1:$page_port:" >&2
    cat "$work/server.log" >&2
    exit 2
  fi
  sleep 0.1
done
grep -q '^serving' "$work/server.log" || { echo "browser-check: the page server did not start" >&2; exit 2; }

# The parameters go in the fragment: it never reaches the page server or its log.
page_url="$(
  SECRET_FILE="$secret_file" GATEWAY="$gateway" CHECK_PATH="$path" KEY_ID="$key_id" APP_VERSION="$app_version" \
    PLATFORM="$platform" PORT="$page_port" python3 -c '
import os, re, urllib.parse
with open(os.environ["SECRET_FILE"], encoding="utf-8") as file:
    secret = re.sub(r"[\r\n]+$", "", file.read())  # as the gateway reads key files
fields = {"gateway": os.environ["GATEWAY"], "path": os.environ["CHECK_PATH"], "keyId": os.environ["KEY_ID"], "secret": secret}
if os.environ["APP_VERSION"]: fields["appVersion"] = os.environ["APP_VERSION"]
if os.environ["PLATFORM"]: fields["platform"] = os.environ["PLATFORM"]
print("http://127.0.0.1:%s/browser/live-check.html#%s" % (os.environ["PORT"], urllib.parse.urlencode(fields)))
'
)"

# Virtual time runs the page until it is idle (network fetches pause it) or the budget is spent,
# then the DOM is dumped; `timeout` bounds the whole run in real time.
status=0
timeout -k 5 "$limit" "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
  --no-first-run --no-default-browser-check --disable-extensions --user-data-dir="$work/profile" \
  --virtual-time-budget=30000 --dump-dom "$page_url" >"$work/dom.html" 2>"$work/chromium.log" || status=$?
if [ "$status" -ne 0 ]; then
  echo "browser-check: Chromium exited with status $status (124: timed out after ${limit}s); its log:" >&2
  grep -v -e 'dbus/' "$work/chromium.log" | tail -n 20 >&2 || true
  exit 1
fi

chromium_log() {
  # Without a session bus Chromium logs dbus failures by the dozen; they say nothing about the page.
  grep -v -e 'dbus/' "$work/chromium.log" | tail -n 20 >&2 || true
}
python3 - "$work/dom.html" "$page_port" <<'PY' || { echo "browser-check: Chromium's log:" >&2; chromium_log; exit 1; }
import html, json, re, sys
dom = open(sys.argv[1], encoding="utf-8", errors="replace").read()
match = re.search(r'<pre id="result"(?: data-done="([^"]*)")?>(.*?)</pre>', dom, re.S)
if not match:
    sys.exit("browser-check: the dumped page has no result element")
done, text = match.group(1), html.unescape(match.group(2))
if done is None:
    sys.exit("browser-check: the page did not finish (last text: %s)" % text.strip())
value = json.loads(text)
if done != "true":
    error = value.get("error", text)
    if "Failed to fetch" in error:
        error += (" (the gateway is unreachable, or its CORS policy does not allow the origin http://127.0.0.1:%s "
                  "with the signature fields)" % sys.argv[2])
    sys.exit("browser-check: the page could not run the checks: %s" % error)
print(json.dumps(value, separators=(",", ":")))
PY
