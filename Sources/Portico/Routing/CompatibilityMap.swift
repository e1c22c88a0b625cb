import PorticoPolicy
import Version

/// A service's compatibility buckets, compiled for lookup: app version (and platform) → API
/// version, in O(log n) per request.
///
/// The buckets that apply to every platform form one array, and each platform named by a bucket
/// has an array of its own; each array is sorted by lower bound, and the loader has made sure the
/// ranges in one array do not overlap. A lookup binary-searches the platform's array first (a
/// platform's own buckets take precedence), then the array for every platform. Built once per
/// policy snapshot; the request path only compares versions.
struct CompatibilityMap: Sendable {
    /// One bucket: versions above `lower` and below `upper` get `version`.
    struct Entry: Sendable {
        let lower: VersionRange.Cut?
        let upper: VersionRange.Cut?
        let version: Int
    }

    /// For every platform, sorted by lower bound (an absent lower bound first).
    let everyPlatform: [Entry]
    /// Platform (lowercase) → its own buckets, sorted likewise. Keyed by `Substring` so that a
    /// request's field value is looked up without being copied into a `String`.
    let byPlatform: [Substring: [Entry]]

    init(_ buckets: [CompatibilityBucket]) {
        func entries(_ buckets: [CompatibilityBucket]) -> [Entry] {
            buckets.map { Entry(lower: $0.clients.lower, upper: $0.clients.upper, version: $0.version) }.sorted { lhs, rhs in
                guard let right = rhs.lower else { return false }
                guard let left = lhs.lower else { return true }
                return left < right
            }
        }
        everyPlatform = entries(buckets.filter(\.platforms.isEmpty))
        var byPlatform: [Substring: [Entry]] = [:]
        for platform in Set(buckets.flatMap(\.platforms)) {
            byPlatform[Substring(platform)] = entries(buckets.filter { $0.platforms.contains(platform) })
        }
        self.byPlatform = byPlatform
    }

    var isEmpty: Bool { everyPlatform.isEmpty && byPlatform.isEmpty }

    /// The API version of the bucket holding `version` on `platform` (lowercase), or `nil` when no
    /// bucket does (the service's default then applies).
    func apiVersion(for version: Version, platform: Substring?) -> Int? {
        if let platform, let own = byPlatform[platform], let found = Self.search(own, for: version) { return found }
        return Self.search(everyPlatform, for: version)
    }

    /// The last entry whose lower bound admits `version` is the only one that can hold it, since
    /// entries do not overlap; it holds it if its upper bound does not admit it too.
    static func search(_ entries: [Entry], for version: Version) -> Int? {
        var low = 0
        var high = entries.count
        // Invariant: entries[..<low] admit `version` at their lower bound, entries[high...] do not.
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].lower?.admits(version) ?? true {
                low = middle + 1
            } else {
                high = middle
            }
        }
        guard low > 0 else { return nil }
        let candidate = entries[low - 1]
        if let upper = candidate.upper, upper.admits(version) { return nil }
        return candidate.version
    }
}
