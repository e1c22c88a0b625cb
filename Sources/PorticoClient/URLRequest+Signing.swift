import Foundation
import PorticoSigning

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLRequest {
    /// Signs this request in place: sets the identity fields, `Content-Digest` (when there is a
    /// body), `Signature-Input` and `Signature`, replacing earlier values.
    ///
    /// Sign last, after every covered field and the body are final: a change afterwards breaks
    /// the signature. Each call draws a new nonce, so a request retried by the app must be signed
    /// again (the gateway refuses a replayed nonce with 401).
    ///
    /// - Throws: ``ClientSigningError/bodyStream`` when the body is an `httpBodyStream`, whose
    ///   digest cannot be computed up front; otherwise what ``RequestSigner/sign(method:url:headers:body:)`` throws.
    public mutating func sign(with signer: RequestSigner) throws(ClientSigningError) {
        guard let url else { throw .badURL("(no URL)") }
        guard httpBodyStream == nil else { throw .streamedBody }
        let headers = (allHTTPHeaderFields ?? [:]).map { (name: $0.key, value: $0.value) }
        let fields = try signer.sign(method: httpMethod ?? "GET", url: url, headers: headers, body: httpBody)
        for field in fields { setValue(field.value, forHTTPHeaderField: field.name) }
    }
}
