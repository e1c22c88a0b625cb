import Foundation
import NIOHTTP1
import PorticoCrypto
import PorticoHTTP

/// The opening handshake of RFC 6455 §4, as a gateway between the two ends checks it: the client's
/// request before anything is sent to a backend, and the backend's `101` against that request
/// before the client is told anything (§4.1, the checks a client makes: a gateway that relayed a
/// wrong answer would join a client to a backend that did not agree to the same protocol).
struct WebSocketHandshake: Sendable, Equatable {
    /// The client's `Sec-WebSocket-Key`.
    let key: String
    /// The subprotocols the client offered (`Sec-WebSocket-Protocol`), in order.
    let protocols: [String]
    /// The extension names the client offered (`Sec-WebSocket-Extensions`), lowercased.
    let extensions: Set<String>

    /// Whether `head` asks to switch to WebSocket at all: `Upgrade: websocket` with `Connection:
    /// upgrade`. Only such requests take the WebSocket path; others go on as plain requests.
    static func isRequested(_ head: HTTPRequestHead) -> Bool {
        head.headers[canonicalForm: "upgrade"].contains { $0.lowercased() == "websocket" }
            && head.headers[canonicalForm: "connection"].contains { $0.lowercased() == "upgrade" }
    }

    /// Why a request that asks for WebSocket is not a valid opening handshake (§4.2.1).
    enum RequestError: Error, Equatable {
        case notGET
        case notHTTP11
        case hasBody
        case badKey
        /// §4.2.2: the answer is 426 with the version the server speaks.
        case unsupportedVersion
    }

    /// The handshake `head` opens, or why it cannot be one.
    static func request(_ head: HTTPRequestHead, hasBody: Bool) -> Result<WebSocketHandshake, RequestError> {
        guard head.method == .GET else { return .failure(.notGET) }
        guard head.version == .http1_1 else { return .failure(.notHTTP11) }
        guard !hasBody else { return .failure(.hasBody) }
        let keys = head.headers["sec-websocket-key"]
        guard keys.count == 1, let key = keys.first?[...].trimmingOptionalWhitespace(),
            let decoded = Data(base64Encoded: String(key)), decoded.count == 16
        else { return .failure(.badKey) }
        guard head.headers["sec-websocket-version"].map({ String($0[...].trimmingOptionalWhitespace()) }) == ["13"] else {
            return .failure(.unsupportedVersion)
        }
        let protocols = head.headers[canonicalForm: "sec-websocket-protocol"].map(String.init)
        let extensions = Set(head.headers[canonicalForm: "sec-websocket-extensions"].map(Self.extensionName))
        return .success(WebSocketHandshake(key: String(key), protocols: protocols, extensions: extensions))
    }

    /// The handshake an HTTP/2 stream's extended CONNECT opens (RFC 8441 §5): `Sec-WebSocket-Version:
    /// 13`, the offered subprotocols and extensions, and no key of the client's, since HTTP/2 has
    /// no `101` to prove: the gateway draws the key it sends the backend (`key`, 16 random bytes,
    /// as a client does) and checks the backend's accept against it.
    static func extendedConnect(_ head: HTTPRequestHead, key: String = randomKey()) -> Result<WebSocketHandshake, RequestError> {
        guard head.headers["sec-websocket-version"].map({ String($0[...].trimmingOptionalWhitespace()) }) == ["13"] else {
            return .failure(.unsupportedVersion)
        }
        let protocols = head.headers[canonicalForm: "sec-websocket-protocol"].map(String.init)
        let extensions = Set(head.headers[canonicalForm: "sec-websocket-extensions"].map(Self.extensionName))
        return .success(WebSocketHandshake(key: key, protocols: protocols, extensions: extensions))
    }

    /// A fresh `Sec-WebSocket-Key`: 16 random bytes in base64 (RFC 6455 §4.1, item 7).
    static func randomKey() -> String {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }).base64EncodedString()
    }

    /// The HTTP/1.1 request that opens the same WebSocket with the backend: `head` as a GET with this
    /// handshake's key (an extended CONNECT's head is a CONNECT without one).
    func backendHead(from head: HTTPRequestHead) -> HTTPRequestHead {
        var head = head
        head.method = .GET
        head.version = .http1_1
        head.headers.replaceOrAdd(name: "Sec-WebSocket-Key", value: key)
        return head
    }

    /// What `Sec-WebSocket-Accept` must hold for this key: base64 of the SHA-1 of the key and the
    /// protocol's GUID (§4.2.2, step 5.4).
    var expectedAccept: String {
        let digest = Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8).withUnsafeBytes(OpenSSLDigest.sha1) ?? []
        return Data(digest).base64EncodedString()
    }

    /// Why the backend's `101` does not complete this handshake, or `nil` when it does (§4.1, the
    /// client's checks 2 to 6).
    func problem(withAnswer headers: HTTPHeaders) -> String? {
        guard headers[canonicalForm: "upgrade"].contains(where: { $0.lowercased() == "websocket" }) else {
            return "its 101 does not say Upgrade: websocket"
        }
        guard headers[canonicalForm: "connection"].contains(where: { $0.lowercased() == "upgrade" }) else {
            return "its 101 does not say Connection: upgrade"
        }
        let accepts = headers["sec-websocket-accept"]
        guard accepts.count == 1, accepts[0][...].trimmingOptionalWhitespace() == expectedAccept else {
            return "its Sec-WebSocket-Accept does not match the request's key"
        }
        for name in headers[canonicalForm: "sec-websocket-extensions"].map(Self.extensionName) where !extensions.contains(name) {
            return "it chose the extension \(name), which the client did not offer"
        }
        let chosen = headers[canonicalForm: "sec-websocket-protocol"]
        guard chosen.count <= 1 else { return "it chose more than one subprotocol" }
        if let chosen = chosen.first, !protocols.contains(String(chosen)) {
            return "it chose the subprotocol \(chosen), which the client did not offer"
        }
        return nil
    }

    /// An extension offer's name, without its parameters (`permessage-deflate; client_max_window_bits`).
    private static func extensionName(_ offer: Substring) -> String {
        String(offer.prefix { $0 != ";" }.trimmingOptionalWhitespace()).lowercased()
    }
}
