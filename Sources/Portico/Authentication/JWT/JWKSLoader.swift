import Foundation
import JWTKit
import Logging
import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoUpstream

/// Fetches an issuer's JWK Set (RFC 7517 §5) and turns it into verifiers with JWTKit.
///
/// A URL is fetched through the gateway's upstream client (libcurl for `https://`, NIO for
/// `http://`), bounded in size and time; a file's text was read with the policy. Keys are imported
/// one at a time, so one key the gateway cannot use (an unknown `kty`, a curve that no allowed
/// algorithm takes, an RSA modulus under 2048 bits, `use: enc`) is left out without spoiling the
/// rest; a set of which no key is usable is a failed load.
struct JWKSLoader: Sendable {
    let upstream: any UpstreamClient
    let logger: Logger

    /// The largest JWK Set read.
    static let maxBytes = 1 << 20

    struct Loaded {
        let keys: [String: IssuerKeys.Key]
        /// The usable keys' JWKs, in a canonical form: equal for equal sets.
        let fingerprint: String
        /// The response's `max-age` (`s-maxage` first), if it gave one.
        let maxAge: Int64?
    }

    enum Failure: Error, CustomStringConvertible {
        case unreachable(String)
        case status(Int)
        case notASet
        case noUsableKey

        var description: String {
            switch self {
            case .unreachable(let why): "unreachable: \(why)"
            case .status(let status): "answered \(status)"
            case .notASet: "not a JWK Set"
            case .noUsableKey: "no key usable with the issuer's algorithms"
            }
        }
    }

    func load(_ issuer: JWTIssuerPolicy, on eventLoop: any EventLoop) async -> Result<Loaded, Failure> {
        switch issuer.keys {
        case .file(_, let contents):
            return await Self.importSet(Data(contents.utf8), algorithms: issuer.algorithms).map {
                Loaded(keys: $0.keys, fingerprint: $0.fingerprint, maxAge: nil)
            }
        case .url(let url):
            let response: FetchedResponse
            do {
                response = try await fetch(url, caFile: issuer.caFile?.path, on: eventLoop).get()
            } catch {
                return .failure(.unreachable(String(describing: error)))
            }
            guard response.status == 200 else { return .failure(.status(response.status)) }
            let control = CacheControl(lines: response.headers[canonicalForm: "cache-control"])
            let maxAge = (control.noStore || control.noCache) ? 0 : (control.sMaxAge ?? control.maxAge).map(Int64.init)
            return await Self.importSet(response.body, algorithms: issuer.algorithms).map {
                Loaded(keys: $0.keys, fingerprint: $0.fingerprint, maxAge: maxAge)
            }
        }
    }

    private func fetch(_ url: String, caFile: String?, on eventLoop: any EventLoop) -> EventLoopFuture<FetchedResponse> {
        var headers = FieldLines(capacity: 128)
        if let host = URL(string: url).flatMap({ url in url.host.map { host in url.port.map { "\(host):\($0)" } ?? host } }) {
            headers.add(name: "host", value: host)
        }
        headers.add(name: "accept", value: "application/jwk-set+json, application/json")
        var request = UpstreamRequest(method: "GET", url: url, headers: headers, connectTimeout: .seconds(2), timeout: .seconds(5))
        request.trustedCAFile = caFile
        let upstream = upstream
        return eventLoop.flatSubmit {
            let collector = BodyCollector(limit: Self.maxBytes, promise: eventLoop.makePromise())
            collector.task = upstream.execute(request, eventLoop: eventLoop, handler: collector)
            collector.taskStarted()
            return collector.promise.futureResult
        }
    }

    /// How long a loaded set is used before it is fetched again: the response's lifetime, held
    /// between the issuer's `minimumRefresh` and a day; `defaultRefresh` when it gave none.
    static func lifetime(_ maxAge: Int64?, policy: JWTIssuerPolicy) -> Int64 {
        guard let maxAge else { return policy.defaultRefresh.components.seconds }
        return min(max(maxAge, policy.minimumRefresh.components.seconds), 24 * 3600)
    }

    /// The usable keys of a JWK Set, by `kid`.
    static func importSet(
        _ data: Data, algorithms: [JWTAlgorithmName]
    ) async -> Result<(keys: [String: IssuerKeys.Key], fingerprint: String), Failure> {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any], let entries = object["keys"] as? [Any]
        else { return .failure(.notASet) }
        var keys: [String: IssuerKeys.Key] = [:]
        var canonical: [String: String] = [:]
        for case let entry as [String: Any] in entries {
            guard let kid = entry["kid"] as? String, let keyType = entry["kty"] as? String, keys[kid] == nil else { continue }
            if let use = entry["use"] as? String, use != "sig" { continue }
            let stated = entry["alg"] as? String
            guard let json = try? JSONSerialization.data(withJSONObject: entry), let jwk = try? JSONDecoder().decode(JWK.self, from: json)
            else { continue }
            var verifiers: [JWTAlgorithmName: any JWTAlgorithm] = [:]
            for algorithm in algorithms where algorithm.keyType == keyType && (stated == nil || stated == algorithm.rawValue) {
                if algorithm == .eddsa, entry["crv"] as? String != "Ed25519" { continue }
                // A collection per algorithm: a key without `alg` keeps the first signer made
                // for it, so an RSA key asked for RS256 and then PS256 would answer RS256 twice.
                let collection = JWTKeyCollection()
                guard (try? await collection.add(jwk: jwk)) != nil,
                    let verifier = try? await collection.getKey(for: JWKIdentifier(string: kid), alg: algorithm.rawValue),
                    verifier.name == algorithm.rawValue
                else { continue }
                verifiers[algorithm] = verifier
            }
            if !verifiers.isEmpty {
                keys[kid] = IssuerKeys.Key(keyType: keyType, verifiers: verifiers)
                canonical[kid] = (try? JSONSerialization.data(withJSONObject: entry, options: .sortedKeys)).map {
                    String(decoding: $0, as: UTF8.self)
                }
            }
        }
        let fingerprint = canonical.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        return keys.isEmpty ? .failure(.noUsableKey) : .success((keys, fingerprint))
    }

    func report(_ failure: Failure, issuer: String) {
        logger.warning("could not load an issuer's keys", metadata: ["issuer": .string(issuer), "failure": .string(failure.description)])
    }
}
