import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy

/// CORS for a service that has `cors:`: a preflight (`OPTIONS` with `Origin` and
/// `Access-Control-Request-Method`) is answered here, before authentication and without a
/// backend (a browser sends no credentials with it, so no later stage could pass it); every other
/// request from a page is marked with what its answer's `Access-Control-*` fields must say,
/// which ``ResponseDecoration`` writes, once, in place of any the backend sent.
///
/// It runs after the service's address lists, so an address the service refuses gets no preflight
/// answer either.
struct CORSStage: RequestStage {
    /// Request fields a page may send without a preflight naming them (the Fetch standard's
    /// CORS-safelisted request headers).
    static let safelisted: Set<String> = ["accept", "accept-language", "content-language", "content-type", "range"]

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard let routed = exchange.routed, let cors = routed.service.policy.cors else { return .proceed }
        let headers = exchange.head.headers
        let origin = headers.first(name: "origin")
        let allowed = origin.map { cors.allowsAnyOrigin || cors.origins.contains($0.lowercased()) } ?? false
        exchange.cors = CORSDecision(
            allowOrigin: allowed ? (cors.allowsAnyOrigin && !cors.credentials ? "*" : origin) : nil, credentials: cors.credentials,
            exposeHeaders: cors.exposeHeaders.isEmpty ? nil : cors.exposeHeaders.joined(separator: ", "))
        guard exchange.head.method == .OPTIONS, origin != nil, let method = headers.first(name: "access-control-request-method") else {
            return .proceed
        }
        let service = routed.rules.name
        guard allowed else { return .answer(.corsRefused(service: service, reason: "This origin may not call the service.")) }
        let simple = ["GET", "HEAD", "POST"]
        guard simple.contains(method) || cors.methods.contains(method) else {
            return .answer(.corsRefused(service: service, reason: "The method \(method) is not allowed from a page."))
        }
        let requested = headers["access-control-request-headers"].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingOptionalWhitespace().lowercased() }.filter { !$0.isEmpty }
        if let refused = requested.first(where: { !Self.safelisted.contains($0) && !cors.headers.contains($0) }) {
            return .answer(.corsRefused(service: service, reason: "The request field \(refused) is not allowed from a page."))
        }
        var answer = HTTPHeaders()
        answer.add(
            name: "Access-Control-Allow-Methods", value: (simple + cors.methods.filter { !simple.contains($0) }).joined(separator: ", "))
        if !requested.isEmpty { answer.add(name: "Access-Control-Allow-Headers", value: requested.joined(separator: ", ")) }
        if let maxAge = cors.maxAge { answer.add(name: "Access-Control-Max-Age", value: String(Int(maxAge.components.seconds))) }
        answer.add(name: "Vary", value: "Access-Control-Request-Method, Access-Control-Request-Headers")
        exchange.destination = .builtIn(BuiltInResponse(status: .noContent, headers: answer, body: nil, contentLength: nil))
        return .proceed
    }
}

/// What a page's request's answer says in its `Access-Control-*` fields (``CORSStage``).
struct CORSDecision {
    /// The `Access-Control-Allow-Origin` value (the origin, or `*`); nil for an origin not allowed.
    let allowOrigin: String?
    let credentials: Bool
    let exposeHeaders: String?

    /// The fields a backend may have set, which the gateway's replace.
    static let replaced = [
        "access-control-allow-origin", "access-control-allow-credentials", "access-control-expose-headers",
    ]
    /// ``replaced``, for a backend's names read as bytes.
    static let replacedNames = HeaderNameSet(replaced)

    /// Takes out of a backend's fields those the gateway replaces (``addFields(to:)`` adds its own).
    static func removeReplaced(from headers: inout HTTPHeaders) {
        for name in replaced { headers.remove(name: name) }
    }

    /// Adds the answer's `Access-Control-*` fields and its `Vary`, after the backend's fields that
    /// are not ``replaced``.
    func addFields(to headers: inout some ResponseFields) {
        if let allowOrigin {
            headers.add(name: "Access-Control-Allow-Origin", value: allowOrigin)
            if credentials { headers.add(name: "Access-Control-Allow-Credentials", value: "true") }
            if let exposeHeaders { headers.add(name: "Access-Control-Expose-Headers", value: exposeHeaders) }
        }
        // The answer depends on the page's origin: a cache between keeps them apart.
        headers.add(name: "Vary", value: "Origin")
    }
}
