import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One answer to a locator fetch.
public struct ServiceLocatorResponse: Sendable {
    public var status: Int
    /// Field names lowercased.
    public var headers: [String: String]
    public var body: Data

    public init(status: Int, headers: [String: String], body: Data) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// How the locator client fetches its document. ``URLSessionLocatorTransport`` is the real one;
/// an app with its own HTTP stack (or a test) supplies another.
public protocol ServiceLocatorTransport: Sendable {
    /// A GET of `url` with `headers`; throws only when no HTTP answer arrived.
    func get(_ url: URL, headers: [String: String]) async throws -> ServiceLocatorResponse
}

/// Fetches with `URLSession`, with its own cache turned off: the locator client keeps the document
/// and revalidates it with `If-None-Match` itself, so it must see the server's 304s.
public struct URLSessionLocatorTransport: ServiceLocatorTransport {
    private let transport: SenderLocatorTransport

    public init(session: URLSession? = nil, timeout: TimeInterval = 10) {
        transport = SenderLocatorTransport(sender: URLSessionSender(session: session ?? .porticoSession(trust: .system)), timeout: timeout)
    }

    public func get(_ url: URL, headers: [String: String]) async throws -> ServiceLocatorResponse {
        try await transport.get(url, headers: headers)
    }
}

/// Fetches the locator with a ``ServerTrust``, for an app that uses ``ServiceLocatorClient`` on its
/// own (a ``PorticoAPI`` given a trust already fetches its locator with it): on Apple platforms a
/// session whose delegate honours the trust, on Linux libcurl (see ``ServerTrust``).
public struct TrustingLocatorTransport: ServiceLocatorTransport {
    private let transport: SenderLocatorTransport

    public init(trust: ServerTrust, timeout: TimeInterval = 10) {
        transport = SenderLocatorTransport(sender: PorticoAPI.sender(session: nil, trust: trust), timeout: timeout)
    }

    public func get(_ url: URL, headers: [String: String]) async throws -> ServiceLocatorResponse {
        try await transport.get(url, headers: headers)
    }
}
