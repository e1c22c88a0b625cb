import ArgumentParser
import Foundation
import Portico
import PorticoPolicy

/// `portico check DIR`: validates a policy directory the way `serve` would load it.
struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check", abstract: "Validate a policy directory; print every mistake with its file and key path.")

    @Argument(help: "The policy directory.")
    var directory: String = "policies"

    func run() throws {
        do {
            let snapshot = try PolicyLoader().load(directory: directory)
            _ = try ListenerTLS.contexts(for: snapshot)  // certificates and keys, opened with OpenSSL
            _ = try LocatorSigning.key(for: snapshot)  // the locator's Ed25519 key, likewise
            if let cluster = snapshot.policy.cluster { _ = try FleetTLS.context(for: cluster) }  // rediss://'s caFile, likewise
            for warning in snapshot.warnings { print("warning: \(warning)") }
            let policy = snapshot.policy
            print(
                "\(directory): OK — \(policy.listeners.count) listener(s), \(policy.backends.count) backend(s), \(policy.services.count) service(s)"
            )
        } catch {
            for diagnostic in error.diagnostics { printError("error: \(diagnostic)") }
            printError("\(directory): \(error.diagnostics.count) error(s)")
            throw ExitCode(1)
        }
    }
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
