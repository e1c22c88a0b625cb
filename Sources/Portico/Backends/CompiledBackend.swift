import NIOCore
import PorticoPolicy
import PorticoUpstream
import Synchronization

/// A backend as requests use it, everything a forwarded request needs already derived from its
/// policy: its targets (``CompiledTarget``) and how to choose one (``TargetBalancer``), the
/// timeouts, the client, its limits, its retries.
///
/// One per backend per compiled policy, shared by every request to it; a request's upstream URL
/// is then its target's prefix plus its own path and query, one string built per request.
final class CompiledBackend: Sendable {
    let name: String
    let targets: [CompiledTarget]
    /// The base path every target shares: empty, or starting with `/` and without a trailing one.
    let basePath: String
    let connectTimeout: Duration
    let timeout: Duration
    /// The policy's `caFile` for `https://` targets (nil: the system's trust store).
    let trustedCAFile: String?
    /// The upstream client the policy names; `nil` lets the routing client go by the scheme.
    let client: UpstreamClientKind?
    /// Requests in flight at once; `nil` is no cap.
    let maxConcurrent: Int?
    /// Requests in flight to each target at once; `nil` is no cap.
    let maxConcurrentPerTarget: Int?
    let rateLimit: CompiledRateLimit?
    let balancer: TargetBalancer
    let outlierDetection: OutlierDetectionPolicy?
    let healthCheck: HealthCheckPolicy?
    let retries: RetryPolicy?
    /// Requests and retries in flight, for the retry budget (the gateway's, across reloads).
    let retryState: BackendRetries
    private let registry: TargetRegistry
    /// The round-robin position, and the source of least-request's random draws.
    private let turns = Atomic<UInt64>(0)
    /// Whether requests in flight are counted per target (least-request reads them, a per-target
    /// cap limits them); otherwise no request touches the shared counter.
    let countsInFlight: Bool
    /// Whether a connect failure proves the request never left the gateway, so that any method
    /// may be retried after one. True of the NIO client, which writes nothing before its
    /// connection is up; not of libcurl, which may have written a request on a reused connection,
    /// seen it die, and failed to connect again.
    let connectFailureProvesUnsent: Bool

    init(_ policy: BackendPolicy, registry: TargetRegistry = TargetRegistry(), addresses: [String: [String]] = [:]) {
        name = policy.name
        // A target named by a host with resolved addresses is one target per address, each with
        // the name's `Host` and the target's weight (at most the 64 a request's tried set holds).
        var expanded: [(target: BackendTarget, address: String?)] = []
        for target in policy.targets {
            if policy.resolveEvery != nil, target.url.scheme == "http", let resolved = addresses[target.url.host], !resolved.isEmpty {
                expanded += resolved.map { (target, $0) }
            } else {
                expanded.append((target, nil))
            }
        }
        targets = expanded.prefix(64).enumerated().map { index, entry in
            let host = entry.address.map { $0.contains(":") ? "[\($0)]" : $0 } ?? entry.target.url.hostForURL
            let origin = "\(entry.target.url.scheme)://\(host):\(entry.target.url.port)"
            return CompiledTarget(entry.target, index: index, address: host, state: registry.state(backend: policy.name, origin: origin))
        }
        basePath = policy.url.basePath
        connectTimeout = policy.connectTimeout
        timeout = policy.timeout
        trustedCAFile = policy.caFile?.path
        client = policy.protocol == .http1 ? policy.client.map(UpstreamClientKind.init) : .http2
        maxConcurrent = policy.maxConcurrent
        maxConcurrentPerTarget = policy.maxConcurrentPerTarget
        rateLimit = policy.rateLimit.map { CompiledRateLimit(kind: .backend, name: policy.name, policy: $0) }
        balancer = TargetBalancer(
            policy.balance, hashOn: policy.hashOn, weights: targets.map(\.weight), names: targets.map(\.origin))
        outlierDetection = policy.outlierDetection
        healthCheck = policy.healthCheck
        retries = policy.retries
        retryState = registry.retries(backend: policy.name)
        self.registry = registry
        countsInFlight = policy.balance == .leastRequest || policy.maxConcurrentPerTarget != nil
        // The NIO clients write nothing until connected; libcurl does not say.
        connectFailureProvesUnsent = policy.protocol != .http1 || (policy.client ?? (policy.url.scheme == "https" ? .curl : .nio)) == .nio
    }

