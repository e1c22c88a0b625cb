import NIOHTTP1
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
    var traceID: Substring { traceparent.count == 55 ? traceparent.dropFirst(3).prefix(32) : "" }
    /// The span id in `traceparent`: 16 hex digits.
    var spanID: Substring { traceparent.count == 55 ? traceparent.dropFirst(36).prefix(16) : "" }

    /// Sets them on a request, replacing any the client sent (which the gateway continued, if it
    /// trusted them, or replaced by a trace of its own).
    func write(to headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: "traceparent", value: traceparent)
        if let tracestate {
            headers.replaceOrAdd(name: "tracestate", value: tracestate)
        } else {
            headers.remove(name: "tracestate")
        }
    }
}
