import NIOCore
import NIOHTTP1

/// Answers requests the HTTP/1.1 decoder rejects, with a problem+json body, before the connection
/// closes.
///
/// It replaces NIO's `HTTPServerProtocolErrorHandler` (whose answer is an empty 400) so that an
/// oversized head gets 431 and every answer carries a request id and a stable problem type. Like
/// NIO's handler, it answers only when no response is under way, and it writes synchronously:
/// the decoder closes the channel right after reporting the error.
final class HTTPParserErrorHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private var hasUnterminatedResponse = false
    private let maxHeadBytes: Int
    private let maxHeaderCount: Int

    init(maxHeadBytes: Int, maxHeaderCount: Int) {
        self.maxHeadBytes = maxHeadBytes
        self.maxHeaderCount = maxHeaderCount
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        if !hasUnterminatedResponse {
            let problem: Problem
            switch parserError {
            case .headerOverflow:
                problem = .headTooLarge(
                    "The request head exceeds this gateway's limits (\(maxHeadBytes) bytes, \(maxHeaderCount) header fields).")
            case .invalidMethod:
                problem = .malformedRequest("The request method is not a valid HTTP token.")
            case .invalidURL:
                problem = .malformedRequest("The request target is not a valid URI.")
            case .invalidVersion:
                problem = .malformedRequest("The request line does not carry HTTP/1.0 or HTTP/1.1.")
            case .invalidContentLength, .unexpectedContentLength:
                problem = .malformedRequest("The Content-Length header is invalid.")
            case .invalidChunkSize:
                problem = .malformedRequest("The chunked transfer coding is invalid.")
            default:
                problem = .malformedRequest("The request is not valid HTTP/1.1 (\(parserError.debugDescription)).")
            }
            let requestID = RequestID.generate()
            let body = problem.body(requestID: requestID)
            context.write(wrapOutboundOut(.head(problem.head(requestID: requestID, contentLength: body.readableBytes))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head) where head.status.code < 200: break
        case .head: hasUnterminatedResponse = true
        case .body: break
        case .end: hasUnterminatedResponse = false
        }
        context.write(data, promise: promise)
    }
}
