#!/usr/bin/env python3
"""The backends and the load of bench/streams.sh: WebSocket and server-sent-event streams through
Portico, from the `websockets` package (PyPI, 15.x asyncio API) and raw asyncio HTTP/1.1.

server [--lifetime S]
    On 127.0.0.1, ephemeral ports, printed as "WS_PORT HTTP_PORT" on the first line:
    - a WebSocket echo server (every message sent back as it came; no compression, no pings);
    - an HTTP/1.1 server: a target whose path starts with /events answers a `text/event-stream`
      with one event ("data: ready") and then keeps the stream open, sending nothing more; any
      other target answers a small JSON body over keep-alive, after `hold` seconds when the query
      says `hold=S`.
    Runs until killed, or for --lifetime seconds (default 1,800), so that a leftover ends anyway.

memory --kind KIND --url URL --pid PID --upstream-port PORT [--count N] [--warm W] ...
    Opens W connections of KIND and keeps them, reads the gateway's resident set (VmRSS of PID) and
    the established connections to the backend's PORT, opens N more and reads both again, then
    prints one JSON line: the difference over N is one more connection's cost. KIND is one of
      websocket      a WebSocket handshake, then nothing (URL ws:// or wss://)
      events         an event stream: its head and first event read, then nothing
      idle           one request answered, then an idle keep-alive connection
      idle-upstream  the same, with the N requests all in flight at once (URL with ?hold=S, the
                     backend answering only after S seconds), so that the gateway opens one
                     upstream connection per request; they stay in its pool, idle
latency --gateway URL --direct URL --pid PID [--count N] [--messages M] [--senders S] [--rounds R]
    Opens N WebSocket connections through the gateway and N straight to the echo server, then
    times M 64-byte binary messages' round trips each way (S senders at once, each over its own
    share of the connections in turn), in R rounds alternating which path goes first. One JSON line.

report FILE
    The tables of the JSON lines in FILE, as bench/streams.sh prints them.

Every wait is bounded: a connection's opening and its answer by --open-timeout, a batch of
messages by --batch-timeout.
"""
import argparse
import asyncio
import json
import math
import os
import resource
import ssl
import time
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

# The kernel caps the listen backlog at net.core.somaxconn; asking for more costs nothing.
BACKLOG = 4096
# Connections being opened at once: enough to open a thousand in a second or two, few enough that
# the gateway's accept backlog (1,024) never overflows into SYN retries, which would take seconds.
PARALLEL_OPENS = 64
EVENT_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
FIRST_EVENT = b"data: ready\n\n"
PLAIN_BODY = b'{"ok":true}'
PLAIN_ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(PLAIN_BODY), PLAIN_BODY))
PAYLOAD = bytes(range(64))


# The backends.

async def echo(ws):
    try:
        async for message in ws:
            await ws.send(message)
    except ConnectionClosed:
        pass


async def http_connection(reader, writer):
    """One client connection of the HTTP backend: GET requests without bodies, kept alive."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
            parts = urlsplit(target)
            if parts.path.startswith("/events"):
                writer.write(EVENT_HEAD + b"%x\r\n%s\r\n" % (len(FIRST_EVENT), FIRST_EVENT))
                await writer.drain()
                # The stream stays open, silent, until the gateway closes it.
                while await reader.read(65536):
                    pass
                return
            hold = parse_qs(parts.query).get("hold")
            if hold:
                await asyncio.sleep(float(hold[0]))
            writer.write(PLAIN_ANSWER)
            await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, IndexError):
        pass
    finally:
        writer.close()


async def run_server(args):
    async with serve(echo, "127.0.0.1", 0, compression=None, ping_interval=None, max_size=1 << 20,
                     backlog=BACKLOG) as ws_server:
        http_server = await asyncio.start_server(http_connection, "127.0.0.1", 0, backlog=BACKLOG)
        async with http_server:
            print(ws_server.sockets[0].getsockname()[1], http_server.sockets[0].getsockname()[1], flush=True)
            await asyncio.sleep(args.lifetime)


# What the clients read of the processes.

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as stat:
        # Fields after the command's closing parenthesis, which may itself hold spaces.
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def established_to(port):
    """TCP connections on this machine in ESTABLISHED state whose remote port is `port`: those the
    gateway holds to the backend (no one else connects to it during a memory run)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) == port:
                        count += 1
        except FileNotFoundError:
            pass
    return count


