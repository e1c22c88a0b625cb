"""Verifies one signed HTTP response with http-message-signatures, an independent RFC 9421
implementation (PyPI), so tests can check that the locator's ed25519 response signature is what
another implementation expects, Content-Digest (RFC 9530) included.

Reads a JSON object on stdin: status, headers ([[name, value], ...]), body_b64, public_key_pem,
key_id. Prints {"ok": true, "covered": [...], "created": N, "expires": N} or {"ok": false, "error": "..."}.
"""
import base64
import datetime
import json
import sys
import types

from http_message_signatures import HTTPMessageVerifier, algorithms
from http_message_signatures.resolvers import MappingKeyResolver
from http_message_signatures.structures import CaseInsensitiveDict

spec = json.load(sys.stdin)
headers = CaseInsensitiveDict()
for name, value in spec["headers"]:
    headers[name] = value
message = types.SimpleNamespace(status_code=spec["status"], headers=headers, request=None)
verifier = HTTPMessageVerifier(
    signature_algorithm=algorithms.ED25519,
    key_resolver=MappingKeyResolver(public_keys={spec["key_id"]: spec["public_key_pem"].encode()}, private_keys={}),
)
try:
    results = verifier.verify(
        message,
        max_age=datetime.timedelta(days=1),
        require_components=("@status", "content-type", "content-digest"),
        body=base64.b64decode(spec["body_b64"]),
    )
    result = results[0]
    print(json.dumps({
        "ok": True,
        "covered": [str(c) for c in result.covered_components],
        "created": result.parameters.get("created"),
        "expires": result.parameters.get("expires"),
    }, default=str))
except Exception as error:  # the test reports the library's own words
    print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}"}))