    /// The first target: what a backend of one target always sends to.
    var primary: CompiledTarget { targets[0] }

    var now: Int64 { registry.clock() }

    /// Whether `target` is left out at `now`: unhealthy by its checks, or ejected. Only what this
    /// policy still asks for counts: a target left unhealthy (or ejected) under a policy that had
    /// checks (or outlier detection), and reloaded without, is used again.
    func isDown(_ target: CompiledTarget, at now: Int64) -> Bool {
        (healthCheck != nil && target.state.health == .unhealthy) || (outlierDetection != nil && target.state.isEjected(at: now))
    }

    /// Whether any target can be down at all (checks or ejection): if not, no clock is read.
    private var canBeDown: Bool { healthCheck != nil || outlierDetection != nil }

    // MARK: Choosing a target

    /// Why no target can take a request.
    enum Unavailable: Error {
        /// Every target is ejected or unhealthy; the soonest may be back in this many seconds.
        case allDown(retryAfter: Int64)
        /// Every target that is up is at `maxConcurrentPerTarget`.
        case allBusy
        /// Every target that is up has been tried already.
        case allTried
    }

    /// The target for a request (or its retry): among those neither down, at their cap, nor in
    /// `tried`, as the balancer says; `hashKey` is what `balance: hash` hashes. The request is
    /// counted in the target's requests in flight (when they are counted) from here on: give it
    /// back with ``release(_:)``. The count is taken by adding first, so two event loops cannot
    /// both take a target's last place under `maxConcurrentPerTarget`.
    func pick(hashKey: some Sequence<UInt8>, tried: TargetSet = .empty) -> Result<CompiledTarget, Unavailable> {
        guard countsInFlight else { return choose(hashKey: hashKey, tried: tried) }
        var tried = tried
        while true {
            let chosen = choose(hashKey: hashKey, tried: tried)
            guard case .success(let target) = chosen else { return chosen }
            let inFlight = target.state.inFlight.wrappingAdd(1, ordering: .relaxed).newValue
            if let cap = maxConcurrentPerTarget, inFlight > cap {
                target.state.inFlight.wrappingSubtract(1, ordering: .relaxed)
                tried.insert(target.index)
                continue
            }
            return chosen
        }
    }

    /// Gives back the place a request took at `target` (``pick(hashKey:tried:)``).
    func release(_ target: CompiledTarget) {
        if countsInFlight { target.state.inFlight.wrappingSubtract(1, ordering: .relaxed) }
    }

