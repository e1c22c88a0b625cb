/// One mistake found in a policy directory, located precisely enough to fix without guessing.
///
/// Operators edit policies by hand and reload them while the gateway serves, so every message names
/// the file, the line when YAML gives one, the key path from the document root (for example
/// `services.stockQuote.versions.1.proxy.backend`) and what was expected there.
public struct PolicyDiagnostic: Sendable, Hashable, CustomStringConvertible {
    /// The file as it was named to the loader (relative paths stay relative).
    public var file: String
    /// 1-based line of the offending node, when the YAML parser reported one.
    public var line: Int?
    /// Dotted path from the document root to the offending key; empty for the whole file.
    public var keyPath: String
    /// What is wrong and what was expected instead.
    public var message: String

    public init(file: String, line: Int?, keyPath: String, message: String) {
        self.file = file
        self.line = line
        self.keyPath = keyPath
        self.message = message
    }

    public var description: String {
        var location = file
        if let line { location += ":\(line)" }
        return keyPath.isEmpty ? "\(location): \(message)" : "\(location): \(keyPath): \(message)"
    }
}

/// A policy directory that cannot become a snapshot, with every mistake found in one pass.
///
/// The loader keeps going after the first mistake so that an operator fixes a broken policy in one
/// edit rather than one run per error.
public struct PolicyError: Error, Sendable, CustomStringConvertible {
    public var diagnostics: [PolicyDiagnostic]

    public init(diagnostics: [PolicyDiagnostic]) {
        self.diagnostics = diagnostics
    }

    public var description: String {
        diagnostics.map(\.description).joined(separator: "\n")
    }
}
