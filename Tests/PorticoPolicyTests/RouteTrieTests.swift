import Testing

@testable import PorticoPolicy

/// The route table answers from a trie; these tests hold it to the rule the ordered service list
/// states (the first service in order whose template and host match), checked by a plain scan.
@Suite("Route trie")
struct RouteTrieTests {
    /// The routing rule as a scan over the ordered routes (each service's template, and its
    /// versionless form): what the gateway did before the trie, kept here as the reference the trie
    /// must agree with.
    static func scan(
        _ routes: RouteTable, path: Substring, host: Substring?
    ) -> (service: String, version: Substring?, remainder: Substring)? {
        for route in routes.routes {
            let service = routes.services[route.service]
            if let wanted = service.policy.host, host.map({ $0 == wanted }) != true { continue }
            if let match = route.template.match(path) { return (service.name, match.version, match.remainder) }
        }
        return nil
    }

    static func service(_ name: String, _ path: String, host: String? = nil) -> ServicePolicy {
        ServicePolicy(
            name: name, path: path, host: host,
            versions: [1: VersionPolicy(handler: .proxy(ProxyPolicy(backend: "b")))], defaultVersion: .latest)
    }

    /// Templates that share prefixes, put a literal and `{version}` at the same place, bind hosts,
    /// and tie (same length, both with a version) so that the name order decides.
    static let table = RouteTable(
        services: [
            service("root", "/"),
            service("api", "/api"),
            service("apiVersioned", "/api/{version}"),
            service("quotes", "/api/{version}/quotes"),
            service("quotesV1", "/api/v1/quotes"),
            service("deep", "/api/deep"),
            service("deeper", "/api/deep/er/still"),
            service("versionFirst", "/{version}/x"),
            service("abc", "/a/b/c"),
            service("aVc", "/a/{version}/c"),
            service("Vbc", "/{version}/b/c"),
            service("abV", "/a/b/{version}"),
            service("encoded", "/a%20b/c%2Fd"),
            service("partnerApi", "/api", host: "partner.example"),
            service("partnerQuotes", "/api/{version}/quotes", host: "partner.example"),
            service("otherRoot", "/", host: "other.example"),
            service("otherAbc", "/a/b/c", host: "other.example"),
            service("otherVersionFirst", "/{version}/x", host: "other.example"),
            // The loader refuses duplicates; the table itself still orders them by name.
            service("dupB", "/dup"),
            service("dupA", "/dup"),
            service("dupHostB", "/dup", host: "partner.example"),
            service("dupHostA", "/dup", host: "partner.example"),
        ].sorted { $0.name < $1.name })  // as PolicySnapshot passes them

    static let words = ["", "api", "v1", "1", "quotes", "deep", "er", "still", "a", "b", "c", "x", "dup", "a%20b", "c%2Fd", "API"]
    static let fewerWords = ["", "api", "v1", "quotes", "a", "b", "c", "x"]

    /// Every path of up to three segments over ``words`` and of four over ``fewerWords``, with and
    /// without a trailing slash.
    static var paths: [String] {
        var paths = ["/", "//", "", "api", "x/api"]
        func extend(_ level: [String], _ words: [String]) -> [String] { level.flatMap { prefix in words.map { prefix + "/" + $0 } } }
        var level = [""]
        for _ in 0..<3 {
            level = extend(level, words)
            paths += level + level.map { $0 + "/" }
        }
        let four = extend(extend(extend(extend([""], fewerWords), fewerWords), fewerWords), fewerWords)
        return paths + four + four.map { $0 + "/" }
    }

