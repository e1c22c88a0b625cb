#!/usr/bin/env python3
"""An OTLP/HTTP traces receiver for the tests, decoding with OpenTelemetry's own protobuf
definitions (opentelemetry-proto), not the gateway's encoder.

    otlp-receiver.py [--status CODE] [--hold]

Listens on an ephemeral loopback port and prints it as the first line. Each POST to /v1/traces is
decoded as an ExportTraceServiceRequest; every span in it is printed as one JSON line:
{"trace_id", "span_id", "parent_span_id", "name", "kind", "attributes", "status", "service",
"start", "end"} (ids in lowercase hex). It answers 200 with an empty ExportTraceServiceResponse, or,
with --status, that status and no body (a collector refusing); with --hold it never answers (a
collector that hangs). Ends when its standard input closes.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

STATUS = 200
HOLD = False
args = sys.argv[1:]
while args:
    if args[0] == "--status":
        STATUS = int(args[1])
        args = args[2:]
    elif args[0] == "--hold":
        HOLD = True
        args = args[1:]
    else:
        sys.exit(f"unknown argument {args[0]}")

lock = threading.Lock()
never = threading.Event()


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "string_value":
        return any_value.string_value
    if kind == "int_value":
        return any_value.int_value
    if kind == "bool_value":
        return any_value.bool_value
    if kind == "double_value":
        return any_value.double_value
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    return None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *arguments):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        lines = []
        for resource_spans in request.resource_spans:
            resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(json.dumps({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": trace_pb2.Span.SpanKind.Name(span.kind),
                        "attributes": {a.key: value(a.value) for a in span.attributes},
                        "status": trace_pb2.Status.StatusCode.Name(span.status.code),
                        "service": resource.get("service.name"),
                        "content_type": self.headers.get("Content-Type"),
                        "authorization": self.headers.get("Authorization"),
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                    }))
        with lock:
            for line in lines:
                print(line, flush=True)
        if HOLD:
            never.wait()
            return
        if STATUS != 200:
            self.send_response(STATUS)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
server.shutdown()
