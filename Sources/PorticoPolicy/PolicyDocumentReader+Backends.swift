import Foundation
import Yams

extension PolicyDocumentReader {
    static let backendKeys = [
        "url", "targets", "connectTimeout", "timeout", "rateLimit", "maxConcurrent", "maxConcurrentPerTarget", "client", "balance",
        "hashOn", "healthCheck", "outlierDetection", "retries", "resolveEvery", "protocol", "caFile",
    ]

    /// The most targets one backend may have (a request's tried targets are a 64-bit set).
    static let maxTargets = 64

    /// `backends.NAME`: one `url`, or `targets` (each `{ url, weight }`), and how they are used.
    func readBackend(_ value: PolicyValue, name: String) -> BackendPolicy? {
        guard let fields = value.fields(known: Self.backendKeys) else { return nil }
        let targets = readTargets(fields, at: value)
        let connectTimeout = fields.optional("connectTimeout", default: Duration.seconds(2)) { $0.duration() }
        let timeout = fields.optional("timeout", default: Duration.seconds(30)) { $0.duration() }
        let rateLimit = fields.optional("rateLimit", readRateLimit)
        let maxConcurrent = fields.optional("maxConcurrent") { $0.int(in: 1...1_000_000) }
        let client = fields.optional("client") { $0.oneOf(BackendClient.allCases) }
        if client == .nio, targets?.first?.url.scheme == "https", let clientValue = fields["client"] {
            clientValue.error("client nio speaks plain HTTP only; an https:// backend needs client curl (or no client key)")
        }
        let backendProtocol = fields.optional("protocol", default: BackendProtocol.http1) { $0.oneOf(BackendProtocol.allCases) }
        if let protocolValue = fields["protocol"], let scheme = targets?.first?.url.scheme {
            if backendProtocol == .h2 && scheme != "https" {
                protocolValue.error("h2 is HTTP/2 over TLS and needs https:// targets; for plain HTTP/2 with prior knowledge use h2c")
            } else if backendProtocol == .h2c && scheme != "http" {
                protocolValue.error("h2c is HTTP/2 without TLS and needs http:// targets; over TLS use h2")
            } else if backendProtocol != .http1, fields["client"] != nil {
                protocolValue.error("\(backendProtocol.rawValue) goes through the gateway's HTTP/2 client: leave out client")
            }
        }
        let caFile = fields.optional("caFile", file)
        if caFile != nil, let scheme = targets?.first?.url.scheme, scheme != "https", let caValue = fields["caFile"] {
            caValue.error("caFile checks the certificates of https:// targets, and this backend's are \(scheme)://")
        }
        let balance = fields.optional("balance", default: BalancePolicy.roundRobin) { $0.oneOf(BalancePolicy.allCases) }
        let hashOn = fields.optional("hashOn", readHashKey)
        if hashOn != nil, balance != .hash, let hashValue = fields["hashOn"] {
            hashValue.error("hashOn applies to balance: hash only; this backend balances by \(balance.rawValue)")
        }
        let perTarget = fields.optional("maxConcurrentPerTarget") { $0.int(in: 1...1_000_000) }
        let healthCheck = fields.optional("healthCheck", readHealthCheck)
        let outlierDetection = fields.optional("outlierDetection", readOutlierDetection)
        let retries = fields.optional("retries") { readRetries($0, timeout: timeout) }
        // A pool's names are resolved to all their addresses by default; a single `url` keeps its
        // name to each connect (which tries every address of it, IPv4 and IPv6) unless asked.
        let defaultResolve: Duration? = fields["targets"] != nil ? .seconds(30) : nil
        let resolveEvery = fields.optional("resolveEvery", default: defaultResolve) { value -> Duration?? in
            if value.isWord("off") { return .some(nil) }
            guard let every = value.duration() else { return nil }
            guard every >= .milliseconds(100), every <= .seconds(86400) else {
                value.error("expected off or between 100ms and 24h, found \(value.describe())")
                return nil
            }
            return .some(every)
        }
        guard let targets else { return nil }
        if let retries, let retriesValue = fields["retries"] {
            if targets.count == 1 {
                retriesValue.warning("retries go to another target, and this backend has one: they never happen")
            } else if retries.on.contains(.timeout), retries.perTryTimeout == nil {
                retriesValue.warning(
                    "a timeout is retried only when perTryTimeout leaves time before the backend's timeout; set perTryTimeout")
            }
        }
        var backend = BackendPolicy(
            name: name, targets: targets, connectTimeout: connectTimeout, timeout: timeout, rateLimit: rateLimit,
            maxConcurrent: maxConcurrent, client: client)
        backend.balance = balance
        backend.hashOn = hashOn ?? .key
        backend.maxConcurrentPerTarget = perTarget
        backend.healthCheck = healthCheck
        if let outlierDetection { backend.outlierDetection = outlierDetection.enabled ? outlierDetection.policy : nil }
        backend.retries = retries
        backend.resolveEvery = resolveEvery
        backend.protocol = backendProtocol
        backend.caFile = caFile
        return backend
    }

