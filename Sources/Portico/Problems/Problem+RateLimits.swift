import NIOHTTP1

extension Problem {
    /// 429 naming the limit that refused: which kind and whose (the tier, the backend), never
    /// anything about other clients' traffic.
    static func rateLimited(_ limit: AppliedLimit) -> Problem {
        let retryAfter = max(1, AppliedLimit.seconds(limit.decision.retryAfterNanos))
        let detail: String
        var extensions = [("limit", limit.kind.rawValue)]
        switch limit.kind {
        case .tier:
            detail =
                "This key's limit for the service \(limit.service) (tier \(limit.name): \(limit.policy)) is used up; retry in \(retryAfter) s."
            extensions += [("tier", limit.name), ("service", limit.service)]
        case .address:
            detail = "Too many requests from your address to the service \(limit.service) (\(limit.policy)); retry in \(retryAfter) s."
            extensions.append(("service", limit.service))
        case .backend:
            detail = "The backend \(limit.name) is receiving all the requests it accepts (\(limit.policy)); retry in \(retryAfter) s."
            extensions.append(("backend", limit.name))
        case .authFailures:
            detail =
                "Too many requests from your address failed authentication (\(limit.policy)); requests are not verified for \(retryAfter) s."
        }
        var problem = Problem(
            type: typePrefix + "rate-limited", title: "Too many requests", status: .tooManyRequests, detail: detail, extensions: extensions)
        problem.headers = [
            ("retry-after", String(retryAfter)), ("ratelimit-policy", limit.policyField), ("ratelimit", limit.statusField),
        ]
        return problem
    }

    /// 503 when a backend already has `maxConcurrent` requests in flight.
    static func backendBusy(backend: String, limit: Int) -> Problem {
        var problem = Problem(
            type: typePrefix + "backend-busy", title: "Backend at capacity", status: .serviceUnavailable,
            detail: "The backend \(backend) already has \(limit) requests in flight, its limit; retry in a moment.",
            extensions: [("backend", backend)])
        problem.headers = [("retry-after", "1")]
        return problem
    }
}

extension Problem {
    /// 503 in fleet mode when Redis cannot answer in time and the policy's `onFailure` says to
    /// refuse rather than decide locally: `what` is `rate limits` or `replay protection`.
    static func sharedStateUnavailable(_ what: String) -> Problem {
        var problem = Problem(
            type: typePrefix + "shared-state-unavailable", title: "Temporarily unavailable", status: .serviceUnavailable,
            detail: "The gateway cannot reach the fleet's shared store to apply \(what); retry in a moment.")
        problem.headers = [("retry-after", "1")]
        return problem
    }
}
