import NIOHTTP1
import PorticoUpstream
import Tracing

/// Reads a trusted client's `traceparent` and `tracestate` for swift-otel's W3C propagator.
struct RequestFieldExtractor: Extractor {
    func extract(key: String, from headers: HTTPHeaders) -> String? {
        headers.first(name: key)
    }
}

/// Takes what the W3C propagator writes (`traceparent`, and `tracestate` when the trace has one).
struct TraceFieldsInjector: Injector {
    func inject(_ value: String, forKey key: String, into fields: inout TraceFields) {
        switch key {
        case "traceparent": fields.traceparent = value
        case "tracestate": fields.tracestate = value
        default: break
        }
    }
}

/// The W3C trace-context fields a request to a backend carries, naming the gateway's span.
struct TraceFields: Sendable {
    var traceparent = ""
    var tracestate: String?

    /// The trace id in `traceparent` (`00-<trace id>-<span id>-<flags>`): 32 hex digits.
    var traceID: Substring { digits(from: 3, count: 32) }
    /// The span id in `traceparent`: 16 hex digits.
    var spanID: Substring { digits(from: 36, count: 16) }

    /// ASCII throughout, so UTF-8 offsets are character offsets (and `count` would walk graphemes).
    private func digits(from start: Int, count: Int) -> Substring {
        let utf8 = traceparent.utf8
        guard utf8.count == 55 else { return "" }
        return Substring(utf8.dropFirst(start).prefix(count))
    }

    /// Sets them on a request. `replacing`: the request may carry such fields already (a previous
    /// attempt's), which go. A first attempt's request has none: the client's were left out when
    /// it was built (``ProxyForwarding/upstreamRequest(head:body:routed:proxy:backend:target:clientAddress:scheme:requestID:credentials:versionedPrefix:traced:eventIdleTimeout:)``),
    /// since the gateway continued them, if it trusted them, or started a trace of its own.
    func write(to headers: inout FieldLines, replacing: Bool) {
        if replacing {
            headers.remove(name: "traceparent")
            headers.remove(name: "tracestate")
        }
        headers.add(name: "traceparent", value: traceparent)
        if let tracestate { headers.add(name: "tracestate", value: tracestate) }
    }
}
