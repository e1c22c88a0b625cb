import Foundation

/// The `locator` section: where the service locator is served, the public base URLs it publishes
/// endpoints under (per environment, chosen by listener), its cache lifetime and its signing key.
extension PolicyDocumentReader {
    func readLocator(_ value: PolicyValue, listeners: [String]) -> LocatorPolicy? {
        let known = [
            "path", "publicKeyPath", "maxAge", "signatureGrace", "publicBaseURL", "environments", "signingKey", "keyId", "demoKey",
        ]
        guard let fields = value.fields(known: known) else { return nil }
        var policy = LocatorPolicy()
        policy.path = fields.optional("path", default: policy.path, Self.servedPath)
        policy.publicKeyPath = fields.optional("publicKeyPath", default: policy.publicKeyPath, Self.servedPath)
        if policy.path == policy.publicKeyPath, let keyPath = fields["publicKeyPath"] {
            keyPath.error("must differ from path (\(policy.path))")
        }
        policy.maxAge = fields.optional("maxAge", default: policy.maxAge) { $0.duration() }
        policy.signatureGrace = fields.optional("signatureGrace", default: policy.signatureGrace) { $0.duration() }
        policy.publicBaseURL = fields.optional("publicBaseURL", Self.baseURL)
        var claimed: [String: String] = [:]
        for (name, entry) in fields.optional("environments", { $0.mappingEntries() }) ?? [] {
            if !Self.isValidName(name) { entry.error("name \"\(name)\" must be letters, digits, '-', '_' or '.'") }
            guard let environment = entry.fields(known: ["publicBaseURL", "listeners"]) else { continue }
            let url = environment.required("publicBaseURL", Self.baseURL)
            let names = environment.required("listeners") { value -> [String]? in
                guard let items = value.sequence() else { return nil }
                if items.isEmpty { value.error("expected at least one listener name") }
                return items.compactMap { item -> String? in
                    guard let listener = item.nonEmptyString() else { return nil }
                    if !listeners.contains(listener) {
                        item.error("unknown listener \"\(listener)\"; expected one of: \(listeners.joined(separator: ", "))")
                    } else if let other = claimed[listener] {
                        item.error("listener \"\(listener)\" is already in environment \"\(other)\"")
                    }
                    claimed[listener] = claimed[listener] ?? name
                    return listener
                }
            }
            if let url, let names { policy.environments.append(LocatorEnvironment(name: name, publicBaseURL: url, listeners: names)) }
        }
        policy.environments.sort { $0.name < $1.name }
        if policy.publicBaseURL == nil {
            let uncovered = listeners.filter { claimed[$0] == nil }
            if !uncovered.isEmpty {
                value.error(
                    "listener(s) \(uncovered.joined(separator: ", ")) have no public base URL: set publicBaseURL, or name them in an environment"
                )
            }
        }
        policy.signingKey = fields.optional("signingKey", file)
        policy.keyID = fields.optional("keyId") { value -> String? in
            guard let text = value.nonEmptyString() else { return nil }
            guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else {
                value.error("expected visible ASCII without quotes or backslashes, found \(value.describe())")
                return nil
            }
            return text
        }
        policy.demoKey = fields.optional("demoKey", default: false) { $0.bool() }
        if policy.signingKey == nil {
            value.warning("no signingKey: the locator is served unsigned, and clients that pin a key refuse it")
        } else if policy.demoKey, let key = fields["signingKey"] {
            key.warning(
                "demo key: its private key is published with this policy, so its signature proves nothing; make a real one with portico keygen --ed25519"
            )
        }
        return policy
    }

    /// The locator is answered before routing: a service whose path holds one of its paths never
    /// sees requests for it.
    func warnAboutShadowedRoutes(_ locator: LocatorPolicy, at value: PolicyValue, services: [ServicePolicy]) {
        for (key, path) in [("path", locator.path), ("publicKeyPath", locator.publicKeyPath)] {
            for service in services.sorted(by: { $0.name < $1.name }) {
                guard let template = PathTemplate(service.path) else { continue }
                let reached = template.match(path[...]) != nil || template.withoutVersion?.match(path[...]) != nil
                guard reached else { continue }
                (value.value(forKey: key) ?? value).warning(
                    "\(path) is also under service \(service.name)'s path \(service.path); the gateway answers it as the locator's")
            }
        }
    }

    /// A path the gateway itself answers: absolute, no query, fragment or dot-segment.
    static func servedPath(_ value: PolicyValue) -> String? {
        guard let path = value.nonEmptyString() else { return nil }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard path.hasPrefix("/"), path.count > 1, !path.contains("?"), !path.contains("#"), !path.contains("%"),
            segments.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." })
        else {
            value.error(
                "expected a path such as /serviceLocator.json (starting with '/', no query, empty or dot segments), found \"\(path)\"")
            return nil
        }
        return path
    }

    static func baseURL(_ value: PolicyValue) -> PublicBaseURL? {
        guard let text = value.nonEmptyString() else { return nil }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty, components.query == nil,
            components.fragment == nil, components.user == nil, components.password == nil
        else {
            value.error("expected an absolute http:// or https:// URL without query, fragment or credentials, found \"\(text)\"")
            return nil
        }
        var path = components.percentEncodedPath
        while path.hasSuffix("/") { path.removeLast() }
        let bare = host.hasPrefix("[") ? host : (host.contains(":") ? "[\(host)]" : host)
        return PublicBaseURL(scheme: scheme, host: bare.lowercased(), port: components.port, path: path)
    }

    /// A version's `deprecation`: the date (ISO 8601, `2027-06-30`) after which it may be removed.
    static func deprecationDate(_ value: PolicyValue) -> String? {
        guard let text = value.string() else { return nil }
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        guard parts.count == 3, parts.map(\.count) == [4, 2, 2], let date = formatter.date(from: text), formatter.string(from: date) == text
        else {
            value.error("expected a date such as 2027-06-30, found \(value.describe())")
            return nil
        }
        return text
    }

    /// A media type such as `application/json`.
    static func mediaType(_ value: PolicyValue) -> String? {
        guard let text = value.nonEmptyString() else { return nil }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        let token: (Substring) -> Bool = { part in
            !part.isEmpty && part.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !"()<>@,;:\\\"/[]?={} ".utf8.contains($0) }
        }
        guard parts.count == 2, token(parts[0]), token(parts[1]) else {
            value.error("expected a media type such as application/json, found \(value.describe())")
            return nil
        }
        return text.lowercased()
    }
}