    /// `url: …` (one target) or `targets: [{ url, weight }, …]`; the targets share a scheme and a
    /// base path, and none appears twice.
    private func readTargets(_ fields: PolicyFields, at value: PolicyValue) -> [BackendTarget]? {
        switch (fields["url"], fields["targets"]) {
        case (let url?, nil):
            return readBackendURL(url).map { [BackendTarget(url: $0)] }
        case (nil, let list?):
            guard let items = list.sequence() else { return nil }
            guard !items.isEmpty else {
                list.error("expected at least one target")
                return nil
            }
            guard items.count <= Self.maxTargets else {
                list.error("expected at most \(Self.maxTargets) targets, found \(items.count)")
                return nil
            }
            var targets: [BackendTarget] = []
            var failed = false
            for item in items {
                guard let target = readTarget(item) else {
                    failed = true
                    continue
                }
                if let first = targets.first {
                    if target.url.scheme != first.url.scheme || target.url.basePath != first.url.basePath {
                        item.error(
                            "every target of a backend has the same scheme and path: expected \(first.url.scheme)://…\(first.url.basePath), found \(target.url)"
                        )
                        failed = true
                    }
                    // Host names are case-insensitive (RFC 3986 §3.2.2).
                    if targets.contains(where: {
                        $0.url.scheme == target.url.scheme && $0.url.host.lowercased() == target.url.host.lowercased()
                            && $0.url.port == target.url.port
                    }) {
                        item.error("\(target.url) is already a target of this backend")
                        failed = true
                    }
                }
                targets.append(target)
            }
            return failed ? nil : targets
        case (.some, .some):
            value.error("expected url (one target) or targets (several), not both")
            return nil
        case (nil, nil):
            value.error("missing required key \"url\" (or \"targets\")")
            return nil
        }
    }

    private func readTarget(_ value: PolicyValue) -> BackendTarget? {
        guard let fields = value.fields(known: ["url", "weight"]) else { return nil }
        let url = fields.required("url", readBackendURL)
        let weight = fields.optional("weight", default: 1) { $0.int(in: 1...1000) }
        return url.map { BackendTarget(url: $0, weight: weight) }
    }

    func readBackendURL(_ value: PolicyValue) -> BackendURL? {
        guard let text = value.nonEmptyString() else { return nil }
        let expected = "expected an absolute http:// or https:// URL with a host and no query, fragment or credentials"
        guard let components = URLComponents(string: text),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty,
            components.query == nil, components.fragment == nil,
            components.user == nil, components.password == nil
        else {
            value.error("\(expected), found \"\(text)\"")
            return nil
        }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        guard (1...65535).contains(port) else {
            value.error("port \(port) is out of range 1...65535")
            return nil
        }
        var path = components.percentEncodedPath
        while path.hasSuffix("/") { path.removeLast() }
        let bareHost = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        return BackendURL(scheme: scheme, host: bareHost, port: port, basePath: path)
    }

