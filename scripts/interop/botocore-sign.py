"""Signs a request with botocore's own SigV4 signers, for the gateway's SigV4 tests.

Reads JSON on stdin: {"method", "url", "headers": [[name, value], ...], "body", "access_key", "secret",
"region", "service", "s3": bool (botocore's S3 variant: x-amz-content-sha256, the path signed as sent),
"unsigned_payload": bool, "presign": seconds or null, "age": seconds to sign in the past (default 0)}.
Writes {"url": ..., "headers": [[name, value], ...]}: the URL to request and every field to send.
"""
import datetime
import json
import sys

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

request = json.load(sys.stdin)
age = request.get("age", 0)
if age:
    real = datetime.datetime

    class Past(real):
        @classmethod
        def utcnow(cls):
            return real.utcnow() - datetime.timedelta(seconds=age)

    botocore.auth.datetime.datetime = Past

body = request.get("body")
aws = AWSRequest(method=request["method"], url=request["url"], data=body.encode() if body is not None else None,
                 headers=dict(request.get("headers") or []))
if request.get("unsigned_payload"):
    aws.context["payload_signing_enabled"] = False
credentials = Credentials(request["access_key"], request["secret"])
if request.get("presign"):
    signer_class = botocore.auth.S3SigV4QueryAuth if request.get("s3") else botocore.auth.SigV4QueryAuth
    signer = signer_class(credentials, request["service"], request["region"], expires=request["presign"])
else:
    signer_class = botocore.auth.S3SigV4Auth if request.get("s3") else botocore.auth.SigV4Auth
    signer = signer_class(credentials, request["service"], request["region"])
signer.add_auth(aws)
json.dump({"url": aws.url, "headers": [[k, v] for k, v in aws.headers.items()]}, sys.stdout)
