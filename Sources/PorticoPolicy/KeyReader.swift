import Foundation

/// Structured-field dictionary keys (RFC 8941 §3.2), which signature labels must be.
enum SignatureLabel {
    static func isValid(_ label: String) -> Bool {
        guard let first = label.utf8.first, first == UInt8(ascii: "*") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first) else {
            return false
        }
        return label.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || "_-.*".utf8.contains(byte)
        }
    }
}

/// Reads one entry of `keys`, including its secrets from files or the environment.
///
/// Diagnostics name the file, key path and what is wrong with a secret (unreadable, too short),
/// never its content.
struct KeyReader {
    let value: PolicyValue
    /// Where `secretEnv` names are looked up.
    let environment: [String: String]

    /// Shorter secrets are refused: 32 characters of base64url is 192 bits, the least `keygen` makes.
    static let minimumSecretLength = 32

    func read(id: String, services: Set<String>, tiers: Set<String>) -> ClientKeyPolicy? {
        let known = [
            "secret", "secretFile", "secretEnv", "previousSecret", "status", "services", "tier", "demo", "allowFrom", "denyFrom",
            "accessKeyId",
        ]
        guard let fields = value.fields(known: known) else { return nil }
        // Key ids travel in signature parameters (any string) and before the '.' of X-API-Key.
        if id.isEmpty || !id.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) || id.contains(".") {
            value.error("key id \"\(id)\" must be visible ASCII characters other than '.' (which separates id and secret in X-API-Key)")
        }
        let demo = fields.optional("demo", default: false) { $0.bool() }
        let secret = readSecret(fields, owner: value, demo: demo)
        var previous: (secret: Secret, expires: Int64)?
        if let previousValue = fields["previousSecret"],
            let previousFields = previousValue.fields(known: ["secret", "secretFile", "secretEnv", "expires"])
        {
            let previousSecret = readSecret(previousFields, owner: previousValue, demo: demo)
            let expires = previousFields.required("expires", Self.readTimestamp)
            if let previousSecret, let expires { previous = (previousSecret, expires) }
        }
        let status = fields.optional("status", default: ClientKeyPolicy.Status.active) { $0.oneOf([.active, .revoked]) }
        let allowed = fields.required("services") { value -> [String]? in
            guard let items = value.sequence() else { return nil }
            if items.isEmpty { value.error("expected at least one service name, or \"*\" for every service") }
            return items.compactMap { item in
                guard let name = item.nonEmptyString() else { return nil }
                if name != "*", !services.contains(name) {
                    let known = services.sorted().joined(separator: ", ")
                    item.error("unknown service \"\(name)\"; expected \"*\" or one of: \(known.isEmpty ? "(no services defined)" : known)")
                }
                return name
            }
        }
        let tier = fields.optional("tier") { value -> String? in
            guard let name = value.nonEmptyString() else { return nil }
            guard tiers.contains(name) else {
                let known = tiers.sorted().joined(separator: ", ")
                value.error("unknown tier \"\(name)\"; expected one of: \(known.isEmpty ? "(no tiers defined)" : known)")
                return nil
            }
            return name
        }
        if demo {
            value.warning("demo key: its secret is published with this policy; never let it guard real traffic")
        }
        let addresses = fields.addressList()
        let accessKeyID = fields.optional("accessKeyId") { value -> String? in
            guard let text = value.nonEmptyString() else { return nil }
            // It travels in `Credential=<id>/<date>/<region>/<service>/aws4_request`.
            guard text.utf8.count <= 128,
                text.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: ",") })
            else {
                value.error("expected an access key id such as AKIDEXAMPLE (visible ASCII, no '/' or ',', at most 128 characters)")
                return nil
            }
            return text
        }
        guard let secret, let allowed else { return nil }
        var key = ClientKeyPolicy(
            id: id, secret: secret, previousSecret: previous?.secret, previousSecretExpires: previous?.expires, status: status,
            services: allowed, tier: tier, demo: demo)
        key.addresses = addresses
        key.accessKeyID = accessKeyID
        return key
    }

    /// Exactly one of `secret` (demo keys only), `secretFile` and `secretEnv`.
    private func readSecret(_ fields: PolicyFields, owner: PolicyValue, demo: Bool) -> Secret? {
        let sources = ["secret", "secretFile", "secretEnv"].filter { fields[$0] != nil }
        guard sources.count == 1, let source = sources.first, let sourceValue = fields[source] else {
            owner.error(
                sources.isEmpty
                    ? "missing the secret: give secretFile (a path) or secretEnv (an environment variable)"
                    : "give only one of secret, secretFile and secretEnv (found \(sources.joined(separator: ", ")))")
            return nil
        }
        let text: String?
        switch source {
        case "secret":
            guard demo else {
                sourceValue.error("an inline secret is allowed on demo keys only (demo: true); use secretFile or secretEnv")
                return nil
            }
            text = sourceValue.nonEmptyString()
        case "secretFile":
            guard let path = sourceValue.filePath() else { return nil }
            switch Secret.read(file: path) {
            case .success(let contents):
                text = contents
            case .failure(let problem):
                sourceValue.error("the secret file \(path) \(problem)")
                return nil
            }
        default:
            guard let name = sourceValue.nonEmptyString() else { return nil }
            guard let variable = environment[name] else {
                sourceValue.error("the environment variable \(name) is not set")
                return nil
            }
            text = variable
        }
        guard let text else { return nil }
        guard text.count >= Self.minimumSecretLength else {
            sourceValue.error(
                "the secret is \(text.count) characters; at least \(Self.minimumSecretLength) are required (make one with `portico keygen`)"
            )
            return nil
        }
        return Secret(text)
    }

    /// An RFC 3339 timestamp such as 2026-12-01T00:00:00Z, as seconds since 1970.
    static func readTimestamp(_ value: PolicyValue) -> Int64? {
        guard let text = value.string() else { return nil }
        let formatter = ISO8601DateFormatter()
        guard let date = formatter.date(from: text) else {
            value.error("expected a timestamp such as 2026-12-01T00:00:00Z, found \(value.describe())")
            return nil
        }
        return Int64(date.timeIntervalSince1970)
    }
}