    private func choose(hashKey: some Sequence<UInt8>, tried: TargetSet) -> Result<CompiledTarget, Unavailable> {
        if case .single = balancer.mode, tried.isEmpty {
            let target = targets[0]
            if canBeDown {
                let now = self.now
                if isDown(target, at: now) { return .failure(.allDown(retryAfter: retryAfter(now: now))) }
            }
            if let cap = maxConcurrentPerTarget, target.state.inFlight.load(ordering: .relaxed) >= cap { return .failure(.allBusy) }
            return .success(target)
        }
        let now = self.now
        var up = 0
        var usable = 0
        for target in targets where !isDown(target, at: now) {
            up += 1
            if !tried.contains(target.index) && hasRoom(target) { usable += 1 }
        }
        guard up > 0 else { return .failure(.allDown(retryAfter: retryAfter(now: now))) }
        guard usable > 0 else { return .failure(tried.isEmpty ? .allBusy : .allTried) }
        let isUsable = { (index: Int) -> Bool in
            let target = self.targets[index]
            return !tried.contains(index) && !self.isDown(target, at: now) && self.hasRoom(target)
        }
        switch balancer.mode {
        case .single:
            return isUsable(0) ? .success(targets[0]) : .failure(.allTried)
        case .roundRobin(let order):
            let start = Int(turns.wrappingAdd(1, ordering: .relaxed).oldValue % UInt64(order.count))
            for step in 0..<order.count {
                let index = Int(order[(start + step) % order.count])
                if isUsable(index) { return .success(targets[index]) }
            }
        case .leastRequest:
            let draw = Self.scramble(turns.wrappingAdd(1, ordering: .relaxed).oldValue)
            let first = Int(draw % UInt64(targets.count))
            // Two different targets: the second is drawn from the others.
            let second = (first + 1 + Int((draw >> 32) % UInt64(targets.count - 1))) % targets.count
            switch (isUsable(first), isUsable(second)) {
            case (true, true): return .success(lighter(targets[first], targets[second]))
            case (true, false): return .success(targets[first])
            case (false, true): return .success(targets[second])
            case (false, false):
                // Both draws left out: the lightest of those that are usable.
                var best: CompiledTarget?
                for index in targets.indices where isUsable(index) {
                    best = best.map { lighter($0, targets[index]) } ?? targets[index]
                }
                if let best { return .success(best) }
            }
        case .hash(let table, _):
            let slot = Int(TargetBalancer.fnv1a(hashKey) % UInt64(table.count))
            for step in 0..<table.count {
                let index = Int(table[(slot + step) % table.count])
                if isUsable(index) { return .success(targets[index]) }
            }
        }
        return .failure(.allTried)
    }

    /// The one with fewer requests in flight for its weight: a × weight(b) < b × weight(a).
    private func lighter(_ a: CompiledTarget, _ b: CompiledTarget) -> CompiledTarget {
        b.state.inFlight.load(ordering: .relaxed) * a.weight < a.state.inFlight.load(ordering: .relaxed) * b.weight ? b : a
    }

    private func hasRoom(_ target: CompiledTarget) -> Bool {
        guard let cap = maxConcurrentPerTarget else { return true }
        return target.state.inFlight.load(ordering: .relaxed) < cap
    }

    /// Seconds until the soonest target may take requests again. A target is back when both its
    /// ejection has ended and, if it is unhealthy, it has passed `healthyAfter` checks: the later
    /// of the two.
    private func retryAfter(now: Int64) -> Int64 {
        var soonest = Int64.max
        for target in targets {
            var back: Int64 = 0
            if outlierDetection != nil { back = max(back, target.state.ejectedUntil.load(ordering: .relaxed) - now) }
            if let check = healthCheck, target.state.health == .unhealthy {
                back = max(back, check.interval.nanoseconds * Int64(check.healthyAfter))
            }
            if back > 0 { soonest = min(soonest, back) }
        }
        guard soonest != .max else { return 1 }
        return max(1, (soonest + 999_999_999) / 1_000_000_000)
    }

