import Foundation

/// A server in a child process (the interop scripts' `server` modes) that prints the port it
/// listens on as its first line, and stops when its standard input closes.
public final class AnnouncedServer: Sendable {
    public let process: ChildProcess
    public let port: Int

    public init(_ executable: String, _ arguments: [String]) throws {
        process = try ChildProcess(executable, arguments, standardInput: .pipe, standardOutput: .pipe)
        var line = Data()
        while let byte = try process.standardOutput!.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) { line += byte }
        port = Int(String(decoding: line, as: UTF8.self)) ?? 0
    }

    public func stop() {
        try? process.standardInput?.close()
        _ = process.wait()
    }
}
