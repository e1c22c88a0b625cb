import Foundation

extension ServiceLocatorDocument {
    /// The URL at which the gateway chooses the version of `service` itself, from the app's
    /// `X-Client-Version` (its compatibility buckets, then its default): the *active* endpoint.
    ///
    /// The document lists one URL per version, built from the service's path (`docs/locator.md`):
    /// the `{version}` segment filled in (`/api/2/stockquote`, `/api/v2/stockquote`), or
    /// `?apiVersion=2` for a path without one. The versionless URL is what those URLs share, which
    /// the gateway routes to the active choice:
    ///
    /// - one version: its URL (the gateway has nothing else to choose);
    /// - URLs that differ only in an `apiVersion` query item equal to their version: that item removed;
    /// - URLs whose paths differ in exactly one segment, which is each entry's version (or `v` and
    ///   it): that segment removed.
    ///
    /// Anything else (URLs on different hosts, say) gives `nil`: name a version instead.
    public func activeURL(service: String) -> URL? {
        let entries = services.filter { $0.name == service }
        guard let first = entries.first else { return nil }
        guard entries.count > 1 else { return first.url }
        let parts = entries.compactMap { URLComponents(url: $0.url, resolvingAgainstBaseURL: false) }
        guard parts.count == entries.count else { return nil }
        return Self.withoutQueryVersion(parts, entries) ?? Self.withoutPathVersion(parts, entries)
    }

    private static func withoutQueryVersion(_ parts: [URLComponents], _ entries: [Endpoint]) -> URL? {
        var stripped: [URLComponents] = []
        for (components, entry) in zip(parts, entries) {
            var items = components.percentEncodedQueryItems ?? []
            guard let index = items.firstIndex(where: { $0.name == "apiVersion" }), items[index].value == entry.version else { return nil }
            items.remove(at: index)
            var copy = components
            copy.percentEncodedQueryItems = items.isEmpty ? nil : items
            stripped.append(copy)
        }
        guard Set(stripped.compactMap(\.url)).count == 1 else { return nil }
        return stripped[0].url
    }

    private static func withoutPathVersion(_ parts: [URLComponents], _ entries: [Endpoint]) -> URL? {
        let paths = parts.map { $0.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: false) }
        guard Set(paths.map(\.count)).count == 1 else { return nil }
        let differing = paths[0].indices.filter { index in Set(paths.map { $0[index] }).count > 1 }
        guard differing.count == 1, let index = differing.first else { return nil }
        for (path, entry) in zip(paths, entries) where path[index] != entry.version && path[index] != "v" + entry.version {
            return nil
        }
        var rest = parts.map { components -> URLComponents in
            var copy = components
            copy.percentEncodedPath = ""
            return copy
        }
        guard Set(rest.compactMap(\.url)).count == 1 else { return nil }
        var path = paths[0]
        path.remove(at: index)
        rest[0].percentEncodedPath = path.joined(separator: "/")
        return rest[0].url
    }
}
