import Foundation
import PorticoTestSupport

/// A server in a child process (the interop scripts' `server` modes) that prints the port it
/// listens on as its first line, and stops when its standard input closes.
final class AnnouncedServer: Sendable {
    let process: ChildProcess
    let port: Int

    init(_ executable: String, _ arguments: [String]) throws {
        process = try ChildProcess(executable, arguments, standardInput: .pipe, standardOutput: .pipe)
        var line = Data()
        while let byte = try process.standardOutput!.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) { line += byte }
        port = Int(String(decoding: line, as: UTF8.self)) ?? 0
    }

    func stop() {
        try? process.standardInput?.close()
        _ = process.wait()
    }
}
