#if os(Linux)
import CPorticoClientCurl
import Foundation
import FoundationNetworking

/// Sends through libcurl, on Linux, when a ``ServerTrust`` other than ``ServerTrust/system`` is set:
/// FoundationNetworking's `URLSession` (itself on libcurl) offers its delegate no server-trust
/// challenge and has no CA setting, so a private CA or a pin can only be honoured one level down.
///
/// One easy handle per request, performed on a thread of its own (a blocking
/// `curl_easy_perform`), never on the caller's or the task pool's; cancelling the task aborts the transfer from
/// libcurl's progress callback. Failures are `URLError`s with the codes URLSession would use, so
/// ``PorticoAPIError`` classifies them the same way (`.transport`).
struct CurlSender: HTTPSender {
    /// PEM roots for `CURLOPT_CAINFO_BLOB`: the trust's CAs, after the system bundle when it trusts
    /// the system's roots too; `nil` leaves libcurl's own roots.
    private let caBundle: Data?
    /// Whether libcurl's built-in CA directory must be switched off (only the trust's CAs count).
    private let onlyTrustedAuthorities: Bool
    /// `sha256//A;sha256//B` for `CURLOPT_PINNEDPUBLICKEY`, or `nil`.
    private let pins: String?

    init(trust: ServerTrust) {
        if trust.certificateAuthorities.isEmpty {
            caBundle = nil
        } else {
            var bundle = trust.trustsSystemRoots ? (Self.systemBundle() ?? Data()) : Data()
            for certificate in trust.certificateAuthorities {
                let lines = certificate.base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
                bundle.append(Data("\n-----BEGIN CERTIFICATE-----\n\(lines)\n-----END CERTIFICATE-----\n".utf8))
            }
            caBundle = bundle
        }
        onlyTrustedAuthorities = !trust.trustsSystemRoots
        pins =
            trust.pinnedPublicKeys.isEmpty
            ? nil : trust.pinnedPublicKeys.map { "sha256//" + $0.base64EncodedString() }.joined(separator: ";")
    }

