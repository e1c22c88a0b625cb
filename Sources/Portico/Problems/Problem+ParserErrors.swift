import NIOHTTP1

extension Problem {
    /// The answer to bytes NIO's HTTP/1.1 decoder refused: 431 for a head over the policy's limits,
    /// 400 otherwise, each saying what was wrong. Replaces NIO's `HTTPServerProtocolErrorHandler`,
    /// whose answer is an empty 400. Every one of them closes the connection: after a framing error
    /// nothing that follows can be trusted to start a request.
    static func parserError(_ error: HTTPParserError, maxHeadBytes: Int, maxHeaderCount: Int) -> Problem {
        switch error {
        case .headerOverflow:
            .headTooLarge("The request head exceeds this gateway's limits (\(maxHeadBytes) bytes, \(maxHeaderCount) header fields).")
        case .invalidMethod:
            .malformedRequest("The request method is not a valid HTTP token.")
        case .invalidURL:
            .malformedRequest("The request target is not a valid URI.")
        case .invalidVersion:
            .malformedRequest("The request line does not carry HTTP/1.0 or HTTP/1.1.")
        case .invalidContentLength, .unexpectedContentLength:
            .malformedRequest("The Content-Length header is invalid.")
        case .invalidChunkSize:
            .malformedRequest("The chunked transfer coding is invalid.")
        default:
            .malformedRequest("The request is not valid HTTP/1.1 (\(error.debugDescription)).")
        }
    }
}
