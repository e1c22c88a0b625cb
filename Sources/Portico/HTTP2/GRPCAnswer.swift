import NIOCore
import NIOHTTP1

/// The gateway's own refusals as a gRPC client reads them: a gRPC call (`content-type:
/// application/grpc…` over HTTP/2) answered with 401, 429, 503… gets HTTP 200 with the matching
/// `grpc-status` and a `grpc-message` in its headers and no body, which the stream codec sends as
/// one HEADERS frame ending the stream: gRPC's Trailers-Only form (PROTOCOL-HTTP2.md). A gRPC
/// client reports the status instead of a bare "unexpected HTTP status".
enum GRPCAnswer {
    /// Whether the exchange is a gRPC call: HTTP/2 and a gRPC content type.
    static func isGRPC(_ head: HTTPRequestHead) -> Bool {
        guard head.version.major == 2, let type = head.headers.first(name: "content-type") else { return false }
        return type.utf8.count >= 16 && type.lowercased().hasPrefix("application/grpc")
    }

    /// gRPC's status code for a gateway answer's HTTP status (gRPC's HTTP-to-status mapping, with
    /// 429 as RESOURCE_EXHAUSTED, what a quota refusal means to a gRPC client).
    static func status(for code: UInt) -> Int {
        switch code {
        case 401: 16  // UNAUTHENTICATED
        case 403: 7  // PERMISSION_DENIED
        case 404: 12  // UNIMPLEMENTED
        case 408, 504: 4  // DEADLINE_EXCEEDED
        case 413, 429, 431: 8  // RESOURCE_EXHAUSTED
        case 502, 503: 14  // UNAVAILABLE
        case 400..<500: 13  // INTERNAL
        default: 2  // UNKNOWN
        }
    }

    /// `problem`'s answer in Trailers-Only form: the gateway's fields kept, the body dropped.
    static func head(replacing head: HTTPResponseHead, problemTitle: String) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        for (name, value) in head.headers where !["content-type", "content-length", "content-language"].contains(name.lowercased()) {
            headers.add(name: name, value: value)
        }
        headers.add(name: "content-type", value: "application/grpc")
        headers.add(name: "grpc-status", value: String(status(for: head.status.code)))
        headers.add(name: "grpc-message", value: percentEncoded(problemTitle))
        return HTTPResponseHead(version: head.version, status: .ok, headers: headers)
    }

    /// grpc-message's encoding: printable ASCII but `%` as is, everything else percent-encoded.
    static func percentEncoded(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            if byte >= 0x20 && byte <= 0x7E && byte != UInt8(ascii: "%") {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                encoded += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return encoded
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
