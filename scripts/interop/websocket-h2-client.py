#!/usr/bin/env python3
"""A WebSocket client over HTTP/2 (RFC 8441's extended CONNECT), for the gateway's tests: the HTTP/2
side is the `h2` package (PyPI), the WebSocket frames are `wsproto`'s, neither written here.

    websocket-h2-client.py MODE HOST PORT PATH HEADERS_JSON

Speaks HTTP/2 with prior knowledge (h2c) to HOST:PORT, waits for the server's SETTINGS, and opens
PATH with `:method CONNECT` and `:protocol websocket`, offering the subprotocol `chat.v1`, with the
extra header fields of HEADERS_JSON. Prints JSON: what it saw.

echo
    Sends text and binary messages of 0 B to 1 MiB and checks each echo (the gateway's flow
    control paces the larger ones), sends a ping and waits for its pong, asks `whoami` (the
    websocket-peer.py server answers with the request's path and fields), closes with 1000, waits
    for the server's close, ends its side of the stream and waits for the server's END_STREAM.

server-closes
    Sends `close-me` (the server closes with 1000 "bye"), answers the close, and reports how the
    stream ended.

refused
    Expects no 200: prints the status, the body and the fields of the answer.
"""
import json
import socket
import sys

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, Pong, TextMessage

SIZES = [0, 1, 125, 126, 65535, 65536, 1024 * 1024]
STREAM = 1


class Client:
    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=60)
        self.h2 = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.h2.initiate_connection()
        self.flush()
        self.status = None
        self.headers = {}
        self.body = b""
        self.ended = False
        self.reset = None
        self.settings_seen = False
        self.ws = Connection(ConnectionType.CLIENT)
        self.messages = []
        self.partial = None
        self.pongs = 0
        self.close = None

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def pump(self, done):
        """Reads and handles frames until done() holds or the stream or connection ends."""
        while not done():
            if self.ended or self.reset is not None:
                return
            data = self.sock.recv(65536)
            if not data:
                return
            for event in self.h2.receive_data(data):
                self.handle(event)
            self.flush()

    def handle(self, event):
        if isinstance(event, h2.events.RemoteSettingsChanged):
            self.settings_seen = True
        elif isinstance(event, h2.events.ResponseReceived):
            self.headers = {name: value for name, value in event.headers}
            self.status = int(self.headers[":status"])
        elif isinstance(event, h2.events.DataReceived):
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if self.status == 200:
                if event.data and self.ws.state != ConnectionState.CLOSED:
                    self.ws.receive_data(event.data)
                    self.read_frames()
            else:
                self.body += event.data
        elif isinstance(event, h2.events.StreamEnded):
            self.ended = True
        elif isinstance(event, h2.events.StreamReset):
            self.reset = int(event.error_code)

    def read_frames(self):
        for event in self.ws.events():
            if isinstance(event, (TextMessage, BytesMessage)):
                self.partial = event.data if self.partial is None else self.partial + event.data
                if event.message_finished:
                    self.messages.append(self.partial)
                    self.partial = None
            elif isinstance(event, Ping):
                self.send(event.response())
            elif isinstance(event, Pong):
                self.pongs += 1
            elif isinstance(event, CloseConnection):
                self.close = (event.code, event.reason)

    def send(self, ws_event):
        data = self.ws.send(ws_event)
        while data:
            window = min(self.h2.local_flow_control_window(STREAM), self.h2.max_outbound_frame_size)
            if window <= 0:
                self.pump(lambda: self.h2.local_flow_control_window(STREAM) > 0)
                continue
            self.h2.send_data(STREAM, data[:window])
            data = data[window:]
            self.flush()

    def open(self, host, port, path, extra):
        self.pump(lambda: self.settings_seen)
        enabled = self.h2.remote_settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL, 0) == 1
        headers = [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"), (":path", path),
                   (":authority", f"{host}:{port}"), ("sec-websocket-version", "13"), ("sec-websocket-protocol", "chat.v1")]
        headers += [(name.lower(), value) for name, value in extra.items()]
        self.h2.send_headers(STREAM, headers, end_stream=False)
        self.flush()
        self.pump(lambda: self.status is not None)
        return enabled

    def next_message(self):
        self.pump(lambda: self.messages or self.close is not None)
        return self.messages.pop(0) if self.messages else None


def main():
    mode, host, port, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    extra = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    client = Client(host, port)
    report = {"enable_connect_protocol": client.open(host, port, path, extra), "status": client.status}
    report["headers"] = {name: value for name, value in client.headers.items() if not name.startswith(":")}
    if mode == "refused" or client.status != 200:
        client.pump(lambda: False)
        report["body"] = client.body.decode("utf-8", "replace")
        print(json.dumps(report), flush=True)
        return
    if mode == "echo":
        echoed = 0
        for size in SIZES:
            for message in ("t" * size, bytes(i % 251 for i in range(size))):
                client.send(TextMessage(data=message) if isinstance(message, str) else BytesMessage(data=message))
                if client.next_message() != message:
                    report["mismatch"] = {"size": size, "kind": type(message).__name__}
                    break
                echoed += 1
        report["echoed"] = echoed
        client.send(Ping(payload=b"are you there"))
        client.pump(lambda: client.pongs > 0)
        report["pong"] = client.pongs > 0
        client.send(TextMessage(data="whoami"))
        answer = client.next_message()
        report["whoami"] = json.loads(answer) if answer else None
        client.send(CloseConnection(code=1000, reason="done"))
    elif mode == "server-closes":
        client.send(TextMessage(data="close-me"))
    client.pump(lambda: client.close is not None)
    report["close"] = list(client.close) if client.close else None
    if mode == "server-closes" and client.close:
        client.send(CloseConnection(code=client.close[0]))
    # The client's side ends (unless the gateway reset the stream); the gateway ends its own once
    # the backend has closed.
    if client.reset is None:
        try:
            client.h2.end_stream(STREAM)
            client.flush()
        except h2.exceptions.StreamClosedError:
            pass
    client.pump(lambda: False)
    report["stream_ended"] = client.ended
    report["reset"] = client.reset
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
