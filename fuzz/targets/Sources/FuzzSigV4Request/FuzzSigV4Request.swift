import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy

@testable import Portico

/// libFuzzer's entry point: a request head (`METHOD target` on the first line, then `name: value`
/// lines), read as the SigV4 scheme reads one, against a fixed policy and clock. Nothing crashes;
/// credentials that read have a 32-byte signature and SignedHeaders sorted, lowercase and without
/// repeats; the canonical path and query hold only unreserved bytes, `/`, `=`, `&` and uppercase
/// `%XX`; a refusal is a 400, 401 or 403 problem.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSigV4Request(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    guard !lines.isEmpty else { return 0 }
    let requestLine = lines.removeFirst().split(separator: " ", maxSplits: 1)
    let method = HTTPMethod(rawValue: String(requestLine.first ?? "GET"))
    let uri = requestLine.count > 1 ? String(requestLine[1]) : "/"
    var head = HTTPRequestHead(version: .http1_1, method: method, uri: uri)
    for line in lines {
        guard let colon = line.firstIndex(of: ":") else { continue }
        let name = String(line[..<colon])
        // NIO traps on a name that is not a token; the HTTP parser never hands one over.
        guard HeaderName.isToken(name) else { continue }
        head.headers.add(name: name, value: String(line[line.index(after: colon)...].drop { $0 == " " }))
    }
    if let credentials = try? SigV4Credentials.read(head) {
        check(credentials.signature.count == 32, "a signature of \(credentials.signature.count) bytes was read")
        check(credentials.signedHeaders == credentials.signedHeaders.sorted(), "SignedHeaders out of order")
        check(Set(credentials.signedHeaders).count == credentials.signedHeaders.count, "SignedHeaders repeats a name")
        check(credentials.signedHeaders.allSatisfy { $0 == $0.lowercased() }, "SignedHeaders not lowercase")
    }
    let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    checkEncoded(SigV4Canonical.uri(path: path, encodesOnce: false), allowing: "/")
    checkEncoded(SigV4Canonical.query(uri, excludingSignature: true), allowing: "=&")
    for hasBody in [false, true] {
        switch FuzzSigV4Fixture.authenticator.authenticate(
            head, body: ByteBuffer(string: "body"), bodyArrived: true, hasBody: hasBody, service: FuzzSigV4Fixture.service,
            now: 1_440_938_160)
        {
        case .failure(let problem): check([400, 401, 403].contains(problem.status.code), "refused with \(problem.status.code)")
        case .success, .wait, .needsBody: break
        }
    }
    return 0
}

func checkEncoded(_ text: String, allowing extra: String) {
    let bytes = Array(text.utf8)
    var index = 0
    while index < bytes.count {
        let byte = bytes[index]
        if byte == UInt8(ascii: "%") {
            let digits = bytes[(index + 1)..<min(index + 3, bytes.count)]
            check(digits.count == 2 && digits.allSatisfy { "0123456789ABCDEF".utf8.contains($0) }, "a %XX not uppercase hex in \(text)")
            index += 3
            continue
        }
        let unreserved =
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "-._~".utf8.contains(byte)
        check(unreserved || extra.utf8.contains(byte), "byte \(byte) left bare in \(text)")
        index += 1
    }
}

enum FuzzSigV4Fixture {
    static let snapshot = try! PolicyLoader().load(sources: [
        (
            "fuzz.yaml",
            """
            listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
            backends: { iam: { url: "http://127.0.0.1:9" } }
            services:
              iam:
                path: /
                auth: sigv4
                sigv4: { region: us-east-1, service: iam }
                versions: { 1: { proxy: { backend: iam } } }
            keys:
              example: { accessKeyId: AKIDEXAMPLE, secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", demo: true, services: [iam] }
            """
        )
    ])
    static let service = snapshot.policy.services["iam"]!
    static let authenticator = SigV4Authenticator(credentials: Credentials(policy: snapshot.policy))
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}
