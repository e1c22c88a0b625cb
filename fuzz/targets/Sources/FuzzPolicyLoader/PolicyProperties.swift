import Foundation
import PorticoPolicy

/// What must hold for any policy the loader accepts.
enum PolicyProperties {
    /// Every compiled route can be matched against request paths of every shape (shorter than the
    /// service path, equal to it, longer, with the version segment missing or empty) without
    /// crashing, and a match only ever reports a remainder that is empty or starts with '/'.
    static func checkRoutes(_ snapshot: PolicySnapshot) {
        var paths: [String] = ["/", "//", "/api", "/api/1", "/api/1/stockquote/AAPL", "/echo/x?y=1"]
        for service in snapshot.routes.services {
            let path = service.policy.path
            paths.append(path)
            paths.append(path + "/")
            paths.append(path + "/rest/of/it")
            paths.append(path.replacingOccurrences(of: "{version}", with: "1"))
            paths.append(path.replacingOccurrences(of: "{version}", with: ""))
            // Every proper prefix that ends at a segment boundary.
            var prefix = ""
            for segment in path.split(separator: "/") {
                prefix += "/" + segment
                paths.append(prefix)
            }
        }
        for path in paths {
            for host: Substring? in [nil, "example.com"] {
                guard let match = snapshot.routes.match(path: path[...], host: host) else { continue }
                let remainder = match.path.remainder
                precondition(remainder.isEmpty || remainder.first == "/", "a route matched \(path) with the remainder \(remainder)")
            }
        }
    }
}
