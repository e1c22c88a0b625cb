import Foundation
import PorticoHTTP

extension PolicyDocumentReader {
    /// A service's `auth`: `none`, one scheme, or a list of schemes any one of which admits.
    func readAuth(_ value: PolicyValue) -> [AuthScheme]? {
        let expected = "expected none, one of \(Self.schemeNames), or a list of them"
        if value.isSequence, let items = value.sequence() {
            if items.isEmpty { value.error("\(expected); an empty list would admit no one (write none to admit anyone)") }
            var schemes: [AuthScheme] = []
            for item in items {
                guard let text = item.string() else { continue }
                guard let scheme = AuthScheme(rawValue: text) else {
                    item.error(
                        text == "none"
                            ? "none cannot be listed with other schemes" : "expected one of \(Self.schemeNames), found \(item.describe())")
                    continue
                }
                if schemes.contains(scheme) { item.error("\(text) is listed twice") }
                schemes.append(scheme)
            }
            return schemes
        }
        guard let text = value.string() else { return nil }
        if text == "none" { return [] }
        guard let scheme = AuthScheme(rawValue: text) else {
            value.error("expected one of none, \(Self.schemeNames), found \(value.describe())")
            return nil
        }
        return [scheme]
    }

    private static var schemeNames: String { AuthScheme.allCases.map(\.rawValue).joined(separator: ", ") }

    /// The settings of the service's schemes: `jwt` and `sigv4` each need theirs, and neither is
    /// given to a service that does not use the scheme (it would silently do nothing).
    func readSchemeSettings(_ fields: PolicyFields, auth: [AuthScheme], service: String) -> (ServiceJWTPolicy?, ServiceSigV4Policy?) {
        var jwt: ServiceJWTPolicy?
        var sigv4: ServiceSigV4Policy?
        for (key, scheme) in [("jwt", AuthScheme.jwt), ("sigv4", .sigv4)] {
            let section = fields[key]
            if auth.contains(scheme), section == nil, let authValue = fields["auth"] {
                authValue.error(
                    "auth: \(scheme.rawValue) needs the service's \(key) section (\(key == "jwt" ? "jwt: { issuers: [...] }" : "sigv4: { region, service }"))"
                )
            }
            if let section, !auth.contains(scheme) {
                section.error("\(key) settings on a service whose auth does not list \(scheme.rawValue)")
            }
        }
        if auth.contains(.jwt) { jwt = fields.optional("jwt", readServiceJWT) }
        if auth.contains(.sigv4) { sigv4 = fields.optional("sigv4", readServiceSigV4) }
        return (jwt, sigv4)
    }

    /// `services.NAME.jwt: { issuers, scopes, claims, forwardClaims }`.
    private func readServiceJWT(_ value: PolicyValue) -> ServiceJWTPolicy? {
        guard let fields = value.fields(known: ["issuers", "scopes", "claims", "forwardClaims"]) else { return nil }
        let issuers = fields.required("issuers") { value -> [String]? in
            guard let items = value.sequence() else { return nil }
            if items.isEmpty { value.error("expected at least one issuer name from jwt.issuers") }
            return items.compactMap { $0.nonEmptyString() }
        }
        guard let issuers else { return nil }
        var policy = ServiceJWTPolicy(issuers: issuers)
        policy.scopes = fields.optional("scopes", default: []) { value -> [String]? in
            value.sequence()?.compactMap { item -> String? in
                guard let scope = item.nonEmptyString() else { return nil }
                if scope.contains(" ") { item.error("a scope cannot contain a space (scope claims are space-separated)") }
                return scope
            }
        }
        policy.claims = fields.optional("claims", default: [:]) { value -> [String: [String]]? in
            guard let entries = value.mappingEntries() else { return nil }
            var claims: [String: [String]] = [:]
            for (name, entry) in entries {
                if let items = entry.sequence() {
                    if items.isEmpty { entry.error("expected at least one accepted value") }
                    claims[name] = items.compactMap { $0.string() }
                } else if let single = entry.string() {
                    claims[name] = [single]
                }
            }
            return claims
        }
        policy.forwardClaims = fields.optional("forwardClaims", default: []) { value -> [(claim: String, field: String)]? in
            guard let entries = value.mappingEntries() else { return nil }
            return entries.compactMap { name, entry -> (claim: String, field: String)? in
                guard let field = entry.nonEmptyString() else { return nil }
                guard HeaderName.isToken(field) else {
                    entry.error("expected a request field name such as X-User-Id, found \"\(field)\"")
                    return nil
                }
                if Self.fieldsTheGatewayOwns.contains(field.lowercased()) {
                    entry.error("\(field) is a field the gateway sets or reads itself; choose another name")
                    return nil
                }
                return (name, field)
            }
        }
        return policy
    }

