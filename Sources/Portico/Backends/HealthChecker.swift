import Logging
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream
import Synchronization

/// Active health checks: one place per gateway (one event loop, not every loop) asks each target
/// of each backend that has a `healthCheck` for its path, every `interval`, jittered by a tenth
/// either way so that a fleet's gateways and a backend's targets are not asked in step.
///
/// A target's first passed check makes it healthy; once unhealthy (`unhealthyAfter` failed checks
/// in a row) it needs `healthyAfter` passed ones, which also end an ejection it earned meanwhile. An unhealthy target is left out of balancing
/// (``TargetState``); a target whose health is still unknown is used. The checks follow reloads
/// (``update(_:)``): a new target is checked from the next moment, a removed one no more, and one
/// that stays keeps its health and its schedule.
///
/// Confined to its event loop; `@unchecked Sendable` so that the gateway can hand it policies
/// from any thread (each call hops there).
final class HealthChecker: @unchecked Sendable {
    private struct Key: Hashable {
        let backend: String
        let origin: String
        let check: HealthCheckPolicy
        /// A reload that changes only the backend's client checks through the new one.
        let client: UpstreamClientKind?
    }

    private final class Check {
        let target: CompiledTarget
        let backend: String
        let policy: HealthCheckPolicy
        let client: UpstreamClientKind?
        /// The backend's `caFile`, for an `https://` target's certificate.
        let trustedCAFile: String?
        var scheduled: Scheduled<Void>?
        var task: (any UpstreamTask)?

        init(target: CompiledTarget, backend: CompiledBackend, policy: HealthCheckPolicy) {
            self.target = target
            self.backend = backend.name
            self.policy = policy
            self.client = backend.client
            self.trustedCAFile = backend.trustedCAFile
        }
    }

    private let eventLoop: any EventLoop
    private let upstream: any UpstreamClient
    private let logger: Logger
    private var checks: [Key: Check] = [:]
    private var stopped = false
    private var draws: UInt64 = 0x2545_f491_4f6c_dd1d

    init(eventLoop: any EventLoop, upstream: any UpstreamClient, logger: Logger) {
        self.eventLoop = eventLoop
        self.upstream = upstream
        self.logger = logger
    }

    /// Checks the targets of `policy`'s backends from now on, in place of the last policy's.
    func update(_ policy: CompiledPolicy) {
        eventLoop.execute { self.apply(policy) }
    }

    /// Stops every check (the gateway is shutting down).
    func stop() {
        eventLoop.execute {
            self.stopped = true
            for check in self.checks.values { self.cancel(check) }
            self.checks = [:]
        }
    }

    private func apply(_ policy: CompiledPolicy) {
        guard !stopped else { return }
        var wanted: [Key: (CompiledTarget, CompiledBackend, HealthCheckPolicy)] = [:]
        for backend in policy.backends.values {
            guard let check = backend.healthCheck else { continue }
            for target in backend.targets {
                wanted[Key(backend: backend.name, origin: target.origin, check: check, client: backend.client)] = (target, backend, check)
            }
        }
        for (key, check) in checks where wanted[key] == nil {
            cancel(check)
            checks[key] = nil
        }
        for (key, (target, backend, policy)) in wanted where checks[key] == nil {
            let check = Check(target: target, backend: backend, policy: policy)
            checks[key] = check
            schedule(check, after: jittered(policy.interval, from: 0))
        }
    }

    private func cancel(_ check: Check) {
        check.scheduled?.cancel()
        check.task?.cancel()
        check.scheduled = nil
        check.task = nil
    }

    /// `interval` give or take a tenth (`from` 0: anywhere within the first interval).
    private func jittered(_ interval: Duration, from fraction: Int64) -> TimeAmount {
        draws ^= draws << 13
        draws ^= draws >> 7
        draws ^= draws << 17
        let nanos = interval.nanoseconds
        if fraction == 0 { return .nanoseconds(Int64(draws % UInt64(max(nanos, 1)))) }
        let spread = nanos / 5
        return .nanoseconds(nanos - nanos / 10 + Int64(draws % UInt64(max(spread, 1))))
    }

    private func schedule(_ check: Check, after delay: TimeAmount) {
        check.scheduled = eventLoop.assumeIsolated().scheduleTask(in: delay) { [weak self, weak check] in
            guard let self, let check, !self.stopped else { return }
            self.run(check)
        }
    }

    private func run(_ check: Check) {
        var headers = FieldLines(capacity: 96)
        headers.add(name: "Host", value: check.target.hostHeader)
        headers.add(name: "User-Agent", value: "portico-health-check")
        var request = UpstreamRequest(
            method: "GET", url: check.target.origin + check.policy.path, headers: headers, connectTimeout: check.policy.timeout,
            timeout: check.policy.timeout)
        request.client = check.client
        request.trustedCAFile = check.trustedCAFile
        let probe = HealthProbe { [weak self, weak check] passed, failure in
            guard let self, let check else { return }
            check.task = nil
            self.record(passed: passed, failure: failure, for: check)
            guard !self.stopped, self.checks.values.contains(where: { $0 === check }) else { return }
            self.schedule(check, after: self.jittered(check.policy.interval, from: 1))
        }
        probe.expected = check.policy.expectStatus
        let task = upstream.execute(request, eventLoop: eventLoop, handler: probe)
        probe.task = task
        if !probe.isFinished { check.task = task }
    }

    private func record(passed: Bool, failure: String?, for check: Check) {
        let state = check.target.state
        let policy = check.policy
        let metadata: Logger.Metadata = ["backend": .string(check.backend), "target": .string(check.target.origin)]
        if passed {
            let streak = max(state.checkStreak.load(ordering: .relaxed), 0) + 1
            state.checkStreak.store(streak, ordering: .relaxed)
            switch state.health {
            case .unknown: state.health = .healthy
            case .unhealthy where streak >= policy.healthyAfter:
                state.health = .healthy
                // Back by its checks: an ejection its failures earned while it was down ends too
                // (as Envoy's active checks un-eject), so it is used again within an interval.
                state.ejectedUntil.store(0, ordering: .relaxed)
                logger.notice("target healthy again", metadata: metadata)
            case .healthy, .unhealthy: break
            }
        } else {
            let streak = min(state.checkStreak.load(ordering: .relaxed), 0) - 1
            state.checkStreak.store(streak, ordering: .relaxed)
            if state.health != .unhealthy && -streak >= policy.unhealthyAfter {
                state.health = .unhealthy
                var metadata = metadata
                metadata["failure"] = .string(failure ?? "")
                logger.warning("target unhealthy", metadata: metadata)
            }
        }
    }
}

/// One health check's answer: its status against the expected ones; the body is read and dropped.
private final class HealthProbe: UpstreamResponseHandler {
    var expected: [ClosedRange<Int>] = []
    /// The check's exchange, given credit for the body it drops.
    var task: (any UpstreamTask)?
    private let done: (Bool, String?) -> Void
    private var status: Int?
    private var finished = false

    var isFinished: Bool { finished }

    init(done: @escaping (Bool, String?) -> Void) {
        self.done = done
    }

    func upstreamReceived(_ events: UpstreamEvents) {
        guard !finished else { return }
        if let head = events.head { status = head.status }
        if let body = events.body, events.result == nil { task?.consumed(bytes: body.readableBytes) }
        switch events.result {
        case .success:
            finished = true
            let status = status ?? 0
            done(expected.contains { $0.contains(status) }, "answered \(status)")
        case .failure(let error):
            finished = true
            done(false, error.description)
        case nil:
            break
        }
    }
}
