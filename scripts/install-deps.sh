#!/usr/bin/env bash
# Makes sure the system libraries Portico links against are installed.
# As root on Debian/Ubuntu it installs what is missing; otherwise it says exactly what to install.
set -euo pipefail

# openssl (the command) makes development and test certificates; the curl command is used by a test;
# redis-server is started by the fleet-mode tests (a real Redis on an ephemeral port); nghttp2-client
# brings h2load and nghttp for the HTTP/2 benchmarks and checks; zlib, brotli and zstd compress
# responses (zlib through compress-nio, the other two through their C libraries); chromium runs the
# CORS test and the JavaScript signer's browser check in a real browser (headless); a JDK, OkHttp
# and JUnit 5 build and test the JVM signer (clients/jvm); Node runs the JavaScript signer's tests
# (clients/js; they need Node 20, which Debian 12's own nodejs package is not: see clients/js/README.md).
packages=(libcurl4-openssl-dev libssl-dev pkg-config openssl curl redis-server nghttp2-client zlib1g-dev libbrotli-dev libzstd-dev chromium
  openjdk-17-jdk-headless libokhttp-java junit5 nodejs)
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$package")
    fi
  done
else
  # Not a Debian system: check for the headers themselves.
  for header in curl/curl.h openssl/ssl.h zlib.h brotli/encode.h zstd.h; do
    if ! printf '#include <%s>\n' "$header" | cc -E -x c - >/dev/null 2>&1; then
      echo "Portico needs the development headers of libcurl (with OpenSSL), OpenSSL 3, zlib, brotli and zstd: <$header> was not found." >&2
      exit 1
    fi
  done
  exit 0
fi

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing ${missing[*]} ..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "Portico needs these packages: ${missing[*]}" >&2
  echo "Install them with:  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
