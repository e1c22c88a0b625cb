import NIOCore
import PorticoPolicy

/// The resolve-version stage: which of the service's API versions serves the request, and so
/// which handler (and, for a proxy, which backend).
///
/// The version is the one the request names (the service path's `{version}` segment, else the
/// `apiVersion` query parameter), else the service's default. It runs after authentication, so a
/// client that is not let in learns nothing about which versions exist.
struct VersionStage: RequestStage {
    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard let routed = exchange.routed else { return .proceed }
        let service = routed.service
        let version: Int?
        if let requested = routed.requestedVersion {
            version = Int(requested.first == "v" ? requested.dropFirst() : requested)
        } else {
            version = service.defaultVersion
        }
        // A validated policy always has its default version, so only a named one can be missing.
        guard let version, let served = routed.rules.versions[version] else {
            let named = String(routed.requestedVersion ?? "\(service.defaultVersion)")
            return .answer(.unknownVersion(named, service: service.name, available: service.policy.versions.keys.sorted()))
        }
        exchange.version = version
        exchange.handler = served.handler
        exchange.backend = served.backend
        exchange.record.version = version
        switch served.handler {
        case .proxy(let proxy): exchange.record.backend = proxy.backend
        }
        return .proceed
    }
}
