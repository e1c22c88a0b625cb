import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a call becomes an answer: resolve, credentials, cache and sharing for GETs, then the signed
/// exchange with its one safe retry.
extension PorticoAPI {
    func response(to request: APIRequest) async throws(PorticoAPIError) -> APIResponseData {
        let base = try await endpoint(of: request)
        let url = try request.url(base: base)
        let fields = try await credentialFields(for: request)
        guard request.method == "GET" else {
            let answer = try await exchange(request, url: url, credentials: fields, ifNoneMatch: nil)
            if request.method != "HEAD", (200..<400).contains(answer.status) {
                cache.withLock { $0.invalidate(url: url.absoluteString) }
            }
            return answer
        }
        var keyFields: [String: String] = [:]
        for (name, value) in request.headers.merging(fields, uniquingKeysWith: { _, credential in credential }) {
            keyFields[name.lowercased()] = value
        }
        let key = ResponseCache.Key(url: url.absoluteString, fields: keyFields)
        let (stored, generation) = cache.withLock { ($0.fresh(key, now: clock()), $0.generation) }
        if let stored { return stored }
        let result = await inFlight.value(for: SharedGet(key: key, generation: generation)) { [self] in
            do throws(PorticoAPIError) {
                return .success(try await revalidatingGet(request, url: url, credentials: fields, key: key, generation: generation))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// A GET that revalidates a stored answer when there is one, and stores what may be stored.
    private func revalidatingGet(
        _ request: APIRequest, url: URL, credentials: [String: String], key: ResponseCache.Key, generation: UInt64
    ) async throws(PorticoAPIError) -> APIResponseData {
        let etag = cache.withLock { $0.validator(key) }
        let answer = try await exchange(request, url: url, credentials: credentials, ifNoneMatch: etag)
        if answer.status == 304, etag != nil {
            if let stored = cache.withLock({ $0.revalidated(key, notModified: answer, now: clock(), generation: generation) }) {
                return stored
            }
            // Evicted, or the cache cleared or the URL written, while the request was out: ask
            // again, unconditionally.
            let full = try await exchange(request, url: url, credentials: credentials, ifNoneMatch: nil)
            cache.withLock { $0.store(key, full, now: clock(), generation: generation) }
            return full
        }
        cache.withLock { $0.store(key, answer, now: clock(), generation: generation) }
        return answer
    }

    /// The service's URL. A locator refused only because its genuine signature was made ahead of
    /// the device clock teaches the clock offset (that signed moment is the gateway's time), and
    /// the lookup is tried once more.
    func endpoint(of request: APIRequest) async throws(PorticoAPIError) -> URL {
        var resynced = false
        while true {
            do {
                if let version = request.version { return try await locator.url(for: request.service, version: version) }
                return try await locator.activeURL(for: request.service)
            } catch let error as ServiceLocatorError where !resynced && error.signedTime != nil {
                resynced = true
                let signed = error.signedTime!
                clockOffset.withLock { $0 = signed.timeIntervalSince(clock()) }
            } catch let error as ServiceLocatorError where error == .unreachable {
                // Nothing answered (no network, say, before a document was ever cached): the same
                // `.transport` as when the gateway itself cannot be reached, with the same error.
                throw .transport(error.underlying ?? error)
            } catch {
                throw .locator(error)
            }
        }
    }

    func credentialFields(for request: APIRequest) async throws(PorticoAPIError) -> [String: String] {
        guard let credentials else { return [:] }
        do {
            return try await credentials.fields(for: request)
        } catch {
            throw .credentials(error, what: "the request credentials")
        }
    }

    /// Signs and sends, with the retries that are safe: once after a clock-skew refusal (the
    /// clock offset corrected), once after a short `Retry-After`, each for idempotent requests only.
    func exchange(
        _ request: APIRequest, url: URL, credentials: [String: String], ifNoneMatch: String?
    ) async throws(PorticoAPIError) -> APIResponseData {
        var resynced = false
        var waited = false
        while true {
            let answer = try await sendSigned(request, url: url, credentials: credentials, ifNoneMatch: ifNoneMatch)
            if !resynced, learnsClockOffset(from: answer) {
                resynced = true
                if request.isIdempotent { continue }
            }
            if answer.status == 429 || answer.status == 503, request.isIdempotent, !waited,
                let delay = answer.retryAfter(now: clock()), delay <= configuration.maximumRetryDelay
            {
                waited = true
                do {
                    try await self.sleep(delay)
                } catch {
                    throw .cancelled
                }
                continue
            }
            return answer
        }
    }

    /// A clock-skew refusal sets the clock offset from the gateway's time (for later calls too, a
    /// POST's included); true when `answer` was one.
    func learnsClockOffset(from answer: APIResponseData) -> Bool {
        guard answer.status == 401, answer.problem?.porticoType == "clock-skew", let serverTime = Self.serverTime(of: answer) else {
            return false
        }
        clockOffset.withLock { $0 = serverTime.timeIntervalSince(clock()) }
        return true
    }

    /// What a sender's failure means to the caller: the task's cancellation, or no answer.
    static func sendingFailed(_ error: any Error) -> PorticoAPIError {
        Task.isCancelled || (error as? URLError)?.code == .cancelled ? .cancelled : .transport(error)
    }

    /// The gateway's time: its `Date`, or the problem's `serverTime` (seconds since 1970).
    private static func serverTime(of answer: APIResponseData) -> Date? {
        if let date = answer.date { return date }
        return answer.problem?.extensions["serverTime"].flatMap(TimeInterval.init).map(Date.init(timeIntervalSince1970:))
    }

    private func sendSigned(
        _ request: APIRequest, url: URL, credentials: [String: String], ifNoneMatch: String?
    ) async throws(PorticoAPIError) -> APIResponseData {
        if Task.isCancelled { throw .cancelled }
        var urlRequest = try await signedRequest(request, url: url, credentials: credentials, ifNoneMatch: ifNoneMatch)
        urlRequest.timeoutInterval = configuration.timeout
        let answer: HTTPAnswer
        do {
            answer = try await sender.send(urlRequest)
        } catch {
            throw Self.sendingFailed(error)
        }
        return APIResponseData(status: answer.status, headers: answer.headers, body: answer.body)
    }

    /// `request` at `url`, with its fields, the credentials' fields and `extra` (an event stream's
    /// `Last-Event-ID`), signed: the identity fields, `Content-Type`, the credentials' fields, the
    /// configuration's covered fields and `extra`'s are covered, and `Content-Digest` for a body.
    func signedRequest(
        _ request: APIRequest, url: URL, credentials: [String: String], ifNoneMatch: String? = nil, accept: String? = "application/json",
        extra: [String: String] = [:]
    ) async throws(PorticoAPIError) -> URLRequest {
        var urlRequest = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: configuration.timeout)
        urlRequest.httpMethod = request.method
        if let accept { urlRequest.setValue(accept, forHTTPHeaderField: "Accept") }
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if let body = request.body {
            urlRequest.httpBody = body
            if urlRequest.value(forHTTPHeaderField: "Content-Type") == nil {
                urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
            }
        }
        for (name, value) in credentials { urlRequest.setValue(value, forHTTPHeaderField: name) }
        for (name, value) in extra { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if let ifNoneMatch { urlRequest.setValue(ifNoneMatch, forHTTPHeaderField: "If-None-Match") }

        var signer = try await loadSigner()
        signer.coveredFields =
            ["content-type"] + credentials.keys.sorted().map { $0.lowercased() } + configuration.coveredFields
            + extra.keys.sorted().map { $0.lowercased() }
        do {
            try urlRequest.sign(with: signer)
        } catch {
            throw .signing(error)
        }
        return urlRequest
    }

    /// The signer, made once from the secret; its clock is the device's plus the learnt offset.
    private func loadSigner() async throws(PorticoAPIError) -> RequestSigner {
        if let signer = signer.withLock({ $0 }) { return signer }
        let text: String
        do {
            text = try await secret.load()
        } catch {
            throw .credentials(error, what: "the secret source")
        }
        let clock = self.clock
        let offset = clockOffset
        let made = RequestSigner(
            keyID: keyID, secret: text, identity: identity, clock: { clock().addingTimeInterval(offset.withLock { $0 }) })
        signer.withLock { $0 = made }
        return made
    }
}