    func send(_ request: URLRequest) async throws -> HTTPAnswer {
        let transfer = CurlTransfer()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // A thread of its own, not Dispatch's global queue: on Linux Swift's tasks share
                // that queue's threads, about one per core, so a transfer blocking one for its
                // whole length would hold back the app's tasks, and tasks that block would hold
                // back the transfer (a CI run saw a request not sent within 30 s).
                let thread = Thread { continuation.resume(with: Result { try perform(request, transfer: transfer) }) }
                thread.name = "portico-curl"
                thread.start()
            }
        } onCancel: {
            transfer.cancelled.withLock { $0 = true }
        }
    }

    /// An event stream: the head is returned as soon as it has arrived, and the body's chunks
    /// are yielded as libcurl receives them. No total timeout: the request's `timeoutInterval`
    /// bounds connecting and each silence.
    func stream(_ request: URLRequest) async throws -> StreamedAnswer {
        let (body, chunks) = AsyncThrowingStream<Data, any Error>.makeStream()
        let transfer = CurlTransfer()
        chunks.onTermination = { _ in transfer.cancelled.withLock { $0 = true } }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (head: CheckedContinuation<StreamedAnswer, any Error>) in
                transfer.streaming = CurlTransfer.Streaming(
                    head: { status, headers in head.resume(returning: StreamedAnswer(status: status, headers: headers, body: body)) },
                    chunks: chunks)
                let thread = Thread {
                    do {
                        let answer = try perform(request, transfer: transfer, streaming: true)
                        // A head not passed on yet (an answer libcurl ended before its blank line).
                        transfer.streaming?.deliverHead(status: answer.status, headers: answer.headers)
                        chunks.finish()
                    } catch {
                        if !transfer.streaming!.headDelivered { head.resume(throwing: error) }
                        chunks.finish(throwing: error)
                    }
                }
                thread.name = "portico-curl-stream"
                thread.start()
            }
        } onCancel: {
            transfer.cancelled.withLock { $0 = true }
        }
    }

    var webSocketSession: URLSession? { nil }

    private func perform(_ request: URLRequest, transfer: CurlTransfer, streaming: Bool = false) throws -> HTTPAnswer {
        guard let url = request.url, let handle = portico_client_curl_easy_init() else {
            throw URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: "libcurl could not be loaded"])
        }
        defer { portico_client_curl_easy_cleanup(handle) }
        var fields: UnsafeMutableRawPointer?
        defer { if let fields { portico_client_curl_slist_free_all(fields) } }
        var errorText = [CChar](repeating: 0, count: 256)  // CURL_ERROR_SIZE

        let method = request.httpMethod ?? "GET"
        var code = url.absoluteString.withCString { portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_URL, $0) }
        func set(_ option: Int32, _ value: Int) {
            if code == PORTICO_CURLE_OK { code = portico_client_curl_setopt_long(handle, option, value) }
        }
        set(PORTICO_CURLOPT_NOSIGNAL, 1)
        // Through an `https_proxy`, the proxy's own `200 Connection established` is not the answer.
        set(PORTICO_CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        set(PORTICO_CURLOPT_SSLVERSION, Int(PORTICO_CURL_SSLVERSION_TLSv1_2))
        if streaming {
            // No total: connecting is bounded, then each silence, by the progress callback
            // (libcurl's low-speed limit averages over its window, so a short heartbeat would not
            // count as a sign of life).
            set(PORTICO_CURLOPT_CONNECTTIMEOUT_MS, Int(max(request.timeoutInterval, 0.001) * 1000))
            transfer.idleLimit = .milliseconds(Int64(max(request.timeoutInterval, 0.001) * 1000))
        } else {
            set(PORTICO_CURLOPT_TIMEOUT_MS, Int(max(request.timeoutInterval, 0.001) * 1000))
        }
        if code == PORTICO_CURLE_OK {
            code = "http,https".withCString { portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_PROTOCOLS_STR, $0) }
        }
        // Any encoding libcurl can decode, decoded, as URLSession does.
        if code == PORTICO_CURLE_OK {
            code = "".withCString { portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_ACCEPT_ENCODING, $0) }
        }
        if let caBundle, code == PORTICO_CURLE_OK {
            code = caBundle.withUnsafeBytes {
                portico_client_curl_setopt_blob(handle, PORTICO_CURLOPT_CAINFO_BLOB, $0.baseAddress, $0.count)
            }
            if onlyTrustedAuthorities, code == PORTICO_CURLE_OK {
                code = portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_CAPATH, nil)
            }
        }
        if let pins, code == PORTICO_CURLE_OK {
            code = pins.withCString { portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_PINNEDPUBLICKEY, $0) }
        }

        if method == "HEAD" {
            set(PORTICO_CURLOPT_NOBODY, 1)
        } else if method != "GET" || request.httpBody != nil {
            if code == PORTICO_CURLE_OK {
                code = method.withCString { portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_CUSTOMREQUEST, $0) }
            }
        }
        if let body = request.httpBody, code == PORTICO_CURLE_OK {
            code = portico_client_curl_setopt_off_t(handle, PORTICO_CURLOPT_POSTFIELDSIZE_LARGE, Int64(body.count))
            if code == PORTICO_CURLE_OK {
                code = body.withUnsafeBytes { bytes in
                    // COPYPOSTFIELDS copies, so the body need not outlive this call; an empty body
                    // still needs a valid pointer.
                    bytes.baseAddress.map { portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_COPYPOSTFIELDS, $0) }
                        ?? "".withCString { portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_COPYPOSTFIELDS, $0) }
                }
            }
        }
        // The request's own fields; an empty `Expect:` stops libcurl waiting for 100 Continue.
        var lines = (request.allHTTPHeaderFields ?? [:]).map { "\($0.key): \($0.value)" }
        if request.httpBody != nil { lines.append("Expect:") }
        for line in lines { fields = line.withCString { portico_client_curl_slist_append(fields, $0) } }
        if let fields, code == PORTICO_CURLE_OK { code = portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_HTTPHEADER, fields) }

        let context = Unmanaged.passUnretained(transfer).toOpaque()
        if code == PORTICO_CURLE_OK {
            code = portico_client_curl_setopt_data_callback(handle, PORTICO_CURLOPT_WRITEFUNCTION, curlWriteBody)
        }
        if code == PORTICO_CURLE_OK { code = portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_WRITEDATA, context) }
        if code == PORTICO_CURLE_OK {
            code = portico_client_curl_setopt_data_callback(handle, PORTICO_CURLOPT_HEADERFUNCTION, curlWriteHeader)
        }
        if code == PORTICO_CURLE_OK { code = portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_HEADERDATA, context) }
        if code == PORTICO_CURLE_OK {
            code = portico_client_curl_setopt_progress_callback(handle, PORTICO_CURLOPT_XFERINFOFUNCTION, curlProgress)
        }
        if code == PORTICO_CURLE_OK { code = portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_XFERINFODATA, context) }
        set(PORTICO_CURLOPT_NOPROGRESS, 0)
        guard code == PORTICO_CURLE_OK else { throw Self.error(code, detail: "") }

        code = errorText.withUnsafeMutableBufferPointer { buffer in
            var result = portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_ERRORBUFFER, buffer.baseAddress)
            if result == PORTICO_CURLE_OK { result = withExtendedLifetime(transfer) { portico_client_curl_easy_perform(handle) } }
            // libcurl must not keep the buffer's address past this closure.
            _ = portico_client_curl_setopt_pointer(handle, PORTICO_CURLOPT_ERRORBUFFER, nil)
            return result
        }
        if code == PORTICO_CURLE_ABORTED_BY_CALLBACK, transfer.idledOut, let idle = transfer.idleLimit {
            throw URLError(.timedOut, userInfo: [NSLocalizedDescriptionKey: "no byte from the server within \(idle)"])
        }
        guard code == PORTICO_CURLE_OK else {
            throw Self.error(code, detail: String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        var status = 0
        _ = portico_client_curl_getinfo_long(handle, PORTICO_CURLINFO_RESPONSE_CODE, &status)
        return HTTPAnswer(status: status, headers: transfer.headers, body: transfer.body)
    }

    /// libcurl's failure as the `URLError` URLSession gives for the same cause.
    static func error(_ code: Int32, detail: String) -> URLError {
        let urlCode: URLError.Code =
            switch code {
            case PORTICO_CURLE_COULDNT_RESOLVE_HOST: .cannotFindHost
            case PORTICO_CURLE_COULDNT_CONNECT: .cannotConnectToHost
            case PORTICO_CURLE_OPERATION_TIMEDOUT: .timedOut
            case PORTICO_CURLE_PEER_FAILED_VERIFICATION, PORTICO_CURLE_SSL_PINNEDPUBKEYNOTMATCH: .serverCertificateUntrusted
            case PORTICO_CURLE_SSL_CONNECT_ERROR, PORTICO_CURLE_SSL_CACERT_BADFILE: .secureConnectionFailed
            case PORTICO_CURLE_ABORTED_BY_CALLBACK: .cancelled
            case PORTICO_CURLE_GOT_NOTHING, PORTICO_CURLE_SEND_ERROR, PORTICO_CURLE_RECV_ERROR: .networkConnectionLost
            default: .unknown
            }
        let reason = String(validatingCString: portico_client_curl_easy_strerror(code)) ?? "libcurl error \(code)"
        return URLError(urlCode, userInfo: [NSLocalizedDescriptionKey: detail.isEmpty ? reason : "\(reason): \(detail)"])
    }

    /// The system's CA bundle: the one this libcurl was built to read, else the usual places.
    static func systemBundle() -> Data? {
        var paths = [
            "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem",
        ]
        if let handle = portico_client_curl_easy_init() {
            var path: UnsafePointer<CChar>?
            if portico_client_curl_getinfo_string(handle, PORTICO_CURLINFO_CAINFO, &path) == PORTICO_CURLE_OK, let path {
                if let text = String(validatingCString: path) { paths.insert(text, at: 0) }
            }
            portico_client_curl_easy_cleanup(handle)
        }
        return paths.lazy.compactMap { FileManager.default.contents(atPath: $0) }.first
    }
}

