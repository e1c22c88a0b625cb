"""Signs one request with http-message-signatures, an independent RFC 9421 implementation (PyPI),
so tests can check that Portico verifies signatures it did not make itself.

Reads a JSON object on stdin: method, url, headers ([[name, value], ...]), body (text or null),
key_id, secret, covered (component ids), nonce, label, include_alg. Prints the header fields to
add, as a JSON object.
"""
import json
import sys
import types

from http_message_signatures import HTTPMessageSigner, algorithms
from http_message_signatures.resolvers import MappingKeyResolver
from http_message_signatures.structures import CaseInsensitiveDict

spec = json.load(sys.stdin)
headers = CaseInsensitiveDict()
for name, value in spec["headers"]:
    headers[name] = value
before = dict(headers.items())
message = types.SimpleNamespace(method=spec["method"], url=spec["url"], headers=headers)
signer = HTTPMessageSigner(
    signature_algorithm=algorithms.HMAC_SHA256,
    key_resolver=MappingKeyResolver(public_keys={}, private_keys={spec["key_id"]: spec["secret"].encode()}),
)
body = spec.get("body")
signer.sign(
    message,
    key_id=spec["key_id"],
    nonce=spec.get("nonce"),
    label=spec.get("label"),
    include_alg=spec.get("include_alg", True),
    covered_component_ids=tuple(spec["covered"]),
    body=body.encode() if body is not None else None,
)
added = {name: value for name, value in headers.items() if before.get(name) != value}
print(json.dumps(added))
