import Foundation
import NIOHTTP1
import PorticoPolicy

/// What `POST /admin/cache/purge` names, read from its query: exactly one of `target` (a path,
/// with its query percent-encoded, routed as a GET for it would be, so that it names the same
/// entries whatever spelling of the path it uses; `host` for a service bound to a host),
/// `service`, `tag` or `all=true`.
enum CachePurge {
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    static func selector(
        _ query: [(name: String, value: String)], in policy: CompiledPolicy
    ) -> Result<ResponseCache.PurgeSelector, Refusal> {
        func value(_ name: String) -> String? {
            query.first { $0.name == name }.flatMap { $0.value.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
        }
        let given = ["target", "service", "tag", "all"].filter { name in query.contains { $0.name == name } }
        guard given.count == 1 else {
            return .failure(Refusal(description: "Name exactly one of target, service, tag or all=true."))
        }
        switch given[0] {
        case "target":
            guard let target = value("target"), target.hasPrefix("/") else {
                return .failure(Refusal(description: "target must be a path such as /weather/v1/now%3Fcity%3Dparis."))
            }
            var headers = HTTPHeaders()
            if let host = value("host") { headers.add(name: "Host", value: host) }
            let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target, headers: headers)
            guard case .success(let routed) = Route.resolve(head, in: policy) else {
                return .failure(Refusal(description: "No service serves \(target)."))
            }
            return .success(.target(service: routed.service.name, target: CacheStage.target(routed)))
        case "service":
            guard let name = value("service"), policy.snapshot.policy.services[name] != nil else {
                return .failure(Refusal(description: "No service of that name."))
            }
            return .success(.service(name))
        case "tag":
            guard let tag = value("tag"), !tag.isEmpty else { return .failure(Refusal(description: "tag must not be empty.")) }
            return .success(.tag(tag))
        default:
            guard value("all") == "true" else { return .failure(Refusal(description: "Say all=true to purge everything.")) }
            return .success(.all)
        }
    }
}
