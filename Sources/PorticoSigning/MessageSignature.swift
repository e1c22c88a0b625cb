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

    /// Whether `signature` is a valid MAC under each of two keys: the signature base is built once
    /// and both MACs are always computed and compared in full.
    ///
    /// A verifier passes the key's current secret and its previous one (mid-rotation), or a stand-in
    /// for whichever it lacks (an unknown key id, a key with one secret). Every verification then
    /// costs the same two MACs, so a client cannot time which key ids exist or which are being
    /// rotated. Deciding which matches count (a previous secret past its window) is the caller's.
    ///
    /// The candidates are existentials, not generic parameters: a verifier holds its keys as
    /// `any MessageAuthenticator` (tests count MACs through their own), and opening those for a
    /// generic function made the caller run its unspecialised body, building the base through
    /// witness tables. Generic over the request alone, it is specialised for the caller's request
    /// type; the two MACs are the only dynamic calls.
    ///
    /// - Parameter maxBaseBytes: the longest signature base built (``SignatureBase/write(for:request:to:maxBytes:)``);
    ///   a longer one throws before any MAC is computed.
    public static func verify<Request: SignableRequest>(
        _ signature: SignatureFields.Signature, request: Request, candidates first: any MessageAuthenticator,
        _ second: any MessageAuthenticator, maxBaseBytes: Int = .max
    ) throws(SigningError) -> (first: Bool, second: Bool) {
        try checkAlgorithm(signature.input)
        var base: [UInt8] = []
        try SignatureBase.write(for: signature.input, request: request, to: &base, maxBytes: maxBaseBytes)
        return base.withUnsafeBytes { message in
            signature.value.withUnsafeBytes { presented in matches(presented, message: message, first, second) }
        }
    }

    /// Whether `presented` is the MAC of `message` under each key: both MACs are always computed
    /// and compared in full.
    static func matches(
        _ presented: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer, _ first: any MessageAuthenticator,
        _ second: any MessageAuthenticator
    ) -> (first: Bool, second: Bool) {
        withUnsafeTemporaryAllocation(byteCount: 2 * macLength, alignment: 16) { codes in
            codes.initializeMemory(as: UInt8.self, repeating: 0)  // compared even when a MAC fails
            let firstCode = UnsafeMutableRawBufferPointer(rebasing: codes[0..<macLength])
            let secondCode = UnsafeMutableRawBufferPointer(rebasing: codes[macLength..<(2 * macLength)])
            let firstComputed = first.writeAuthenticationCode(for: message, to: firstCode)
            let secondComputed = second.writeAuthenticationCode(for: message, to: secondCode)
            let firstEqual = ConstantTime.equal(UnsafeRawBufferPointer(firstCode), presented)
            let secondEqual = ConstantTime.equal(UnsafeRawBufferPointer(secondCode), presented)
            return (firstComputed && firstEqual, secondComputed && secondEqual)
        }
    }

    /// The length of an `hmac-sha256` MAC.
    static let macLength = 32

    static func checkAlgorithm(_ input: SignatureInput) throws(SigningError) {
        if let algorithm = input.algorithm, algorithm != Self.algorithm {
            throw .invalidParameter("alg \"\(algorithm)\" is not accepted; use \(Self.algorithm) or leave alg out")
        }
    }
}
