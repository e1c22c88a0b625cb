#!/usr/bin/env python3
"""Both ends of a WebSocket connection, from the `websockets` package (PyPI), for the gateway's tests.

server [CERT KEY]
    An echo server on 127.0.0.1 (over TLS with CERT and KEY when given) (an ephemeral port, printed on the first line of standard output).
    It offers the subprotocol `chat.v1`, echoes every message as it came (text or binary), and
    understands three text messages: `whoami` (answers JSON with the request's path and some of
    its header fields), `close-me` (closes with 1000 "bye"), and `greet` in the query (`?greet=1`:
    it sends "hello from the backend" at once after the handshake, before any message from the
    client). It stops when its standard input closes.

client echo URL HEADERS_JSON
    Opens URL with the extra header fields, offering `chat.v1`; sends text and binary messages of
    0 B to 4 MiB (uncompressed) and checks each echo; sends a ping and waits for its pong; asks `whoami`; closes
    with 1000. Prints JSON: what it saw.

client wait URL HEADERS_JSON
    Opens URL, sends "hello", reads its echo, then waits (up to 120 s) for the other side to close.
    Prints JSON with the close code and reason it received and the messages read meanwhile.

client server-closes URL HEADERS_JSON
    Sends `close-me` and reports the close the backend sent through the gateway.

A client verifies a wss:// server against the CA file in the environment's PEER_CA.

client refused URL HEADERS_JSON
    Expects the handshake to be refused; prints the status and body of the refusal.

client greeted URL HEADERS_JSON
    Reads the first message without sending anything, then closes.

client whoami URL HEADERS_JSON
    Asks `whoami` once, reports the server's answer, and closes with 1000.

client echo-fixed-key URL HEADERS_JSON
    Sends HEADERS_JSON's X-Fixed-Key as its Sec-WebSocket-Key (so that a signature made beforehand
    can cover it), then one message, checks its echo, and closes.
"""
import asyncio
import json
import os
import ssl
import sys

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed, InvalidStatus

SIZES = [0, 1, 125, 126, 65535, 65536, 4 * 1024 * 1024]


async def echo(ws):
    if "greet=1" in (ws.request.path or ""):
        await ws.send("hello from the backend")
    try:
        async for message in ws:
            if message == "whoami":
                fields = {name: ws.request.headers.get(name) for name in
                          ("x-forwarded-for", "x-request-id", "authorization", "x-api-key", "host", "sec-websocket-protocol")}
                await ws.send(json.dumps({"path": ws.request.path, "headers": fields}))
            elif message == "close-me":
                await ws.close(1000, "bye")
                return
            else:
                await ws.send(message)
    except ConnectionClosed:
        pass


async def run_server(tls):
    context = None
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls[0], tls[1])
    async with serve(echo, "127.0.0.1", 0, subprotocols=["chat.v1"], max_size=None, ping_interval=None,
                     ssl=context) as server:
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)


def closed_info(ws):
    received = ws.protocol.close_rcvd
    return {
        "received_code": received.code if received else None,
        "received_reason": received.reason if received else None,
    }


async def run_client(mode, url, headers):
    report = {}
    fixed = [value for name, value in headers if name == "X-Fixed-Key"]
    headers = [(name, value) for name, value in headers if name != "X-Fixed-Key"]
    if fixed:
        # websockets' client protocol draws its key from generate_key(); a test that signed the
        # key beforehand passes its own.
        from websockets import client as sans_io_client
        sans_io_client.generate_key = lambda: fixed[0]
    try:
        # The echo goes uncompressed, so that 4 MiB messages are 4 MiB on the wire; the others
        # offer permessage-deflate, as browsers do.
        compression = None if mode == "echo" else "deflate"
        context = None
        if url.startswith("wss://"):
            context = ssl.create_default_context(cafile=os.environ.get("PEER_CA"))
        async with connect(url, additional_headers=headers, subprotocols=["chat.v1"], max_size=None,
                           ping_interval=None, open_timeout=60, close_timeout=30, compression=compression,
                           ssl=context) as ws:
            report["subprotocol"] = ws.subprotocol
            report["extensions"] = [extension.name for extension in ws.protocol.extensions]
            if mode == "echo":
                echoed = 0
                for size in SIZES:
                    for message in ("t" * size, bytes(i % 251 for i in range(size))):
                        await ws.send(message)
                        answer = await asyncio.wait_for(ws.recv(), 120)
                        if answer != message:
                            report["mismatch"] = {"size": size, "kind": type(message).__name__}
                            break
                        echoed += 1
                report["echoed"] = echoed
                pong = await ws.ping(b"are you there")
                await asyncio.wait_for(pong, 60)
                report["pong"] = True
                await ws.send("whoami")
                answer = await asyncio.wait_for(ws.recv(), 60)
                try:
                    report["whoami"] = json.loads(answer)
                except ValueError:
                    report["whoami_raw"] = answer   # another echo server: it echoes the question
                await ws.close(1000, "done")
                report["sent_code"] = 1000
                report.update(closed_info(ws))
            elif mode == "wait":
                try:
                    await ws.send("hello")
                    report["first"] = await asyncio.wait_for(ws.recv(), 60)
                    while True:
                        await asyncio.wait_for(ws.recv(), 120)
                except ConnectionClosed:
                    pass
                report.update(closed_info(ws))
            elif mode == "server-closes":
                await ws.send("close-me")
                try:
                    await asyncio.wait_for(ws.recv(), 60)
                except ConnectionClosed:
                    pass
                report.update(closed_info(ws))
            elif mode == "whoami":
                await ws.send("whoami")
                report["whoami"] = json.loads(await asyncio.wait_for(ws.recv(), 60))
                await ws.close(1000)
            elif mode == "echo-fixed-key":
                await ws.send("signed hello")
                report["echoed"] = 1 if await asyncio.wait_for(ws.recv(), 60) == "signed hello" else 0
                await ws.close(1000)
            elif mode == "greeted":
                report["first"] = await asyncio.wait_for(ws.recv(), 60)
                await ws.close(1000)
            elif mode == "refused":
                report["opened"] = True
    except InvalidStatus as error:
        response = error.response
        report["status"] = response.status_code
        report["body"] = response.body.decode("utf-8", "replace") if response.body else ""
        report["headers"] = {name.lower(): value for name, value in response.headers.raw_items()}
    print(json.dumps(report), flush=True)


def main():
    if sys.argv[1] == "server":
        asyncio.run(run_server(sys.argv[2:4] if len(sys.argv) > 3 else None))
    else:
        mode, url = sys.argv[2], sys.argv[3]
        headers = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
        asyncio.run(run_client(mode, url, list(headers.items())))


if __name__ == "__main__":
    main()
