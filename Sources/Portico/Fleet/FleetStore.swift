import Logging
import NIOCore
import PorticoPolicy
import PorticoRedis
import Tracing

/// Fleet mode's shared state: rate-limit buckets and nonces in one Redis, decided by
/// ``FleetScript`` in one round trip per request. A decision Redis cannot make (it is down, slow,
/// or its breaker open) fails; ``FleetLimitStore``, the limit store requests call, then applies
/// the policy's `onFailure`.
///
/// Made at start from the policy's `cluster` section and kept for the gateway's life.
public final class FleetStore: Sendable {
    let client: RedisClient
    let onFailure: ClusterFailurePolicy
    /// Where Redis is, and which database: for a round trip's span.
    private let address: RedisAddress
    private let database: Int
    /// Told of replies of a shape the script does not give, which the client itself counts as
    /// answers (error replies, such as `-READONLY` or `-OOM`, it counts as failures).
    private let observer: (any RedisObserver)?
    /// Why no command can be sent at all (a `caFile` OpenSSL refuses), naming the file and key
    /// path: ``Gateway/start()`` refuses to start with it.
    let configurationError: PolicyError?
    /// The same as the error every decision fails with, so that `onFailure` applies.
    private let unusable: RedisError?

    /// - Parameters:
    ///   - group: the event loops that serve requests; each gets its own Redis connection.
    ///   - clock: monotonic nanoseconds for the breaker and backoff (tests may pass their own).
    ///   - logger: where a breaker opening (with the failure that opened it) and closing are told.
    ///   - maxReplyBytes: the longest reply Redis may send (a shared cache entry is one).
    public init(
        _ cluster: ClusterPolicy, group: any EventLoopGroup, metrics: GatewayMetrics? = nil, logger: Logger? = nil,
        clock: @escaping @Sendable () -> Int64 = { Int64(bitPattern: NIODeadline.now().uptimeNanoseconds) },
        maxReplyBytes: Int = 1024 * 1024
    ) {
        var configuration = RedisConfiguration(
            host: cluster.redis.host, port: cluster.redis.port,
            password: cluster.password.map { String(decoding: $0.bytes, as: UTF8.self) }, database: cluster.database,
            timeoutNanos: cluster.timeout.nanoseconds, scripts: [FleetScript.source])
        configuration.maxReplyBytes = maxReplyBytes
        var configurationError: PolicyError?
        do {
            configuration.tls = try FleetTLS.context(for: cluster).map { RedisTLS(context: $0, serverName: cluster.redis.host) }
        } catch {
            configurationError = error
        }
        let observer = FleetObserver(metrics: metrics?.redis, logger: logger)
        client = RedisClient(group: group, configuration: configuration, observer: observer, clock: clock)
        onFailure = cluster.onFailure
        address = cluster.redis
        database = cluster.database
        self.observer = observer
        self.configurationError = configurationError
        unusable = configurationError.map { .tls($0.description) }
    }

    /// What Redis decided for one request.
    enum Verdict: Equatable {
        /// Every limit admitted the request (their decisions, in order) and its nonce is recorded.
        case admitted([RateLimitDecision])
        /// Limit `index` refused; the decisions up to and including it. The nonce is recorded all
        /// the same (or, without room, its key marked): the request must never pass later.
        case limited(index: Int, [RateLimitDecision])
        case replayed
        case nonceQuotaExceeded(retryAfter: Int64)
    }

    /// Runs the script for `draws` and `nonce` from `eventLoop` (the connection's); completes there.
    /// - Parameters:
    ///   - span: a sampled request's client span for the round trip (OpenTelemetry's database
    ///     conventions: the command, Redis's address and database, and why it failed), ended here.
    ///     No key, nonce or argument is recorded: they name API keys.
    ///   - testTime: a time (seconds, nanoseconds) instead of the server's clock, for tests.
    func decide(
        _ draws: [LimitDraw], nonce: PendingNonce?, on eventLoop: any EventLoop, span: (any Span)? = nil,
        testTime: (Int64, Int64)? = nil
    ) -> EventLoopFuture<Verdict> {
        if let span { describe(span) }
        if let unusable {
            observer?.failed(unusable)
            Self.end(span, failure: unusable)
            return eventLoop.makeFailedFuture(unusable)
        }
        var keys: [String] = []
        var arguments: [String] = [String(draws.count)]
        keys.reserveCapacity(draws.count + 3)
        arguments.reserveCapacity(3 * draws.count + 8)
        for draw in draws {
            keys.append(FleetKeys.bucket(draw.key))
            let limit = draw.limit.gcra
            arguments.append(String(limit.count))
            arguments.append(String(limit.periodNanos))
            arguments.append(String(limit.burst))
        }
        if let nonce {
            keys.append(FleetKeys.nonce(keyID: nonce.keyID, nonce: nonce.nonce))
            keys.append(FleetKeys.nonceBudget(keyID: nonce.keyID))
            keys.append(FleetKeys.refusalMark(keyID: nonce.keyID))
            arguments += ["1", nonce.nonce, String(nonce.expiry), String(nonce.quota), String(nonce.created)]
        } else {
            arguments.append("0")
        }
        if let testTime { arguments += [String(testTime.0), String(testTime.1)] }
        let operands = [String(keys.count)] + keys + arguments
        let client = client
        let observer = observer
        let limits = draws.count
        // One promise and one callback for the request path (chained futures cost one each).
        let verdict = eventLoop.makePromise(of: Verdict.self)
        if let span {
            verdict.futureResult.whenComplete { result in
                switch result {
                case .success: Self.end(span, failure: nil)
                case .failure(let error): Self.end(span, failure: error)
                }
            }
        }
        client.send(encoded: RESPValueEncoder.command(["EVALSHA", FleetScript.sha1] + operands), on: eventLoop).whenComplete { result in
            switch result {
            case .success(let reply):
                verdict.completeWith(Self.read(reply, limits: limits, observer: observer))
            case .failure(let error as RedisError) where error.errorCode == "NOSCRIPT":
                span?.attributes["portico.redis.script_resent"] = true
                // The script is loaded on every new connection, but a `SCRIPT FLUSH`, or a failover
                // to a replica that never loaded it, leaves the connection without it: send it
                // whole, once, which also caches it again. The NOSCRIPT reply counted as one
                // failure; the retry goes even if that opened the breaker (a half-open probe's
                // NOSCRIPT would otherwise reopen it at every probe, for good), and its success
                // closes it.
                client.send(.command(["EVAL", FleetScript.source] + operands), on: eventLoop, bypassingBreaker: true).whenComplete {
                    verdict.completeWith($0.flatMap { Self.read($0, limits: limits, observer: observer) })
                }
            case .failure(let error):
                verdict.fail(error)
            }
        }
        return verdict.futureResult
    }

