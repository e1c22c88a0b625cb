#!/usr/bin/env bash
# Makes a development CA and a server certificate for localhost, for the quick start only.
#
#   certs/make-dev-certs.sh [directory]     (default: certs/dev; existing files are kept)
#
# The CA's private key never leaves this machine and is made fresh on each machine: nothing here
# is a production key, and nothing here is committed (certs/dev/ is ignored by git).
set -euo pipefail
DIR=${1:-"$(dirname "$0")/dev"}
mkdir -p "$DIR"
cd "$DIR"
if [ -f server.pem ] && [ -f server-key.pem ] && [ -f ca.pem ]; then
  exit 0
fi
command -v openssl >/dev/null || { echo "make-dev-certs: needs the openssl command (apt-get install -y openssl)" >&2; exit 1; }
umask 077

# The CA: EC P-256, valid 10 years, allowed to sign certificates only.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -days 3650 \
  -subj "/O=Portico development/CN=Portico development CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout ca-key.pem -out ca.pem 2>/dev/null

# The server: localhost and the loopback addresses, valid 825 days (what clients accept).
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
  -subj "/O=Portico development/CN=localhost" -keyout server-key.pem -out server.csr 2>/dev/null
cat >server.ext <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
EXT
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -sha256 -days 825 \
  -extfile server.ext -out server.pem 2>/dev/null
rm -f server.csr server.ext ca.srl
chmod 644 ca.pem server.pem
echo "make-dev-certs: wrote $(pwd)/{ca.pem,server.pem,server-key.pem}; trust ca.pem in clients (curl --cacert)"
