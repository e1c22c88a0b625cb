/// One instance of a backend: where it is, and its share of the backend's requests.
public struct BackendTarget: Sendable, Hashable {
    public var url: BackendURL
    /// Its share relative to the other targets' weights (1...1000); 1 by default.
    public var weight: Int

    public init(url: BackendURL, weight: Int = 1) {
        self.url = url
        self.weight = weight
    }
}

/// How a backend's requests are spread over its targets.
public enum BalancePolicy: String, Sendable, Hashable, CaseIterable {
    /// Each target in turn, as often as its weight says, interleaved (nginx's smooth weighted
    /// round robin): the default.
    case roundRobin
    /// Of two targets drawn at random, the one with fewer requests in flight for its weight.
    case leastRequest
    /// The same target for the same key (``HashKey``), on a consistent ring: adding or removing a
    /// target moves only its share of the keys.
    case hash
}

/// What `balance: hash` hashes.
public enum HashKey: Sendable, Hashable, CustomStringConvertible {
    /// The authenticated key id (the client address for unauthenticated requests).
    case key
    /// The client's address.
    case address
    /// A request header's value (the client address when the request has none).
    case header(String)

    public var description: String {
        switch self {
        case .key: "key"
        case .address: "address"
        case .header(let name): "header:\(name)"
        }
    }
}

/// Active health checks: the gateway asks each target for `path` every `interval`.
public struct HealthCheckPolicy: Sendable, Hashable {
    /// An origin-form path, sent with `GET` and the target's `Host`.
    public var path: String
    public var interval: Duration = .seconds(5)
    /// A check that takes longer fails.
    public var timeout: Duration = .seconds(2)
    /// Consecutive passed checks that make an unhealthy target healthy again.
    public var healthyAfter: Int = 2
    /// Consecutive failed checks that make a target unhealthy.
    public var unhealthyAfter: Int = 2
    /// The statuses that pass; `2xx` and `3xx` by default.
    public var expectStatus: [ClosedRange<Int>] = [200...399]

    public init(path: String) { self.path = path }
}

/// Passive outlier ejection: a target whose proxied requests keep failing is left out for a while.
public struct OutlierDetectionPolicy: Sendable, Hashable {
    /// Consecutive failures (connect failures, resets, timeouts, 5xx answers) that eject a target.
    public var consecutiveFailures: Int = 5
    /// How long the first ejection lasts; each further ejection in a row lasts once more as long,
    /// up to ten times this.
    public var ejectFor: Duration = .seconds(10)
    /// The most of a backend's targets ejected at once, in percent (at least one target may be).
    public var maxEjectedPercent: Int = 50

    public init() {}
}

/// What can make a request worth sending to another target.
public enum RetryCondition: String, Sendable, Hashable, CaseIterable, Comparable {
    /// The connection could not be made: the request never left the gateway.
    case connectFailure = "connect-failure"
    /// The backend broke the exchange (closed, reset, sent what is not HTTP) before its answer began.
    case reset
    /// The attempt's time (`perTryTimeout`) ran out before the answer began.
    case timeout
    case status502 = "502"
    case status503 = "503"
    case status504 = "504"

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Retries on another target, for requests that cannot be applied twice.
///
/// A request is retried only when a second attempt cannot duplicate a write: its method is one of
/// ``methods`` (idempotent ones only) or it carries an `Idempotency-Key`, or the first attempt
/// provably never reached the backend (a connect failure). Its body is kept whole by the gateway,
/// so every attempt sends the same bytes.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts in all, the first included (2: one retry).
    public var attempts: Int
    public var on: Set<RetryCondition>
    /// Each attempt's limit; the backend's `timeout` still bounds them all together.
    public var perTryTimeout: Duration?
    /// Retries in flight to the backend, as a percentage of its requests in flight (at least 3 are
    /// always allowed): a struggling backend is not sent twice its load.
    public var budgetPercent: Int = 20
    /// The methods retried on any of ``on``'s conditions.
    public var methods: Set<String> = RetryPolicy.idempotentMethods

    /// RFC 9110 §9.2.2's idempotent methods that a gateway retries (CONNECT and TRACE are not proxied).
    public static let idempotentMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]

    public init(attempts: Int, on: Set<RetryCondition>) {
        self.attempts = attempts
        self.on = on
    }
}
