import Foundation
import PorticoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The tests' own child processes (`ChildProcess`, in place of Foundation's `Process`).
@Suite("Child processes")
struct ChildProcessTests {
    @Test("exit statuses and signals come back as they happened")
    func terminations() throws {
        #expect(try ChildProcess.run("/bin/sh", ["-c", "exit 0"]).termination == .exited(0))
        #expect(try ChildProcess.run("/bin/sh", ["-c", "exit 7"]).termination == .exited(7))
        #expect(try ChildProcess.run("/bin/sh", ["-c", "kill -TERM $$"]).termination == .signalled(SIGTERM))

        let sleeper = try ChildProcess("/bin/sleep", ["30"])
        #expect(sleeper.isRunning)
        sleeper.signal(SIGKILL)
        #expect(sleeper.wait() == .signalled(SIGKILL))
        #expect(!sleeper.isRunning)
        #expect(sleeper.wait() == .signalled(SIGKILL))  // asked again: the same answer, no second reap
    }

    @Test("input reaches the child, and more output than a pipe holds comes back whole on both streams")
    func streams() throws {
        let input = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        // `tee` writes everything to standard error as well as to standard output.
        let result = try ChildProcess.run("/bin/sh", ["-c", "tee /dev/stderr"], input: input)
        #expect(result.termination == .exited(0))
        #expect(result.output == input)
        #expect(result.errors == input)
    }

    @Test("the child inherits no descriptor above standard error, and starts with no signal ignored")
    func cleanStart() throws {
        // A descriptor the test process opens without close-on-exec.
        let leaked = open("/dev/null", O_RDONLY)
        try #require(leaked > 2)
        defer { close(leaked) }
        // Ignored here for the rest of the run, as NIO and `ChildProcess.run` leave it: restoring
        // a default action afterwards could undo their one-time ignore, and a later write to a
        // closed socket or pipe would end the whole test process.
        signal(SIGPIPE, SIG_IGN)

        // `ls` lists the shell's descriptors (the `:` after it keeps the shell from becoming `ls`).
        let descriptors = try ChildProcess.run("/bin/sh", ["-c", "ls /proc/$$/fd; :"])
        #expect(descriptors.termination == .exited(0))
        let listed = String(decoding: descriptors.output, as: UTF8.self).split(separator: "\n").compactMap { Int32($0) }
        #expect(listed == [0, 1, 2], "\(listed)")

        // The standard signals (1 to 31, the mask's low bits); glibc itself sets its two internal
        // real-time signals (32 and 33) to ignored in a spawned child when the parent handles them.
        let status = try ChildProcess.run("/bin/grep", ["^SigIgn:", "/proc/self/status"])
        let line = String(decoding: status.output, as: UTF8.self)
        let mask = line.split(separator: "\t").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        let ignored = try #require(mask.flatMap { UInt64($0, radix: 16) })
        #expect(ignored & 0x7FFF_FFFF == 0, "SigIgn: \(mask ?? "")")
    }

    @Test("an executable that does not exist is an error, not a child")
    func missingExecutable() {
        #expect(throws: POSIXError.self) { try ChildProcess("/nonexistent/portico-no-such-tool", []) }
    }
}
