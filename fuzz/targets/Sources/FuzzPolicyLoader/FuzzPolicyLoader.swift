import PorticoPolicy

/// libFuzzer's entry point: the input is policy YAML. A form feed (never needed in a policy) splits
/// it into up to four files, so that sections spread over several files and defined twice are
/// exercised too. The loader must answer with a snapshot or with diagnostics, never crash; what it
/// accepts must route without crashing.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPolicyLoader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let parts = bytes.split(separator: 0x0C, maxSplits: 3, omittingEmptySubsequences: false)
    // Files in a directory of their own that does not exist, so a relative secretFile finds nothing.
    let sources = parts.enumerated().map { index, part in
        (file: "/nonexistent-fuzz-policy/\(index).yaml", text: String(decoding: part, as: UTF8.self))
    }
    let snapshot: PolicySnapshot
    do {
        snapshot = try PolicyLoader().load(sources: sources)
    } catch {
        precondition(!error.diagnostics.isEmpty, "a policy was refused without a diagnostic")
        for diagnostic in error.diagnostics {
            precondition(!diagnostic.message.isEmpty, "a diagnostic without a message")
            precondition(
                diagnostic.file == "(policy)" || sources.contains { $0.file == diagnostic.file },
                "a diagnostic names no file of the policy: \(diagnostic.file)")
        }
        return 0
    }
    PolicyProperties.checkRoutes(snapshot)
    return 0
}
