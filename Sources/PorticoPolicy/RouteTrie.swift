/// The route table's index: every service's path template in a trie of segments, so that finding a
/// request's service costs one binary search of a node's edges per path segment, whatever the
/// number of services.
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

    /// A node of the trie, as plain numbers: its literal edges are `edges[firstEdge ..< firstEdge +
    /// edgeCount]`, ordered by length, then bytes, for a binary search. Nothing in it is a
    /// reference, so reading a node during a lookup counts no references (a node holding a
    /// dictionary and two arrays cost a retain and a release of each, on every node visited).
    private struct Node: Sendable {
        var firstEdge = 0
        var edgeCount = 0
        /// The `{version}` edge, taken by any non-empty segment; -1 when there is none.
        var version = -1
        /// The lowest rank of the services whose template ends here and that name no host; -1 when none.
        var hostFree = -1
        /// Whether a host-bound service's template ends here (``byHost`` has the node).
        var hostBound = false
    }

    /// A literal edge: its segment's bytes are `segmentBytes[start ..< start + count]`.
    private struct Edge: Sendable {
        var start: Int
        var count: Int
        var child: Int
    }

    /// `nodes[0]` is the root (the template `/`). Indices rather than references keep the trie a
    /// plain immutable value, shared by every event loop without any synchronisation.
    private let nodes: [Node]
    private let edges: [Edge]
    /// Every literal segment's bytes, one after another.
    private let segmentBytes: [UInt8]
    /// For the nodes where host-bound templates end: the lowest rank by host (lowercased).
    private let byHost: [Int: [Substring: Int]]

    /// - Parameter entries: the services in rank order: `entries[i]` has rank `i`.
    init(_ entries: [Entry]) {
        // Built as a tree of dictionaries, then laid out flat.
        // Keyed by bytes: segments are compared as bytes (two spellings of one Unicode text are two
        // segments, as they are two URLs).
        var literals: [[[UInt8]: Int]] = [[:]]
        var versions = [-1]
        var hostFree = [-1]
        var byHost: [Int: [Substring: Int]] = [:]
        for (rank, entry) in entries.enumerated() {
            var index = 0
            for segment in entry.template.segments {
                switch segment {
                case .literal(let text):
                    let text = Array(text.utf8)
                    if let child = literals[index][text] {
                        index = child
                    } else {
                        literals.append([:])
                        versions.append(-1)
                        hostFree.append(-1)
                        literals[index][text] = literals.count - 1
                        index = literals.count - 1
                    }
                case .version:
                    if versions[index] >= 0 {
                        index = versions[index]
                    } else {
                        literals.append([:])
                        versions.append(-1)
                        hostFree.append(-1)
                        versions[index] = literals.count - 1
                        index = literals.count - 1
                    }
                }
            }
            // Entries arrive in rank order: the first to end here, for a host or for none, is the lowest.
            if let host = entry.host {
                if byHost[index]?[Substring(host)] == nil { byHost[index, default: [:]][Substring(host)] = rank }
            } else if hostFree[index] < 0 {
                hostFree[index] = rank
            }
        }
        var nodes: [Node] = []
        var edges: [Edge] = []
        var segmentBytes: [UInt8] = []
        for index in literals.indices {
            let ordered = literals[index].keys.sorted(by: Self.precedes)
            nodes.append(
                Node(
                    firstEdge: edges.count, edgeCount: ordered.count, version: versions[index], hostFree: hostFree[index],
                    hostBound: byHost[index] != nil))
            for bytes in ordered {
                edges.append(Edge(start: segmentBytes.count, count: bytes.count, child: literals[index][bytes]!))
                segmentBytes += bytes
            }
        }
        self.nodes = nodes
        self.edges = edges
        self.segmentBytes = segmentBytes
        self.byHost = byHost
    }

    /// The edges' order: shorter first, then by bytes.
    private static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count != b.count ? a.count < b.count : a.lexicographicallyPrecedes(b)
    }

    /// What a lookup found: the winning service's rank and what its template matched.
    struct Found {
        let rank: Int
        let path: PathTemplate.Match
    }

    /// The lowest-ranked service whose template matches `path` (the request path without its
    /// query) and whose host, if it has one, is `host` (lowercased, without port).
    ///
    /// Segments are compared as bytes, as ``PathTemplate/match(_:)`` compares them.
    func match(path: Substring, host: Substring?) -> Found? {
        guard path.utf8.first == UInt8(ascii: "/") else { return nil }
        var text = path
        let best = text.withUTF8 { bytes in
            nodes.withUnsafeBufferPointer { nodes in
                edges.withUnsafeBufferPointer { edges in
                    segmentBytes.withUnsafeBufferPointer { segmentBytes in
                        var walk = Walk(path: bytes, nodes: nodes, edges: edges, segmentBytes: segmentBytes, byHost: byHost, host: host)
                        walk.visit(0, at: 0, version: nil)
                        return walk.best
                    }
                }
            }
        }
        guard let best else { return nil }
        let utf8 = path.utf8
        func slice(_ range: Range<Int>) -> Substring {
            let start = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
            return Substring(utf8[start..<utf8.index(start, offsetBy: range.count)])
        }
        return Found(
            rank: best.rank, path: PathTemplate.Match(version: best.version.map(slice), remainder: slice(best.rest..<utf8.count)))
    }

    /// A lookup under way: the path's bytes and the trie's, read in place.
    private struct Walk {
        let path: UnsafeBufferPointer<UInt8>
        let nodes: UnsafeBufferPointer<Node>
        let edges: UnsafeBufferPointer<Edge>
        let segmentBytes: UnsafeBufferPointer<UInt8>
        let byHost: [Int: [Substring: Int]]
        let host: Substring?
        /// The best so far: its rank, its `{version}` segment's bytes and where the rest of the path starts.
        var best: (rank: Int, version: Range<Int>?, rest: Int)?

        /// Records the service ending at `index`, if any beats ``best``, then follows the segment
        /// that starts at `offset` (the path's end, or a `/`), as ``PathTemplate/match(_:)`` splits it.
        ///
        /// Recursion depth is bounded by the deepest template, not by the path: the walk stops
        /// where the trie has no edge for the segment.
        mutating func visit(_ index: Int, at offset: Int, version: Range<Int>?) {
            let node = nodes[index]
            if let rank = lowestRank(node, index), best.map({ rank < $0.rank }) ?? true {
                best = (rank, version, offset)
            }
            guard offset < path.count else { return }
            let start = offset + 1
            var end = start
            while end < path.count && path[end] != UInt8(ascii: "/") { end += 1 }
            // Neither a literal segment nor `{version}` matches an empty one (`//`).
            guard end > start else { return }
            if let child = literalChild(node, start..<end) { visit(child, at: end, version: version) }
            if node.version >= 0 { visit(node.version, at: end, version: start..<end) }
        }

        /// The child along the literal edge named by the path's bytes in `segment`, found by a
        /// binary search of the node's edges.
        private func literalChild(_ node: Node, _ segment: Range<Int>) -> Int? {
            var low = node.firstEdge
            var high = node.firstEdge + node.edgeCount
            while low < high {
                let middle = (low + high) / 2
                let edge = edges[middle]
                let order = compare(edge, segment)
                if order == 0 { return edge.child }
                if order < 0 { low = middle + 1 } else { high = middle }
            }
            return nil
        }

        /// Negative when `edge`'s segment comes before the path's `segment` in the edges' order,
        /// zero when they are the same bytes.
        private func compare(_ edge: Edge, _ segment: Range<Int>) -> Int {
            if edge.count != segment.count { return edge.count - segment.count }
            for offset in 0..<edge.count {
                let a = segmentBytes[edge.start + offset]
                let b = path[segment.lowerBound + offset]
                if a != b { return Int(a) - Int(b) }
            }
            return 0
        }

        /// The lowest rank among the services ending at `node` that accept ``host``.
        private func lowestRank(_ node: Node, _ index: Int) -> Int? {
            let hostFree = node.hostFree >= 0 ? node.hostFree : nil
            guard node.hostBound, let host, let bound = byHost[index]?[host] else { return hostFree }
            return min(bound, hostFree ?? .max)
        }
    }
}