    private func describe(_ span: any Span) {
        var attributes = span.attributes
        attributes["db.system.name"] = "redis"
        attributes["db.operation.name"] = "EVALSHA"
        attributes["db.namespace"] = String(database)
        attributes["server.address"] = address.host
        attributes["server.port"] = address.port
        span.attributes = attributes
    }

    private static func end(_ span: (any Span)?, failure: (any Error)?) {
        guard let span else { return }
        if let failure {
            span.attributes["error.type"] = (failure as? RedisError)?.label ?? "\(type(of: failure))"
            span.setStatus(SpanStatus(code: .error))
        }
        span.end()
    }

    /// ``verdict(_:limits:)`` as a result; a reply of the wrong shape is reported as a failure.
    private static func read(_ reply: RESPValue, limits: Int, observer: (any RedisObserver)?) -> Result<Verdict, any Error> {
        do {
            return .success(try verdict(reply, limits: limits))
        } catch {
            if let error = error as? RedisError { observer?.failed(error) }
            return .failure(error)
        }
    }

    /// Reads the script's reply; anything else (a reply of the wrong shape) is a
    /// ``RedisError/protocolViolation(_:)``, which the caller treats as Redis failing.
    static func verdict(_ reply: RESPValue, limits: Int) throws -> Verdict {
        guard let values = reply.array, values.count >= 2, let status = values[0].integer, let detail = values[1].integer else {
            throw RedisError.protocolViolation("unexpected reply to the fleet script: \(reply)")
        }
        let numbers = values.dropFirst(2).compactMap(\.integer)
        guard numbers.count == values.count - 2, numbers.count % 4 == 0, numbers.count / 4 <= limits else {
            throw RedisError.protocolViolation("unexpected reply to the fleet script: \(reply)")
        }
        let decisions = stride(from: numbers.startIndex, to: numbers.endIndex, by: 4).map { index in
            RateLimitDecision(
                allowed: numbers[index] == 1, remaining: numbers[index + 1], resetNanos: numbers[index + 2],
                retryAfterNanos: numbers[index + 3])
        }
        switch status {
        case 0 where decisions.count == limits: return .admitted(decisions)
        case 1: return .replayed
        case 2 where detail >= 1 && Int(detail) == decisions.count: return .limited(index: Int(detail) - 1, decisions)
        case 3: return .nonceQuotaExceeded(retryAfter: detail)
        default: throw RedisError.protocolViolation("unexpected reply to the fleet script: \(reply)")
        }
    }

    public func close() -> EventLoopFuture<Void> { client.close() }
}

/// Redis key names. Every part is prefixed by its length in bytes, so that no key id, nonce or
/// name (whatever characters it holds) can make two different buckets share a key.
enum FleetKeys {
    static func bucket(_ key: RateLimitKey) -> String {
        "portico:rl:\(key.scope.rawValue):\(part(key.name))\(part(key.service))\(part(key.subject))"
    }

    static func nonce(keyID: String, nonce: String) -> String { "portico:n:\(part(keyID))\(part(nonce))" }

    static func nonceBudget(keyID: String) -> String { "portico:nb:\(part(keyID))" }

    /// The key's refusal mark (``NonceStore``): the latest `created` of its signatures that found no room.
    static func refusalMark(keyID: String) -> String { "portico:nm:\(part(keyID))" }

    private static func part(_ text: String) -> String { "\(text.utf8.count):\(text)" }
}