# The client connections.

class HTTPStream:
    """A raw HTTP/1.1 connection that made one request and is kept open after its answer."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    async def close(self):
        self.writer.close()
        await self.writer.wait_closed()


async def open_websocket(url, context):
    extra = {"ssl": context} if context else {}
    # No compression and no keep-alive pings: an idle connection sends nothing, and an echo costs
    # the relay, not zlib.
    return await connect(url, proxy=None, compression=None, ping_interval=None, open_timeout=None,
                         close_timeout=2, max_size=1 << 20, **extra)


async def send_request(url, context):
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port, ssl=context)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    writer.write(f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept: */*\r\n\r\n".encode())
    await writer.drain()
    return HTTPStream(reader, writer)


async def read_answer(stream):
    head = (await stream.reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
    if not head.startswith("http/1.1 200"):
        raise RuntimeError(f"answer {head.splitlines()[0]!r}")
    length = next((int(line.split(":", 1)[1]) for line in head.splitlines() if line.startswith("content-length:")), None)
    if length is not None:
        await stream.reader.readexactly(length)
    elif "transfer-encoding: chunked" in head:
        await stream.reader.readuntil(b"0\r\n\r\n")  # the body is a dozen bytes: no chunk holds this
    else:
        raise RuntimeError("an answer without Content-Length or chunks")


async def read_event_stream(stream):
    head = (await stream.reader.readuntil(b"\r\n\r\n")).lower()
    if not head.startswith(b"http/1.1 200") or b"content-type: text/event-stream" not in head:
        raise RuntimeError(f"not an event stream: {head.splitlines()[0]!r}")
    event = await stream.reader.readuntil(b"\n\n")
    if FIRST_EVENT not in event:
        raise RuntimeError(f"first event {event!r}")


async def nothing(_):
    pass


# KIND: (how a connection is opened, what is awaited after that outside the limit on openings,
# how many are opened at once). Waiting for answers outside that limit lets idle-upstream's held
# requests all be in flight; idle's are opened one after another, so that its requests never
# overlap and the pool needs no more upstream connections for them.
KINDS = {
    "websocket": (open_websocket, nothing, PARALLEL_OPENS),
    "events": (send_request, read_event_stream, PARALLEL_OPENS),
    "idle": (send_request, read_answer, 1),
    "idle-upstream": (send_request, read_answer, PARALLEL_OPENS),
}


async def open_many(kind, url, count, context, timeout):
    """Opens `count` connections of `kind`; returns those that opened and the distinct errors."""
    opener, ready, parallel = KINDS[kind]
    gate = asyncio.Semaphore(parallel)

    async def one():
        async with gate:
            async with asyncio.timeout(timeout):
                connection = await opener(url, context)
            if parallel == 1:  # one after another, answers included
                return await answered(connection)
        return await answered(connection)

    async def answered(connection):
        try:
            async with asyncio.timeout(timeout):
                await ready(connection)
        except BaseException:
            await close_all([connection])
            raise
        return connection

    results = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    opened = [r for r in results if not isinstance(r, BaseException)]
    errors = sorted({f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)})
    return opened, errors


async def close_all(connections, timeout=10):
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
    except TimeoutError:
        pass  # the process is about to exit, which closes whatever is left


def client_context(ca):
    return ssl.create_default_context(cafile=ca) if ca else None


def raise_file_limit():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def run_memory(args):
    raise_file_limit()
    context = client_context(args.ca)
    # The warm-up connections stay open while the N are measured, so that the N do not land in
    # memory the warm-up freed: the difference is what N more connections cost. idle-upstream's
    # warm-up is plain idle connections, so that the pool has no spare upstream connections for
    # the held requests to reuse.
    warm_kind = "idle" if args.kind == "idle-upstream" else args.kind
    warm_url = args.url.split("?", 1)[0] if args.kind == "idle-upstream" else args.url
    warm, warm_errors = await open_many(warm_kind, warm_url, args.warm, context, args.open_timeout)
    await asyncio.sleep(args.settle)
    rss_before, upstream_before = rss_kib(args.pid), established_to(args.upstream_port)
    started = time.monotonic()
    opened, errors = await open_many(args.kind, args.url, args.count, context, args.open_timeout)
    open_seconds = time.monotonic() - started
    await asyncio.sleep(args.settle)
    rss_after, upstream_after = rss_kib(args.pid), established_to(args.upstream_port)
    result = {
        "test": "memory", "kind": args.kind, "count": args.count, "opened": len(opened), "warm": len(warm),
        "rss_before_kib": rss_before, "rss_after_kib": rss_after,
        "bytes_per_connection": (rss_after - rss_before) * 1024 / len(opened) if opened else None,
        "upstream_before": upstream_before, "upstream_after": upstream_after,
        "open_seconds": round(open_seconds, 2), "errors": (warm_errors + errors)[:5],
    }
    await close_all(warm + opened)
    print(json.dumps(result), flush=True)


def percentile(sorted_values, p):
    """Nearest-rank percentile of an already sorted list."""
    return sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)]


async def drive(connections, messages, senders, timeout):
    """Round trips of `messages` messages, `senders` at once, each sender over its own connections
    in turn; returns each round trip's nanoseconds."""
    senders = min(senders, len(connections))
    groups = [connections[i::senders] for i in range(senders)]
    shares = [messages // senders + (1 if i < messages % senders else 0) for i in range(senders)]

    async def sender(group, count):
        times = []
        for i in range(count):
            ws = group[i % len(group)]
            start = time.perf_counter_ns()
            await ws.send(PAYLOAD)
            answer = await ws.recv()
            times.append(time.perf_counter_ns() - start)
            if answer != PAYLOAD:
                raise RuntimeError("the echo differs from the message sent")
        return times

    async with asyncio.timeout(timeout):
        results = await asyncio.gather(*(sender(g, c) for g, c in zip(groups, shares)))
    return [t for times in results for t in times]


def summary(times):
    ordered = sorted(times)
    return {"messages": len(ordered), "p50_us": percentile(ordered, 50) / 1000, "p99_us": percentile(ordered, 99) / 1000,
            "mean_us": sum(ordered) / len(ordered) / 1000}


async def run_latency(args):
    raise_file_limit()
    paths = {"gateway": args.gateway, "direct": args.direct}
    contexts = {"gateway": client_context(args.ca), "direct": None}
    connections, errors = {}, []
    # Both sets stay open for the whole run, so each path is measured with its N connections (and
    # the other path's N) open, the echo server holding 2 N in both cases.
    for name in ("gateway", "direct"):
        connections[name], failed = await open_many("websocket", paths[name], args.count, contexts[name], args.open_timeout)
        errors += failed
        if len(connections[name]) < args.senders:
            raise SystemExit(f"latency: only {len(connections[name])} {name} connections opened: {errors[:5]}")
    # A first echo on every connection, not timed: buffers, the relay and the interpreter warm.
    for name in ("gateway", "direct"):
        await drive(connections[name], len(connections[name]), args.senders, args.batch_timeout)
    times = {"gateway": [], "direct": []}
    rounds = {"gateway": [], "direct": []}
    gateway_ticks = 0
    per_round = args.messages // args.rounds
    for number in range(args.rounds):
        # Alternating which goes first, so a drift of the machine's load touches both alike.
        for name in (("gateway", "direct") if number % 2 == 0 else ("direct", "gateway")):
            ticks = cpu_ticks(args.pid)
            batch = await drive(connections[name], per_round, args.senders, args.batch_timeout)
            if name == "gateway":
                gateway_ticks += cpu_ticks(args.pid) - ticks
            times[name] += batch
            rounds[name].append(summary(batch))
    result = {"test": "latency", "count": args.count, "senders": args.senders, "rounds": args.rounds,
              "opened": {name: len(c) for name, c in connections.items()}, "errors": errors[:5],
              "gateway": summary(times["gateway"]), "direct": summary(times["direct"]),
              "gateway_cpu_us_per_message": gateway_ticks / os.sysconf("SC_CLK_TCK") * 1e6 / len(times["gateway"]),
              "per_round": rounds}
    await close_all(connections["gateway"] + connections["direct"])
    print(json.dumps(result), flush=True)


# The report.

MEMORY_ROWS = [
    ("websocket", "WebSocket (client connection + its own upstream connection)"),
    ("events", "event stream (client connection + a pooled upstream connection, streaming)"),
    ("idle", "idle keep-alive connection (its request answered, no upstream connection held)"),
    ("idle-upstream", "idle keep-alive connection + an idle pooled upstream connection"),
]


def report(path):
    results = [json.loads(line) for line in open(path) if line.strip()]
    memory = {r["kind"]: r for r in results if r["test"] == "memory"}
    if memory:
        print()
        print("| idle connection kind | opened | upstream conns | RSS before → after | per connection |")
        print("|---|---|---|---|---|")
        for kind, label in MEMORY_ROWS:
            r = memory.get(kind)
            if not r:
                continue
            per = f"{r['bytes_per_connection'] / 1024:.1f} KiB" if r["bytes_per_connection"] is not None else "–"
            print(f"| {label} | {r['opened']:,} of {r['count']:,} | +{r['upstream_after'] - r['upstream_before']:,} | "
                  f"{r['rss_before_kib'] / 1024:.1f} → {r['rss_after_kib'] / 1024:.1f} MiB | {per} |")
        for r in memory.values():
            for error in r["errors"]:
                print(f"  {r['kind']}: {error}")
        floor = memory.get("idle-upstream", {}).get("bytes_per_connection")
        for kind, name in (("websocket", "WebSocket"), ("events", "event stream")):
            cost = memory.get(kind, {}).get("bytes_per_connection")
            if cost is not None and floor:
                verdict = "met" if cost <= floor else "not met"
                print(f"{name}: {cost / floor:.2f}× an idle connection plus its upstream connection "
                      f"(goal: at most 1×, {verdict})")
    for r in (r for r in results if r["test"] == "latency"):
        print()
        g, d = r["gateway"], r["direct"]
        print(f"| 64-byte WebSocket echo, {r['opened']['gateway']:,} connections open through the gateway and "
              f"{r['opened']['direct']:,} straight, {r['senders']} senders | messages | p50 | p99 | mean |")
        print("|---|---|---|---|---|")
        print(f"| straight to the echo server | {d['messages']:,} | {d['p50_us']:.0f} µs | {d['p99_us']:.0f} µs | {d['mean_us']:.0f} µs |")
        print(f"| through the gateway | {g['messages']:,} | {g['p50_us']:.0f} µs | {g['p99_us']:.0f} µs | {g['mean_us']:.0f} µs |")
        print(f"| **added by the gateway** | | **{g['p50_us'] - d['p50_us']:+.0f} µs** | **{g['p99_us'] - d['p99_us']:+.0f} µs** "
              f"| {g['mean_us'] - d['mean_us']:+.0f} µs |")
        added = [(gr["p50_us"] - dr["p50_us"], gr["p99_us"] - dr["p99_us"]) for gr, dr in zip(r["per_round"]["gateway"], r["per_round"]["direct"])]
        print("added per round (p50/p99): " + ", ".join(f"{a:+.0f}/{b:+.0f} µs" for a, b in added))
        print(f"gateway CPU per round trip (both directions relayed): {r['gateway_cpu_us_per_message']:.1f} µs")
        for error in r["errors"]:
            print(f"  latency: {error}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    modes = parser.add_subparsers(dest="mode", required=True)
    server = modes.add_parser("server")
    server.add_argument("--lifetime", type=float, default=1800)
    memory = modes.add_parser("memory")
    memory.add_argument("--kind", choices=sorted(KINDS), required=True)
    memory.add_argument("--url", required=True)
    memory.add_argument("--pid", type=int, required=True)
    memory.add_argument("--upstream-port", type=int, required=True)
    memory.add_argument("--count", type=int, default=1000)
    memory.add_argument("--warm", type=int, default=100)
    memory.add_argument("--settle", type=float, default=2, help="seconds between the last opening and the reading")
    latency = modes.add_parser("latency")
    latency.add_argument("--gateway", required=True)
    latency.add_argument("--direct", required=True)
    latency.add_argument("--pid", type=int, required=True)
    latency.add_argument("--count", type=int, default=1000)
    latency.add_argument("--messages", type=int, default=20000)
    latency.add_argument("--senders", type=int, default=50)
    latency.add_argument("--rounds", type=int, default=4)
    latency.add_argument("--batch-timeout", type=float, default=120)
    for mode in (memory, latency):
        mode.add_argument("--ca", help="the CA file of a TLS listener")
        mode.add_argument("--open-timeout", type=float, default=60)
    report_mode = modes.add_parser("report")
    report_mode.add_argument("file")
    args = parser.parse_args()
    if args.mode == "report":
        return report(args.file)
    asyncio.run({"server": run_server, "memory": run_memory, "latency": run_latency}[args.mode](args))


if __name__ == "__main__":
    main()
