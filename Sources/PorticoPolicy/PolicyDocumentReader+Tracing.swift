import Foundation
import PorticoHTTP

extension PolicyDocumentReader {
    /// `tracing: { serviceName, otlp: { endpoint, headers, timeout }, sampler: { ratio, parentBased },
    /// trustIncoming: true | false | { listeners, networks }, responseTraceparent }`.
    func readTracing(_ value: PolicyValue, listeners: [String]) -> TracingPolicy? {
        guard
            let fields = value.fields(known: ["serviceName", "otlp", "sampler", "trustIncoming", "responseTraceparent", "queueSize"])
        else { return nil }
        let serviceName = fields.optional("serviceName", default: "portico") { $0.nonEmptyString() }
        let otlp = fields.required("otlp", readOTLP)
        let sampler = fields.optional("sampler", default: TracingPolicy.Sampler()) { value -> TracingPolicy.Sampler? in
            guard let fields = value.fields(known: ["ratio", "parentBased"]) else { return nil }
            let ratio = fields.optional("ratio", default: 1.0) { value -> Double? in
                guard let text = value.string(), let ratio = Double(text), ratio >= 0, ratio <= 1 else {
                    value.error(
                        "expected a share of traces between 0 and 1 (0.01 records one trace in a hundred), found \(value.describe())")
                    return nil
                }
                return ratio
            }
            let parentBased = fields.optional("parentBased", default: true) { $0.bool() }
            return TracingPolicy.Sampler(ratio: ratio, parentBased: parentBased)
        }
        let trust = fields.optional("trustIncoming", default: TracingPolicy.TrustIncoming.nobody) {
            readTrustIncoming($0, listeners: listeners)
        }
        let responseTraceparent = fields.optional("responseTraceparent", default: false) { $0.bool() }
        let queueSize = fields.optional("queueSize", default: 2048) { $0.int(in: 16...1_000_000) }
        guard let otlp else { return nil }
        var tracing = TracingPolicy(
            serviceName: serviceName, otlp: otlp, sampler: sampler, trustIncoming: trust, responseTraceparent: responseTraceparent)
        tracing.queueSize = queueSize
        return tracing
    }

    private func readOTLP(_ value: PolicyValue) -> TracingPolicy.OTLP? {
        guard let fields = value.fields(known: ["endpoint", "headers", "timeout"]) else { return nil }
        let endpoint = fields.required("endpoint") { value -> String? in
            guard let text = value.nonEmptyString() else { return nil }
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                url.host != nil, url.query == nil, url.user == nil
            else {
                value.error("expected the collector's OTLP/HTTP URL, such as http://127.0.0.1:4318/v1/traces, found \(value.describe())")
                return nil
            }
            // A bare collector address gets OTLP's traces path, as the collector's own clients add it.
            guard url.path.isEmpty || url.path == "/" else { return text }
            return (text.hasSuffix("/") ? String(text.dropLast()) : text) + "/v1/traces"
        }
        let headers = fields.optional("headers", default: []) { value -> [TracingPolicy.Header]? in
            guard let entries = value.mappingEntries() else { return nil }
            var headers: [TracingPolicy.Header] = []
            for (name, entry) in entries {
                guard HeaderName.isToken(name) else {
                    entry.error("\"\(name)\" is not a valid HTTP field name")
                    continue
                }
                guard let text = readHeaderValue(entry) else { continue }
                headers.append(TracingPolicy.Header(name: name, value: Secret(text)))
            }
            return headers
        }
        let timeout = fields.optional("timeout", default: .seconds(10)) { value -> Duration? in
            guard let duration = value.duration() else { return nil }
            guard duration <= .seconds(60) else {
                value.error("expected at most 60s: an export waits this long for a collector that does not answer")
                return nil
            }
            return duration
        }
        guard let endpoint else { return nil }
        return TracingPolicy.OTLP(endpoint: endpoint, headers: headers, timeout: timeout)
    }

    /// A header's value: a string, or `{ env: NAME }` for a token kept out of the policy file.
    private func readHeaderValue(_ value: PolicyValue) -> String? {
        if value.isMapping {
            guard let fields = value.fields(known: ["env"]) else { return nil }
            guard let name = fields.required("env", { $0.nonEmptyString() }) else { return nil }
            guard let text = environment[name], !text.isEmpty else {
                value.error("the environment variable \(name) is not set")
                return nil
            }
            return text
        }
        guard let text = value.string(), !text.isEmpty, !text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
            value.error("expected a header value (or { env: NAME }), found \(value.describe())")
            return nil
        }
        return text
    }

    private func readTrustIncoming(_ value: PolicyValue, listeners: [String]) -> TracingPolicy.TrustIncoming? {
        if !value.isMapping {
            guard let trusted = value.bool() else { return nil }
            return trusted ? TracingPolicy.TrustIncoming(everyone: true, listeners: [], networks: []) : .nobody
        }
        guard let fields = value.fields(known: ["listeners", "networks"]) else { return nil }
        let named = fields.optional("listeners", default: []) { value -> [String]? in
            guard let entries = value.sequence() else { return nil }
            var names: [String] = []
            for entry in entries {
                guard let name = entry.nonEmptyString() else { continue }
                guard listeners.contains(name) else {
                    entry.error("no listener is named \(name) (listeners: \(listeners.joined(separator: ", ")))")
                    continue
                }
                names.append(name)
            }
            return names
        }
        let networks = fields.optional("networks", default: []) { $0.addressRanges() }
        return TracingPolicy.TrustIncoming(everyone: false, listeners: named, networks: networks)
    }
}