    /// SplitMix64's finaliser: consecutive counter values become unrelated draws.
    private static func scramble(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// The answer to a request that no target can take: 503 `backend-unavailable` (with
    /// `Retry-After`) when every target is down, else 503 `backend-busy`.
    func problem(_ unavailable: Unavailable) -> Problem {
        switch unavailable {
        case .allDown(let retryAfter): .backendDown(backend: name, retryAfter: retryAfter)
        case .allBusy, .allTried: .backendBusy(backend: name, limit: maxConcurrentPerTarget ?? 0)
        }
    }

    /// One attempt's time limit: `perTryTimeout` if the backend retries, else its `timeout`, and
    /// never past `deadline` (the backend's `timeout` for all attempts together), nor under 1 ms.
    func attemptTimeout(until deadline: NIODeadline) -> Duration {
        let perTry = retries?.perTryTimeout ?? timeout
        guard deadline != .distantFuture else { return perTry }
        return min(perTry, .nanoseconds(max((deadline - .now()).nanoseconds, 1_000_000)))
    }

    // MARK: Retries

    /// The target a request whose attempt number `attempt` failed with `condition` is retried at,
    /// if the backend's `retries` allow it now; nil otherwise. The one rule for proxied requests
    /// and fetches alike:
    /// - `retries.on` lists the condition, and attempts are left;
    /// - a second attempt cannot apply the request twice: the first provably never left the
    ///   gateway (``connectFailureProvesUnsent``), or the method is one of `retries.methods`, or
    ///   the request carries an `Idempotency-Key`;
    /// - the backend's `timeout` (`deadline`) has not passed;
    /// - the retry budget has room: the slot taken here is the caller's until the retry ends
    ///   (`retryState.retries`);
    /// - a target not tried yet is up and has room.
    func retryTarget(
        after condition: RetryCondition, method: String, idempotencyKey: Bool, attempt: Int, tried: TargetSet,
        hashKey: some Sequence<UInt8>, deadline: NIODeadline
    ) -> CompiledTarget? {
        guard let retries, attempt < retries.attempts, retries.on.contains(condition) else { return nil }
        if condition != .connectFailure || !connectFailureProvesUnsent {
            guard retries.methods.contains(method) || idempotencyKey else { return nil }
        }
        guard NIODeadline.now() < deadline else { return nil }
        guard retryState.startRetry(budgetPercent: retries.budgetPercent) else { return nil }
        guard case .success(let next) = pick(hashKey: hashKey, tried: tried) else {
            retryState.retries.wrappingSubtract(1, ordering: .relaxed)
            return nil
        }
        return next
    }

    // MARK: Outcomes

    /// An attempt at `target` ended: a failure (connect failure, reset, timeout, 5xx) counts
    /// toward its ejection (`outlierDetection`); a success clears its count. (An attempt given up
    /// because its client left says nothing of the target, and is not reported.)
    func attemptEnded(at target: CompiledTarget, failed: Bool) {
        let state = target.state
        if failed { state.failuresTotal.wrappingAdd(1, ordering: .relaxed) }
        guard let detection = outlierDetection else { return }
        guard failed else {
            // Loads first: a success writes a counter every core shares only when it must.
            if state.consecutiveFailures.load(ordering: .relaxed) != 0 { state.consecutiveFailures.store(0, ordering: .relaxed) }
            if state.ejections.load(ordering: .relaxed) > 0 && !state.isEjected(at: now) {
                state.ejections.store(0, ordering: .relaxed)
            }
            return
        }
        let failures = state.consecutiveFailures.wrappingAdd(1, ordering: .relaxed).newValue
        let now = self.now
        guard failures >= detection.consecutiveFailures, !state.isEjected(at: now) else { return }
        // Counting the ejected and ejecting one more is one step (under the backend's lock, taken
        // only here, when a target is about to be ejected): two event loops cannot both take the
        // last place `maxEjectedPercent` leaves.
        retryState.ejecting.withLock { _ in
            guard !state.isEjected(at: now) else { return }
            let ejected = targets.count { $0.state.isEjected(at: now) }
            guard ejected < max(1, targets.count * detection.maxEjectedPercent / 100) else { return }
            let ejections = min(10, state.ejections.wrappingAdd(1, ordering: .relaxed).newValue)
            state.ejectedUntil.store(now + detection.ejectFor.nanoseconds * Int64(ejections), ordering: .relaxed)
            state.consecutiveFailures.store(0, ordering: .relaxed)
            state.ejectionsTotal.wrappingAdd(1, ordering: .relaxed)
        }
    }
}

extension TargetSet {
    var isEmpty: Bool { bits == 0 }
}
