#!/usr/bin/env python3
"""Writes signing-vectors.json: fixed requests with the fields a client must send for them.

The signature bases below are written out by hand from RFC 9421 (section 2.5), and the MACs and
digests are computed here with Python's hmac and hashlib, so the expected values do not come from
Portico's own code. Both PorticoClient (the signer) and the gateway (the verifier) are tested
against the result. Run it again only to add a vector; never to make a failing test pass.
"""
import base64, hashlib, hmac, json, pathlib

def b64(data): return base64.b64encode(data).decode()

def digest(body, algorithm="sha-256"):
    function = {"sha-256": hashlib.sha256, "sha-512": hashlib.sha512}[algorithm]
    return f"{algorithm}=:{b64(function(body.encode()).digest())}:"

def vector(name, key, label, request, coverage, params, base_lines, body=None, identity=None,
           lifetime=None, digest_algorithm=None):
    key_bytes = base64.b64decode(key["base64"]) if "base64" in key else key["text"].encode()
    params_text = "(" + " ".join(f'"{c}"' for c in coverage["components"]) + ")" + params
    base = "\n".join(base_lines + [f'"@signature-params": {params_text}'])
    mac = hmac.new(key_bytes, base.encode(), hashlib.sha256).digest()
    expected = {
        "signatureBase": base,
        "signatureInput": f"{label}={params_text}",
        "signature": f"{label}=:{b64(mac)}:",
    }
    if body is not None and digest_algorithm:
        expected["contentDigest"] = digest(body, digest_algorithm)
    return {"name": name, "key": key, "label": label, "request": request, "body": body,
            "identity": identity, "lifetime": lifetime, "coverage": coverage, "expected": expected}

ORDER = '{"symbol": "AAPL", "quantity": 10}'
WATCHLIST = '["AAPL","MSFT"]'
NOW = 1763800000  # created, for every Portico vector
APP = {"text": "vector-app-secret-0123456789abcdefghijklmnopqrstuv"}

vectors = [
    vector("RFC 9421 B.2.5: HMAC-SHA256 over date, @authority and content-type",
           {"base64": "uzvJfB4u3N0Jy4T7NZ75MDVcr8zSTInedJtkgcu46YW4XByzNJjxBdtjUkdJPBtbmHhIDi6pcl8jsasjlTMtDQ=="},
           "sig-b25",
           {"method": "POST", "url": "https://example.com/foo?param=Value&Pet=dog",
            "headers": [["Date", "Tue, 20 Apr 2021 02:07:55 GMT"], ["Content-Type", "application/json"],
                        ["Content-Digest", "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:"]]},
           {"mode": "exact", "components": ["date", "@authority", "content-type"]},
           ';created=1618884473;keyid="test-shared-secret"',
           ["\"date\": Tue, 20 Apr 2021 02:07:55 GMT", "\"@authority\": example.com",
            "\"content-type\": application/json"]) | {"keyID": "test-shared-secret", "created": 1618884473, "nonce": None},
    vector("GET without a query: the gateway's default coverage",
           APP, "sig1",
           {"method": "GET", "url": "http://gateway.test/api/1/stockquote/AAPL", "headers": []},
           {"mode": "default", "components": ["@method", "@authority", "@path"]},
           f';created={NOW};nonce="n-0001";keyid="vector-app"',
           ['"@method": GET', '"@authority": gateway.test', '"@path": /api/1/stockquote/AAPL'])
    | {"keyID": "vector-app", "created": NOW, "nonce": "n-0001"},
    vector("GET with a percent-encoded path and query: both signed exactly as sent",
           APP, "sig1",
           {"method": "GET", "url": "http://gateway.test:8080/api/2/stock%20quote/BRK.B?region=eu&q=caf%C3%A9&empty=", "headers": [["Accept", "application/json"]]},
           {"mode": "default", "components": ["@method", "@authority", "@path", "@query"]},
           f';created={NOW};nonce="n-0002";keyid="vector-app"',
           ['"@method": GET', '"@authority": gateway.test:8080', '"@path": /api/2/stock%20quote/BRK.B',
            '"@query": ?region=eu&q=caf%C3%A9&empty='])
    | {"keyID": "vector-app", "created": NOW, "nonce": "n-0002"},
    vector("POST with a body and the app's identity: content-digest and both identity fields covered",
           APP, "sig1",
           {"method": "POST", "url": "https://gateway.test/api/1/orders", "headers": [["Content-Type", "application/json"]]},
           {"mode": "default", "components": ["@method", "@authority", "@path", "content-digest", "x-client-version", "x-client-platform"]},
           f';created={NOW};nonce="n-0003";keyid="vector-app"',
           ['"@method": POST', '"@authority": gateway.test', '"@path": /api/1/orders',
            f'"content-digest": {digest(ORDER)}',
            '"x-client-version": 2.4.1', '"x-client-platform": iphone'],
           body=ORDER, identity={"appVersion": "2.4.1", "platform": "iphone"},
           digest_algorithm="sha-256")
    | {"keyID": "vector-app", "created": NOW, "nonce": "n-0003"},
    vector("PUT with a query, a body, an expiry and a non-default port",
           APP, "sig1",
           {"method": "PUT", "url": "https://api.example.com:8443/api/3/watchlists/7?replace=true", "headers": []},
           {"mode": "default", "components": ["@method", "@authority", "@path", "@query", "content-digest"]},
           f';created={NOW};expires={NOW + 60};nonce="n-0004";keyid="vector-app"',
           ['"@method": PUT', '"@authority": api.example.com:8443', '"@path": /api/3/watchlists/7',
            '"@query": ?replace=true', f'"content-digest": {digest(WATCHLIST)}'],
           body=WATCHLIST, lifetime=60, digest_algorithm="sha-256")
    | {"keyID": "vector-app", "created": NOW, "nonce": "n-0004"},
    vector("DELETE to an https URL naming the default port: @authority leaves the port out",
           APP, "sig1",
           {"method": "DELETE", "url": "https://Example.COM:443/api/1/sessions/abc", "headers": []},
           {"mode": "default", "components": ["@method", "@authority", "@path"]},
           f';created={NOW};nonce="n-0005";keyid="vector-app"',
           ['"@method": DELETE', '"@authority": example.com', '"@path": /api/1/sessions/abc'])
    | {"keyID": "vector-app", "created": NOW, "nonce": "n-0005"},
]

out = pathlib.Path(__file__).with_name("signing-vectors.json")
out.write_text(json.dumps({"vectors": vectors}, indent=2, ensure_ascii=True) + "\n")
print(f"wrote {len(vectors)} vectors to {out}")
