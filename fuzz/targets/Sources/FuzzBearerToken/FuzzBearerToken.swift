import Foundation
import NIOHTTP1
import PorticoPolicy

@testable import Portico

/// libFuzzer's entry point: the bytes as a bearer token (and as an `Authorization` field), read as
/// the JWT scheme reads one. Nothing crashes; a token that reads has exactly three parts, each
/// decoded part encodes back to the bytes sent (one encoding per value), and the signing input is
/// the first two parts as sent; its claims, checked against a fixed issuer and service, are refused
/// with a 401 or 403 problem or admitted with forwarded fields free of control characters.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBearerToken(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var headers = HTTPHeaders()
    if text.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) {
        headers.add(name: "authorization", value: "Bearer " + text)
        if let token = BearerAuthenticator.token(in: headers) {
            check(token.utf8.count <= text.utf8.count, "the token read is longer than what was sent")
        }
    }
    guard let jws = try? CompactJWS.read(text[...], maxBytes: 64 * 1024) else { return 0 }
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    check(parts.count == 3, "a token of \(parts.count) parts was read")
    check(jws.signingInput.elementsEqual((parts[0] + "." + parts[1]).utf8), "the signing input is not the first two parts")
    check(Base64URL.encode(jws.signature) == String(parts[2]), "the signature part has another encoding than its bytes'")
    for part in parts.prefix(2) {
        if let decoded = Base64URLDecoding.decode(part.utf8) {
            check(Base64URL.encode(decoded) == String(part), "a part decodes to bytes that encode otherwise")
        }
    }
    for now in [Int64(0), 1_800_000_000] {
        switch JWTClaimsCheck(issuer: FuzzIssuer.issuer, service: FuzzIssuer.service, now: now).check(jws.claims) {
        case .failure(let problem):
            check([401, 403].contains(problem.status.code), "a claim refused with \(problem.status.code)")
        case .success(let admitted):
            for (_, value) in admitted.forwarded {
                check(value.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F }, "a forwarded claim holds a control character")
            }
        }
    }
    return 0
}

enum FuzzIssuer {
    static let issuer: JWTIssuerPolicy = {
        var issuer = JWTIssuerPolicy(
            name: "corp", issuer: "https://id.example.com/", keys: .url("https://id.example.com/jwks"), audiences: ["portico"],
            algorithms: [.es256, .rs256])
        issuer.requiredClaims = ["exp", "sub"]
        return issuer
    }()

    static let service: ServiceJWTPolicy = {
        var service = ServiceJWTPolicy(issuers: ["corp"])
        service.scopes = ["orders.read"]
        service.claims = ["tenant": ["acme"]]
        service.forwardClaims = [("sub", "X-User-Id"), ("roles", "X-Roles")]
        return service
    }()
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}
