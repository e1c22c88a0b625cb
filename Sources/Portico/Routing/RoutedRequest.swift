import NIOHTTP1
import PorticoPolicy

/// Which service a request is for, and the path it is served by.
///
/// A class: later stages read it through the exchange several times per request, and a struct of
/// this many references would be copied, with a retain per field, at each read.
final class RoutedRequest {
    let service: CompiledService
    /// The service's compiled limits and versions.
    let rules: ServiceRules
    /// The version the service path's `{version}` segment names.
    let pathVersion: Substring?
    /// Every `apiVersion` query parameter's value, in order; usually none.
    let queryVersions: [Substring]
    /// The version the request names, from the service path's `{version}` segment or else the
    /// `apiVersion` query parameter; the version stage checks it, and that no other one differs.
    var requestedVersion: Substring? { pathVersion ?? queryVersions.first }
    /// Normalised path after the service prefix (empty or starting with `/`).
    let remainder: Substring
    /// The whole normalised path.
    let path: Substring
    let query: Substring?
    /// The path left out the service template's `{version}` segment (`/api/stockquote/AAPL`).
    let versionless: Bool

    init(
        service: CompiledService, rules: ServiceRules, pathVersion: Substring?, queryVersions: [Substring] = [], remainder: Substring,
        path: Substring, query: Substring?, versionless: Bool = false
    ) {
        self.service = service
        self.rules = rules
        self.pathVersion = pathVersion
        self.queryVersions = queryVersions
        self.remainder = remainder
        self.path = path
        self.query = query
        self.versionless = versionless
    }
}