/// What one transfer has received; written only by the thread performing it, read after
/// `curl_easy_perform` returned, except ``cancelled``. A streamed transfer hands its head and body
/// on as they arrive instead (``streaming``).
final class CurlTransfer: @unchecked Sendable {
    /// Where a streamed transfer's head and chunks go. The head's closure holds the body until
    /// it is handed on, then is let go: the reader dropping the body must end the stream.
    struct Streaming {
        private var head: ((Int, [String: String]) -> Void)?
        let chunks: AsyncThrowingStream<Data, any Error>.Continuation
        private(set) var headDelivered = false

        init(head: @escaping (Int, [String: String]) -> Void, chunks: AsyncThrowingStream<Data, any Error>.Continuation) {
            self.head = head
            self.chunks = chunks
        }

        mutating func deliverHead(status: Int, headers: [String: String]) {
            guard let head else { return }
            self.head = nil
            headDelivered = true
            head(status, headers)
        }
    }

    var body = Data()
    var headers: [String: String] = [:]
    /// The status line's code of the answer being received.
    var status = 0
    var streaming: Streaming?
    let cancelled = Locked(false)
    /// A stream's longest silence, checked by the progress callback; and whether it ran out.
    var idleLimit: Duration?
    private(set) var idledOut = false
    private var lastActivity = ContinuousClock.now

