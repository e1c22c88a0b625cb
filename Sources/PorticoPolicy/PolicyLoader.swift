import Foundation
import Yams

/// Turns a directory of YAML files into a validated ``PolicySnapshot``.
///
/// Every `*.yaml`/`*.yml` file in the directory is read (in name order) and their top-level keys are
/// merged: `backends`, `services`, `keys` and `tiers` may be spread over several files, the singular sections
/// (`listeners`, `limits`, `upstream`, `accessLog`, `signatures`, `apiKeys`, `clients`, `locator`, `admin`,
/// `cluster`, `cache`, `compression`, `trustedProxies`, `jwt`, `tracing`) may each appear in one file only. A key's `secretFile` is read relative to the file that names it. The loader never
/// stops at the first mistake; it throws one ``PolicyError`` holding all of them.
public struct PolicyLoader: Sendable {
    static let topLevelKeys = [
        "listeners", "limits", "upstream", "accessLog", "backends", "services", "signatures", "apiKeys", "keys", "tiers", "clients",
        "locator", "admin", "cluster", "cache", "compression", "trustedProxies", "jwt", "tracing",
    ]

    /// Where `secretEnv` names are looked up; `nil`: the process's environment, read at each load.
    /// Tests pass their own, since setting the process's (`setenv`) races with any thread that
    /// reads it, such as one starting a child process.
    let environment: [String: String]?

    public init(environment: [String: String]? = nil) {
        self.environment = environment
    }

    /// Loads and compiles every policy file in `directory`.
    public func load(directory: String) throws(PolicyError) -> PolicySnapshot {
        try load(sources: readSources(directory: directory))
    }

    /// The text of every policy file in `directory`, in name order: what ``load(sources:)`` reads,
    /// and what a reload hashes to tell one policy from another.
    public func readSources(directory: String) throws(PolicyError) -> [(file: String, text: String)] {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw PolicyError(diagnostics: [
                PolicyDiagnostic(file: directory, line: nil, keyPath: "", message: "not a readable directory")
            ])
        }
        let names: [String]
        do {
            names = try fileManager.contentsOfDirectory(atPath: directory)
                .filter { $0.hasSuffix(".yaml") || $0.hasSuffix(".yml") }
                .sorted()
        } catch {
            throw PolicyError(diagnostics: [
                PolicyDiagnostic(file: directory, line: nil, keyPath: "", message: "cannot list directory: \(error)")
            ])
        }
        var sources: [(file: String, text: String)] = []
        var unreadable: [PolicyDiagnostic] = []
        for name in names {
            let path = (directory as NSString).appendingPathComponent(name)
            if let text = try? String(contentsOfFile: path, encoding: .utf8) {
                sources.append((path, text))
            } else {
                unreadable.append(PolicyDiagnostic(file: path, line: nil, keyPath: "", message: "cannot read the file as UTF-8 text"))
            }
        }
        if !unreadable.isEmpty { throw PolicyError(diagnostics: unreadable) }
        if sources.isEmpty {
            throw PolicyError(diagnostics: [
                PolicyDiagnostic(file: directory, line: nil, keyPath: "", message: "no *.yaml or *.yml policy files")
            ])
        }
        return sources
    }

    /// Loads and compiles policy text held in memory; `file` names are used in diagnostics only.
    public func load(sources: [(file: String, text: String)]) throws(PolicyError) -> PolicySnapshot {
        let sink = DiagnosticSink()
        var sections: [String: [PolicyValue]] = [:]
        var unparsed = false
        for source in sources {
            let root: Node?
            do {
                root = try Yams.compose(yaml: source.text)
            } catch {
                sink.error(Self.diagnostic(for: error, file: source.file))
                unparsed = true
                continue
            }
            guard let root else { continue }  // an empty file contributes nothing
            let document = PolicyValue(node: root, file: source.file, path: [], sink: sink)
            guard let fields = document.fields(known: Self.topLevelKeys) else { continue }
            for key in Self.topLevelKeys {
                if let value = fields[key] { sections[key, default: []].append(value) }
            }
        }
        let reader = PolicyDocumentReader(
            sink: sink, complete: !unparsed, environment: environment ?? ProcessInfo.processInfo.environment)
        let policy = reader.read(sections: sections)
        if !sink.diagnostics.isEmpty {
            // In file and line order, as an editor would walk them; the sort is stable, so mistakes
            // without a line keep the order they were found in.
            let ordered = sink.diagnostics.enumerated().sorted { lhs, rhs in
                let left = (lhs.element.file, lhs.element.line ?? 0, lhs.offset)
                let right = (rhs.element.file, rhs.element.line ?? 0, rhs.offset)
                return left < right
            }
            throw PolicyError(diagnostics: ordered.map(\.element))
        }
        return PolicySnapshot(policy: policy!, warnings: sink.warnings)
    }

    /// A YAML syntax error as a diagnostic with the line libyaml reported.
    static func diagnostic(for error: any Error, file: String) -> PolicyDiagnostic {
        guard let yamlError = error as? YamlError else {
            return PolicyDiagnostic(file: file, line: nil, keyPath: "", message: "not valid YAML: \(error)")
        }
        switch yamlError {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let message = [context?.text, problem].compactMap { $0 }.joined(separator: " ")
            return PolicyDiagnostic(file: file, line: mark.line, keyPath: "", message: "not valid YAML: \(message)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            let keys = duplicates.map { "\"\($0)\"" }.joined(separator: ", ")
            return PolicyDiagnostic(
                file: file, line: context.mark.line, keyPath: "",
                message: "not valid YAML: key \(keys) appears more than once in one mapping")
        default:
            return PolicyDiagnostic(file: file, line: nil, keyPath: "", message: "not valid YAML: \(yamlError)")
        }
    }
}
