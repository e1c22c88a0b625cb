import NIOCore

/// Sends each request through the NIO client, the libcurl client or the HTTP/2 client, as the
/// request says.
///
/// The gateway holds one ``UpstreamClient``; this one lets each backend choose (the policy's
/// `client: nio | curl`, or `protocol: h2 | h2c`). A request that names no client goes by its
/// URL's scheme: `https://` through libcurl, everything else through NIO, the fast path.
public final class RoutingUpstreamClient: UpstreamClient {
    public let nio: any UpstreamClient
    public let curl: any UpstreamClient
    public let http2: any UpstreamClient

    public init(nio: any UpstreamClient, curl: any UpstreamClient, http2: any UpstreamClient = HTTP2UpstreamClient()) {
        self.nio = nio
        self.curl = curl
        self.http2 = http2
    }

    public func execute(
        _ request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler
    ) -> any UpstreamTask {
        switch Self.kind(of: request) {
        case .nio: nio.execute(request, eventLoop: eventLoop, handler: handler)
        case .curl: curl.execute(request, eventLoop: eventLoop, handler: handler)
        case .http2: http2.execute(request, eventLoop: eventLoop, handler: handler)
        }
    }

    public func shutdown() {
        nio.shutdown()
        curl.shutdown()
        http2.shutdown()
    }

    /// The client `request` names, or the one its scheme calls for.
    static func kind(of request: UpstreamRequest) -> UpstreamClientKind {
        if let client = request.client { return client }
        let https = "https:".utf8
        let isHTTPS = request.url.utf8.prefix(https.count).elementsEqual(https) { byte, expected in
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte) == expected
        }
        return isHTTPS ? .curl : .nio
    }
}
