import NIOCore
import NIOEmbedded
import NIOHTTP1
import PorticoHTTP

@testable import PorticoUpstream

/// libFuzzer's entry point: the bytes a backend sends on one connection, read by the upstream
/// connection's own HTTP/1.1 decoder (`HTTP1ResponseDecoder`). The first byte says whether the
/// requests were HEAD (bit 0) and where to cut the rest in two; up to four responses are read.
///
/// Checks: nothing crashes; what is read (heads, body bytes, ends, or the refusal and its reason)
/// does not depend on where the network cut the bytes (whole, cut in two at a point the input
/// picks, byte by byte); a body framed by a length is exactly that long; every field read is a
/// token and a value without a control byte; and, where NIO's own decoder also reads the first
/// response whole, both read the same status, the same fields and the same body.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBackendResponse(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard let control = input.first else { return 0 }
    let toHEAD = control & 1 == 1
    let bytes = Array(input.dropFirst())

    let whole = read([bytes[...]], toHEAD: toHEAD)
    let cut = Int(control >> 1) % (bytes.count + 1)
    let halves = read([bytes[..<cut], bytes[cut...]], toHEAD: toHEAD)
    let singles = read(bytes.indices.map { bytes[$0...$0] }, toHEAD: toHEAD)
    check(whole == halves, "the reading depends on the cut: \(whole) against \(halves)")
    check(whole == singles, "the reading depends on the cut: \(whole) against \(singles) byte by byte")

    if let first = whole.first, first.ended, let nio = nioReading(bytes, toHEAD: toHEAD) {
        check(first.status == nio.status, "NIO read status \(nio.status), Portico \(first.status)")
        check(first.fields.count == nio.fields.count, "NIO read \(nio.fields), Portico \(first.fields)")
        for (ours, theirs) in zip(first.fields, nio.fields) {
            check(ours.name == theirs.name, "NIO read field \(theirs), Portico \(ours)")
            check(ours.value == trimmed(theirs.value), "NIO read field \(theirs), Portico \(ours)")
        }
        // NIO's decoder delivers no body for 1xx, 204 and 304 either; a chunked or length body is the same bytes.
        check(first.body == nio.body, "NIO read a body of \(nio.body.count) bytes, Portico \(first.body.count)")
    }
    return 0
}

/// One response as read: its final status and fields, its body, whether it ended, and the
/// refusal that stopped the reading, if any.
struct Reading: Equatable {
    var interim: [Int] = []
    var status = 0
    var fields: [Field] = []
    var body: [UInt8] = []
    var ended = false
    var refusal: String?
}

struct Field: Equatable, CustomStringConvertible {
    var name: String
    var value: String
    var description: String { "\(name): \(value)" }
}

private func read(_ pieces: [ArraySlice<UInt8>], toHEAD: Bool) -> [Reading] {
    var decoder = HTTP1ResponseDecoder()
    decoder.expectResponse(toHEAD: toHEAD)
    var readings = [Reading()]
    var framedLength: Int?
    for piece in pieces {
        decoder.receive(ByteBuffer(bytes: piece))
        while true {
            let part: HTTP1ResponseDecoder.Part?
            do {
                part = try decoder.next()
            } catch {
                readings[readings.count - 1].refusal = error.detail
                return readings
            }
            guard let part else { break }
            switch part {
            case .interim(let status):
                check((100..<200).contains(status), "an interim status \(status)")
                readings[readings.count - 1].interim.append(status)
            case .head(let head, let framing, _):
                readings[readings.count - 1].status = head.status
                readings[readings.count - 1].fields = head.headers.map { Field(name: $0.name, value: $0.value) }
                for (name, value) in head.headers {
                    check(HeaderName.isToken(name) && WireSyntax.isFieldValue(value), "a field read is not sendable: \(name): \(value)")
                }
                if case .length(let length) = framing.body { framedLength = length } else { framedLength = nil }
                check(head.contentLength == framing.contentLength, "the head's length is not the framing's")
            case .body(let bytes):
                check(bytes.readableBytes > 0, "an empty body part")
                readings[readings.count - 1].body += bytes.readableBytesView
            case .end:
                if let framedLength {
                    check(readings[readings.count - 1].body.count == framedLength, "a body is not as long as its Content-Length")
                }
                readings[readings.count - 1].ended = true
                guard readings.count < 4 else { continue }
                readings.append(Reading())
                framedLength = nil
                decoder.expectResponse(toHEAD: toHEAD)
            }
        }
    }
    if decoder.endOfInput() == .end {
        readings[readings.count - 1].ended = true
    }
    return readings
}

/// The first response as NIO's decoder reads it, when it reads one whole without an error.
private func nioReading(_ bytes: [UInt8], toHEAD: Bool) -> (status: Int, fields: [Field], body: [UInt8])? {
    let channel = EmbeddedChannel()
    defer { _ = try? channel.finish() }
    let decoder = HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes, informationalResponseStrategy: .drop)
    guard (try? channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(decoder))) != nil else { return nil }
    // The decoder learns that the request was HEAD from the request going out.
    let head = HTTPRequestHead(version: .http1_1, method: toHEAD ? .HEAD : .GET, uri: "/")
    guard (try? channel.writeOutbound(HTTPClientRequestPart.head(head))) != nil else { return nil }
    guard (try? channel.writeInbound(ByteBuffer(bytes: bytes))) != nil else { return nil }
    var status = 0
    var fields: [Field] = []
    var body: [UInt8] = []
    while let part = try? channel.readInbound(as: HTTPClientResponsePart.self) {
        switch part {
        case .head(let head):
            status = Int(head.status.code)
            fields = head.headers.map { Field(name: $0.name, value: $0.value) }
        case .body(let bytes):
            body += bytes.readableBytesView
        case .end:
            return (status, fields, body)
        }
    }
    return nil
}

private func trimmed(_ value: String) -> String {
    String(Substring(value).trimmingOptionalWhitespace())
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzBackendResponse: \(message())") }
}
