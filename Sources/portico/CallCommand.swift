import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import PorticoUpstream

/// `portico call`: signs a request like `portico sign` and sends it with libcurl.
///
/// Exits with 22 (as `curl --fail` does) when the answer is 4xx or 5xx, so scripts notice a
/// refused signature; `--no-fail` turns that off.
struct CallCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call",
        abstract: "Sign a request and send it; print the response body (and with -i its status and headers).",
        discussion: """
            Example:
              portico call --key-id demo-app --secret-file policies/secrets/demo-app.secret \\
                  --cacert certs/dev/ca.pem -i https://localhost:8443/api/1/stockquote/AAPL
            """)

    @OptionGroup var request: SigningOptions

    @Flag(name: [.customShort("i"), .customLong("include")], help: "Print the status line and header fields before the body.")
    var include = false

    @Flag(name: .customLong("no-fail"), help: "Exit 0 on 4xx and 5xx answers too.")
    var noFail = false

    @Option(help: "CA certificates (PEM) an https server must chain to; default: $CURL_CA_BUNDLE, else the system's.")
    var cacert: String?

    @Option(name: .customLong("max-time"), help: "Seconds the whole exchange may take.")
    var maxTime: Int64 = 30

    func run() async throws {
        let url = try request.requestURL()
        var headers = try request.headerFields()
        let signed = try request.signedFields()
        headers.removeAll { field in signed.contains { $0.name.lowercased() == field.name.lowercased() } }
        var upstream = UpstreamRequest(
            method: request.method, url: url.absoluteString, headers: headers + signed,
            body: try request.body().map { ByteBuffer(bytes: $0) }, connectTimeout: .seconds(min(maxTime, 10)), timeout: .seconds(maxTime))
        upstream.trustedCAFile = cacert ?? ProcessInfo.processInfo.environment["CURL_CA_BUNDLE"]

        let response = try await Self.send(upstream)
        var output = Data()
        if include {
            output.append(contentsOf: "HTTP \(response.status)\n".utf8)
            for (name, value) in response.headers { output.append(contentsOf: "\(name): \(value)\n".utf8) }
            output.append(contentsOf: "\n".utf8)
        }
        output.append(contentsOf: response.body.readableBytesView)
        FileHandle.standardOutput.write(output)
        if response.status >= 400 && !noFail {
            if !include { FileHandle.standardError.write(Data("portico call: HTTP \(response.status)\n".utf8)) }
            throw ExitCode(22)
        }
    }

    /// The whole response of one exchange through the gateway's own libcurl client.
    static func send(_ request: UpstreamRequest) async throws -> CollectedResponse {
        let client = CurlUpstreamClient()
        defer { client.shutdown() }
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = eventLoop.makePromise(of: CollectedResponse.self)
        try await eventLoop.submit {
            let collector = ResponseCollector(promise: promise)
            collector.task = client.execute(request, eventLoop: eventLoop, handler: collector)
        }.get()
        return try await promise.futureResult.get()
    }
}

struct CollectedResponse: Sendable {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: ByteBuffer
}

/// Gathers one exchange's events on its event loop, returning flow-control credit as it goes.
final class ResponseCollector: UpstreamResponseHandler {
    private let promise: EventLoopPromise<CollectedResponse>
    private var response = CollectedResponse(status: 0, headers: [], body: ByteBuffer())
    var task: (any UpstreamTask)?

    init(promise: EventLoopPromise<CollectedResponse>) {
        self.promise = promise
    }

    func upstreamReceived(_ events: UpstreamEvents) {
        if let head = events.head {
            response.status = head.status
            response.headers = head.headers.map { ($0.name, $0.value) }
        }
        if var body = events.body {
            let count = body.readableBytes
            response.body.writeBuffer(&body)
            if events.result == nil { task?.consumed(bytes: count) }
        }
        switch events.result {
        case .success?: promise.succeed(response)
        case .failure(let error)?: promise.fail(CallError(error))
        case nil: break
        }
    }
}

/// A failed exchange, in the words curl would use.
struct CallError: Error, CustomStringConvertible {
    let error: UpstreamError
    init(_ error: UpstreamError) { self.error = error }
    var description: String { "the request failed: \(error.detail)" }
}
