#!/usr/bin/env bash
# Certificates for the TLS tests, made fresh in a temporary directory on every test run:
#   ca.pem                     the servers' CA
#   localhost.pem/-key.pem     CN=localhost, SAN localhost and 127.0.0.1 (the default certificate)
#   other.pem/-key.pem         CN=other.test, SAN other.test (chosen by SNI)
#   renewed.pem/-key.pem       CN=localhost-renewed, SAN localhost (a reload swaps it in)
#   expired.pem/-key.pem       CN=expired.test, valid in 2020 only
#   notyet.pem/-key.pem        CN=notyet.test, valid from 2099
#   client-ca.pem              the client CA; client.pem/-key.pem: CN=app-client,O=Portico tests
#   foreign-ca.pem             another CA; foreign-client.pem/-key.pem signed by it
set -euo pipefail
DIR=$1
mkdir -p "$DIR"
cd "$DIR"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() { # name subject
  key "$1-key.pem"
  openssl req -x509 -new -key "$1-key.pem" -sha256 -days 30 -subj "$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$1.pem" 2>/dev/null
}
leaf() { # name subject ca usage san...
  local name=$1 subject=$2 issuer=$3 usage=$4; shift 4
  key "$name-key.pem"
  openssl req -new -key "$name-key.pem" -subj "$subject" -out "$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "extendedKeyUsage=$usage"
    if [ $# -gt 0 ]; then local IFS=,; echo "subjectAltName=$*"; fi
  } >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA "$issuer.pem" -CAkey "$issuer-key.pem" -CAcreateserial -sha256 -days 30 \
    -extfile "$name.ext" -out "$name.pem" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

ca ca "/O=Portico tests/CN=Test server CA"
leaf localhost "/CN=localhost" ca serverAuth DNS:localhost IP:127.0.0.1
leaf other "/CN=other.test" ca serverAuth DNS:other.test
leaf renewed "/CN=localhost-renewed" ca serverAuth DNS:localhost IP:127.0.0.1
ca client-ca "/O=Portico tests/CN=Test client CA"
leaf client "/O=Portico tests/CN=app-client" client-ca clientAuth
ca foreign-ca "/O=Elsewhere/CN=Foreign CA"
leaf foreign-client "/O=Elsewhere/CN=intruder" foreign-ca clientAuth

# An expired certificate needs explicit dates, which only `openssl ca` takes.
key expired-key.pem
openssl req -new -key expired-key.pem -subj "/CN=expired.test" -out expired.csr 2>/dev/null
mkdir -p ca-db && : >ca-db/index.txt && echo 1000 >ca-db/serial
cat >ca-db/ca.cnf <<CNF
[ ca ]
default_ca = test
[ test ]
database = $DIR/ca-db/index.txt
new_certs_dir = $DIR/ca-db
serial = $DIR/ca-db/serial
default_md = sha256
policy = anything
[ anything ]
commonName = supplied
CNF
openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca-key.pem -in expired.csr -out expired.pem \
  -startdate 20200101000000Z -enddate 20200102000000Z -notext 2>/dev/null
key notyet-key.pem
openssl req -new -key notyet-key.pem -subj "/CN=notyet.test" -out notyet.csr 2>/dev/null
openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca-key.pem -in notyet.csr -out notyet.pem \
  -startdate 20990101000000Z -enddate 20990102000000Z -notext 2>/dev/null
rm -rf expired.csr notyet.csr ca-db ./*.srl
