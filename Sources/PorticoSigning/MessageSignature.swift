/// Signing and verifying with `hmac-sha256` (RFC 9421 §3.3.3), shared by the client library and
/// the gateway so both build the same base from the same request.
public enum MessageSignature {
    /// The only algorithm Portico signs with. A signature without an `alg` parameter is read as
    /// this one (the key determines the algorithm, as in RFC 9421 §3.3.7); any other `alg` fails.
    public static let algorithm = "hmac-sha256"

    /// The header fields to add to `request`: `Signature-Input` and `Signature` under `label`.
    public static func sign(
        _ request: some SignableRequest, input: SignatureInput, label: String = "sig1", authenticator: some MessageAuthenticator
    ) throws(SigningError) -> (signatureInput: String, signature: String) {
        try input.validateParameterTypes()
        try checkAlgorithm(input)
        let base = try SignatureBase.make(for: input, request: request)
        let mac = authenticator.authenticationCode(for: base)
        return try SignatureFields.serialize(label: label, input: input, signature: mac)
    }

    /// Whether `signature` is a valid MAC of its signature base over `request`, compared in
    /// constant time. Policy (required components, time window, replay) is the caller's job.
    public static func verify(
        _ signature: SignatureFields.Signature, request: some SignableRequest, authenticator: some MessageAuthenticator
    ) throws(SigningError) -> Bool {
        try checkAlgorithm(signature.input)
        let base = try SignatureBase.make(for: signature.input, request: request)
        return ConstantTime.equal(authenticator.authenticationCode(for: base), signature.value)
    }

    static func checkAlgorithm(_ input: SignatureInput) throws(SigningError) {
        if let algorithm = input.algorithm, algorithm != Self.algorithm {
            throw .invalidParameter("alg \"\(algorithm)\" is not accepted; use \(Self.algorithm) or leave alg out")
        }
    }
}
