/// The route table's index: every service's path template in a trie of segments, so that finding a
/// request's service costs one dictionary lookup per path segment, whatever the number of services.
///
/// The rule it answers is the one ``RouteTable/services`` states by its order: the first service
/// in that order whose template matches the path and whose host (if it names one) is the
/// request's. Each service is entered with its position in that order, its *rank*, and a lookup
/// returns the lowest rank among the services that match, so it cannot disagree with a scan of
/// the list.
///
/// A lookup follows the path down the trie one segment at a time, along the literal edge named by
/// the segment and along the `{version}` edge (any non-empty segment). A template holds at most
/// one `{version}`, so a path of `n` segments walks at most `n + 1` branches, each no longer than
/// the deepest template, and it never looks at a service whose template shares no prefix with the
/// path.
struct RouteTrie: Sendable {
    /// What one service matches; its rank is its position in the list given to ``init(_:)``.
    struct Entry {
        let template: PathTemplate
        /// Lowercased, like the request's host it is compared with.
        let host: String?
    }

    private struct Node: Sendable {
        /// Literal segment → child. Keyed by `Substring` so that a request's segment, a slice of its
        /// path, is looked up without being copied into a `String`.
        var literals: [Substring: Int] = [:]
        /// The `{version}` edge, taken by any non-empty segment.
        var version: Int?
        /// Ranks of the services whose template ends here and that name no host, lowest first.
        var hostFree: [Int] = []
        /// Ranks of the services whose template ends here, by the host they are bound to, lowest first.
        var byHost: [Substring: [Int]] = [:]
    }

    /// `nodes[0]` is the root (the template `/`). Indices rather than references keep the trie a
    /// plain immutable value, shared by every event loop without any synchronisation.
    private let nodes: [Node]

    /// - Parameter entries: the services in rank order: `entries[i]` has rank `i`.
    init(_ entries: [Entry]) {
        var nodes = [Node()]
        for (rank, entry) in entries.enumerated() {
            var index = 0
            for segment in entry.template.segments {
                switch segment {
                case .literal(let text):
                    if let child = nodes[index].literals[Substring(text)] {
                        index = child
                    } else {
                        nodes.append(Node())
                        nodes[index].literals[Substring(text)] = nodes.count - 1
                        index = nodes.count - 1
                    }
                case .version:
                    if let child = nodes[index].version {
                        index = child
                    } else {
                        nodes.append(Node())
                        nodes[index].version = nodes.count - 1
                        index = nodes.count - 1
                    }
                }
            }
            // Entries arrive in rank order, so every list stays sorted, lowest rank first.
            if let host = entry.host {
                nodes[index].byHost[Substring(host), default: []].append(rank)
            } else {
                nodes[index].hostFree.append(rank)
            }
        }
        self.nodes = nodes
    }

    /// What a lookup found: the winning service's rank and what its template matched.
    struct Found {
        let rank: Int
        let path: PathTemplate.Match
    }

    /// The lowest-ranked service whose template matches `path` (the request path without its
    /// query) and whose host, if it has one, is `host` (lowercased, without port).
    func match(path: Substring, host: Substring?) -> Found? {
        guard path.utf8.first == UInt8(ascii: "/") else { return nil }
        var best: Found?
        visit(0, rest: path, version: nil, host: host, best: &best)
        return best
    }

    /// Records the service ending at `index`, if any beats `best`, then follows the next segment of
    /// `rest` (empty, or starting with `/`, as in ``PathTemplate/match(_:)``).
    ///
    /// Recursion depth is bounded by the deepest template, not by the path: the walk stops where the
    /// trie has no edge for the segment.
    private func visit(_ index: Int, rest: Substring, version: Substring?, host: Substring?, best: inout Found?) {
        if let rank = lowestRank(at: index, host: host), best.map({ rank < $0.rank }) ?? true {
            best = Found(rank: rank, path: PathTemplate.Match(version: version, remainder: rest))
        }
        // The same segment split as PathTemplate.match: the text between this "/" and the next.
        guard !rest.isEmpty else { return }
        let (text, end) = PathTemplate.segment(after: rest)
        // Neither a literal segment nor `{version}` matches an empty one (`//`).
        guard !text.isEmpty else { return }
        let next = rest[end...]
        if let child = nodes[index].literals[text] {
            visit(child, rest: next, version: version, host: host, best: &best)
        }
        if let child = nodes[index].version {
            visit(child, rest: next, version: text, host: host, best: &best)
        }
    }

    /// The lowest rank among the services ending at `index` that accept `host`.
    private func lowestRank(at index: Int, host: Substring?) -> Int? {
        let hostFree = nodes[index].hostFree.first
        guard let host, !nodes[index].byHost.isEmpty, let bound = nodes[index].byHost[host]?.first else { return hostFree }
        return min(bound, hostFree ?? .max)
    }
}
