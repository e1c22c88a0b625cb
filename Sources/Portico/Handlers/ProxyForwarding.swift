import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoUpstream

/// What the `proxy` handler sends upstream and what it passes back, per RFC 9110 §7.6.
enum ProxyForwarding {
    /// Hop-by-hop fields (RFC 9110 §7.6.1 and the historical ones proxies still see).
    static let hopByHop = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization",
    ]

    /// Request fields the gateway sets itself (or, for `expect`, has already answered) instead of
    /// passing on.
    static let replacedOnRequest = [
        "host", "content-length", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-for", "x-request-id", "expect",
    ]

    /// Request fields through which a proxy tells a backend who the client is or what it asked for.
    /// No client is a trusted proxy, so a client's own are dropped: a backend that trusts
    /// `X-Real-IP` or `Forwarded` would otherwise take the client's word for its address, and one
    /// that honours `X-Original-URL` or `X-Rewrite-URL` (IIS, some PHP frameworks) would serve a
    /// path the gateway never routed.
    static let droppedOnRequest = [
        "forwarded", "x-real-ip", "x-original-url", "x-rewrite-url", "x-forwarded-port", "x-forwarded-prefix",
        "x-forwarded-server", "x-forwarded-scheme", "x-original-forwarded-for", "x-client-ip", "true-client-ip",
        "x-cluster-client-ip",
    ]

    /// Response fields the gateway sets itself. `Content-Length` is among them: the client's framing
    /// is the gateway's own, from the length the upstream client checked (or chunked by NIO), never
    /// the backend's field as sent, which could be a list, repeated, or padded with zeros.
    static let replacedOnResponse = ["x-request-id", "x-api-version", "content-length"]

    /// W3C trace-context fields. A traced exchange drops the client's and the backend's on the way
    /// through and writes its own (``TraceFields``); an untraced one passes them on untouched, so a
    /// gateway without tracing never breaks its callers' traces.
    static let traceContext = ["traceparent", "tracestate"]

    /// Field names listed in `Connection` values (RFC 9110 §7.6.1), lowercased; `close` and
    /// `keep-alive` are left out since they are dropped anyway.
    ///
    /// The fields are read by index, a value only where its name is `Connection`: iterating them
    /// as (name, value) pairs copied every value (a reference count each way) to compare names.
    static func connectionListed(_ fields: HTTPHeaders) -> [String] {
        var listed: [String] = []
        for index in fields.indices where HeaderName.matches(fields[index].name, "connection") {
            var value = fields[index].value
            value.withUTF8 { addListed(in: UnsafeRawBufferPointer($0), to: &listed) }
        }
        return listed
    }

    /// ``connectionListed(_:)-(HTTPHeaders)`` for a backend's fields as lines, read in place: an
    /// array is made only when a `Connection` field lists something other than `close` and
    /// `keep-alive` (a backend's `Connection: keep-alive` comes with nearly every response).
    static func connectionListed(_ fields: FieldLines) -> [String] {
        var listed: [String] = []
        fields.forEachField { name, value, _ in
            if HeaderName.matches(bytes: name, "connection") { addListed(in: value, to: &listed) }
            return true
        }
        return listed
    }

    /// Appends the names one `Connection` value lists, lowercased, but `close` and `keep-alive`.
    /// Its elements are read at the commas' bytes, without an array (``HTTP1Syntax/forEachElement(of:_:)``).
    private static func addListed(in value: UnsafeRawBufferPointer, to listed: inout [String]) {
        HTTP1Syntax.forEachElement(of: value) { option in
            if !option.isEmpty && !HeaderName.matches(bytes: option, "close") && !HeaderName.matches(bytes: option, "keep-alive") {
                listed.append(String(decoding: option, as: UTF8.self).lowercased())
            }
        }
    }

    /// The URL the backend receives: the target's URL prefix (origin and base path, compiled
    /// once), then the rewritten prefix (or the original path when the policy sets no rewrite),
    /// then the request's query unchanged. A request whose path comes out empty gets `/`.
    ///
    /// A request that left out its service's `{version}` segment is forwarded, without a rewrite,
    /// as if it had named the version chosen (`versionedPrefix`, then the rest of its path).
    static func upstreamURL(
        _ routed: RoutedRequest, proxy: ProxyPolicy, backend: CompiledBackend, target: CompiledTarget, versionedPrefix: String? = nil
    ) -> String {
        let pathIsEmpty: Bool
        var length = target.urlPrefix.utf8.count + 2
        if let rewrite = proxy.rewrite {
            pathIsEmpty = backend.basePath.isEmpty && rewrite.isEmpty && routed.remainder.isEmpty
            length += rewrite.utf8.count + routed.remainder.utf8.count
        } else if let versionedPrefix {
            pathIsEmpty = false
            length += versionedPrefix.utf8.count + routed.remainder.utf8.count
        } else {
            pathIsEmpty = backend.basePath.isEmpty && routed.path.isEmpty
            length += routed.path.utf8.count
        }
        if let query = routed.query { length += query.utf8.count }
        var url = ""
        url.reserveCapacity(length)
        url += target.urlPrefix
        if let rewrite = proxy.rewrite {
            url += rewrite
            url += routed.remainder
        } else if let versionedPrefix {
            url += versionedPrefix
            url += routed.remainder
        } else {
            url += routed.path
        }
        if pathIsEmpty { url += "/" }
        if let query = routed.query {
            url += "?"
            url += query
        }
        return url
    }

    /// The request sent to `target` of `backend`, whose origin, `Host` value, timeouts and client
    /// come compiled (``CompiledBackend``, ``CompiledTarget``). Each attempt's limit is the
    /// backend's `perTryTimeout`, if it retries, else its `timeout`.
    static func upstreamRequest(
        head: HTTPRequestHead, body: ByteBuffer?, routed: RoutedRequest, proxy: ProxyPolicy, backend: CompiledBackend,
        target: CompiledTarget, clientAddress: String?, scheme: String, requestID: String,
        credentials: CredentialFields = CredentialFields(),
        versionedPrefix: String? = nil, traced: Bool = false, eventIdleTimeout: Duration? = nil
    ) -> UpstreamRequest {
        // One pass over the client's fields, by index (see ``connectionListed(_:)``): a value is
        // copied only into the forwarded head. `Connection` is dropped as hop-by-hop; the names it
        // lists, rarely any, are taken out afterwards.
        let fields = head.headers
        // The lines' bytes are not known before they are written: room for the usual field, and
        // for the five the gateway adds.
        var headers = FieldLines(capacity: 256 + fields.count * 64)
        var host: String?
        var listsFields = false
        for index in fields.indices {
            let name = fields[index].name
            if HeaderName.matchesAny(name, hopByHop) || HeaderName.matchesAny(name, replacedOnRequest)
                || HeaderName.matchesAny(name, droppedOnRequest)
            {
                if host == nil, HeaderName.matches(name, "host") { host = fields[index].value }
                if HeaderName.matches(name, "connection") { listsFields = true }
                continue
            }
            if !credentials.dropped.isEmpty && HeaderName.matchesAny(name, credentials.dropped) { continue }
            if traced && HeaderName.matchesAny(name, traceContext) { continue }
            headers.add(name: name, value: fields[index].value)
        }
        if listsFields {
            // Matched as everywhere else here (`HeaderName`, letters' case only), not with
            // `HTTPHeaders.remove(name:)`, whose comparison also takes `^` for `~` and `@` for `` ` ``.
            let listed = connectionListed(fields)
            if !listed.isEmpty { headers.removeAll { HeaderName.matchesAny($0, listed) } }
        }
        for (name, value) in credentials.added { headers.add(name: name, value: value) }
        headers.add(name: "Host", value: target.hostHeader)
        // The peer's address alone: what a client wrote in the field is its own claim.
        if let clientAddress { headers.add(name: "X-Forwarded-For", value: clientAddress) }
        headers.add(name: "X-Forwarded-Proto", value: scheme)
        if let host { headers.add(name: "X-Forwarded-Host", value: host) }
        headers.add(name: "X-Request-Id", value: requestID)
        // `TE: trailers` is the one TE HTTP/2 allows, and gRPC requires it end to end (a backend
        // may refuse a gRPC call without it): passed on to an HTTP/2 backend, as it came.
        if backend.client == .http2, let te = head.headers.first(name: "te"), HeaderName.matches(te, "trailers") {
            headers.add(name: "te", value: "trailers")
        }

        // The request is made whole at once (returned from a `var` changed afterwards, it was copied).
        var timeout = backend.attemptTimeout(until: .distantFuture)
        // A gRPC deadline no longer than the attempt's limit (see GRPCTimeout); gRPC goes to HTTP/2 backends only.
        if backend.client == .http2, let field = head.headers.first(name: "grpc-timeout") {
            if let deadline = GRPCTimeout.parse(field), deadline < timeout {
                timeout = deadline
            } else {
                headers.replaceOrAdd(name: "grpc-timeout", value: GRPCTimeout.field(timeout))
            }
        }
        return UpstreamRequest(
            method: head.method.wireName,
            url: upstreamURL(routed, proxy: proxy, backend: backend, target: target, versionedPrefix: versionedPrefix),
            headers: headers, body: body, connectTimeout: backend.connectTimeout, timeout: timeout,
            eventIdleTimeout: eventIdleTimeout, trustedCAFile: backend.trustedCAFile, client: backend.client)
    }

    /// Whether a backend's response field reaches the client: not a hop-by-hop one, nor one
    /// `Connection` lists (`listed`, from ``connectionListed(_:)``), nor one the gateway sets
    /// itself, nor, on a traced exchange, a trace-context one.
    static func passesOn(_ name: String, listed: [String], traced: Bool) -> Bool {
        if HeaderName.matchesAny(name, hopByHop) || HeaderName.matchesAny(name, replacedOnResponse) { return false }
        if !listed.isEmpty && HeaderName.matchesAny(name, listed) { return false }
        return !(traced && HeaderName.matchesAny(name, traceContext))
    }

    /// The names a response field passes on unless it has (``hopByHop``, ``replacedOnResponse``),
    /// and ``traceContext``, as sets for names read as bytes.
    static let withheldOnResponse = HeaderNameSet(hopByHop + replacedOnResponse)
    static let traceContextNames = HeaderNameSet(traceContext)

    /// ``passesOn(_:listed:traced:)`` for a name read in place from a backend's lines.
    static func passesOn(bytes name: UnsafeRawBufferPointer, listed: [String], traced: Bool) -> Bool {
        if withheldOnResponse.contains(bytes: name) { return false }
        if !listed.isEmpty && HeaderName.matchesAny(bytes: name, listed) { return false }
        return !(traced && traceContextNames.contains(bytes: name))
    }

    /// The response head sent to the client: the backend's end-to-end fields, before
    /// ``ResponseDecoration`` adds the gateway's own.
    ///
    /// Framing: `Content-Length` is the backend's checked length (``UpstreamResponseHead/contentLength``),
    /// which the body either matches or is cut short of, so the client sees a cut; without one, the
    /// body is chunked (HTTP/1.1) or the connection's close ends it (HTTP/1.0). The length is
    /// dropped from 204 and 304 answers, and no body follows a head answering HEAD
    /// (``HTTP1ResponseSerializer``; on HTTP/2, NIO's codec). ``ResponseDecoration/headBytes(_:for:closing:serializer:)``
    /// writes the same fields as bytes, for an HTTP/1.1 client.
    static func responseHead(_ upstream: UpstreamResponseHead, version: HTTPVersion, traced: Bool = false) -> HTTPResponseHead {
        let listed = connectionListed(upstream.fields)
        var headers = HTTPHeaders()
        headers.reserveCapacity(upstream.fields.count + 5)
        for (name, value) in upstream.fields where passesOn(name, listed: listed, traced: traced) {
            headers.add(name: name, value: value)
        }
        if let length = upstream.contentLength { headers.add(name: "Content-Length", value: String(length)) }
        return HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: upstream.status), headers: headers)
    }
}
