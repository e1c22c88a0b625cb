import NIOCore
import NIOHTTP1

/// A gateway answer that no backend gives: the service locator and its public key.
struct BuiltInResponse: Sendable {
    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    /// `nil` for a 304 and for HEAD.
    var body: ByteBuffer?
    /// The length `Content-Length` states (HEAD's is the body's it leaves out); `nil` for a 304.
    var contentLength: Int?
}
