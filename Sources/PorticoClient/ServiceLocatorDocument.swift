import Foundation

/// The service locator: every endpoint the gateway publishes, with its name, version, URL and
/// metadata, generated from the gateway's live policy.
///
/// Apps fetch it (through a CDN, typically) instead of compiling URLs in, so that an endpoint can
/// move without a new app release. The JSON it reads:
///
/// ```json
/// { "environment": "production",
///   "services": [
///     { "name": "stockQuote", "version": "2", "url": "https://api.example.com/api/2/stockquote",
///       "metadata": { "auth": "signature", "input": "application/json", "output": "application/json",
///                     "default": true, "minimumClientVersion": "1.0.0" },
///       "buckets": [ { "clients": ">=2.0.0" } ] } ] }
/// ```
///
/// `version` may be a string or an integer; `metadata` values may be strings, numbers or booleans
/// (read as their text); `buckets` is optional. Members this type does not know are ignored, so the
/// format can grow.
public struct ServiceLocatorDocument: Sendable, Hashable, Decodable {
    /// One published endpoint.
    public struct Endpoint: Sendable, Hashable, Decodable {
        public var name: String
        public var version: String
        public var url: URL
        public var metadata: [String: String]
        /// The compatibility buckets whose apps the gateway serves this version when they name none.
        public var buckets: [Bucket]

        /// App versions in `clients` (a range such as `>=2.0.0 <3.1.0`), on `platforms` (empty:
        /// every platform).
        public struct Bucket: Sendable, Hashable, Decodable {
            public var clients: String
            public var platforms: [String]

            public init(clients: String, platforms: [String] = []) {
                self.clients = clients
                self.platforms = platforms
            }

            private enum CodingKeys: String, CodingKey { case clients, platforms }

            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                clients = try container.decode(String.self, forKey: .clients)
                platforms = try container.decodeIfPresent([String].self, forKey: .platforms) ?? []
            }
        }

        public init(name: String, version: String, url: URL, metadata: [String: String] = [:], buckets: [Bucket] = []) {
            self.name = name
            self.version = version
            self.url = url
            self.metadata = metadata
            self.buckets = buckets
        }

        private enum CodingKeys: String, CodingKey {
            case name, version, url, metadata, buckets
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            if let number = try? container.decode(Int.self, forKey: .version) {
                version = String(number)
            } else {
                version = try container.decode(String.self, forKey: .version)
            }
            let text = try container.decode(String.self, forKey: .url)
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http",
                url.host != nil
            else {
                throw DecodingError.dataCorruptedError(
                    forKey: .url, in: container, debugDescription: "expected an absolute http(s) URL, found \(text)")
            }
            self.url = url
            let values = try container.decodeIfPresent([String: MetadataValue].self, forKey: .metadata) ?? [:]
            metadata = values.mapValues(\.text)
            buckets = try container.decodeIfPresent([Bucket].self, forKey: .buckets) ?? []
        }
    }

    public var services: [Endpoint]
    /// The environment the document was made for (`production`), when the gateway's policy names one.
    public var environment: String?

    public init(services: [Endpoint], environment: String? = nil) {
        self.services = services
        self.environment = environment
    }

    /// The endpoint of `service` at `version`, if published.
    public func endpoint(service: String, version: String) -> Endpoint? {
        services.first { $0.name == service && $0.version == version }
    }

    /// Reads a document, saying what is wrong with one that does not fit.
    public static func decode(_ data: Data) throws(ServiceLocatorError) -> ServiceLocatorDocument {
        do {
            return try JSONDecoder().decode(ServiceLocatorDocument.self, from: data)
        } catch let error as DecodingError {
            throw .invalidDocument(Self.describe(error))
        } catch {
            throw .invalidDocument("\(error)")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return keys.isEmpty ? "the document" : String(keys.drop { $0 == "." })
        }
        switch error {
        case .keyNotFound(let key, let context): return "\(path(context)): missing \"\(key.stringValue)\""
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return "\(path(context)): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }

    /// A metadata value: text, a number or a boolean, kept as text.
    private struct MetadataValue: Decodable {
        var text: String

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let string = try? container.decode(String.self) {
                text = string
            } else if let bool = try? container.decode(Bool.self) {
                text = String(bool)
            } else if let integer = try? container.decode(Int.self) {
                text = String(integer)
            } else {
                text = String(try container.decode(Double.self))
            }
        }
    }
}
