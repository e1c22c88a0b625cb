import Foundation
import NIOConcurrencyHelpers

/// The last problems the gateway answered, newest first, for the console: what was refused, when,
/// for which service, under which request id. Nothing from a request's body, fields or credentials.
///
/// A lock per problem answered: error answers are not the path a healthy gateway's requests take,
/// and a bounded ring keeps a flood of them cheap.
public final class RecentProblems: Sendable {
    public static let capacity = 50

    struct Entry: Encodable, Sendable {
        /// Formatted when read: an answer's path (a flood of 401s) only takes the clock.
        var time: Date
        var type: String
        var status: Int
        var service: String?
        var requestId: String

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(time.adminTimestamp, forKey: .time)
            try container.encode(type, forKey: .type)
            try container.encode(status, forKey: .status)
            try container.encodeIfPresent(service, forKey: .service)
            try container.encode(requestId, forKey: .requestId)
        }

        private enum CodingKeys: String, CodingKey { case time, type, status, service, requestId }
    }

    private let ring = NIOLockedValueBox<(entries: [Entry?], next: Int)>(([Entry?](repeating: nil, count: capacity), 0))
    private let now: @Sendable () -> Date

    public init(now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
    }

    func record(type: String, status: Int, service: String?, requestID: String) {
        let entry = Entry(time: now(), type: type, status: status, service: service, requestId: requestID)
        ring.withLockedValue { ring in
            ring.entries[ring.next] = entry
            ring.next = (ring.next + 1) % Self.capacity
        }
    }

    /// Newest first.
    var entries: [Entry] {
        ring.withLockedValue { ring in
            (0..<Self.capacity).compactMap { offset in ring.entries[(ring.next - 1 - offset + 2 * Self.capacity) % Self.capacity] }
        }
    }

}
