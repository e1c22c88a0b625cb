import Foundation
import PorticoHTTP
import PorticoPolicy
import PorticoReform

/// A `facade` version as the handler uses it: each source's reformer and backend resolved, the
/// order sources are tried in, and the request's parameters template split into segments.
///
/// Built once per compiled policy, shared by every request to that version.
final class CompiledFacade: Sendable {
    /// One source, ready to fetch and reform.
    struct Source: Sendable {
        let name: String
        let policy: FacadeSourcePolicy
        let reformer: Reformer
        /// `nil` only if the policy names a backend it does not define (a validated one never does).
        let backend: CompiledBackend?
    }

    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    let service: String
    let version: Int
    let contract: Contract
    let sources: [String: Source]
    /// The active source, then its fallbacks, in order; empty when the version aggregates.
    let chain: [Source]
    let shadow: Source?
    /// Fetched in parallel and merged, in the policy's order (earlier parts win a shared field).
    let aggregate: [Source]
    /// `nil`: the facade takes no path segments after the service prefix.
    let parameterSegments: [Segment]?

    init(_ policy: FacadePolicy, service: String, version: Int, backends: [String: CompiledBackend]) {
        self.service = service
        self.version = version
        contract = policy.contract
        var sources: [String: Source] = [:]
        for source in policy.sources {
            let reformer = Reformer(
                format: source.format, mappings: source.fields, csvHeader: source.header, maxBodyBytes: policy.maxBodyBytes)
            sources[source.name] = Source(name: source.name, policy: source, reformer: reformer, backend: backends[source.backend])
        }
        self.sources = sources
        chain = ((policy.active.map { [$0] } ?? []) + policy.fallback).compactMap { sources[$0] }
        shadow = policy.shadow.flatMap { sources[$0] }
        aggregate = policy.aggregate.compactMap { sources[$0] }
        parameterSegments = policy.parameters.map { template in
            template.split(separator: "/").map { segment in
                segment.hasPrefix("{") && segment.hasSuffix("}")
                    ? .parameter(String(segment.dropFirst().dropLast())) : .literal(String(segment))
            }
        }
    }

    /// The request's named values: the path after the service prefix matched against
    /// `parameters` (segments percent-decoded), then the query's parameters (the path wins a name
    /// both have). `nil` when the path does not fit the template: no such resource.
    func parameters(remainder: Substring, query: Substring?) -> [String: String]? {
        var values: [String: String] = [:]
        if var bytes = query {
            bytes.withUTF8 { bytes in
                QueryPairs.forEach(in: bytes) { key, value in
                    guard let name = Self.decode(query!.utf8Slice(key), query: true), !name.isEmpty else { return }
                    values[name] = value.map { Self.decode(query!.utf8Slice($0), query: true) ?? "" } ?? ""
                }
            }
        }
        let segments = remainder.split(separator: "/")
        let template = parameterSegments ?? []
        guard segments.count == template.count else { return nil }
        for (segment, expected) in zip(segments, template) {
            switch expected {
            case .literal(let text): guard segment == text else { return nil }
            case .parameter(let name):
                guard let value = Self.decode(segment, query: false) else { return nil }
                values[name] = value
            }
        }
        return values
    }

    /// A source's request path and query with its placeholders filled, each value
    /// percent-encoded as an RFC 3986 unreserved-only component; the first placeholder the
    /// request has no value for, or no usable one, instead.
    ///
    /// In the path part, a value of `.` or `..` would survive the encoding (both are unreserved)
    /// and let the backend's path resolution climb to a route the policy never published; an
    /// empty value would make `//`. Both are refused. In the query part any value is data.
    static func requestTarget(_ template: String, parameters: [String: String]) -> Result<String, ParameterProblem> {
        var target = ""
        var rest = template[...]
        let queryStart = template.firstIndex(of: "?") ?? template.endIndex
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            target += rest[..<open]
            let name = String(rest[rest.index(after: open)..<close])
            guard let value = parameters[name] else { return .failure(ParameterProblem(name: name, isMissing: true)) }
            if open < queryStart, value.isEmpty || value == "." || value == ".." {
                return .failure(ParameterProblem(name: name, isMissing: false))
            }
            percentEncode(value, into: &target)
            rest = rest[rest.index(after: close)...]
        }
        target += rest
        return .success(target)
    }

    /// A placeholder without a value (`isMissing`), or with one that cannot stand as a path segment.
    struct ParameterProblem: Error {
        let name: String
        let isMissing: Bool
    }

    /// `value` with every UTF-8 byte outside RFC 3986's unreserved set as `%XX` (upper-case hex).
    /// A value that needs no escape, the usual one, is appended as it is.
    private static func percentEncode(_ value: String, into target: inout String) {
        guard !value.utf8.allSatisfy(PathNormalizer.isUnreserved) else { return target += value }
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.utf8.count * 3)
        for byte in value.utf8 {
            if PathNormalizer.isUnreserved(byte) {
                bytes.append(byte)
            } else {
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        target += String(decoding: bytes, as: UTF8.self)
    }

    /// Percent-decoded; in a query (HTML form encoding) `+` is a space too. Text with neither
    /// (the usual) is taken as it is, without a trip through Foundation.
    private static func decode(_ text: Substring, query: Bool) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) || (query && text.utf8.contains(UInt8(ascii: "+"))) else { return String(text) }
        return (query ? String(text).replacingOccurrences(of: "+", with: " ") : String(text)).removingPercentEncoding
    }
}
