"""Keys and tokens from PyJWT (and the cryptography package), for the gateway's JWT tests.

Reads one JSON command on stdin, writes JSON on stdout:
  {"command": "keys", "keys": [{"kid": "k1", "alg": "ES256"}, ...]}
      -> {"k1": {"alg": "ES256", "private": "<PEM>", "jwk": {...public JWK with kid and alg...}}, ...}
  {"command": "sign", "alg": "ES256", "private": "<PEM>", "kid": "k1", "claims": {...}, "headers": {...}}
      -> {"token": "<compact JWS>"}
  {"command": "hmac", "secret": "<text>", "claims": {...}, "headers": {...}}
      -> {"token": ...}   (HS256 made by hand: PyJWT itself refuses a PEM as an HMAC secret)
"""
import base64
import hashlib
import hmac
import json
import sys

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa


def private_key(alg):
    if alg.startswith("RS") or alg.startswith("PS"):
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if alg == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if alg == "ES384":
        return ec.generate_private_key(ec.SECP384R1())
    if alg == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    raise SystemExit(f"unknown alg {alg}")


def public_jwk(key, alg):
    public = key.public_key()
    if alg.startswith("RS") or alg.startswith("PS"):
        text = jwt.algorithms.RSAAlgorithm.to_jwk(public)
    elif alg.startswith("ES"):
        text = jwt.algorithms.ECAlgorithm.to_jwk(public)
    else:
        text = jwt.algorithms.OKPAlgorithm.to_jwk(public)
    return json.loads(text)


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main():
    request = json.load(sys.stdin)
    command = request["command"]
    if command == "keys":
        out = {}
        for spec in request["keys"]:
            key = private_key(spec["alg"])
            jwk = public_jwk(key, spec["alg"])
            jwk["kid"] = spec["kid"]
            if spec.get("withAlg", True):
                jwk["alg"] = spec["alg"]
            pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            out[spec["kid"]] = {"alg": spec["alg"], "private": pem.decode(), "jwk": jwk}
        json.dump(out, sys.stdout)
    elif command == "sign":
        headers = dict(request.get("headers") or {})
        if request.get("kid") is not None:
            headers["kid"] = request["kid"]
        key = serialization.load_pem_private_key(request["private"].encode(), password=None) if request.get("private") else None
        token = jwt.encode(request["claims"], key, algorithm=request["alg"], headers=headers)
        json.dump({"token": token}, sys.stdout)
    elif command == "hmac":
        header = {"alg": "HS256", "typ": "JWT"}
        header.update(request.get("headers") or {})
        signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(request["claims"]).encode())
        mac = hmac.new(request["secret"].encode(), signing_input.encode(), hashlib.sha256).digest()
        json.dump({"token": signing_input + "." + b64(mac)}, sys.stdout)
    else:
        raise SystemExit(f"unknown command {command}")


main()
