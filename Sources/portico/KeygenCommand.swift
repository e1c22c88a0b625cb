import ArgumentParser
import Foundation
import Portico
import PorticoCrypto

/// `portico keygen`: a new random secret for a key, in the form the policy and clients read.
struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Print a new random secret (base64url, no padding) for a client key, or an Ed25519 private key.",
        discussion: """
            Save a secret to a file named by the key's secretFile (or an environment variable named by secretEnv). \
            With --ed25519, save the PEM private key to the file locator.signingKey names (readable by the gateway only); \
            portico locator-key then prints the public key apps pin.
            """)

    @Option(help: "Random bytes in the secret (at least 32).")
    var bytes = 32

    @Flag(help: "Print a new Ed25519 private key (PEM, PKCS#8) for signing the service locator instead.")
    var ed25519 = false

    func validate() throws {
        guard bytes >= 32 else { throw ValidationError("--bytes must be at least 32") }
    }

    func run() throws {
        if ed25519 {
            guard let pem = Ed25519SigningKey.generatePEM() else {
                printError("error: OpenSSL could not generate an Ed25519 key")
                throw ExitCode(1)
            }
            print(pem, terminator: "")
            return
        }
        var generator = SystemRandomNumberGenerator()
        let random = (0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        // base64url without padding (RFC 4648 §5): safe in files, environment variables and YAML.
        let base64 = Data(random).base64EncodedString()
        print(
            base64.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        )
    }
}
