import ArgumentParser
import Foundation
import Portico
import PorticoPolicy
import PorticoSigning

/// `portico sign`: the header fields that make a request acceptable to a `signature` service.
///
/// For use with any HTTP client: the output is one `Name: value` line per field. The secret is
/// read from a file or an environment variable, never from an argument (arguments show in `ps`).
struct SignCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Print the Signature-Input, Signature (and Content-Digest) fields for a request.",
        discussion: """
            Example, with bash and curl:
              mapfile -t H < <(portico sign --key-id demo-app --secret-file policies/secrets/demo-app.secret \\
                  http://127.0.0.1:8080/api/1/stockquote/AAPL)
              curl -H "${H[0]}" -H "${H[1]}" http://127.0.0.1:8080/api/1/stockquote/AAPL
            """)

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

    @Option(help: "Extra header fields to cover, beyond the ones the gateway requires (repeatable).")
    var cover: [String] = []

    @Option(help: "The signature label.")
    var label = "sig1"

    @Flag(name: .customLong("no-nonce"), help: "Sign without a nonce (only for services whose policy sets requireNonce: false).")
    var noNonce = false

    @Option(help: "Seconds from now until the signature expires (adds the expires parameter).")
    var expires: Int64?

    @Argument(help: "The request URL, exactly as it will be sent.")
    var url: String

    func run() throws {
        let secret = try SecretSource(file: secretFile, environment: secretEnv).read()
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), let host = components.host,
            scheme == "http" || scheme == "https"
        else {
            throw ValidationError("expected an absolute http:// or https:// URL, found \(url)")
        }
        let authority = components.port.map { "\(components.percentEncodedHost ?? host):\($0)" } ?? (components.percentEncodedHost ?? host)
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        let target = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")

        var fields: [(name: String, value: String)] = [("host", authority)]
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else { throw ValidationError("expected -H 'Name: value', found \(header)") }
            fields.append((String(header[..<colon]), header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var output: [(String, String)] = []
        var covered: [ComponentIdentifier] = [.method, .authority, .path]
        if components.percentEncodedQuery != nil { covered.append(.query) }
        if let body = try body() {
            let digest = body.withUnsafeBytes { ContentDigest.value(for: $0, using: OpenSSLDigest()) }
            fields.append(("content-digest", digest))
            output.append(("Content-Digest", digest))
            covered.append(.field("content-digest"))
        }
        if fields.contains(where: { $0.name.lowercased() == "x-client-version" }) { covered.append(.field("x-client-version")) }
        for name in cover where !covered.contains(.field(name)) { covered.append(.field(name)) }

        let now = Int64(Date().timeIntervalSince1970)
        let input = SignatureInput(
            components: covered, created: now, expires: expires.map { now + $0 }, nonce: noNonce ? nil : UUID().uuidString, keyID: keyID)
        let request = HTTPRequestParts(method: method, scheme: scheme, authority: authority, requestTarget: target, fields: fields)
        guard let key = OpenSSLHMACKey(key: Array(secret.utf8)) else { throw ValidationError("OpenSSL cannot compute HMAC-SHA256") }
        let signed: (signatureInput: String, signature: String)
        do {
            signed = try MessageSignature.sign(request, input: input, label: label, authenticator: key)
        } catch {
            throw ValidationError("cannot sign this request: \(error)")
        }
        output.insert(contentsOf: [("Signature-Input", signed.signatureInput), ("Signature", signed.signature)], at: 0)
        for (name, value) in output { print("\(name): \(value)") }
    }

    private func body() throws -> [UInt8]? {
        guard let data else { return nil }
        guard data.hasPrefix("@") else { return Array(data.utf8) }
        let path = String(data.dropFirst())
        guard let contents = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
        return Array(contents)
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
