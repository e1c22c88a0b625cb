import Foundation
import Portico
import PorticoClient
import PorticoCrypto

/// Ed25519 keys for the locator tests, written once to a temporary directory: the gateway reads
/// its signing key from a file, as in production.
public enum LocatorKeys {
    public static let directory: URL = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-locator-keys-\(UUID())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }()

    /// The key the test gateways sign with, and another one.
    public static let signing = make("signing")
    public static let other = make("other")
    /// The signing key's public half, as an app pins it.
    public static let pinned = try! PinnedLocatorKey(base64URL: LocatorSigning.base64URL(signing.key.publicKey))

    public static func make(_ name: String) -> (file: String, key: Ed25519SigningKey) {
        let pem = Ed25519SigningKey.generatePEM()!
        let file = directory.appendingPathComponent("\(name).pem").path
        try? pem.write(toFile: file, atomically: true, encoding: .utf8)
        return (file, try! Ed25519SigningKey(pem: pem))
    }
}
