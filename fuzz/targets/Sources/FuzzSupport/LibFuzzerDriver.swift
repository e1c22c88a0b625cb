import CLibFuzzer

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs libFuzzer on `testOneInput` with this process's arguments, then exits with its status.
///
/// Each target's `main.swift` calls this rather than relying on libFuzzer's own `main`: on Linux,
/// SwiftPM links an executable target with `main` aliased to the module's entry point
/// (`--defsym main=<Module>_main`, so that tests can link executables), and a module without
/// top-level code has no entry point, so the link fails. A two-line `main.swift` gives it one.
public func runLibFuzzer(_ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
}
