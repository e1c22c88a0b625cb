import NIOHTTP1

/// Answers about connections that stay open: a WebSocket handshake the gateway cannot pass on,
/// and a stream over its service's or its key's `maxUpgraded`.
extension Problem {
    /// 400 (426 for a version other than 13, with the version the gateway speaks, RFC 6455 §4.2.2).
    static func webSocketHandshake(_ error: WebSocketHandshake.RequestError) -> Problem {
        let detail: String
        switch error {
        case .notGET: detail = "A WebSocket handshake is a GET request (RFC 6455 §4.1)."
        case .notHTTP11: detail = "A WebSocket handshake over HTTP/1.x is an HTTP/1.1 request (RFC 6455 §4.1)."
        case .hasBody: detail = "A WebSocket handshake has no body."
        case .badKey: detail = "Sec-WebSocket-Key must be one base64 value of 16 bytes (RFC 6455 §4.1)."
        case .unsupportedVersion:
            var problem = Problem(
                type: typePrefix + "websocket-version", title: "WebSocket version not supported", status: .upgradeRequired,
                detail: "The gateway speaks WebSocket version 13 (RFC 6455); send Sec-WebSocket-Version: 13.")
            problem.headers = [("Sec-WebSocket-Version", "13")]
            return problem
        }
        return Problem(type: typePrefix + "websocket-handshake", title: "Invalid WebSocket handshake", status: .badRequest, detail: detail)
    }

    /// 502 naming the backend, when its `101` does not complete the client's handshake.
    static func webSocketAnswer(backend: String, reason: String) -> Problem {
        Problem(
            type: typePrefix + "backend-unavailable", title: "Backend unavailable", status: .badGateway,
            detail: "The backend \(backend) did not complete the WebSocket handshake: \(reason).", extensions: [("backend", backend)])
    }

    /// 429 when the service or the key holds as many streams as it may.
    static func tooManyStreams(_ refusal: OpenStreams.Refusal, service: String, tier: String?) -> Problem {
        let detail: String
        var extensions = [("service", service)]
        switch refusal {
        case .service(let limit):
            detail = "The service \(service) has \(limit) open streams, its limit (maxUpgraded); close one or retry later."
            extensions.append(("limit", "service"))
        case .key(let limit):
            detail = "This key has \(limit) open streams, its tier's limit (maxUpgraded); close one first."
            extensions.append(("limit", "tier"))
            if let tier { extensions.append(("tier", tier)) }
        }
        return Problem(
            type: typePrefix + "too-many-streams", title: "Too many open streams", status: .tooManyRequests, detail: detail,
            extensions: extensions)
    }

    /// 501 for an HTTP/2 extended CONNECT (RFC 8441) the route does not tunnel: a protocol other
    /// than `websocket`, or a service that does not take WebSocket connections (`websocket: true`
    /// on a proxied version).
    static func tunnelNotOffered(_ requested: String, service: String?) -> Problem {
        let detail =
            requested.lowercased() == "websocket"
            ? "The service \(service ?? "at this path") does not take WebSocket connections."
            : "The gateway tunnels only WebSocket over HTTP/2 (RFC 8441), not \(requested)."
        return Problem(
            type: typePrefix + "tunnel-not-offered", title: "Tunnel not offered", status: .notImplemented, detail: detail,
            extensions: [("protocol", requested)])
    }
}
