import ArgumentParser
import Foundation

/// `portico keygen`: a new random secret for a key, in the form the policy and clients read.
struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Print a new random secret (base64url, no padding) for a client key.",
        discussion: "Save it to a file named by the key's secretFile (or an environment variable named by secretEnv).")

    @Option(help: "Random bytes in the secret (at least 32).")
    var bytes = 32

    func validate() throws {
        guard bytes >= 32 else { throw ValidationError("--bytes must be at least 32") }
    }

    func run() {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        // base64url without padding (RFC 4648 §5): safe in files, environment variables and YAML.
        let base64 = Data(random).base64EncodedString()
        print(
            base64.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        )
    }
}
