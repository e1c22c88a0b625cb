#!/usr/bin/env python3
"""gRPC's own Python implementation (grpcio) on both sides of the gateway, for its gRPC tests.

  grpc-peer.py server           serves portico.test.Echo on 127.0.0.1 (h2c), prints its port,
                                and stops when its standard input closes.
  grpc-peer.py client TARGET METHOD PAYLOAD [TIMEOUT [KEY=VALUE...]]
                                calls METHOD (of portico.test.Echo, or SERVICE/METHOD) through
                                TARGET (host:port, plaintext HTTP/2) and prints {"code",
                                "details", "replies"} as JSON.

The messages are raw bytes (no protobuf): the gateway passes gRPC through without reading it.
"""
import json
import sys
from concurrent import futures

import grpc

SERVICE = "portico.test.Echo"
# The same methods under a second name, for a service the gateway guards differently.
KEYED = "portico.test.Keyed"


def unary(request, context):
    if request == b"fail":
        context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
    return b"echo:" + request


def stream(request, context):
    for index in range(5):
        yield b"%s-%d" % (request, index)


def deadline(request, context):
    # The deadline the backend was given, in whole seconds (None: no deadline).
    remaining = context.time_remaining()
    return b"none" if remaining is None else str(round(remaining)).encode()


def serve():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
        "Deadline": grpc.unary_unary_rpc_method_handler(deadline),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, handlers), grpc.method_handlers_generic_handler(KEYED, handlers)))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(0)


def call(target, method, payload, timeout=10.0, metadata=()):
    with grpc.insecure_channel(target) as channel:
        path = "/%s" % method if "/" in method else "/%s/%s" % (SERVICE, method)
        try:
            if method.endswith("Stream"):
                replies = list(channel.unary_stream(path)(payload.encode(), timeout=timeout, metadata=metadata))
            else:
                replies = [channel.unary_unary(path)(payload.encode(), timeout=timeout, metadata=metadata)]
            result = {"code": "OK", "details": "", "replies": [reply.decode() for reply in replies]}
        except grpc.RpcError as error:
            result = {"code": error.code().name, "details": error.details() or "", "replies": []}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve()
    else:
        timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 10.0
        metadata = tuple(tuple(item.split("=", 1)) for item in sys.argv[6:])
        call(sys.argv[2], sys.argv[3], sys.argv[4], timeout, metadata)
