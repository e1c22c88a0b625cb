import NIOConcurrencyHelpers

/// What each facade version's sources did since start, for the console: answers served by each
/// source, how many of them a fallback served, and how its shadow compared. (`/metrics` has the
/// shadow's comparisons gateway-wide, `portico_facade_shadow_total`.)
///
/// One lock per facade answer: a facade's request fetches and reforms a source's body, beside
/// which the lock costs nothing measurable.
public final class FacadeTallies: Sendable {
    struct Counts: Encodable, Sendable, Equatable {
        /// Answers served, by the source that served them.
        var served: [String: Int] = [:]
        /// Of those, answers a fallback served because the source before it failed.
        var fallbacksServed = 0
        /// Shadow comparisons: `agree`, `mismatch`, `shadow_failed`.
        var shadow: [String: Int] = [:]
    }

    private struct Key: Hashable {
        var service: String
        var version: Int
    }

    private let counts = NIOLockedValueBox<[Key: Counts]>([:])

    public init() {}

    func served(service: String, version: Int, source: String, byFallback: Bool) {
        counts.withLockedValue { counts in
            counts[Key(service: service, version: version), default: Counts()].served[source, default: 0] += 1
            if byFallback { counts[Key(service: service, version: version), default: Counts()].fallbacksServed += 1 }
        }
    }

    func shadowCompared(service: String, version: Int, result: String) {
        counts.withLockedValue { $0[Key(service: service, version: version), default: Counts()].shadow[result, default: 0] += 1 }
    }

    func counts(service: String, version: Int) -> Counts {
        counts.withLockedValue { $0[Key(service: service, version: version)] } ?? Counts()
    }
}
