import Foundation

/// Certificates for the TLS tests, made once per test run by `Fixtures/make-test-certs.sh` (which
/// lists what it makes) in a fresh temporary directory.
public enum TestCertificates {
    public static let directory: String = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-test-certs-\(UUID().uuidString)").path
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/make-test-certs.sh").path
        let result = try! ChildProcess.run("/bin/bash", [script, directory])
        precondition(result.termination == .exited(0), "make-test-certs.sh failed (is the openssl command installed?)")
        return directory
    }()

    public static func path(_ name: String) -> String { directory + "/" + name }

    /// A listener `tls` mapping with one certificate.
    public static func listenerTLS(_ name: String = "localhost", extra: String = "") -> String {
        "{ certificate: \"\(path(name + ".pem"))\", privateKey: \"\(path(name + "-key.pem"))\"\(extra) }"
    }
}
