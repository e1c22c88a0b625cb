import Foundation
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoSigning

/// The header fields a signature check reads, found in one pass over the head: looked up one by
/// one, they cost six scans of every field name and two arrays.
///
/// The pass notes where each field is and copies no value: a value is read where it is used.
/// (Holding them as strings cost a reference count each way per field, again for each copy of
/// this struct, and most of them are read once.)
struct SignatureHeadFields {
    private let headers: HTTPHeaders
    private var signatureInputAt: HTTPHeaders.Index?
    private var signatureAt: HTTPHeaders.Index?
    private var contentDigestAt: HTTPHeaders.Index?
    private var hostAt: HTTPHeaders.Index?
    /// Whether a signature field has more than one line (the lines are then joined).
    private var signatureInputRepeated = false
    private var signatureRepeated = false
    private(set) var hasClientVersion = false
    private(set) var hasClientPlatform = false

    /// `clientVersionHeader` and `clientPlatformHeader` are lowercase.
    ///
    /// The head is read by index, and a field's value only once its name matches: iterating the
    /// fields as (name, value) pairs copied every value (a reference count each way) just to
    /// compare names.
    init(_ headers: HTTPHeaders, clientVersionHeader: String, clientPlatformHeader: String) {
        self.headers = headers
        let versionLength = clientVersionHeader.utf8.count
        let platformLength = clientPlatformHeader.utf8.count
        for index in headers.indices {
            let name = headers[index].name
            // Told apart by length first: most fields match none of these names, and are then
            // passed over after one comparison of lengths instead of six of names.
            let length = name.utf8.count
            switch length {
            case 15 where HeaderName.matches(name, "signature-input"):
                if signatureInputAt == nil { signatureInputAt = index } else { signatureInputRepeated = true }
            case 9 where HeaderName.matches(name, "signature"):
                if signatureAt == nil { signatureAt = index } else { signatureRepeated = true }
            case 14 where HeaderName.matches(name, "content-digest"):
                if contentDigestAt == nil { contentDigestAt = index }
            case 4 where HeaderName.matches(name, "host"):
                if hostAt == nil { hostAt = index }
            default:
                break
            }
            // Apart from the names above: a policy may name any field for the client's identity,
            // even one of those, and it must then be covered all the same.
            if length == versionLength, HeaderName.matches(name, clientVersionHeader) { hasClientVersion = true }
            if length == platformLength, HeaderName.matches(name, clientPlatformHeader) { hasClientPlatform = true }
        }
    }

    /// `Signature-Input` and `Signature`, each field's lines joined with ", " (RFC 9110 §5.3).
    var signatureInput: String? { value(at: signatureInputAt, repeated: signatureInputRepeated, name: "signature-input") }
    var signature: String? { value(at: signatureAt, repeated: signatureRepeated, name: "signature") }
    /// The first `Content-Digest` line, checked against the body later.
    var contentDigest: String? { contentDigestAt.map { headers[$0].value } }
    /// The first `Host` line: `@authority`.
    var host: String? { hostAt.map { headers[$0].value } }

    private func value(at first: HTTPHeaders.Index?, repeated: Bool, name: String) -> String? {
        guard let first else { return nil }
        guard repeated else { return headers[first].value }
        return headers.filter { HeaderName.matches($0.name, name) }.map(\.value).joined(separator: ", ")
    }
}
