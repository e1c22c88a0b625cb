import Foundation
import PorticoPolicy

/// The service locator document, generated from a policy for one public base URL.
///
/// It keeps the seed format's core, `{"services":[{"name","url","version"}]}`, which
/// `ServiceLocatorClient` reads (`docs/client.md`), and adds per endpoint:
///
/// - `metadata` (strings and booleans, which the client exposes as text): `auth`, `input` and
///   `output` media types, `default` (whether requests naming no version get this one),
///   `minimumClientVersion` and `deprecation` when set;
/// - `buckets`: the compatibility buckets that map app versions to this version, each with its
///   `clients` range and, when limited, its `platforms`.
///
/// The bytes are deterministic (keys sorted, services by name and version), so an unchanged policy
/// gives the same `ETag` whatever the order of its files or a reload.
enum LocatorDocument {
    static func json(_ policy: Policy, environment: String?, baseURL: PublicBaseURL) -> [UInt8] {
        var endpoints: [[String: Any]] = []
        for service in policy.services.values.sorted(by: { $0.name < $1.name }) {
            let defaultVersion =
                switch service.defaultVersion {
                case .latest: service.versions.keys.max()
                case .version(let number): number
                }
            for (number, version) in service.versions.sorted(by: { $0.key < $1.key }) {
                var metadata: [String: Any] = [
                    "auth": service.authDescription, "input": version.input, "output": version.output, "default": number == defaultVersion,
                ]
                if let minimum = service.minimumClientVersion { metadata["minimumClientVersion"] = ClientVersion.describe(minimum) }
                if let deprecation = version.deprecation { metadata["deprecation"] = deprecation }
                var endpoint: [String: Any] = [
                    "name": service.name, "version": String(number), "url": url(of: service, version: number, base: baseURL),
                    "metadata": metadata,
                ]
                let buckets = service.compatibility.filter { $0.version == number }.map { bucket -> [String: Any] in
                    var entry: [String: Any] = ["clients": bucket.clients.description]
                    if !bucket.platforms.isEmpty { entry["platforms"] = bucket.platforms }
                    return entry
                }
                if !buckets.isEmpty { endpoint["buckets"] = buckets }
                endpoints.append(endpoint)
            }
        }
        var document: [String: Any] = ["services": endpoints]
        if let environment { document["environment"] = environment }
        let data = (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return Array(data)
    }

    /// The absolute URL of one version: the `{version}` segment filled in; a service without one
    /// gets `?apiVersion=` when it has more than one version. A host-bound service is published
    /// under its own host, with the base URL's scheme and port.
    static func url(of service: ServicePolicy, version: Int, base: PublicBaseURL) -> String {
        var origin = base
        if let host = service.host { origin.host = host }
        let path = origin.path + (service.path == "/" ? "" : service.path.replacingOccurrences(of: "{version}", with: String(version)))
        origin.path = ""
        var url = origin.description + (path.isEmpty ? "/" : path)
        if !service.path.contains("{version}") && service.versions.count > 1 { url += "?apiVersion=\(version)" }
        return url
    }
}
