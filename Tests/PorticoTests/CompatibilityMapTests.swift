import PorticoPolicy
import Testing
import Version

@testable import Portico

/// The compiled bucket search (binary, over sorted arrays) against the plain reading of the
/// policy: the first bucket whose range holds the version, the platform's own buckets first.
@Suite("Compatibility map")
struct CompatibilityMapTests {
    /// What the map must answer, by a linear scan of the buckets as the policy lists them.
    static func reference(_ buckets: [CompatibilityBucket], version: SemanticVersion, platform: String?) -> Int? {
        if let platform, let own = buckets.first(where: { $0.platforms.contains(platform) && $0.clients.contains(version) }) {
            return own.version
        }
        return buckets.first { $0.platforms.isEmpty && $0.clients.contains(version) }?.version
    }

    /// Versions around every bound the buckets use, pre-releases of them included.
    static func probes(_ buckets: [CompatibilityBucket]) -> [SemanticVersion] {
        var probes: [SemanticVersion] = [Version(0, 0, 0), Version(0, 0, 0, pre: ["0"]), Version(100, 0, 0)]
        for bucket in buckets {
            for cut in [bucket.clients.lower, bucket.clients.upper].compactMap({ $0 }) {
                let bound: SemanticVersion =
                    switch cut {
                    case .below(let version), .above(let version): version
                    }
                probes += [
                    bound, Version(bound.major, bound.minor, bound.patch),
                    Version(bound.major, bound.minor, bound.patch, pre: ["rc", "1"]),
                    Version(bound.major, bound.minor, bound.patch + 1), Version(bound.major, bound.minor + 1, 0),
                    Version(bound.major, max(bound.minor, 1) - 1, 99),
                ]
            }
        }
        return probes
    }

    /// Disjoint random ranges over small versions, some for every platform, some per platform.
    static func randomBuckets(using generator: inout some RandomNumberGenerator) -> [CompatibilityBucket] {
        var buckets: [CompatibilityBucket] = []
        for platforms in [[], ["ipad"], ["android", "web"]] as [[String]] {
            // Strictly increasing cuts, paired into disjoint ranges, some open-ended.
            var versions: [SemanticVersion] = []
            var major = 0
            for _ in 0..<Int.random(in: 0...8, using: &generator) {
                major += Int.random(in: 0...2, using: &generator)
                let minor = Int.random(in: 0...3, using: &generator)
                let pre: [String] = Bool.random(using: &generator) ? [] : ["beta", String(Int.random(in: 1...3, using: &generator))]
                let next = Version(major, minor + 10 * versions.count, 0, pre: pre)
                versions.append(next)
            }
            var index = 0
            while index + 1 < versions.count {
                let lower: VersionRange.Cut? =
                    index == 0 && Bool.random(using: &generator)
                    ? nil : (Bool.random(using: &generator) ? .below(versions[index]) : .above(versions[index]))
                let upper: VersionRange.Cut? = Bool.random(using: &generator) ? .below(versions[index + 1]) : .above(versions[index + 1])
                let range = VersionRange(lower: lower, upper: upper)
                if !range.isEmpty {
                    buckets.append(
                        CompatibilityBucket(clients: range, platforms: platforms, version: Int.random(in: 1...5, using: &generator)))
                }
                index += 2 + Int.random(in: 0...1, using: &generator)
            }
            if let last = versions.last, Bool.random(using: &generator), index < versions.count {
                buckets.append(
                    CompatibilityBucket(clients: VersionRange(lower: .above(last), upper: nil), platforms: platforms, version: 9))
            }
        }
        return buckets.shuffled(using: &generator)
    }

    @Test("the binary search agrees with a scan of the buckets, for random disjoint buckets and versions at every bound")
    func agreesWithScan() {
        var generator = SystemRandomNumberGenerator()
        var checked = 0
        for _ in 0..<300 {
            let buckets = Self.randomBuckets(using: &generator)
            let map = CompatibilityMap(buckets)
            for version in Self.probes(buckets) {
                for platform in [nil, "ipad", "android", "web", "iphone"] {
                    let expected = Self.reference(buckets, version: version, platform: platform)
                    let found = map.apiVersion(for: version, platform: platform.map { Substring($0) })
                    #expect(
                        found == expected,
                        "\(buckets.map { "\($0.platforms) \($0.clients) → \($0.version)" }) \(version) \(platform ?? "-")")
                    checked += 1
                }
            }
        }
        #expect(checked > 10_000)
    }

    @Test("bucket ranges are read as the policy writes them")
    func rangesFromText() throws {
        func range(_ text: String) throws -> VersionRange { try VersionRange.parse(text).get() }
        #expect(try range("<2.0.0").description == "<2.0.0")
        #expect(try range(">=2.0 <3.1").description == ">=2.0.0 <3.1.0")
        #expect(try range(">1.2.3 <=2").description == ">1.2.3 <=2.0.0")
        #expect(try range("=2.4.1").description == ">=2.4.1 <=2.4.1")
        #expect(try range("*").description == "*")
        #expect(try range(">=2.0.0-0").contains(Version(2, 0, 0, pre: ["beta", "1"])))
        #expect(try !range(">=2.0.0").contains(Version(2, 0, 0, pre: ["beta", "1"])))
        #expect(try range("<=2.0.0").contains(Version(2, 0, 0)))
        #expect(try !range(">2.0.0").contains(Version(2, 0, 0)))
        for broken in ["", "2.0 3.0", ">=2 >=3", "<2 <3", ">=3 <2", ">=2 <2", "~2.0", ">=x", ">= 2.0"] {
            #expect(throws: VersionRange.RangeError.self, "\(broken)") { try VersionRange.parse(broken).get() }
        }
    }
}
