import PorticoPolicy
import Synchronization

/// What the gateway knows of its backends' targets now, for `/admin/backends` and `/metrics`:
/// read from the targets' state when asked, so that keeping it costs requests nothing.
struct BackendsReport: Encodable {
    struct Target: Encodable {
        let url: String
        let weight: Int
        /// `unknown` (no check has decided, or the backend has no checks), `healthy` or `unhealthy`.
        let health: String
        /// Seconds of ejection left; absent when the target is not ejected.
        let ejectedForSeconds: Int64?
        /// Whether requests are sent to it now (not unhealthy, not ejected).
        let up: Bool
        /// Requests in flight, when the backend counts them (least request, a per-target cap).
        let inFlight: Int?
        let consecutiveFailures: Int
        let failuresTotal: Int
        let ejectionsTotal: Int
    }

    struct Backend: Encodable {
        let balance: String
        let healthCheck: String?
        let retriesTotal: Int
        let targets: [Target]
    }

    let backends: [String: Backend]

    init(_ policy: CompiledPolicy) {
        backends = policy.backends.mapValues { backend in
            let now = backend.now
            return Backend(
                balance: backend.targets.count > 1 ? "\(backend.balancer.modeName)" : "single",
                healthCheck: backend.healthCheck.map { "GET \($0.path) every \($0.interval)" },
                retriesTotal: backend.retryState.retriesTotal.load(ordering: .relaxed),
                targets: backend.targets.map { target in
                    let state = target.state
                    let ejectedUntil = state.ejectedUntil.load(ordering: .relaxed)
                    let ejected = backend.outlierDetection != nil && ejectedUntil > now
                    return Target(
                        url: target.origin + backend.basePath, weight: target.weight,
                        health: backend.healthCheck == nil ? "unknown" : "\(state.health)",
                        ejectedForSeconds: ejected ? (ejectedUntil - now + 999_999_999) / 1_000_000_000 : nil,
                        up: !backend.isDown(target, at: now),
                        inFlight: backend.countsInFlight ? state.inFlight.load(ordering: .relaxed) : nil,
                        consecutiveFailures: state.consecutiveFailures.load(ordering: .relaxed),
                        failuresTotal: state.failuresTotal.load(ordering: .relaxed),
                        ejectionsTotal: state.ejectionsTotal.load(ordering: .relaxed))
                })
        }
    }

    /// The same as Prometheus text (version 0.0.4): each target's `up` and `healthy` gauges (the
    /// latter for backends with checks) and its failure and ejection counters, and each backend's
    /// retries.
    func render(into text: inout String) {
        let names = backends.keys.sorted()
        text += "# HELP portico_backend_target_up Whether the gateway sends requests to the target (1) or leaves it out (0).\n"
        text += "# TYPE portico_backend_target_up gauge\n"
        for name in names {
            for target in backends[name]!.targets {
                text += "portico_backend_target_up{backend=\"\(name)\",target=\"\(target.url)\"} \(target.up ? 1 : 0)\n"
            }
        }
        text +=
            "# HELP portico_backend_target_healthy The target's active health: 1 healthy, 0 unhealthy (only once a check has decided).\n"
        text += "# TYPE portico_backend_target_healthy gauge\n"
        for name in names {
            for target in backends[name]!.targets where target.health != "unknown" {
                text +=
                    "portico_backend_target_healthy{backend=\"\(name)\",target=\"\(target.url)\"} \(target.health == "healthy" ? 1 : 0)\n"
            }
        }
        text +=
            "# HELP portico_backend_target_failures_total Proxied and fetched attempts at the target that failed (connect failure, reset, timeout, 5xx).\n"
        text += "# TYPE portico_backend_target_failures_total counter\n"
        for name in names {
            for target in backends[name]!.targets {
                text += "portico_backend_target_failures_total{backend=\"\(name)\",target=\"\(target.url)\"} \(target.failuresTotal)\n"
            }
        }
        text += "# HELP portico_backend_target_ejections_total Times the target was ejected for failing.\n"
        text += "# TYPE portico_backend_target_ejections_total counter\n"
        for name in names {
            for target in backends[name]!.targets {
                text += "portico_backend_target_ejections_total{backend=\"\(name)\",target=\"\(target.url)\"} \(target.ejectionsTotal)\n"
            }
        }
        text += "# HELP portico_backend_retries_total Requests and fetches sent again to another target of the backend.\n"
        text += "# TYPE portico_backend_retries_total counter\n"
        for name in names {
            text += "portico_backend_retries_total{backend=\"\(name)\"} \(backends[name]!.retriesTotal)\n"
        }
    }
}

extension TargetBalancer {
    /// The policy's name of the mode (`single` for one target).
    var modeName: String {
        switch mode {
        case .single: "single"
        case .roundRobin: "roundRobin"
        case .leastRequest: "leastRequest"
        case .hash(_, let on): "hash on \(on)"
        }
    }
}
