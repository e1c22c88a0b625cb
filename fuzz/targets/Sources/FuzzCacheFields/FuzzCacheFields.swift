import NIOCore
import NIOHTTP1
import PorticoHTTP

@testable import Portico
@testable import PorticoPolicy

/// libFuzzer's entry point: a backend's response fields and a client's request fields (lines of
/// `name: value`, the two blocks separated by a blank line), read as the response cache and
/// compression read them. Nothing crashes; the figures the cache keeps are sane (no negative or
/// infinite freshness, a date it reads formats back to itself); a stored entry survives the fleet
/// store's encoding unchanged; the bytes themselves read as an encoded entry never crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCacheFields(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let text = String(decoding: bytes, as: UTF8.self)
    let blocks = text.split(separator: "\n\n", maxSplits: 1, omittingEmptySubsequences: false)
    let response = fields(blocks.first ?? "")
    let request = fields(blocks.count > 1 ? blocks[1] : "")

    for (name, value) in response + request {
        if let moment = HTTPDate.parse(value) {
            check(HTTPDate.parse(HTTPDate.format(moment)) == moment, "a date read as \(moment) does not format back: \(value)")
        }
        let control = CacheControl(lines: [value])
        for delta in [control.maxAge, control.sMaxAge, control.minFresh, control.staleIfError, control.staleWhileRevalidate] {
            if let delta { check(delta >= 0 && delta <= CacheControl.maxDeltaSeconds, "\(name): delta \(delta) out of range") }
        }
    }
    let responseHeaders = HTTPHeaders(response)
    let requestHeaders = HTTPHeaders(request)
    _ = ResponseDirectives(responseHeaders)
    let key = CacheKey(service: "s", target: "/t")
    let cacheRequest = CacheRequest(key: key, version: 1, headers: requestHeaders, authenticated: false, isHEAD: false)
    let rules = CacheRules(service: ServicePolicyFixture.service, version: ServicePolicyFixture.version)!
    let storage = cacheRequest.storage(
        status: 200, headers: responseHeaders, contentLength: 10, rules: rules, maxObjectBytes: 1 << 20, responseTime: 1_800_000_000)
    if case .store(let freshness) = storage {
        check(freshness >= 0 && freshness.isFinite, "freshness \(freshness)")
        let entry = CachedResponse(
            key: key, version: 1, status: 200, headers: responseHeaders, body: ByteBuffer(string: "0123456789"), contentLength: 10,
            requestTime: 1_800_000_000, responseTime: 1_800_000_001, rules: rules, freshness: freshness, request: requestHeaders)
        check(entry.age(at: 1_800_000_010) >= 0, "negative age")
        _ = cacheRequest.usability(of: entry, at: 1_800_000_010)
        _ = cacheRequest.mayServeOnError(entry, at: 1_800_000_010)
        _ = CachedAnswer.notModified(requestHeaders, entry)
        _ = entry.matches(requestHeaders)
        let decoded = CachedResponse.decode(entry.encoded(), key: key, version: 1)
        check(decoded?.headers == entry.headers && decoded?.body == entry.body, "an entry does not survive its encoding")
        check(decoded?.varyValues == entry.varyValues, "an entry's Vary selection does not survive its encoding")
    }
    _ = CachedResponse.decode(ByteBuffer(bytes: bytes), key: key, version: 1)
    if let compression = CompressionRules(CompressionPolicy(), service: nil) {
        if let coding = compression.negotiate(requestHeaders) {
            check(compression.algorithms.contains(coding), "negotiated \(coding), which the policy does not list")
        }
        _ = compression.mayCompress(status: 200, headers: responseHeaders, contentLength: nil)
    }
    return 0
}

/// `name: value` lines; a line the HTTP decoder would refuse (no colon, a name that is not a
/// token, a NUL or CR in the value) is skipped, as it never reaches the cache.
private func fields(_ block: Substring) -> [(String, String)] {
    block.split(separator: "\n").compactMap { line in
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return nil }
        let name = String(line[..<colon])
        let value = String(line[line.index(after: colon)...].trimmingOptionalWhitespace())
        guard HeaderName.isToken(name), CachedResponse.isFieldValue(value) else { return nil }
        return (name, value)
    }
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}

/// A service that caches, with every policy default given a value.
private enum ServicePolicyFixture {
    static let version: VersionPolicy = {
        var version = VersionPolicy(handler: .proxy(ProxyPolicy(backend: "b", rewrite: nil)))
        version.cache = ServiceCachePolicy(
            defaultTTL: .seconds(30), staleWhileRevalidate: .seconds(10), staleIfError: .seconds(60))
        return version
    }()
    static let service = ServicePolicy(name: "s", path: "/t", versions: [1: version], defaultVersion: .latest)
}
