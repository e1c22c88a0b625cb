import ArgumentParser
import Foundation
import PorticoClient
import PorticoPolicy

/// The request and key options `portico sign` and `portico call` share.
///
/// The secret is read from a file or an environment variable, never from an argument: arguments
/// show in `ps` and shell history.
struct SigningOptions: ParsableArguments {
    @Option(name: .customLong("key-id"), help: "The key id (keyid parameter).")
    var keyID: String

    @Option(name: .customLong("secret-file"), help: "A file holding the secret (a trailing newline is ignored).")
    var secretFile: String?

    @Option(name: .customLong("secret-env"), help: "An environment variable holding the secret.")
    var secretEnv: String?

    @Option(name: .customShort("X"), help: "The request method.")
    var method = "GET"

    @Option(name: .customShort("H"), help: "A header field the request will carry, as 'Name: value' (repeatable).")
    var headers: [String] = []

    @Option(name: .customLong("data"), help: "The request body: text, or @file to read it from a file.")
    var data: String?

    @Option(help: "Header fields to cover when present, beyond the ones always covered (repeatable).")
    var cover: [String] = []

    @Option(help: "The signature label.")
    var label = "sig1"

    @Flag(name: .customLong("no-nonce"), help: "Sign without a nonce (only for services whose policy sets requireNonce: false).")
    var noNonce = false

    @Option(help: "Seconds from now until the signature expires (adds the expires parameter).")
    var expires: Int64?

    @Argument(help: "The request URL, exactly as it will be sent.")
    var url: String

    /// The parsed `-H` fields, in order.
    func headerFields() throws -> [(name: String, value: String)] {
        try headers.map { header in
            guard let colon = header.firstIndex(of: ":"), colon != header.startIndex else {
                throw ValidationError("expected -H 'Name: value', found \(header)")
            }
            return (String(header[..<colon]), header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
    }

    /// The body named by `--data`, if any.
    func body() throws -> Data? {
        guard let data else { return nil }
        guard data.hasPrefix("@") else { return Data(data.utf8) }
        let path = String(data.dropFirst())
        guard let contents = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
        return contents
    }

    func requestURL() throws -> URL {
        guard let url = URL(string: url) else { throw ValidationError("not a URL: \(self.url)") }
        return url
    }

    /// The client library's signer for these options. `X-Client-Version` and `X-Client-Platform`
    /// given with `-H` are covered, as an app's identity is.
    func signer() throws -> RequestSigner {
        let secret = try SecretSource(file: secretFile, environment: secretEnv).read()
        var signer = RequestSigner(keyID: keyID, secret: secret)
        signer.label = label
        signer.includesNonce = !noNonce
        signer.lifetime = expires.map { .seconds($0) }
        signer.coveredFields = [ClientIdentity.versionField, ClientIdentity.platformField] + cover
        return signer
    }

    /// The fields that sign this request: `Signature-Input` and `Signature` first, then the rest
    /// (`Content-Digest`), so that scripts can rely on the first two lines.
    func signedFields() throws -> [(name: String, value: String)] {
        let signer = try signer()
        let fields: [(name: String, value: String)]
        do {
            fields = try signer.sign(method: method, url: try requestURL(), headers: try headerFields(), body: try body())
        } catch let error as ClientSigningError {
            throw ValidationError(error.description)
        }
        let signature = ["Signature-Input", "Signature"]
        return fields.filter { signature.contains($0.name) } + fields.filter { !signature.contains($0.name) }
    }
}

/// Where a command reads a secret from: exactly one of a file and an environment variable, read
/// the way the gateway reads its keys (a file's trailing newline is not part of the secret).
struct SecretSource {
    var file: String?
    var environment: String?

    func read() throws -> String {
        switch (file, environment) {
        case (let file?, nil):
            guard let secret = Secret.text(ofFile: file) else { throw ValidationError("cannot read the secret file \(file)") }
            return secret
        case (nil, let name?):
            guard let value = ProcessInfo.processInfo.environment[name] else {
                throw ValidationError("the environment variable \(name) is not set")
            }
            return value
        default:
            throw ValidationError("give the secret with exactly one of --secret-file and --secret-env")
        }
    }
}
