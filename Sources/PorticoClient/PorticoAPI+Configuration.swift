import Foundation

extension PorticoAPI {
    /// What a façade may do on its own; the defaults suit an app.
    public struct Configuration: Sendable {
        /// The longest `Retry-After` (429, 503) an idempotent request is retried after, once.
        /// Longer waits are the app's decision: the error carries ``PorticoAPIError/retryAfter``.
        public var maximumRetryDelay: Duration = .seconds(2)
        /// How many GET answers the cache keeps, at most.
        public var cacheEntryLimit = 64
        /// How many bytes (bodies and fields) the cache keeps, at most; a larger answer is not kept.
        public var cacheByteLimit = 1 << 20
        /// How long a request may wait for its answer.
        public var timeout: TimeInterval = 30
        /// Header fields covered by the signature whenever a request carries them, beside the
        /// identity fields, `Content-Digest`, `Content-Type` and the credentials' fields.
        public var coveredFields: [String] = []
        /// How the service locator is cached and refreshed.
        public var locator = ServiceLocatorClient.Configuration()

        public init() {}
    }
}