    @Test("the trie agrees with a scan of the ordered services for every path and host")
    func agreesWithScan() {
        var checked = 0
        var disagreements: [String] = []
        for path in Self.paths {
            for host: Substring? in [nil, "partner.example", "other.example", "unknown.example", ""] {
                let found = Self.table.match(path: path[...], host: host).map { ($0.service.name, $0.path.version, $0.path.remainder) }
                let expected = Self.scan(Self.table, path: path[...], host: host)
                if found?.0 != expected?.service || found?.1 != expected?.version || found?.2 != expected?.remainder {
                    disagreements.append("\(path) \(host ?? "-"): trie \(String(describing: found)), scan \(String(describing: expected))")
                }
                checked += 1
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(20))")
        #expect(checked > 80_000)
    }

    @Test("segments end at a \"/\" byte, even where a combining mark follows it, in the trie and the scan alike")
    func splitsAtSlashBytes() throws {
        for path in ["/api/v1/quotes/\u{301}AAPL", "/api/v1/quotes/\u{301}", "/api/v2\u{301}/quotes"] {
            let found = Self.table.match(path: path[...], host: nil)
            let expected = Self.scan(Self.table, path: path[...], host: nil)
            #expect(found?.service.name == expected?.service, "\(path)")
            #expect(found?.path.remainder == expected?.remainder, "\(path)")
        }
        let combining = try #require(Self.table.match(path: "/api/v1/quotes/\u{301}AAPL", host: nil))
        #expect(combining.service.name == "quotesV1")
        #expect(combining.path.remainder == "/\u{301}AAPL")
        // A version segment may hold any text but "/": here "v2" and the mark.
        let marked = try #require(Self.table.match(path: "/api/v2\u{301}/quotes", host: nil))
        #expect(marked.service.name == "quotes")
        #expect(marked.path.version == "v2\u{301}")
        #expect(Self.table.match(path: "\u{301}/api", host: nil) == nil)
    }

    @Test(
        "literal segments are compared as bytes: a precomposed letter and the letter with a combining mark are two segments, in the trie and the scan alike"
    )
    func literalsAsBytes() throws {
        let table = RouteTable(services: [Self.service("precomposed", "/caf\u{E9}/menu"), Self.service("decomposed", "/cafe\u{301}/list")])
        for (path, service) in [
            ("/caf\u{E9}/menu", "precomposed"), ("/cafe\u{301}/list", "decomposed"), ("/cafe\u{301}/menu", nil),
            ("/caf\u{E9}/list", nil),
        ] as [(String, String?)] {
            #expect(table.match(path: path[...], host: nil)?.service.name == service, "\(path)")
            #expect(Self.scan(table, path: path[...], host: nil)?.service == service, "\(path)")
        }
        // Many literals under one node: each is found by its bytes among the others.
        let many = RouteTable(services: (0..<40).map { Self.service("s\($0)", "/\(String(repeating: "x", count: $0 % 7))\($0)/end") })
        for index in 0..<40 {
            let path = "/\(String(repeating: "x", count: index % 7))\(index)/end/more"
            let found = try #require(many.match(path: path[...], host: nil), "\(path)")
            #expect(found.service.name == "s\(index)")
            #expect(found.path.remainder == "/more")
        }
        #expect(many.match(path: "/x/end", host: nil) == nil)
    }

    @Test("a literal segment beats {version} at the same length, and a longer prefix beats both")
    func specificity() throws {
        let v1 = try #require(Self.table.match(path: "/api/v1/quotes/AAPL", host: nil))
        #expect(v1.service.name == "quotesV1")
        #expect(v1.path.version == nil)
        #expect(v1.path.remainder == "/AAPL")
        let v2 = try #require(Self.table.match(path: "/api/v2/quotes", host: nil))
        #expect(v2.service.name == "quotes")
        #expect(v2.path.version == "v2")
        #expect(v2.path.remainder == "")
        #expect(Self.table.match(path: "/api/v2/other", host: nil)?.service.name == "apiVersioned")
        #expect(Self.table.match(path: "/api/deep/er/still/here", host: nil)?.service.name == "deeper")
        #expect(Self.table.match(path: "/api/deep/er", host: nil)?.service.name == "deep")
        #expect(Self.table.match(path: "/api/deep/er", host: nil)?.path.remainder == "/er")
        // Four templates of three segments match /a/b/c/; the all-literal one wins over those with {version}.
        #expect(Self.table.match(path: "/a/b/c/", host: nil)?.service.name == "abc")
        #expect(Self.table.match(path: "/a/z/c", host: nil)?.service.name == "aVc")
        #expect(Self.table.match(path: "/dup", host: nil)?.service.name == "dupA")
    }

    @Test("host-bound services come before host-free ones of the same length, and only for their host")
    func hosts() {
        #expect(Self.table.match(path: "/api", host: "partner.example")?.service.name == "partnerApi")
        #expect(Self.table.match(path: "/api", host: "other.example")?.service.name == "api")
        #expect(Self.table.match(path: "/api/1/quotes", host: "partner.example")?.service.name == "partnerQuotes")
        // At the same length, host-bound wins even over a literal where it has {version}.
        #expect(Self.table.match(path: "/api/v1/quotes", host: "partner.example")?.service.name == "partnerQuotes")
        // Length comes first: a two-segment template, even with {version}, beats the one-segment host-bound one.
        #expect(Self.table.match(path: "/api/x", host: "partner.example")?.service.name == "apiVersioned")
        #expect(Self.table.match(path: "/api/x", host: "other.example")?.service.name == "otherVersionFirst")
        #expect(Self.table.match(path: "/nothing", host: "other.example")?.service.name == "otherRoot")
        #expect(Self.table.match(path: "/nothing", host: nil)?.service.name == "root")
        #expect(Self.table.match(path: "/dup", host: "partner.example")?.service.name == "dupHostA")
    }

    @Test("a trailing slash, an empty segment and a path that ends inside a template")
    func edges() throws {
        let trailing = try #require(Self.table.match(path: "/api/", host: nil))
        #expect(trailing.service.name == "api")
        #expect(trailing.path.remainder == "/")
        // `//` is an empty segment, which neither a literal nor {version} matches.
        #expect(Self.table.match(path: "/api//quotes", host: nil)?.service.name == "api")
        #expect(Self.table.match(path: "/api//quotes", host: nil)?.path.remainder == "//quotes")
        #expect(Self.table.match(path: "//x", host: nil)?.service.name == "root")
        // `/a/b` is `/a/b/{version}` without its version segment (versionless routes, below).
        #expect(Self.table.match(path: "/a/b", host: nil)?.service.name == "abV")
        #expect(Self.table.match(path: "/a", host: nil)?.service.name == "root")
        #expect(Self.table.match(path: "/a%20b/c%2Fd/e", host: nil)?.service.name == "encoded")
        #expect(Self.table.match(path: "relative", host: nil) == nil)
        #expect(Self.table.match(path: "", host: nil) == nil)
        let empty = RouteTable(services: [])
        #expect(empty.match(path: "/", host: nil) == nil)
    }

    @Test("a {version} template also matches without that segment, after every template of the same length")
    func versionless() throws {
        let quotes = try #require(Self.table.match(path: "/api/quotes/AAPL", host: nil))
        #expect(quotes.service.name == "quotes")
        #expect(quotes.versionless)
        #expect(quotes.path.version == nil)
        #expect(quotes.path.remainder == "/AAPL")
        // With its version the same service is matched through its own template.
        let versioned = try #require(Self.table.match(path: "/api/2/quotes/AAPL", host: nil))
        #expect(versioned.service.name == "quotes")
        #expect(!versioned.versionless)
        // `/api/deep` is a literal template of its own: it wins over `/api/{version}` without its version (`/api`).
        #expect(Self.table.match(path: "/api/deep", host: nil)?.service.name == "deep")
        // `/api/{version}` without its version is `/api`, which the literal service `api` holds.
        #expect(Self.table.match(path: "/api", host: nil)?.service.name == "api")
        #expect(Self.table.match(path: "/api", host: nil)?.versionless == false)
        // A host-bound versioned service is reachable without its version only on its host.
        #expect(Self.table.match(path: "/api/quotes", host: "partner.example")?.service.name == "partnerQuotes")
    }

    @Test("a policy of 500 services routes each request to its own service")
    func fiveHundredServices() throws {
        var yaml = """
            listeners:
              - { name: public, address: 127.0.0.1, port: 8080 }
            backends:
              b: { url: "http://127.0.0.1:18081" }
            services:

            """
        for index in 0..<500 {
            // Groups of ten share their first segment; every fifth is versioned, every seventh host-bound.
            let group = "g\(index / 10)"
            let path = index % 5 == 0 ? "/\(group)/{version}/s\(index)" : "/\(group)/s\(index)"
            let host = index % 7 == 0 ? ", host: h\(index).example" : ""
            yaml += "  s\(index): { path: \"\(path)\"\(host), versions: { 1: { proxy: { backend: b } } } }\n"
        }
        let routes = try PolicyLoader().load(sources: [(file: "many.yaml", text: yaml)]).routes
        #expect(routes.services.count == 500)
        for index in 0..<500 {
            let group = "g\(index / 10)"
            let path = index % 5 == 0 ? "/\(group)/v1/s\(index)/item" : "/\(group)/s\(index)/item"
            let host: Substring? = index % 7 == 0 ? Substring("h\(index).example") : nil
            let match = try #require(routes.match(path: path[...], host: host), "\(path)")
            #expect(match.service.name == "s\(index)")
            #expect(match.path.remainder == "/item")
            #expect(match.path.version == (index % 5 == 0 ? "v1" : nil))
            #expect(routes.match(path: path[...], host: "elsewhere.example")?.service.name == (host == nil ? "s\(index)" : nil))
            let expected = Self.scan(routes, path: path[...], host: host)
            #expect(expected?.service == "s\(index)")
        }
        #expect(routes.match(path: "/g3", host: nil) == nil)
        #expect(routes.match(path: "/g3/s999", host: nil) == nil)
    }
}
