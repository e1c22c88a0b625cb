import Logging
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoTLS

/// One structured line per request, made from the ``Exchange`` when the response ends (or the
/// exchange is abandoned).
///
/// The fields are what an operator needs to follow a request: its id, what was asked, which
/// service/version/backend served it, the outcome, and where the time went. No header values and no
/// body are logged, so no credential reaches the log.
struct AccessRecord {
    let requestID: String
    let method: String
    let path: Substring
    let client: String?
    let started: NIODeadline
    /// `HTTP/1.1`, `HTTP/1.0` or `HTTP/2` (small strings: no allocation).
    var httpProtocol = "HTTP/1.1"
    var service: String?
    var version: Int?
    var backend: String?
    /// The facade source that served (or failed last), by its policy name.
    var source: String?
    /// The authenticated key id (never its secret).
    var keyID: String?
    /// The scheme that admitted the request, or whose problem refused it.
    var authScheme: String?
    /// Whom a bearer token speaks for: `<issuer>:<sub>` (never the token).
    var subject: String?
    /// `TLSv1.3` etc. on a TLS listener.
    var tlsVersion: String?
    /// The verified client certificate's subject (mTLS).
    var clientCertificate: String?
    var status: UInt = 0
    var bytesSent = 0
    var upstreamDuration: Duration?
    /// Connections the upstream client opened for this exchange (0 when it reused a pooled one).
    var upstreamConnects: Int?
    /// Why an exchange ended abnormally (for logs only; may name internal addresses).
    var failure: String?
    /// For a stream (a WebSocket connection): the bytes the client sent after the handshake
    /// (`bytes` are the backend's to the client), and how it ended.
    var bytesReceived: Int?
    var streamEnding: String?
    /// The backend's target that answered, when it has several (may name an internal address).
    var target: String?
    /// Attempts made, when the request was retried on another target.
    var attempts: Int?
    /// The request's trace and the gateway's server span, when the policy traces (sampled or not:
    /// the ids are what a backend's own logs and spans carry too).
    var traceID: Substring?
    var spanID: Substring?

    init(requestID: String, method: String, path: Substring, client: String?, started: NIODeadline) {
        self.requestID = requestID
        self.method = method
        self.path = path
        self.client = client
        self.started = started
    }

    /// The line of an exchange that has ended.
    init(_ exchange: Exchange) {
        self.init(
            requestID: exchange.requestID, method: exchange.head.method.wireName, path: exchange.path, client: exchange.client.address,
            started: exchange.started)
        httpProtocol = AccessRecord.protocolName(exchange.head.version)
        switch exchange.route {
        case .service(let routed): service = routed.service.name
        case .locator: service = "(locator)"
        case nil: break
        }
        version = exchange.version
        keyID = exchange.keyID
        authScheme = exchange.authScheme?.rawValue
        subject = exchange.subject
        tlsVersion = exchange.client.tls?.version
        clientCertificate = exchange.client.tls?.peerSubject
        let outcome = exchange.outcome
        backend = outcome.backend ?? exchange.destination?.proxyBackend?.name
        source = outcome.source
        status = outcome.status
        bytesSent = outcome.bytesSent
        upstreamDuration = outcome.upstreamDuration
        upstreamConnects = outcome.upstreamConnects
        failure = outcome.failure
        bytesReceived = outcome.bytesReceived
        streamEnding = outcome.streamEnding
        target = outcome.target
        attempts = outcome.attempts > 1 ? outcome.attempts : nil
        if let trace = exchange.trace {
            traceID = trace.fields.traceID
            spanID = trace.fields.spanID
        }
    }

    /// The protocol's name as the logs and metrics give it.
    static func protocolName(_ version: HTTPVersion) -> String {
        switch (version.major, version.minor) {
        case (2, _): "HTTP/2"
        case (1, 0): "HTTP/1.0"
        default: "HTTP/1.1"
        }
    }

    func write(to logger: Logger) {
        let total = NIODeadline.now() - started
        var metadata: Logger.Metadata = [
            "request_id": .string(requestID),
            "method": .string(method),
            "path": .string(String(path)),
            "protocol": .string(httpProtocol),
            "status": .stringConvertible(status),
            "bytes": .stringConvertible(bytesSent),
            "total_ms": .string(Self.milliseconds(total.nanoseconds)),
        ]
        if let client { metadata["client"] = .string(client) }
        if let service { metadata["service"] = .string(service) }
        if let version { metadata["version"] = .stringConvertible(version) }
        if let backend { metadata["backend"] = .string(backend) }
        if let source { metadata["source"] = .string(source) }
        if let keyID { metadata["key"] = .string(keyID) }
        if let authScheme { metadata["auth"] = .string(authScheme) }
        if let subject { metadata["subject"] = .string(subject) }
        if let tlsVersion { metadata["tls"] = .string(tlsVersion) }
        if let clientCertificate { metadata["client_cert"] = .string(clientCertificate) }
        if let upstreamDuration {
            metadata["upstream_ms"] = .string(Self.milliseconds(TimeAmount(upstreamDuration).nanoseconds))
        }
        if let upstreamConnects { metadata["upstream_connects"] = .stringConvertible(upstreamConnects) }
        if let target { metadata["target"] = .string(target) }
        if let attempts { metadata["upstream_attempts"] = .stringConvertible(attempts) }
        if let failure { metadata["failure"] = .string(failure) }
        if let bytesReceived { metadata["bytes_in"] = .stringConvertible(bytesReceived) }
        if let streamEnding { metadata["stream_end"] = .string(streamEnding) }
        if let traceID, let spanID {
            metadata["trace_id"] = .string(String(traceID))
            metadata["span_id"] = .string(String(spanID))
        }
        logger.info("access", metadata: metadata)
    }

    private static func milliseconds(_ nanoseconds: Int64) -> String {
        let micros = nanoseconds / 1000
        let fraction = String(micros % 1000)
        return "\(micros / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
    }
}
