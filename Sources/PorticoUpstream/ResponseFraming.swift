import PorticoHTTP

/// How a backend's final response head delimits its body (RFC 9112 §6.3), once it is known to do so
/// unambiguously.
///
/// A head that could be read two ways is refused rather than guessed at: a gateway that reads a body
/// differently from the client behind it (or from the next hop) lets bytes of one response be taken
/// for another, which is how response splitting and desync attacks work. Refused are
/// `Content-Length` beside `Transfer-Encoding` (§6.3 ¶3: "ought to be handled as an error"),
/// `Content-Length` values that differ (several fields or a comma-separated list, RFC 9110 §8.6)
/// and values that are not plain decimal digits (libcurl reads `+5` as 5 and `0x5` as 0).
/// Repeated *identical* values are tolerated and read as one, as RFC 9110 §8.6 allows: some
/// frameworks repeat the field, and the value is not in doubt.
public struct ResponseFraming: Equatable, Sendable {
    /// Bodies declared this long or shorter are held back, head included, until the exchange ended
    /// cleanly with exactly the declared length; then head, body and end are shipped together.
    ///
    /// Until the head has been written to the client, a broken response can still become a clean
    /// 502; afterwards the gateway can only close the connection. Holding small bodies makes the
    /// common case deterministic (a short or overlong small body is always a 502, whatever the
    /// timing of the backend's writes) at the cost of buffering at most this much per exchange,
    /// which most answers fit in whole anyway. Larger bodies stream, so that a download is not
    /// buffered; their framing errors can only close the client's connection short of the length
    /// it was promised.
    static let heldBodyLimit = 64 * 1024

    /// Whether a response so framed is held back whole (see ``heldBodyLimit``).
    var isHeldBack: Bool {
        if case .length(let length) = body { return length <= Self.heldBodyLimit }
        return false
    }
    enum Body: Equatable, Sendable {
        /// No body follows, whatever the fields say: a response to HEAD, a 204 or a 304.
        case none
        /// Exactly this many bytes follow.
        case length(Int)
        /// The chunked transfer coding, as the final coding, delimits the body; the client decodes it.
        case transferCoded
        /// The body ends when the backend closes the connection: no length and no transfer coding,
        /// or a transfer coding whose final coding is not chunked.
        case untilClose
    }

    /// The `Content-Length` the head declared, checked. For a response to HEAD and for a 304 it
    /// describes the representation, not bytes that follow (RFC 9110 §8.6).
    var contentLength: Int?
    var body: Body

    /// Interim (1xx) heads one response may carry before its final head; a backend sending more is
    /// cut off rather than followed for ever.
    static let maxInterimResponses = 8

    /// What both clients do with an interim (1xx) head, the `count`th of its response.
    ///
    /// - `101 Switching Protocols` is refused: the gateway never asks to switch (it removes
    ///   `Upgrade` from requests), and what follows a 101 is the backend's raw bytes, which must
    ///   never reach a client as if they were an HTTP response.
    /// - `100 Continue`, `102 Processing`, `103 Early Hints` and any other 1xx are dropped: the
    ///   gateway has sent the whole request already (so `100` means nothing to it), and Early Hints
    ///   are not forwarded, since they would reach the client before the gateway's own checks of the
    ///   final answer and an HTTP/1.0 client cannot take them. The final head follows.
    /// - More than ``maxInterimResponses`` are refused.
    ///
    /// A refusal fails the exchange (the client gets 502) and the backend connection is discarded.
    static func interim(status: Int, count: Int) -> Result<Void, UpstreamError> {
        if status == 101 {
            return .failure(UpstreamError(.badResponse, detail: "the backend switched protocols (101), which was never asked for"))
        }
        if count > maxInterimResponses {
            return .failure(
                UpstreamError(.badResponse, detail: "the backend sent more than \(maxInterimResponses) interim (1xx) responses"))
        }
        return .success(())
    }

    /// Body bytes that arrive before a final head: what they are cannot be known, so the exchange
    /// fails (the client gets 502) and the connection is discarded.
    public static let bodyBeforeHead = UpstreamError(.badResponse, detail: "the backend sent body bytes before a final response head")

