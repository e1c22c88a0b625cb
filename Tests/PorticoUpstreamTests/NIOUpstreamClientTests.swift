import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import PorticoDemoBackends
import PorticoTestSupport
import Testing

@testable import PorticoUpstream

@Suite("The NIO upstream client")
struct NIOUpstreamClientTests {
    let group = MultiThreadedEventLoopGroup.singleton

    static func json(_ outcome: ExchangeOutcome) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(outcome.text.utf8))) as? [String: Any] ?? [:]
    }

    static func headers(_ outcome: ExchangeOutcome) -> [String: String] {
        json(outcome)["headers"] as? [String: String] ?? [:]
    }

    @Test("methods, bodies, headers and query cross intact, framed by Content-Length only where a body is due")
    func roundTrip() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.echo)
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let base = "http://127.0.0.1:\(server.port)"

        let patch = try await Exchanges.run(
            client,
            UpstreamRequest(
                method: "PATCH", url: "\(base)/p/q?r=s&t=%20u", headers: [("X-One", "1"), ("Content-Type", "text/plain")],
                body: ByteBuffer(string: "payload")), on: loop)
        #expect(patch.succeeded)
        #expect(patch.head?.status == 200)
        #expect(patch.head?.headers.contains { $0.name.lowercased() == "content-type" && $0.value == "application/json" } == true)
        let echoed = Self.json(patch)
        #expect(echoed["method"] as? String == "PATCH")
        #expect(echoed["path"] as? String == "/p/q")
        #expect(echoed["query"] as? String == "r=s&t=%20u")
        #expect(echoed["body"] as? String == "payload")
        let patchHeaders = Self.headers(patch)
        #expect(patchHeaders["x-one"] == "1")
        #expect(patchHeaders["content-length"] == "7")
        #expect(patchHeaders["host"] == "127.0.0.1:\(server.port)")  // the URL's, as none was given
        #expect(patchHeaders["transfer-encoding"] == nil)
        #expect(patchHeaders["accept"] == nil)

        let get = try await Exchanges.run(
            client, UpstreamRequest(method: "GET", url: "\(base)/g", headers: [("Host", "api.test")]), on: loop)
        #expect(Self.headers(get)["host"] == "api.test")
        #expect(Self.headers(get)["content-length"] == nil)
        #expect(Self.headers(get)["transfer-encoding"] == nil)

        let post = try await Exchanges.run(client, UpstreamRequest(method: "POST", url: "\(base)/empty"), on: loop)
        #expect(Self.headers(post)["content-length"] == "0")

        // The caller's framing fields are never passed on: the client frames the body itself.
        let framed = try await Exchanges.run(
            client,
            UpstreamRequest(
                method: "PUT", url: "\(base)/f", headers: [("Content-Length", "99"), ("Transfer-Encoding", "chunked")],
                body: ByteBuffer(string: "abc")), on: loop)
        #expect(Self.json(framed)["body"] as? String == "abc")
        #expect(Self.headers(framed)["content-length"] == "3")
        #expect(Self.headers(framed)["transfer-encoding"] == nil)

        for method in ["DELETE", "OPTIONS"] {
            let outcome = try await Exchanges.run(client, UpstreamRequest(method: method, url: "\(base)/m"), on: loop)
            #expect(Self.json(outcome)["method"] as? String == method)
        }

        // HEAD: the decoder knows no body follows despite Content-Length, and the connection stays usable.
        let head = try await Exchanges.run(client, UpstreamRequest(method: "HEAD", url: "\(base)/h"), on: loop)
        #expect(head.succeeded)
        #expect(head.head?.status == 200)
        #expect(head.body.readableBytes == 0)
        let after = try await Exchanges.run(client, UpstreamRequest(method: "GET", url: "\(base)/after"), on: loop)
        #expect(Self.json(after)["path"] as? String == "/after")

        #expect(server.connectionsAccepted == 1)
        for outcome in [patch, get, post, framed, head, after] {
            #expect(outcome.offLoopDeliveries == 0)
            #expect(outcome.deliveriesAfterResult == 0)
        }
        try await server.shutdown()
    }

    @Test(
        "a method, target, field name or value HTTP/1.1 cannot carry is refused as invalidRequest before any connection; the next request goes"
    )
    func unsendableHeads() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.echo)
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let base = "http://127.0.0.1:\(server.port)"
        let unsendable: [(String, UpstreamRequest)] = [
            ("CR LF in a value", UpstreamRequest(method: "GET", url: "\(base)/a", headers: [("X-Claim", "1\r\nX-Admin: yes")])),
            ("a lone LF in a value", UpstreamRequest(method: "GET", url: "\(base)/a", headers: [("X-Claim", "1\nGET /b HTTP/1.1")])),
            ("NUL in a value", UpstreamRequest(method: "GET", url: "\(base)/a", headers: [("X-Claim", "a\u{0}b")])),
            ("a space in a name", UpstreamRequest(method: "GET", url: "\(base)/a", headers: [("X Claim", "1")])),
            ("a colon in a name", UpstreamRequest(method: "GET", url: "\(base)/a", headers: [("X-Claim:", "1")])),
            ("an empty name", UpstreamRequest(method: "GET", url: "\(base)/a", headers: [("", "1")])),
            ("a space in the target", UpstreamRequest(method: "GET", url: "\(base)/a b")),
            ("a quote in the target", UpstreamRequest(method: "GET", url: "\(base)/a\"b")),
            ("a method with a space", UpstreamRequest(method: "GET /x", url: "\(base)/a")),
        ]
        for (name, request) in unsendable {
            let outcome = try await Exchanges.run(client, request, on: loop)
            #expect(outcome.errorKind == .invalidRequest, "\(name)")
            #expect(outcome.head == nil, "\(name)")
        }
        #expect(server.requestsReceived == 0)
        // Tabs, obs-text and every sub-delimiter are fine.
        let fine = try await Exchanges.run(
            client,
            UpstreamRequest(method: "GET", url: "\(base)/a;b=c,d!$&'()*+@:~?q=%20", headers: [("X-Claim", "a\tb caf\u{E9}")]), on: loop)
        #expect(fine.head?.status == 200)
        #expect(Self.headers(fine)["x-claim"] == "a\tb caf\u{E9}", "\(Self.headers(fine))")
        #expect(server.requestsReceived == 1)
        try await server.shutdown()
    }

    @Test("sequential requests reuse one keep-alive connection")
    func keepAliveReuse() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.echo)
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        var newConnections = 0
        for index in 0..<200 {
            let outcome = try await Exchanges.run(
                client, UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/item/\(index)"), on: loop)
            #expect(outcome.head?.status == 200)
            newConnections += outcome.metrics?.newConnections ?? 0
        }
        #expect(server.requestsReceived == 200)
        #expect(server.connectionsAccepted == 1)
        #expect(newConnections == 1)
        try await server.shutdown()
    }

    @Test("requests beyond the cap wait in line for a connection of their event loop")
    func capWithQueue() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.echo)
        let client = NIOUpstreamClient(configuration: .init(maxConnectionsPerHost: 2))
        defer { client.shutdown() }
        let loop = group.next()
        let url = "http://127.0.0.1:\(server.port)/queued"
        // Started in one loop turn, so 48 of them find both connections busy.
        let (recorders, waiting) = try await loop.submit {
            let recorders = (0..<50).map { _ in
                let recorder = ExchangeRecorder(eventLoop: loop)
                recorder.task = client.execute(UpstreamRequest(method: "GET", url: url), eventLoop: loop, handler: recorder)
                return NIOLoopBound(recorder, eventLoop: loop)
            }
            return (recorders, client.statistics(for: url, on: loop)?.waiting ?? 0)
        }.get()
        #expect(waiting == 50)  // two connections are opening; nobody has one yet
        var outcomes: [ExchangeOutcome] = []
        for recorder in recorders { outcomes.append(try await Exchanges.finish(recorder, on: loop)) }
        #expect(outcomes.allSatisfy { $0.head?.status == 200 && $0.offLoopDeliveries == 0 })
        #expect(server.requestsReceived == 50)
        #expect(server.connectionsAccepted == 2)
        try await server.shutdown()
    }

    @Test("time spent waiting for a connection counts toward the timeout")
    func queuedRequestTimesOut() async throws {
        let backend = try await ScriptedBackend.start { _ in [] }
        let client = NIOUpstreamClient(configuration: .init(maxConnectionsPerHost: 1))
        defer { client.shutdown() }
        let loop = group.next()
        let url = "http://127.0.0.1:\(backend.port)/"
        let first = try await Exchanges.start(client, UpstreamRequest(method: "GET", url: url, timeout: .seconds(30)), on: loop)
        let second = try await Exchanges.run(client, UpstreamRequest(method: "GET", url: url, timeout: .milliseconds(100)), on: loop)
        #expect(second.errorKind == .timedOut)
        #expect(backend.requestsReceived <= 1)
        try await loop.submit {
            first.value.task?.cancel()
            first.value.done.succeed()  // a cancelled task delivers nothing, and the recorder goes now
        }.get()
        try await backend.shutdown()
    }

    @Test("a consumer that stops returning credit pauses the download instead of buffering it")
    func backPressure() async throws {
        let size = 64 * 1024 * 1024
        let server = try await BackendServer.start { _ in .stream(status: .ok, headers: HTTPHeaders(), totalBytes: size) }
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let recorder = try await Exchanges.start(
            // Only the credit decides when this download ends: no timeout a slow machine could reach.
            client, UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/big", timeout: .seconds(600)), on: loop
        ) {
            $0.keepBody = false
            $0.consumesImmediately = false
        }
        // Wait until delivery stalls: the same count over 20 polls in a row (or the attempts run out;
        // the bounds below hold either way, since they only cap what can have arrived).
        var last = -1
        var steady = 0
        await Exchanges.eventually {
            let now = (try? await loop.submit { recorder.value.bodyBytes }.get()) ?? 0
            steady = now == last && now > 0 ? steady + 1 : 0
            last = now
            return steady >= 20
        }
        let delivered = try await loop.submit { recorder.value.bodyBytes }.get()
        // Credit is 256 KiB; one read batch (4 reads of at most 64 KiB) may land before the pause.
        #expect(delivered > 0)
        #expect(delivered <= 256 * 1024 + 4 * 64 * 1024)
        // The backend is held back by TCP: socket buffers on both sides, not the whole body.
        #expect(server.streamedBytes < size / 2)

        // Return the credit: the download completes.
        try await loop.submit {
            let recorder = recorder.value
            recorder.consumesImmediately = true
            let amount = recorder.unconsumed
            recorder.unconsumed = 0
            recorder.task?.consumed(bytes: amount)
        }.get()
        let outcome = try await Exchanges.finish(recorder, on: loop)
        #expect(outcome.succeeded)
        #expect(try await loop.submit { recorder.value.bodyBytes }.get() == size)
        #expect(outcome.offLoopDeliveries == 0)
        try await server.shutdown()
    }

    @Test("a refused connection is connectFailed, a hanging backend is timedOut and its connection is closed")
    func failures() async throws {
        let closedPort = try RefusingPort.make()
        let hanging = try await ScriptedBackend.start { _ in [] }
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()

        let refused = try await Exchanges.run(client, UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(closedPort)/"), on: loop)
        #expect(refused.errorKind == .connectFailed)
        #expect(refused.head == nil)

        let timedOut = try await Exchanges.run(
            client, UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(hanging.port)/", timeout: .seconds(2)), on: loop)
        #expect(timedOut.errorKind == .timedOut)
        // A request that reached the backend had its connection closed. (On a starved machine the
        // timeout can come first, while connecting; that connection then lands in the pool unused.)
        if hanging.requestsReceived == 1 {
            #expect(await Exchanges.eventually { hanging.connectionsClosed == 1 })
        }

        let https = try await Exchanges.run(client, UpstreamRequest(method: "GET", url: "https://127.0.0.1:\(hanging.port)/"), on: loop)
        #expect(https.errorKind == .invalidRequest)
        #expect(hanging.connectionsAccepted == 1)
        try await hanging.shutdown()
    }

    @Test("cancelling closes the backend connection and delivers nothing more")
    func cancel() async throws {
        let backend = try await ScriptedBackend.start { _ in [] }
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let recorder = try await Exchanges.start(client, UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(backend.port)/"), on: loop)
        #expect(await Exchanges.eventually { backend.requestsReceived == 1 })
        try await loop.submit { recorder.value.task?.cancel() }.get()
        #expect(await Exchanges.eventually { backend.connectionsClosed == 1 })
        // Whatever the closing connection reported was handled on the loop by now.
        try await loop.submit {}.get()
        #expect(try await loop.submit { recorder.value.deliveries }.get() == 0)
        try await loop.submit { recorder.value.done.succeed() }.get()  // nothing else will, and the recorder goes now
        try await backend.shutdown()
    }

    @Test("a finished or cancelled exchange lets go of its handler, so a handler keeping its task makes no cycle")
    func releasesHandler() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.echo)
        let hanging = try await ScriptedBackend.start { _ in [] }
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        // Like the gateway's exchange, each recorder keeps its task; the test keeps only weak references.
        func start(_ url: String) async throws -> (recorder: WeakReference<ExchangeRecorder>, done: EventLoopFuture<Void>) {
            try await loop.submit {
                let recorder = ExchangeRecorder(eventLoop: loop)
                recorder.task = client.execute(UpstreamRequest(method: "GET", url: url), eventLoop: loop, handler: recorder)
                return (WeakReference(recorder), recorder.done.futureResult)
            }.get()
        }

        let finished = try await start("http://127.0.0.1:\(server.port)/")
        try await finished.done.get()
        #expect(try await loop.submit { finished.recorder.object == nil }.get(), "the finished exchange kept its handler")

        let cancelled = try await start("http://127.0.0.1:\(hanging.port)/")
        #expect(await Exchanges.eventually { hanging.requestsReceived == 1 })
        #expect(try await loop.submit { cancelled.recorder.object != nil }.get(), "the running exchange let its handler go")
        try await loop.submit {
            guard let recorder = cancelled.recorder.object else { return }
            recorder.task?.cancel()
            recorder.done.succeed()  // nothing else will: a cancelled task delivers nothing
        }.get()
        #expect(try await loop.submit { cancelled.recorder.object == nil }.get(), "the cancelled exchange kept its handler")
        try await hanging.shutdown()
    }

    @Test("a pooled connection the backend closed while idle is never handed out")
    func idleCloseByBackend() async throws {
        // Each response says nothing about closing, then the backend closes (its idle timeout, say).
        let backend = try await ScriptedBackend.start { _ in [.text("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), .close] }
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let url = "http://127.0.0.1:\(backend.port)/"
        let first = try await Exchanges.run(client, UpstreamRequest(method: "POST", url: url), on: loop)
        #expect(first.text == "ok")
        #expect(try await Exchanges.eventually { try await loop.submit { client.statistics(for: url, on: loop)?.idle == 0 }.get() })
        // Not even a POST (which is never retried) can meet the dead connection.
        let second = try await Exchanges.run(client, UpstreamRequest(method: "POST", url: url), on: loop)
        #expect(second.text == "ok")
        #expect(backend.connectionsAccepted == 2)
        try await backend.shutdown()
    }

    @Test("a reused connection that breaks before answering is retried once on a fresh one, for idempotent methods only")
    func staleConnectionRetry() async throws {
        // The backend answers the first request of a connection and drops the connection on the second,
        // as a server whose idle timeout fired just as the request arrived.
        let backend = try await ScriptedBackend.start { request in
            request.indexOnConnection == 1 ? [.text("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")] : [.close]
        }
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let url = "http://127.0.0.1:\(backend.port)/"
        #expect(try await Exchanges.run(client, UpstreamRequest(method: "GET", url: url), on: loop).text == "ok")
        let retried = try await Exchanges.run(client, UpstreamRequest(method: "GET", url: url), on: loop)
        #expect(retried.text == "ok")
        #expect(retried.metrics?.newConnections == 1)
        #expect(backend.connectionsAccepted == 2)
        #expect(backend.requestsReceived == 3)

        // A POST may have been processed: it is not sent twice, and fails.
        let post = try await Exchanges.run(client, UpstreamRequest(method: "POST", url: url), on: loop)
        #expect(post.errorKind == .badResponse)
        #expect(backend.requestsReceived == 4)
        try await backend.shutdown()
    }

    @Test("shutting down fails running and queued exchanges, and later ones, with .shutdown")
    func shutdown() async throws {
        let backend = try await ScriptedBackend.start { _ in [] }
        let client = NIOUpstreamClient(configuration: .init(maxConnectionsPerHost: 1))
        let loops = Array(group.makeIterator())
        let loop = loops[0]
        let other = loops.count > 1 ? loops[1] : loops[0]
        let running = loops.count > 1 ? 2 : 1  // one connection per loop
        let url = "http://127.0.0.1:\(backend.port)/"
        var recorders: [(NIOLoopBound<ExchangeRecorder>, any EventLoop)] = []
        for target in [loop, loop, loop, other] {
            // Only the shutdown may end these exchanges: no timeout a slow machine could reach first.
            let request = UpstreamRequest(method: "GET", url: url, timeout: .seconds(600))
            recorders.append((try await Exchanges.start(client, request, on: target), target))
        }
        #expect(await Exchanges.eventually { backend.requestsReceived == running })
        client.shutdown()
        for (recorder, target) in recorders {
            let outcome = try await Exchanges.finish(recorder, on: target)
            #expect(outcome.errorKind == .shutdown)
            #expect(outcome.offLoopDeliveries == 0)
        }
        let later = try await Exchanges.run(client, UpstreamRequest(method: "GET", url: url), on: loop)
        #expect(later.errorKind == .shutdown)
        #expect(await Exchanges.eventually { backend.connectionsClosed == running })
        try await backend.shutdown()
    }

    @Test("an exchange started from another thread is still delivered on its event loop")
    func deliveredOnTheCallersLoop() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.echo)
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let recorder = try await loop.submit { UncheckedBox(ExchangeRecorder(eventLoop: loop)) }.get()
        // Called off the loop: the client only stores the handler here, and calls it on the loop.
        let task = client.execute(
            UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/"), eventLoop: loop, handler: recorder.value)
        try await loop.submit { recorder.value.task = task }.get()
        let outcome = try await loop.flatSubmit { recorder.value.done.futureResult.map { recorder.value.outcome } }.get()
        #expect(outcome.succeeded)
        #expect(outcome.offLoopDeliveries == 0)
        try await server.shutdown()
    }
}

/// Carries a loop-bound object across threads where the test knows it will only be used on its loop.
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
