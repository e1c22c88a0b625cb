import Version

/// A semantic version (mxcl/Version's `Version`), under a name that no nested `Version` type of
/// ours (a service's version, ``ServiceRules``' for one) can shadow.
public typealias SemanticVersion = Version

/// An app's version, as a client sends it in `X-Client-Version` and as compatibility buckets and
/// `minimumClientVersion` name it: a semantic version (SemVer 2.0), parsed by mxcl/Version.
///
/// Apps do not all send three parts, so `2.4` means `2.4.0` and `3` means `3.0.0`; a pre-release
/// (`2.4.1-beta.2`) is kept and orders before its release, as SemVer says; build metadata
/// (`+build.7`) is accepted and ignored, as SemVer's precedence ignores it. Anything else is refused
/// rather than guessed at: a sign (`+2.4`), an empty part (`2..4`, `2.4.1-`), a character SemVer
/// does not allow, or more than ``maxLength`` bytes.
public enum ClientVersion {
    /// Longer texts are refused before they are looked at; no real app version comes near.
    public static let maxLength = 64

    /// The version in `text`, or `nil` if it is not one.
    ///
    /// The package's tolerant parser reads the numbers; this first checks what that parser lets
    /// through (it takes `Int("+2")` as 2 and drops empty pre-release identifiers).
    public static func parse<S: StringProtocol>(_ text: S) -> Version? {
        let utf8 = text.utf8
        guard !utf8.isEmpty, utf8.count <= maxLength else { return nil }
        var core = Substring(text)
        if let plus = core.firstIndex(of: "+") {
            guard identifiersAreValid(core[core.index(after: plus)...]) else { return nil }
            core = core[..<plus]
        }
        let numbers: Substring
        if let dash = core.firstIndex(of: "-") {
            guard identifiersAreValid(core[core.index(after: dash)...]) else { return nil }
            numbers = core[..<dash]
        } else {
            numbers = core
        }
        let parts = numbers.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count),
            parts.allSatisfy({ part in !part.isEmpty && part.utf8.count <= 9 && part.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } })
        else { return nil }
        return Version(tolerant: core)
    }

    /// Dot-separated, non-empty identifiers of ASCII letters, digits and `-` (SemVer §9, §10).
    private static func identifiersAreValid(_ text: Substring) -> Bool {
        let identifiers = text.split(separator: ".", omittingEmptySubsequences: false)
        return identifiers.allSatisfy { identifier in
            !identifier.isEmpty
                && identifier.utf8.allSatisfy { byte in
                    (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D
                }
        }
    }

    /// `2.4.0` rather than the tolerant parser's input `2.4`: how versions are shown in messages.
    public static func describe(_ version: Version) -> String {
        var text = "\(version.major).\(version.minor).\(version.patch)"
        if !version.prereleaseIdentifiers.isEmpty { text += "-" + version.prereleaseIdentifiers.joined(separator: ".") }
        return text
    }
}