    /// `key`, `address` or `header:NAME`.
    private func readHashKey(_ value: PolicyValue) -> HashKey? {
        guard let text = value.nonEmptyString() else { return nil }
        switch text {
        case "key": return .key
        case "address": return .address
        default:
            let name = text.hasPrefix("header:") ? String(text.dropFirst("header:".count)) : ""
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }) else {
                value.error("expected key, address or header:NAME (a header field name), found \(value.describe())")
                return nil
            }
            return .header(name.lowercased())
        }
    }

    private func readHealthCheck(_ value: PolicyValue) -> HealthCheckPolicy? {
        let known = ["path", "interval", "timeout", "healthyAfter", "unhealthyAfter", "expectStatus"]
        guard let fields = value.fields(known: known) else { return nil }
        let path = fields.required("path") { value -> String? in
            guard let path = value.nonEmptyString() else { return nil }
            guard path.hasPrefix("/"), !path.contains("#"), path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                value.error("expected an origin-form path such as /healthz, found \(value.describe())")
                return nil
            }
            return path
        }
        guard let path else { return nil }
        var check = HealthCheckPolicy(path: path)
        check.interval = fields.optional("interval", default: check.interval) { value -> Duration? in
            guard let interval = value.duration() else { return nil }
            guard interval >= .milliseconds(100), interval <= .seconds(3600) else {
                value.error("expected between 100ms and 1h, found \(value.describe())")
                return nil
            }
            return interval
        }
        check.timeout = fields.optional("timeout", default: min(check.timeout, check.interval)) { value -> Duration? in
            guard let timeout = value.duration() else { return nil }
            guard timeout > .zero, timeout <= check.interval else {
                value.error(
                    "expected a timeout no longer than the interval (\(fields["interval"]?.describe() ?? "5s")), found \(value.describe())")
                return nil
            }
            return timeout
        }
        check.healthyAfter = fields.optional("healthyAfter", default: check.healthyAfter) { $0.int(in: 1...100) }
        check.unhealthyAfter = fields.optional("unhealthyAfter", default: check.unhealthyAfter) { $0.int(in: 1...100) }
        check.expectStatus = fields.optional("expectStatus", default: check.expectStatus, readStatuses)
        return check
    }

    /// `200`, `2xx`, or a list of either.
    private func readStatuses(_ value: PolicyValue) -> [ClosedRange<Int>]? {
        func one(_ value: PolicyValue) -> ClosedRange<Int>? {
            guard let text = value.string() else { return nil }
            if text.count == 3, text.hasSuffix("xx"), let digit = Int(text.prefix(1)), (1...5).contains(digit) {
                return digit * 100...digit * 100 + 99
            }
            guard let status = Int(text), (100...599).contains(status) else {
                value.error("expected a status such as 200 or a class such as 2xx, found \(value.describe())")
                return nil
            }
            return status...status
        }
        guard value.node.sequence != nil else { return one(value).map { [$0] } }
        guard let items = value.sequence(), !items.isEmpty else {
            value.error("expected at least one status")
            return nil
        }
        let statuses = items.compactMap(one)
        return statuses.count == items.count ? statuses : nil
    }

    /// `outlierDetection: off`, or its settings.
    private func readOutlierDetection(_ value: PolicyValue) -> (enabled: Bool, policy: OutlierDetectionPolicy)? {
        if value.isWord("off") { return (false, OutlierDetectionPolicy()) }
        guard let fields = value.fields(known: ["consecutiveFailures", "ejectFor", "maxEjectedPercent"]) else { return nil }
        var policy = OutlierDetectionPolicy()
        policy.consecutiveFailures = fields.optional("consecutiveFailures", default: policy.consecutiveFailures) { $0.int(in: 1...1000) }
        policy.ejectFor = fields.optional("ejectFor", default: policy.ejectFor) { value -> Duration? in
            guard let duration = value.duration() else { return nil }
            guard duration >= .seconds(1), duration <= .seconds(3600) else {
                value.error("expected between 1s and 1h, found \(value.describe())")
                return nil
            }
            return duration
        }
        policy.maxEjectedPercent = fields.optional("maxEjectedPercent", default: policy.maxEjectedPercent) { value -> Int? in
            readPercent(value)
        }
        return (true, policy)
    }

    /// `20%` (or `20`): 1 to 100.
    private func readPercent(_ value: PolicyValue) -> Int? {
        guard let text = value.string() else { return nil }
        let digits = text.hasSuffix("%") ? String(text.dropLast()) : text
        guard let percent = Int(digits), (1...100).contains(percent) else {
            value.error("expected a percentage from 1% to 100%, found \(value.describe())")
            return nil
        }
        return percent
    }

    private func readRetries(_ value: PolicyValue, timeout: Duration) -> RetryPolicy? {
        guard let fields = value.fields(known: ["attempts", "on", "perTryTimeout", "budget", "methods"]) else { return nil }
        let attempts = fields.required("attempts") { $0.int(in: 2...5) }
        let conditions = fields.required("on") { value -> Set<RetryCondition>? in
            guard let items = value.sequence(), !items.isEmpty else {
                if value.node.sequence != nil { value.error("expected at least one of \(Self.retryConditionList)") }
                return nil
            }
            let conditions = items.compactMap { item -> RetryCondition? in
                guard let text = item.string(), let condition = RetryCondition(rawValue: text) else {
                    item.error("expected one of \(Self.retryConditionList), found \(item.describe())")
                    return nil
                }
                return condition
            }
            return conditions.count == items.count ? Set(conditions) : nil
        }
        let perTryTimeout = fields.optional("perTryTimeout") { value -> Duration? in
            guard let duration = value.duration() else { return nil }
            guard duration > .zero, duration <= timeout else {
                value.error("expected a time no longer than the backend's timeout (\(timeout)), found \(value.describe())")
                return nil
            }
            return duration
        }
        let budget = fields.optional("budget", default: 20) { readPercent($0) }
        let methods = fields.optional("methods") { value -> Set<String>? in
            guard let items = value.sequence() else { return nil }
            guard !items.isEmpty else {
                value.error("expected at least one method; to retry only after connect failures, write on: [connect-failure]")
                return nil
            }
            var methods: Set<String> = []
            for item in items {
                guard let method = item.nonEmptyString() else { return nil }
                guard RetryPolicy.idempotentMethods.contains(method) else {
                    item.error(
                        "\(method) is not idempotent: a retry after a reset, a timeout or a 5xx may apply it twice. Retried are \(RetryPolicy.idempotentMethods.sorted().joined(separator: ", ")) and any request that carries an Idempotency-Key; every method is retried after a connect failure (when on lists it), which never reached the backend"
                    )
                    return nil
                }
                methods.insert(method)
            }
            return methods
        }
        guard let attempts, let conditions else { return nil }
        var retries = RetryPolicy(attempts: attempts, on: conditions)
        retries.perTryTimeout = perTryTimeout
        retries.budgetPercent = budget
        if let methods { retries.methods = methods }
        return retries
    }

    private static var retryConditionList: String { RetryCondition.allCases.map(\.rawValue).joined(separator: ", ") }
}
