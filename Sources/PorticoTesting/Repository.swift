import Foundation
import PorticoTestSupport

/// The repository the tests run from: its shipped policies, scripts and fixtures.
public enum Repository {
    /// The repository's root directory, found from this file's place in it.
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The Python with the interop peers' packages (`scripts/interop/setup.sh` makes it, and
    /// `make test` runs that); `nil` when it has not been made.
    public static let interopPython: String? = {
        let path = root.appendingPathComponent(".build/interop/bin/python").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }()

    /// Whether the interop Python can import `module` (`websockets`, `grpc`…): the tests that
    /// need a peer from it run only then.
    public static func interopPythonImports(_ module: String) -> Bool {
        guard let python = interopPython else { return false }
        return (try? ChildProcess.run(python, ["-c", "import \(module)"]).termination) == .exited(0)
    }
}
