import ArgumentParser
import Portico
import PorticoCrypto
import PorticoPolicy

/// `portico locator-key DIR`: the public half of the locator's signing key, in the forms apps and
/// operators need.
struct LocatorKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "locator-key",
        abstract: "Print the public key (and keyid) that verifies the service locator's signature.",
        discussion: """
            The raw key (base64url) is what an app pins in ServiceLocatorClient; the PEM form is for other tools. \\
            The gateway also serves it as a JWK Set at locator.publicKeyPath, but pin it in the app: a key fetched \\
            from the same place as the document proves nothing about the document.
            """)

    @Argument(help: "The policy directory.")
    var directory: String = "policies"

    func run() throws {
        do {
            let snapshot = try PolicyLoader().load(directory: directory)
            guard let key = try LocatorSigning.key(for: snapshot) else {
                printError("error: \(directory): the policy has no locator.signingKey")
                throw ExitCode(1)
            }
            print("keyid: \(LocatorSigning.keyID(for: snapshot, key: key))")
            print("ed25519 public key (base64url, 32 bytes): \(LocatorSigning.base64URL(key.publicKey))")
            print(key.publicKeyPEM ?? "", terminator: "")
            if snapshot.policy.locator?.demoKey == true {
                printError("warning: this is the policy's demo key (locator.demoKey: true); its private key is published")
            }
        } catch let error as PolicyError {
            for diagnostic in error.diagnostics { printError("error: \(diagnostic)") }
            throw ExitCode(1)
        }
    }
}
