import Version

/// The active version map's part of the policy: the `clients` section, and each service's
/// `compatibility` buckets, `minimumClientVersion` and `missingClientVersion`, with the checks
/// `portico check` reports (overlapping buckets are errors, gaps are warnings, each naming the
/// exact versions concerned).
extension PolicyDocumentReader {
    func readClients(_ value: PolicyValue) -> ClientsPolicy? {
        guard let fields = value.fields(known: ["versionHeader", "platformHeader"]) else { return nil }
        var policy = ClientsPolicy()
        policy.versionHeader = fields.optional("versionHeader", default: policy.versionHeader, Self.headerName)
        policy.platformHeader = fields.optional("platformHeader", default: policy.platformHeader, Self.headerName)
        if policy.versionHeader.lowercased() == policy.platformHeader.lowercased(), let platform = fields["platformHeader"] {
            platform.error("must differ from versionHeader (\(policy.versionHeader))")
        }
        return policy
    }

    /// A header field name: visible ASCII without ':' (RFC 9110 §5.1 tokens are narrower still,
    /// but NIO would refuse to send the rest anyway).
    static func headerName(_ value: PolicyValue) -> String? {
        guard let header = value.nonEmptyString() else { return nil }
        guard header.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }) else {
            value.error("expected a header field name such as X-Client-Version, found \"\(header)\"")
            return nil
        }
        return header
    }

    /// The service's active-versioning keys; bucket versions must be among `versions`.
    func readActiveVersioning(
        _ fields: PolicyFields, versions: [Int: VersionPolicy], defaultVersion: DefaultVersion
    ) -> (buckets: [CompatibilityBucket], minimum: Version?, missing: MissingClientVersion) {
        let minimum = fields.optional("minimumClientVersion") { value -> Version? in
            guard let text = value.nonEmptyString() else { return nil }
            guard let version = ClientVersion.parse(text) else {
                value.error("expected a version such as 1.0.0, found \(value.describe())")
                return nil
            }
            return version
        }
        let missing = fields.optional("missingClientVersion", default: MissingClientVersion.default) {
            $0.oneOf(MissingClientVersion.allCases)
        }
        var buckets: [(bucket: CompatibilityBucket, value: PolicyValue)] = []
        if let list = fields.optional("compatibility", { $0.sequence() }) {
            for item in list {
                if let bucket = readBucket(item, versions: versions) { buckets.append((bucket, item)) }
            }
        }
        if let compatibility = fields["compatibility"], !buckets.isEmpty {
            let served: Int? =
                switch defaultVersion {
                case .latest: versions.keys.max()
                case .version(let number): number
                }
            checkBuckets(buckets, minimum: minimum, defaultVersion: served, at: compatibility)
        }
        return (buckets.map(\.bucket), minimum, missing)
    }

    private func readBucket(_ value: PolicyValue, versions: [Int: VersionPolicy]) -> CompatibilityBucket? {
        guard let fields = value.fields(known: ["clients", "platforms", "version"]) else { return nil }
        let range = fields.required("clients") { value -> VersionRange? in
            guard let text = value.nonEmptyString() else { return nil }
            switch VersionRange.parse(text) {
            case .success(let range): return range
            case .failure(let error):
                value.error("the range \"\(text)\" \(error.message)")
                return nil
            }
        }
        let platforms = fields.optional("platforms", default: []) { value -> [String]? in
            guard let items = value.sequence() else { return nil }
            if items.isEmpty { value.error("expected at least one platform (or no platforms key, for every platform)") }
            var names: [String] = []
            for item in items {
                guard let name = item.nonEmptyString()?.lowercased() else { continue }
                if names.contains(name) { item.error("platform \"\(name)\" is listed twice") }
                names.append(name)
            }
            return names
        }
        let version = fields.required("version") { value -> Int? in
            guard let text = value.string(), let number = Int(text.hasPrefix("v") ? String(text.dropFirst()) : text) else {
                value.error("expected one of this service's versions, found \(value.describe())")
                return nil
            }
            guard versions[number] != nil else {
                let known = versions.keys.sorted().map(String.init).joined(separator: ", ")
                value.error("version \(number) is not one of this service's versions (\(known))")
                return nil
            }
            return number
        }
        guard let range, let version else { return nil }
        return CompatibilityBucket(clients: range, platforms: platforms, version: version)
    }

    /// Overlaps within each set of buckets that apply together (those for every platform, and each
    /// platform's own) are errors; gaps among the buckets for every platform are warnings, since
    /// the versions in a gap get the default version, which may be what the operator wants.
    private func checkBuckets(
        _ buckets: [(bucket: CompatibilityBucket, value: PolicyValue)], minimum: Version?, defaultVersion: Int?, at list: PolicyValue
    ) {
        let indexed = buckets.map { (index: Int($0.value.path.last ?? "") ?? 0, bucket: $0.bucket, value: $0.value) }
        let everyPlatform = indexed.filter { $0.bucket.platforms.isEmpty }
        reportOverlaps(everyPlatform, platform: nil)
        let platforms = Set(indexed.flatMap(\.bucket.platforms)).sorted()
        for platform in platforms {
            reportOverlaps(indexed.filter { $0.bucket.platforms.contains(platform) }, platform: platform)
        }
        if let minimum {
            for entry in indexed {
                guard let upper = entry.bucket.clients.upper, upper <= .below(minimum) else { continue }
                entry.value.warning(
                    "bucket \(entry.index) (\(entry.bucket.clients)) holds only versions below minimumClientVersion \(ClientVersion.describe(minimum)), which get 426"
                )
            }
        }
        guard !everyPlatform.isEmpty else { return }
        let served = defaultVersion.map { "the default version \($0)" } ?? "the default version"
        for gap in gaps(in: everyPlatform.map(\.bucket.clients), from: minimum.map { .below($0) }) {
            list.warning("versions \(gap) are in no bucket; they get \(served)")
        }
    }

    private func reportOverlaps(_ entries: [(index: Int, bucket: CompatibilityBucket, value: PolicyValue)], platform: String?) {
        for (position, later) in entries.enumerated() {
            for earlier in entries[..<position] {
                guard let common = earlier.bucket.clients.intersection(later.bucket.clients) else { continue }
                // A pair of platform buckets is reported once, at the first platform they share.
                if let platform, let first = Set(earlier.bucket.platforms).intersection(later.bucket.platforms).sorted().first,
                    first != platform
                {
                    continue
                }
                let scope = platform.map { " on platform \($0)" } ?? ""
                later.value.error(
                    "overlaps bucket \(earlier.index) (\(earlier.bucket.clients) → \(earlier.bucket.version))\(scope): versions \(common) are in both"
                )
            }
        }
    }

    /// The ranges of versions, from `start` (or the lowest version) up to the highest bucket, that
    /// no range holds. Versions above every bucket are not a gap: they get the default by design.
    private func gaps(in ranges: [VersionRange], from start: VersionRange.Cut?) -> [VersionRange] {
        let sorted = ranges.sorted { lhs, rhs in
            switch (lhs.lower, rhs.lower) {
            case (nil, nil): false
            case (nil, _): true
            case (_, nil): false
            case (let left?, let right?): left < right
            }
        }
        var result: [VersionRange] = []
        // Everything below `covered` is accounted for (held by a bucket, or under the minimum).
        var covered: VersionRange.Cut? = start
        for range in sorted {
            if let lower = range.lower, covered.map({ $0 < lower }) ?? true {
                result.append(VersionRange(lower: covered, upper: lower))
            }
            guard let upper = range.upper else { break }
            if covered.map({ $0 < upper }) ?? true { covered = upper }
        }
        return result
    }
}
