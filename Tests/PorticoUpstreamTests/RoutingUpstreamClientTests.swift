import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import PorticoUpstream

@Suite("Routing between the NIO and libcurl clients")
struct RoutingUpstreamClientTests {
    /// Records which requests reached it and answers nothing.
    final class Recording: UpstreamClient {
        let urls = NIOLockedValueBox<[String]>([])
        let stopped = NIOLockedValueBox(false)

        struct Task: UpstreamTask {
            func cancel() {}
            func consumed(bytes: Int) {}
        }

        func execute(_ request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler) -> any UpstreamTask {
            urls.withLockedValue { $0.append(request.url) }
            return Task()
        }

        func shutdown() { stopped.withLockedValue { $0 = true } }
    }

    final class Ignoring: UpstreamResponseHandler {
        func upstreamReceived(_ events: UpstreamEvents) {}
    }

    @Test("a request goes where it says, or by its scheme: https through libcurl, http through NIO")
    func routes() throws {
        let nio = Recording()
        let curl = Recording()
        let client = RoutingUpstreamClient(nio: nio, curl: curl)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        var viaCurl = UpstreamRequest(method: "GET", url: "http://a/curl")
        viaCurl.client = .curl
        for request in [
            UpstreamRequest(method: "GET", url: "http://a/plain"), UpstreamRequest(method: "GET", url: "HTTPS://a/secure"), viaCurl,
        ] {
            _ = client.execute(request, eventLoop: loop, handler: Ignoring())
        }
        #expect(nio.urls.withLockedValue { $0 } == ["http://a/plain"])
        #expect(curl.urls.withLockedValue { $0 } == ["HTTPS://a/secure", "http://a/curl"])
        client.shutdown()
        #expect(nio.stopped.withLockedValue { $0 } && curl.stopped.withLockedValue { $0 })
    }

    @Test("URLs are split into origin, request target and authority")
    func origins() throws {
        let plain = try UpstreamOrigin.parse("http://127.0.0.1:8080/a/b?c=d#frag").get()
        #expect(plain.origin == UpstreamOrigin(host: "127.0.0.1", port: 8080))
        #expect(plain.requestTarget == "/a/b?c=d")
        #expect(plain.authority == "127.0.0.1:8080")
        let bare = try UpstreamOrigin.parse("HTTP://example.test").get()
        #expect(bare.origin == UpstreamOrigin(host: "example.test", port: 80))
        #expect(bare.requestTarget == "/")
        let query = try UpstreamOrigin.parse("http://example.test?x=1").get()
        #expect(query.requestTarget == "/?x=1")
        let v6 = try UpstreamOrigin.parse("http://[::1]:9/x").get()
        #expect(v6.origin == UpstreamOrigin(host: "::1", port: 9))
        #expect(v6.authority == "[::1]:9")
        let emptyPort = try UpstreamOrigin.parse("http://example.test:/x").get()
        #expect(emptyPort.origin == UpstreamOrigin(host: "example.test", port: 80))
        let bareV6 = try UpstreamOrigin.parse("http://[fe80::1]").get()
        #expect(bareV6.origin == UpstreamOrigin(host: "fe80::1", port: 80))
        let bad = [
            "https://example.test/", "ftp://x/", "http://", "http://user@host/", "http://host:99999/", "http://[::1/",
            "http://host:0/", "http://host:+80/", "http://host:8a/", "http://host:000080/", "http://:80/", "http://[::1]x/",
            "http://[]:80/",
        ]
        for bad in bad {
            guard case .failure(let error) = UpstreamOrigin.parse(bad) else {
                Issue.record("\(bad) should be refused")
                continue
            }
            #expect(error.kind == .invalidRequest)
        }
    }
}