    /// Whether the progress callback should abort the transfer: cancelled, or silent too long.
    func shouldAbort() -> Bool {
        if cancelled.withLock({ $0 }) { return true }
        guard let idleLimit, ContinuousClock.now - lastActivity > idleLimit else { return false }
        idledOut = true
        return true
    }

    /// One header line; a status line starts a new answer (after a 100 Continue, say), and the
    /// blank line ending a final answer's head passes it on when streaming.
    func received(headerLine: String) {
        lastActivity = ContinuousClock.now
        let line = headerLine.trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("HTTP/") {
            headers = [:]
            status = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        } else if line.isEmpty {
            if status >= 200 { streaming?.deliverHead(status: status, headers: headers) }
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
    }

    func received(body bytes: UnsafeRawPointer, count: Int) {
        lastActivity = ContinuousClock.now
        if let streaming {
            streaming.chunks.yield(Data(bytes: bytes, count: count))
        } else {
            body.append(bytes.assumingMemoryBound(to: UInt8.self), count: count)
        }
    }
}

private func curlWriteBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    transfer.received(body: UnsafeRawPointer(data), count: size * count)
    return size * count
}

private func curlWriteHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let bytes = UnsafeRawBufferPointer(start: data, count: size * count)
    transfer.received(headerLine: String(decoding: bytes, as: UTF8.self))
    return size * count
}

/// Non-zero aborts the transfer (`CURLE_ABORTED_BY_CALLBACK`): how a cancelled task stops it, and
/// a stream that has been silent too long. libcurl calls it about once a second, even when idle.
private func curlProgress(_ context: UnsafeMutableRawPointer?, _: Int64, _: Int64, _: Int64, _: Int64) -> Int32 {
    guard let context else { return 0 }
    return Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue().shouldAbort() ? 1 : 0
}
#endif
