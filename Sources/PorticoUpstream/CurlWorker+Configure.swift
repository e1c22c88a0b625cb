import CPorticoCurl
import NIOCore
import NIOHTTP1
import PorticoHTTP

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// libcurl callbacks. They receive the transfer through their userdata pointer (unretained: the
/// worker's `active` table owns transfers while libcurl may call back).
private let headerCallback: portico_curl_data_callback = { data, size, count, userdata in
    let length = size * count
    guard let data, let userdata else { return length }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    // Any other value than `length` makes libcurl abort the transfer.
    return transfer.receivedHeaderLine(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}

private let writeCallback: portico_curl_data_callback = { data, size, count, userdata in
    let length = size * count
    guard let data, let userdata else { return length }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    switch transfer.receivedBody(UnsafeRawBufferPointer(start: data, count: length)) {
    case .accept: return length
    case .pause: return portico_curl_writefunc_pause()
    case .abort: return 0
    }
}

private let socketOptionCallback: portico_curl_sockopt_callback = { userdata, socket, _ in
    guard let userdata else { return CURL_SOCKOPT_OK }
    Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue().opened(socket)
    return CURL_SOCKOPT_OK
}

/// Set on every transfer, but libcurl keeps the one of the transfer that opened a connection and
/// calls it whenever it closes that connection, possibly long after: hence the worker's table, not
/// the transfer, as its data.
private let closeSocketCallback: portico_curl_closesocket_callback = { userdata, socket in
    if let userdata { Unmanaged<BackendSockets>.fromOpaque(userdata).takeUnretainedValue().closed(socket) }
    return close(socket)
}

private let preRequestCallback: portico_curl_prereq_callback = { userdata, peerAddress, _, peerPort, localPort in
    guard let userdata, let peerAddress else { return CURL_PREREQFUNC_OK }
    let connection = BackendSockets.Connection(
        localPort: Int(localPort), peerPort: Int(peerPort), peerAddress: String(cString: peerAddress))
    let ready = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue().connectionReady(connection)
    return ready ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT
}

/// Only libcurl's informational text is read (see ``CurlTransfer/libcurlSaid(_:)``); the header and
/// data it also reports here are ignored.
private let debugCallback: portico_curl_debug_callback = { _, type, data, size, userdata in
    guard type == CURLINFO_TEXT, let data, let userdata else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    transfer.libcurlSaid(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

extension CurlWorker {
    /// Sets every option an exchange needs on a fresh (or reset) easy handle. Returns a problem
    /// description when libcurl refuses an option.
    func configure(_ easy: UnsafeMutableRawPointer, for request: UpstreamRequest, transfer: CurlTransfer) -> String? {
        let me = Unmanaged.passUnretained(transfer).toOpaque()
        var failed: String?
        func check(_ code: CURLcode, _ what: String) {
            if code != CURLE_OK, failed == nil { failed = "\(what): \(String(cString: curl_easy_strerror(code)))" }
        }

        check(portico_easy_setopt_pointer(easy, CURLOPT_URL, request.url), "URL")
        check(portico_easy_setopt_pointer(easy, CURLOPT_PRIVATE, me), "private")
        check(portico_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1), "nosignal")
        check(portico_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1), "http version")
        check(portico_easy_setopt_long(easy, CURLOPT_PATH_AS_IS, 1), "path as is")
        // An empty proxy disables the http_proxy/HTTPS_PROXY environment variables: backends are
        // addressed directly.
        check(portico_easy_setopt_pointer(easy, CURLOPT_PROXY, ""), "proxy")
        check(portico_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(request.connectTimeout)), "connect timeout")
        if Self.asksForEventStream(request.headers) {
            // An event stream lasts as long as its backend has events: no bound on the whole
            // transfer, but one on each wait (under one byte a second for that long is a wait).
            // libcurl fixes its limits before the answer's head says what it is, so the request's
            // Accept decides; its speed check is whole seconds.
            let idle = request.eventIdleTimeout ?? request.timeout
            transfer.eventWait = idle
            let seconds = (Self.milliseconds(idle) + 999) / 1000
            check(portico_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, 0), "timeout")
            check(portico_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1), "low speed limit")
            check(portico_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, seconds), "low speed time")
        } else {
            check(portico_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Self.milliseconds(request.timeout)), "timeout")
        }
        check(portico_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, transfer.errorBuffer), "error buffer")
        if let caFile = request.trustedCAFile { check(portico_easy_setopt_pointer(easy, CURLOPT_CAINFO, caFile), "CA file") }
        check(portico_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION, headerCallback), "header function")
        check(portico_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, me), "header data")
        check(portico_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, writeCallback), "write function")
        check(portico_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, me), "write data")
        // libcurl tells of bytes beyond a response's framing only in its verbose text; with a debug
        // function set, that text goes to it (not to stderr). Its cost: docs/upstream.md.
        check(portico_easy_setopt_long(easy, CURLOPT_VERBOSE, 1), "verbose")
        check(portico_easy_setopt_debug_callback(easy, CURLOPT_DEBUGFUNCTION, debugCallback), "debug function")
        check(portico_easy_setopt_pointer(easy, CURLOPT_DEBUGDATA, me), "debug data")
        // Each transfer learns its connection's socket, to see bytes the backend sent past the end of
        // its response (see BackendSockets).
        let sockets = Unmanaged.passUnretained(self.sockets).toOpaque()
        check(portico_easy_setopt_sockopt_callback(easy, CURLOPT_SOCKOPTFUNCTION, socketOptionCallback), "socket option function")
        check(portico_easy_setopt_pointer(easy, CURLOPT_SOCKOPTDATA, me), "socket option data")
        check(portico_easy_setopt_closesocket_callback(easy, CURLOPT_CLOSESOCKETFUNCTION, closeSocketCallback), "close socket function")
        check(portico_easy_setopt_pointer(easy, CURLOPT_CLOSESOCKETDATA, sockets), "close socket data")
        check(portico_easy_setopt_prereq_callback(easy, CURLOPT_PREREQFUNCTION, preRequestCallback), "pre-request function")
        check(portico_easy_setopt_pointer(easy, CURLOPT_PREREQDATA, me), "pre-request data")

        let method = request.method
        let bodyLength = request.body?.readableBytes ?? 0
        let sendsBody = bodyLength > 0 || ["POST", "PUT", "PATCH"].contains(method)
        if method == "HEAD" {
            check(portico_easy_setopt_long(easy, CURLOPT_NOBODY, 1), "nobody")
        } else if sendsBody {
            check(portico_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bodyLength)), "body size")
            if let body = request.body, bodyLength > 0 {
                body.withUnsafeReadableBytes { bytes in
                    check(portico_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, bytes.baseAddress), "body")
                }
            } else {
                check(portico_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, ""), "body")
            }
            if method != "POST" { check(portico_easy_setopt_pointer(easy, CURLOPT_CUSTOMREQUEST, method), "method") }
        } else {
            check(portico_easy_setopt_long(easy, CURLOPT_HTTPGET, 1), "get")
            if method != "GET" { check(portico_easy_setopt_pointer(easy, CURLOPT_CUSTOMREQUEST, method), "method") }
        }

        // The caller chose every header. Blank out the ones libcurl would add on its own.
        var list: UnsafeMutablePointer<curl_slist>?
        var sendsAccept = false
        var sendsExpect = false
        var sendsContentType = false
        // Each line as libcurl takes it, read in place: `name: value`, or `name;` for an empty
        // value (which `name:` would tell libcurl to leave out), NUL-terminated.
        request.headers.forEachLine { name, value in
            switch name.count {
            case 6 where HeaderName.matches(bytes: name, "accept"): sendsAccept = true
            case 6 where HeaderName.matches(bytes: name, "expect"): sendsExpect = true
            case 12 where HeaderName.matches(bytes: name, "content-type"): sendsContentType = true
            default: break
            }
            let length = name.count + (value.isEmpty ? 1 : 2 + value.count)
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length + 1) { line in
                var end = line.initialize(fromContentsOf: name)
                if value.isEmpty {
                    line[end] = UInt8(ascii: ";")
                    end += 1
                } else {
                    line[end] = UInt8(ascii: ":")
                    line[end + 1] = UInt8(ascii: " ")
                    end = UnsafeMutableBufferPointer(rebasing: line[(end + 2)...]).initialize(fromContentsOf: value) + end + 2
                }
                line[end] = 0
                list = line.withMemoryRebound(to: CChar.self) { curl_slist_append(list, $0.baseAddress) }
            }
            return true
        }
        if !sendsAccept { list = curl_slist_append(list, "Accept:") }
        if !sendsExpect { list = curl_slist_append(list, "Expect:") }
        if !sendsContentType { list = curl_slist_append(list, "Content-Type:") }
        transfer.headerList = list
        check(portico_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, list), "headers")
        return failed
    }

    static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return max(1, Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
    }
}

extension CurlWorker {
    /// Whether a request takes event streams only (`Accept: text/event-stream`, as EventSource sends
    /// it): the one sign, before the answer's head, that it may stay open for long.
    static func asksForEventStream(_ headers: FieldLines) -> Bool {
        var accepted = false
        for (name, value) in headers where HeaderName.matches(name, "accept") {
            for range in HTTP1Syntax.ListElements(value) where !range.isEmpty {
                let mediaType = Substring(range.utf8.prefix { $0 != UInt8(ascii: ";") }).trimmingOptionalWhitespace()
                guard HeaderName.matches(mediaType, "text/event-stream") else { return false }
                accepted = true
            }
        }
        return accepted
    }
}
