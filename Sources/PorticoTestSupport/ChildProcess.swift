import CPorticoSpawn
import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A child process for tests and their helpers (a `redis-server`, `portico serve`, a script),
/// started with `posix_spawn`.
///
/// **Why not Foundation's `Process`.** On Linux, `Process.run()` (swift-corelibs-foundation as
/// shipped with Swift 6.3.1) emulates close-on-exec by listing `/proc/self/fd`, and copies each
/// directory entry's whole 256-byte name field although `readdir` returns entries sized to their
/// names. An entry at the end of glibc's buffer, before an unmapped page, makes the copy fault:
/// the whole test process crashed now and then with SIGSEGV in `Process.run` (fixed upstream by
/// swift-corelibs-foundation pull request 5472, not in this toolchain). Here the child closes every
/// descriptor above standard error itself (`posix_spawn_file_actions_addclosefrom_np`), and no
/// directory is read.
///
/// The child starts with every signal at its default action and none blocked, whatever the test
/// process ignores (NIO ignores SIGPIPE), and in a process group of its own, as `Process` does.
public final class ChildProcess: Sendable {
    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// The test process's own.
        case inherit
        /// `/dev/null`.
        case null
        /// A pipe; the test's end is ``standardInput``, ``standardOutput`` or ``standardError``.
        case pipe
    }

    /// How the child ended.
    public enum Termination: Equatable, Sendable, CustomStringConvertible {
        case exited(Int32)
        case signalled(Int32)

        public var description: String {
            switch self {
            case .exited(let status): "exited with status \(status)"
            case .signalled(let signal): "ended by signal \(signal)"
            }
        }
    }

    public let pid: pid_t
    /// The test's ends of the pipes asked for (closed when this object goes).
    public let standardInput: FileHandle?
    public let standardOutput: FileHandle?
    public let standardError: FileHandle?
    /// Set once the child has been reaped, under the lock that reaping takes.
    private let termination = NIOLockedValueBox<Termination?>(nil)

    /// Starts `executable` (a path; no search) with `arguments`, and `environment` or else the
    /// test process's own.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        standardInput: Stream = .null, standardOutput: Stream = .null, standardError: Stream = .null
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // The child's ends of the pipes, closed here once it has its copies.
        var childEnds: [Int32] = []
        defer { for descriptor in childEnds { close(descriptor) } }
        var parentEnds: [FileHandle?] = []
        for (target, stream) in [(Int32(0), standardInput), (1, standardOutput), (2, standardError)] {
            switch stream {
            case .inherit:
                parentEnds.append(nil)
            case .null:
                try Self.check(posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0))
                parentEnds.append(nil)
            case .pipe:
                var descriptors: [Int32] = [-1, -1]
                guard cportico_pipe_cloexec(&descriptors) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
                // Reading end for the child's input, writing end for its output.
                let (child, parent) = target == 0 ? (descriptors[0], descriptors[1]) : (descriptors[1], descriptors[0])
                childEnds.append(child)
                parentEnds.append(FileHandle(fileDescriptor: parent, closeOnDealloc: true))
                try Self.check(posix_spawn_file_actions_adddup2(&actions, child, target))
            }
        }
        try Self.check(cportico_spawn_file_actions_addclosefrom(&actions, 3))

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var everySignal = sigset_t()
        sigemptyset(&everySignal)
        // The standard signals; the real-time ones start at 32, some of them glibc's own.
        for signal in Int32(1)..<32 where signal != SIGKILL && signal != SIGSTOP { sigaddset(&everySignal, signal) }
        try Self.check(posix_spawnattr_setsigmask(&attributes, &noSignals))
        try Self.check(posix_spawnattr_setsigdefault(&attributes, &everySignal))
        try Self.check(posix_spawnattr_setpgroup(&attributes, 0))
        try Self.check(posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP)))

        let argumentStrings = ([executable] + arguments).map { strdup($0) }
        defer { for string in argumentStrings { free(string) } }
        let environmentStrings = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") }
        defer { for string in environmentStrings { free(string) } }
        var pid: pid_t = 0
        let spawned = (argumentStrings + [nil]).withUnsafeBufferPointer { argv in
            (environmentStrings + [nil]).withUnsafeBufferPointer { envp in
                posix_spawn(&pid, executable, &actions, &attributes, argv.baseAddress!, envp.baseAddress!)
            }
        }
        try Self.check(spawned)
        self.pid = pid
        self.standardInput = parentEnds[0]
        self.standardOutput = parentEnds[1]
        self.standardError = parentEnds[2]
    }

    private static func check(_ result: Int32) throws {
        guard result == 0 else { throw POSIXError(.init(rawValue: result) ?? .EIO) }
    }

    /// Sends `signal` to the child (nothing once it has been reaped: its pid may be another's).
    public func signal(_ signal: Int32) { send(signal, to: pid) }

    /// Sends `signal` to the child's process group, which it leads (it and whatever it started
    /// that stayed in the group); nothing once the child has been reaped, as for ``signal(_:)``.
    public func signalGroup(_ signal: Int32) { send(signal, to: -pid) }

    /// `kill(target, signal)` under the lock reaping takes, and only while the child is unreaped.
    private func send(_ signal: Int32, to target: pid_t) {
        termination.withLockedValue { ended in
            if ended == nil { _ = kill(target, signal) }
        }
    }

    /// Whether the child has not ended yet.
    public var isRunning: Bool { reap() == nil }

    /// Blocks until the child ends, and says how.
    @discardableResult
    public func wait() -> Termination {
        if let ended = termination.withLockedValue({ $0 }) { return ended }
        // Waits without reaping, so that the reaping (and the pid's release) happens under the lock
        // ``signal(_:)`` takes: a signal is never sent to a pid the system has given to another.
        var information = siginfo_t()
        while waitid(P_PID, id_t(pid), &information, WEXITED | WNOWAIT) != 0, errno == EINTR {}
        guard let ended = reap() else { preconditionFailure("child \(pid) could not be reaped after it ended") }
        return ended
    }

    /// Reaps the child if it has ended; returns how it ended, or nil while it runs.
    private func reap() -> Termination? {
        termination.withLockedValue { ended in
            if let ended { return ended }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
            // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import.
            let signal = status & 0x7F
            ended = signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
            return ended
        }
    }

    /// A write to a pipe whose child has gone must fail, not end the test process (SIGPIPE's
    /// default action).
    private static let ignoreBrokenPipes: Void = { _ = Glibc.signal(SIGPIPE, SIG_IGN) }()

    /// Runs `executable` to its end, with `input` on its standard input, and returns how it ended
    /// with everything it wrote on its standard output and error (both read as it writes them, so a
    /// chatty child never blocks on a full pipe).
    public static func run(
        _ executable: String, _ arguments: [String], input: Data? = nil, environment: [String: String]? = nil
    ) throws -> (termination: Termination, output: Data, errors: Data) {
        let child = try ChildProcess(
            executable, arguments, environment: environment, standardInput: input == nil ? .null : .pipe,
            standardOutput: .pipe, standardError: .pipe)
        let errors = NIOLockedValueBox(Data())
        let errorsRead = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let data = child.standardError!.readDataToEndOfFile()
            errors.withLockedValue { $0 = data }
            errorsRead.signal()
        }
        if let input, let writer = child.standardInput {
            ignoreBrokenPipes
            Thread.detachNewThread {
                // A child that exits without reading everything closes the pipe; the write fails.
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
        }
        let output = child.standardOutput!.readDataToEndOfFile()
        errorsRead.wait()
        let termination = child.wait()
        return (termination, output, errors.withLockedValue { $0 })
    }
}
