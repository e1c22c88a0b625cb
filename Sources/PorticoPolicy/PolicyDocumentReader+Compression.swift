extension PolicyDocumentReader {
    /// `compression: { algorithms: [br, gzip, zstd], minBytes, levels: { gzip: 6, br: 4, zstd: 3 }, types: [...] }`.
    func readCompression(_ value: PolicyValue) -> CompressionPolicy? {
        guard let fields = value.fields(known: ["algorithms", "minBytes", "levels", "types"]) else { return nil }
        var policy = CompressionPolicy()
        if let list = fields["algorithms"] {
            let items = list.sequence() ?? []
            if list.sequence() != nil && items.isEmpty { list.error("expected at least one of br, gzip, zstd") }
            var algorithms: [ContentCoding] = []
            for item in items {
                guard let coding = item.oneOf(ContentCoding.allCases) else { continue }
                if algorithms.contains(coding) { item.error("\(coding.rawValue) is listed twice") } else { algorithms.append(coding) }
            }
            if !algorithms.isEmpty { policy.algorithms = algorithms }
        }
        policy.minBytes = fields.optional("minBytes", default: policy.minBytes) { $0.byteCount(allowingZero: true) }
        policy.levels = fields.optional("levels", default: [:], readLevels)
        if let list = fields["types"], let items = list.sequence() {
            policy.types = items.compactMap { item -> String? in
                guard let text = item.nonEmptyString()?.lowercased() else { return nil }
                let parts = text.split(separator: "/", omittingEmptySubsequences: false)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                    item.error("expected a media type such as application/json, text/* or */*+json, found \"\(text)\"")
                    return nil
                }
                return text
            }
        }
        return policy
    }

    /// A service's `compression`: `false`, `true`, or `{ enabled, levels, minBytes }`.
    func readServiceCompression(_ value: PolicyValue) -> ServiceCompressionPolicy? {
        if value.isWord("true") { return ServiceCompressionPolicy() }
        if value.isWord("false") { return ServiceCompressionPolicy(enabled: false) }
        guard let fields = value.fields(known: ["enabled", "levels", "minBytes"]) else { return nil }
        return ServiceCompressionPolicy(
            enabled: fields.optional("enabled", default: true) { $0.bool() },
            levels: fields.optional("levels", default: [:], readLevels),
            minBytes: fields.optional("minBytes") { $0.byteCount(allowingZero: true) })
    }

    private func readLevels(_ value: PolicyValue) -> [ContentCoding: Int]? {
        guard let fields = value.fields(known: ContentCoding.allCases.map(\.rawValue)) else { return nil }
        var levels: [ContentCoding: Int] = [:]
        for coding in ContentCoding.allCases {
            if let level = fields.optional(coding.rawValue, { $0.int(in: coding.levels) }) { levels[coding] = level }
        }
        return levels
    }
}
