import Foundation
import NIOConcurrencyHelpers
import PorticoTestSupport
import PorticoTesting
import Testing

/// A real OTLP/HTTP receiver in a child process: Python decoding what the gateway posts with
/// OpenTelemetry's own protobuf definitions (`scripts/interop/otlp-receiver.py`).
final class OTLPCollector: Sendable {
    static let script = InteropTests.repositoryRoot.appendingPathComponent("scripts/interop/otlp-receiver.py").path
    static let installed = Repository.interopPythonImports("opentelemetry.proto")

    /// One span as the receiver decoded it.
    struct Span: Decodable, Sendable {
        var traceID: String
        var spanID: String
        var parentSpanID: String
        var name: String
        var kind: String
        var attributes: [String: Attribute]
        var status: String
        var service: String?
        var contentType: String?
        var authorization: String?

        enum CodingKeys: String, CodingKey {
            case traceID = "trace_id", spanID = "span_id", parentSpanID = "parent_span_id", name, kind, attributes, status, service
            case contentType = "content_type", authorization
        }

        func string(_ key: String) -> String? {
            if case .string(let value)? = attributes[key] { return value }
            return nil
        }

        func int(_ key: String) -> Int? {
            if case .int(let value)? = attributes[key] { return value }
            return nil
        }
    }

    enum Attribute: Decodable, Sendable, Equatable {
        case string(String), int(Int), bool(Bool), double(Double), other

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Int.self) {
                self = .int(value)
            } else if let value = try? container.decode(Double.self) {
                self = .double(value)
            } else if let value = try? container.decode(String.self) {
                self = .string(value)
            } else {
                self = .other
            }
        }
    }

    let process: ChildProcess
    let port: Int
    private let received = NIOLockedValueBox<[Span]>([])

    /// - Parameter arguments: `--status 503` for a collector that refuses, `--hold` for one that never answers.
    init(_ arguments: [String] = []) throws {
        process = try ChildProcess(InteropTests.python!, [Self.script] + arguments, standardInput: .pipe, standardOutput: .pipe)
        var line = Data()
        while let byte = try process.standardOutput!.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) { line += byte }
        port = Int(String(decoding: line, as: UTF8.self)) ?? 0
        let output = process.standardOutput!
        let received = received
        Thread.detachNewThread {
            var pending = Data()
            // `availableData`: whatever has arrived (a read of a given size waits until it is full).
            while case let chunk = output.availableData, !chunk.isEmpty {
                pending += chunk
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = pending[pending.startIndex..<newline]
                    pending = Data(pending[pending.index(after: newline)...])
                    if let span = try? JSONDecoder().decode(Span.self, from: line) { received.withLockedValue { $0.append(span) } }
                }
            }
        }
    }

    var endpoint: String { "http://127.0.0.1:\(port)/v1/traces" }
    var spans: [Span] { received.withLockedValue { $0 } }

    func spans(ofTrace traceID: String) -> [Span] { spans.filter { $0.traceID == traceID } }

    func stop() {
        try? process.standardInput?.close()
        _ = process.wait()
    }
}
