import Foundation
import PorticoHTTP

extension PolicyDocumentReader {
    /// `cors: { origins, methods, headers, exposeHeaders, credentials, maxAge }`.
    func readCORS(_ value: PolicyValue) -> CORSPolicy? {
        guard let fields = value.fields(known: ["origins", "methods", "headers", "exposeHeaders", "credentials", "maxAge"]) else {
            return nil
        }
        let origins = fields.required("origins") { value -> [String]? in
            guard let items = value.sequence() else { return nil }
            if items.isEmpty { value.error("expected at least one origin, or \"*\"") }
            return items.compactMap { item -> String? in
                guard let text = item.nonEmptyString() else { return nil }
                guard text == "*" || Self.isOrigin(text) else {
                    item.error(
                        "expected an origin such as https://app.example.com (scheme, host, optional port; no path), or \"*\"; found \"\(text)\""
                    )
                    return nil
                }
                return text.lowercased()
            }
        }
        guard let origins else { return nil }
        var cors = CORSPolicy(origins: origins)
        if let methods = fields.optional("methods", { tokens($0) }) { cors.methods = methods.map { $0.uppercased() } }
        cors.headers = (fields.optional("headers", { tokens($0) }) ?? []).map { $0.lowercased() }
        cors.exposeHeaders = fields.optional("exposeHeaders", { tokens($0) }) ?? []
        cors.credentials = fields.optional("credentials", default: false) { $0.bool() }
        cors.maxAge = fields.optional("maxAge") { $0.duration() }
        // The Fetch standard refuses `*` with credentials; a policy that asks for both is a mistake.
        if cors.credentials, cors.allowsAnyOrigin, let credentials = fields["credentials"] {
            credentials.error("credentials: true cannot go with origins: [\"*\"]; list the origins whose pages may send credentials")
            return nil
        }
        return cors
    }

    private func tokens(_ value: PolicyValue) -> [String]? {
        guard let items = value.sequence() else { return nil }
        return items.compactMap { item -> String? in
            guard let text = item.nonEmptyString() else { return nil }
            guard HeaderName.isToken(text) else {
                item.error("expected a method or field name, found \"\(text)\"")
                return nil
            }
            return text
        }
    }

    /// `scheme://host[:port]`, nothing after.
    static func isOrigin(_ text: String) -> Bool {
        guard let separator = text.range(of: "://") else { return false }
        let scheme = text[..<separator.lowerBound]
        let rest = text[separator.upperBound...]
        guard !scheme.isEmpty, scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }), !rest.isEmpty else {
            return false
        }
        return !rest.contains("/") && !rest.contains("?") && !rest.contains("#") && !rest.contains("@") && !rest.contains(" ")
    }
}
