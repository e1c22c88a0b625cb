import Foundation
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream

/// Where a handler's response goes: the connection's handler, on its event loop. Events for an
/// exchange that is no longer the connection's current one (its client left) are dropped there.
protocol ExchangeResponder: AnyObject {
    /// The response, as the upstream client delivers it (a facade's or code handler's whole answer
    /// is delivered the same way, so that it is decorated and logged as a backend's is).
    func handlerReceived(_ events: UpstreamEvents, for exchange: Exchange)
    /// The handler answers with a problem instead.
    func handlerAnswered(_ problem: Problem, for exchange: Exchange)
}

extension ExchangeResponder {
    /// Delivers a whole answer made by the gateway (a facade's contract object, a code handler's
    /// response, the service locator's document) as one response.
    func handlerFinished(
        _ exchange: Exchange, status: Int, headers: HTTPHeaders, body: ByteBuffer?, contentLength: Int?,
        upstreamDuration: Duration = .zero
    ) {
        handlerFinished(
            exchange, status: status, fields: FieldLines(headers), body: body, contentLength: contentLength,
            upstreamDuration: upstreamDuration)
    }

    /// ``handlerFinished(_:status:headers:body:contentLength:upstreamDuration:)`` with the fields as
    /// the lines the answer keeps them as.
    func handlerFinished(
        _ exchange: Exchange, status: Int, fields: FieldLines, body: ByteBuffer?, contentLength: Int?,
        upstreamDuration: Duration = .zero
    ) {
        let head = UpstreamResponseHead(status: status, fields: fields, contentLength: contentLength)
        let metrics = UpstreamMetrics(duration: upstreamDuration, newConnections: 0)
        handlerReceived(UpstreamEvents(head: head, body: body, result: .success(metrics)), for: exchange)
    }

    /// A facade's or code handler's body, written with the headers the gateway gives such answers;
    /// a HEAD answer describes the body it leaves out (RFC 9110 §9.3.2).
    func handlerFinished(_ exchange: Exchange, status: Int, body data: Data, contentType: String) {
        var fields = FieldLines(capacity: 64 + contentType.utf8.count)
        fields.add(name: "content-type", value: contentType)
        fields.add(name: "cache-control", value: "no-store")
        let body = exchange.head.method == .HEAD ? nil : ByteBuffer(bytes: data)
        handlerFinished(
            exchange, status: status, fields: fields, body: body, contentLength: data.count,
            upstreamDuration: exchange.outcome.upstreamDuration ?? .zero)
    }
}