    /// Request fields `forwardClaims` may not set: framing, hop-by-hop and credential fields, and
    /// those the gateway writes or drops on every forwarded request.
    static let fieldsTheGatewayOwns: Set<String> = [
        "host", "authorization", "proxy-authorization", "content-length", "transfer-encoding", "connection", "keep-alive",
        "proxy-connection", "te", "trailer", "upgrade", "expect", "forwarded", "x-forwarded-for", "x-forwarded-proto",
        "x-forwarded-host", "x-real-ip", "x-request-id", "content-digest", "signature", "signature-input", "cookie",
    ]

    /// `services.NAME.sigv4: { region, service, allowUnsignedPayload, clockSkew, maxExpires }`.
    private func readServiceSigV4(_ value: PolicyValue) -> ServiceSigV4Policy? {
        guard let fields = value.fields(known: ["region", "service", "allowUnsignedPayload", "clockSkew", "maxExpires"]) else {
            return nil
        }
        let scopePart = { (value: PolicyValue) -> String? in
            guard let text = value.nonEmptyString() else { return nil }
            guard text.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "/") }) else {
                value.error("expected a credential-scope name such as eu-west-1 (visible ASCII, no '/'), found \"\(text)\"")
                return nil
            }
            return text
        }
        let region = fields.required("region", scopePart)
        let service = fields.required("service", scopePart)
        guard let region, let service else { return nil }
        var policy = ServiceSigV4Policy(region: region, service: service)
        policy.allowUnsignedPayload = fields.optional("allowUnsignedPayload", default: false) { $0.bool() }
        policy.clockSkew = fields.optional("clockSkew", default: policy.clockSkew) { $0.duration() }
        policy.maxExpires = fields.optional("maxExpires", default: policy.maxExpires) { value -> Duration? in
            guard let duration = value.duration() else { return nil }
            guard duration <= .seconds(7 * 24 * 3600), duration >= .seconds(1) else {
                value.error("expected at most 7 days (AWS's own limit) and at least 1 s")
                return nil
            }
            return duration
        }
        return policy
    }

    /// The top-level `jwt: { issuers: { NAME: { issuer, jwks | keysFile, audiences, algorithms, … } } }`.
    func readJWT(_ value: PolicyValue) -> JWTPolicy? {
        guard let fields = value.fields(known: ["issuers"]) else { return nil }
        var policy = JWTPolicy()
        guard let entries = fields.required("issuers", { $0.mappingEntries() }) else { return nil }
        for (name, entry) in entries {
            if !Self.isValidName(name) { entry.error("name \"\(name)\" must be letters, digits, '-', '_' or '.'") }
            if let issuer = readIssuer(entry, name: name) { policy.issuers[name] = issuer }
        }
        return policy
    }

    private func readIssuer(_ value: PolicyValue, name: String) -> JWTIssuerPolicy? {
        let known = [
            "issuer", "jwks", "keysFile", "audiences", "algorithms", "clockSkew", "requiredClaims", "refetchCooldown", "defaultRefresh",
            "minimumRefresh", "caFile", "maxTokenBytes",
        ]
        guard let fields = value.fields(known: known) else { return nil }
        let issuer = fields.required("issuer") { $0.nonEmptyString() }
        let sources = ["jwks", "keysFile"].filter { fields[$0] != nil }
        var keys: JWTIssuerPolicy.KeySource?
        if sources.count != 1 {
            value.error(
                sources.isEmpty
                    ? "missing the issuer's keys: give jwks (a URL) or keysFile (a JWK Set file)" : "give only one of jwks and keysFile")
        } else if sources[0] == "jwks" {
            keys = fields.optional("jwks") { value -> JWTIssuerPolicy.KeySource? in
                guard let text = value.nonEmptyString() else { return nil }
                guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
                    value.error("expected an http:// or https:// URL, found \"\(text)\"")
                    return nil
                }
                if url.scheme?.lowercased() == "http", !["localhost", "127.0.0.1", "::1", "[::1]"].contains(url.host ?? "") {
                    value.warning("keys fetched over plain HTTP can be replaced on the way, and with them every token; use https")
                }
                return .url(text)
            }
        } else {
            keys = fields.optional("keysFile", readKeysFile)
        }
        let audiences = fields.required("audiences") { value -> [String]? in
            guard let items = value.sequence() else { return nil }
            if items.isEmpty { value.error("expected at least one audience, or \"*\" to accept tokens for any audience") }
            return items.compactMap { $0.nonEmptyString() }
        }
        let algorithms = fields.required("algorithms") { value -> [JWTAlgorithmName]? in
            guard let items = value.sequence() else { return nil }
            if items.isEmpty { value.error("expected at least one algorithm") }
            return items.compactMap { item -> JWTAlgorithmName? in
                guard let text = item.string() else { return nil }
                guard let algorithm = JWTAlgorithmName(rawValue: text) else {
                    let why =
                        text.lowercased() == "none"
                        ? "an unsigned token proves nothing"
                        : text.uppercased().hasPrefix("HS")
                            ? "HMAC tokens need a shared secret, and the issuer's keys are public"
                            : "not a supported algorithm"
                    item.error(
                        "\(text) cannot be accepted (\(why)); expected some of \(JWTAlgorithmName.allCases.map(\.rawValue).joined(separator: ", "))"
                    )
                    return nil
                }
                return algorithm
            }
        }
        guard let issuer, let keys, let audiences, let algorithms else { return nil }
        var policy = JWTIssuerPolicy(name: name, issuer: issuer, keys: keys, audiences: audiences, algorithms: algorithms)
        policy.clockSkew = fields.optional("clockSkew", default: policy.clockSkew) { value -> Duration? in
            guard let skew = value.duration() else { return nil }
            if skew > .seconds(600) { value.error("at most 10m: a wider window keeps expired tokens alive") }
            return skew
        }
        policy.requiredClaims = fields.optional("requiredClaims", default: policy.requiredClaims) { value in
            value.sequence()?.compactMap { $0.nonEmptyString() }
        }
        policy.refetchCooldown = fields.optional("refetchCooldown", default: policy.refetchCooldown) { $0.duration() }
        policy.defaultRefresh = fields.optional("defaultRefresh", default: policy.defaultRefresh) { $0.duration() }
        policy.minimumRefresh = fields.optional("minimumRefresh", default: policy.minimumRefresh) { $0.duration() }
        policy.caFile = fields.optional("caFile", file)
        if policy.caFile != nil, let caValue = fields["caFile"] {
            switch keys {
            case .file: caValue.error("caFile checks the certificate of an https:// jwks URL; this issuer's keys are in a file")
            case .url(let url) where !url.lowercased().hasPrefix("https://"):
                caValue.error("caFile checks the certificate of an https:// jwks URL; this one is plain HTTP")
            case .url: break
            }
        }
        if case .file(let path, let contents) = keys, let fileValue = fields["keysFile"] {
            checkUsableKeys(contents, path: path, algorithms: algorithms, at: fileValue)
        }
        policy.maxTokenBytes = fields.optional("maxTokenBytes", default: policy.maxTokenBytes) { value -> Int? in
            guard let bytes = value.byteCount() else { return nil }
            guard (256...65536).contains(bytes) else {
                value.error("expected between 256 B and 64 KiB")
                return nil
            }
            return bytes
        }
        return policy
    }

    /// A file whose keys none of the issuer's algorithms could use is a policy error rather than a
    /// 503 at the first token: at least one key must have a `kid`, a `kty` an allowed algorithm
    /// takes, no `use` but `sig`, and no `alg` outside the list. (Whether its numbers make a valid
    /// key is JWTKit's to say, when the keys are imported at the first token.)
    private func checkUsableKeys(_ contents: String, path: String, algorithms: [JWTAlgorithmName], at value: PolicyValue) {
        let object = (try? JSONSerialization.jsonObject(with: Data(contents.utf8))) as? [String: Any]
        let keys = (object?["keys"] as? [Any])?.compactMap { $0 as? [String: Any] } ?? []
        let usable = keys.contains { key in
            guard key["kid"] is String, let type = key["kty"] as? String, (key["use"] as? String ?? "sig") == "sig" else { return false }
            return algorithms.contains { $0.keyType == type && (key["alg"] == nil || key["alg"] as? String == $0.rawValue) }
        }
        if !usable {
            let names = algorithms.map(\.rawValue).joined(separator: ", ")
            value.error("\(path) holds no key usable with \(names) (each needs a kid, a matching kty and alg, and use: sig)")
        }
    }

    /// A JWK Set file: read now, so that a missing or broken one is the policy's error, not a
    /// request's. Its keys are imported (by JWTKit) at the first token that needs them.
    private func readKeysFile(_ value: PolicyValue) -> JWTIssuerPolicy.KeySource? {
        guard let path = value.filePath() else { return nil }
        guard let data = FileManager.default.contents(atPath: path), data.count <= 1 << 20 else {
            value.error("cannot read the JWK Set file \(path) (missing, unreadable, or over 1 MiB)")
            return nil
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let keys = object["keys"] as? [Any],
            !keys.isEmpty
        else {
            value.error("\(path) is not a JWK Set: expected a JSON object with a non-empty \"keys\" array")
            return nil
        }
        return .file(path: path, contents: String(decoding: data, as: UTF8.self))
    }
}