    /// A response head with a field that cannot be written to an HTTP/1.1 client as it is (a
    /// control byte in a value, a name that is not a token): the exchange fails (502) rather than
    /// pass it on.
    public static let unsendableHead = UpstreamError(
        .badResponse, detail: "the response head holds a field HTTP/1.1 cannot carry (a control byte, or a name that is not a token)")

    /// Reads the framing of a final (non-1xx) response head.
    /// - Parameters:
    ///   - status: the response's status code.
    ///   - headers: its fields, as received.
    ///   - requestIsHEAD: whether the request was HEAD (its answer has no body, RFC 9110 §9.3.2).
    /// - Returns: the framing, or the reason the head cannot be trusted to frame a body.
    static func of(
        status: Int, headers: some Sequence<(name: String, value: String)>, requestIsHEAD: Bool
    ) -> Result<Self, UpstreamError> {
        var fields = FieldReader()
        for (name, value) in headers {
            if let error = fields.read(name: name, value: value) { return .failure(error) }
        }
        return fields.framing(status: status, requestIsHEAD: requestIsHEAD)
    }

    /// The framing fields of one head, read field by field as they arrive, so that a reader that
    /// parses the head itself (``HTTP1ResponseDecoder``) judges each field as it makes it instead
    /// of walking the finished fields again. ``of(status:headers:requestIsHEAD:)`` is the same
    /// reading over a finished head.
    struct FieldReader {
        private var contentLength: Int?
        private(set) var hasTransferEncoding = false
        private var chunkedIsFinal = false

        /// Takes one field; an error when it makes the framing untrustworthy.
        mutating func read(name: String, value: String) -> UpstreamError? {
            switch name.utf8.count {
            case 14 where HeaderName.matches(name, "content-length"):
                // One field may carry a comma-separated list (RFC 9110 §5.3); every element counts.
                for element in value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                    guard let length = decimal(element) else {
                        return UpstreamError(.badResponse, detail: "backend sent an invalid Content-Length: \(value)")
                    }
                    if let error = read(contentLength: length) { return error }
                }
            case 17 where HeaderName.matches(name, "transfer-encoding"):
                hasTransferEncoding = true
                // The final coding is the last element of the last field (RFC 9112 §6.1).
                let last = value.split(separator: ",", omittingEmptySubsequences: false).last ?? ""
                chunkedIsFinal = HeaderName.matches(String(last.trimmingOptionalWhitespace()), "chunked")
            default:
                break
            }
            return nil
        }

        /// One `Content-Length` value, read: what ``read(name:value:)`` does with each element of
        /// the field, for a reader that found the field to be digits alone (as nearly every one is)
        /// and made no string of it.
        mutating func read(contentLength length: Int) -> UpstreamError? {
            if let earlier = contentLength, earlier != length {
                return UpstreamError(.badResponse, detail: "backend sent conflicting Content-Length values \(earlier) and \(length)")
            }
            contentLength = length
            return nil
        }

        /// The framing of a final (non-1xx) head whose fields were all read.
        func framing(status: Int, requestIsHEAD: Bool) -> Result<ResponseFraming, UpstreamError> {
            if hasTransferEncoding && contentLength != nil {
                return .failure(UpstreamError(.badResponse, detail: "backend sent both Content-Length and Transfer-Encoding"))
            }
            let body: Body
            if requestIsHEAD || status == 204 || status == 304 {
                body = .none
            } else if hasTransferEncoding {
                // RFC 9112 §6.3 ¶4: unless chunked is the final coding, the body ends by close.
                body = chunkedIsFinal ? .transferCoded : .untilClose
            } else if let contentLength {
                body = .length(contentLength)
            } else {
                body = .untilClose
            }
            return .success(ResponseFraming(contentLength: contentLength, body: body))
        }
    }

    /// One `Content-Length` element: `1*DIGIT` between optional whitespace; nil for anything else
    /// (empty, a sign, a hexadecimal prefix, more digits than any real body needs).
    static func decimal(_ element: Substring.UTF8View) -> Int? {
        let digits = Substring(element).trimmingOptionalWhitespace().utf8
        // 18 digits always fit an Int64, and no body comes near that.
        return DecimalDigits.value(of: digits, maxDigits: 18)
    }
}
