import PorticoReform

/// A `facade` version: a contract held still over sources that may change.
///
/// The contract and each source's field mappings are the reformer's own value types
/// (``Contract``, ``FieldMapping``): they are pure data, and the policy says nothing about them
/// that the reformer does not also need.
public struct FacadePolicy: Sendable, Hashable {
    /// The request path after the service's prefix, with named segments (`/{symbol}`); a
    /// request's values for them (and its query parameters) fill each source's request template.
    /// `nil`: the facade takes no path segments.
    public var parameters: String?
    public var contract: Contract
    /// In the file's order.
    public var sources: [FacadeSourcePolicy]
    /// The source that serves; `nil` when the version aggregates.
    public var active: String?
    /// Tried in order when the active source fails (connection error, timeout, 5xx, a body that
    /// does not parse, a required field missing).
    public var fallback: [String] = []
    /// Fetched beside the active source and compared field by field; never seen by the client.
    public var shadow: String?
    /// Sources fetched in parallel and merged into one contract object, instead of `active`.
    public var aggregate: [String] = []
    /// Largest source body reformed; a larger one fails that source.
    public var maxBodyBytes: Int = 1024 * 1024

    public init(parameters: String?, contract: Contract, sources: [FacadeSourcePolicy], active: String?) {
        self.parameters = parameters
        self.contract = contract
        self.sources = sources
        self.active = active
    }

    public func source(_ name: String) -> FacadeSourcePolicy? { sources.first { $0.name == name } }
}

/// One backend a facade can fetch from, and how its answer is reformed.
public struct FacadeSourcePolicy: Sendable, Hashable {
    public var name: String
    public var backend: String
    /// The path and query sent, with `{name}` placeholders for the request's parameters, e.g.
    /// `/quotes.csv?s={symbol}`.
    public var request: String
    public var format: SourceFormat
    /// CSV only: whether the first line names the columns.
    public var header: Bool = false
    public var fields: [FieldMapping]

    public init(name: String, backend: String, request: String, format: SourceFormat, fields: [FieldMapping]) {
        self.name = name
        self.backend = backend
        self.request = request
        self.format = format
        self.fields = fields
    }

    /// The names between braces in ``request``, in order.
    public var placeholders: [String] { FacadeSourcePolicy.placeholders(in: request) }

    static func placeholders(in template: String) -> [String] {
        var names: [String] = []
        var rest = template[...]
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            names.append(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }
}

/// A `code` version: served by a handler written in Swift and registered with the gateway under
/// this name when it starts.
public struct CodeHandlerPolicy: Sendable, Hashable {
    public var name: String
    /// Backends the handler may call, by name (each call draws from that backend's limits).
    public var backends: [String] = []

    public init(name: String, backends: [String] = []) {
        self.name = name
        self.backends = backends
    }
}
