import Foundation
import PorticoTestSupport

/// Headless Chromium on a page, driven through the DevTools protocol by
/// `scripts/interop/console-browser.py`: one JSON command per line, one JSON answer per line.
/// Blocking: call it off the task pool (``offThePool``).
final class ConsoleBrowser: @unchecked Sendable {
    static let chromium: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static var available: Bool { chromium != nil }
    static let script = InteropTests.repositoryRoot.appendingPathComponent("scripts/interop/console-browser.py").path

    private let process: ChildProcess
    private var pending = Data()

    /// Opens `url`, with Chromium's command line extended by `flags`; throws if the page does not load.
    init(_ url: String, flags: [String] = []) throws {
        let python = InteropTests.python ?? "/usr/bin/python3"
        process = try ChildProcess(
            python, [Self.script, url, "--chromium", Self.chromium ?? "chromium"] + flags.map { "--flag=\($0)" }, standardInput: .pipe,
            standardOutput: .pipe)
        let first = try line()
        guard first["ready"] as? Bool == true else { throw BrowserError(message: "the page did not load: \(first)") }
    }

    struct BrowserError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    private func line() throws -> [String: Any] {
        while true {
            if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let text = pending[pending.startIndex..<newline]
                pending = Data(pending[pending.index(after: newline)...])
                return (try JSONSerialization.jsonObject(with: text)) as? [String: Any] ?? [:]
            }
            let chunk = process.standardOutput!.availableData
            guard !chunk.isEmpty else { throw BrowserError(message: "the browser driver ended") }
            pending += chunk
        }
    }

    private var sequence = 0

    private func send(_ command: [String: Any]) throws -> [String: Any] {
        sequence += 1
        var command = command
        command["seq"] = sequence
        try process.standardInput!.write(contentsOf: JSONSerialization.data(withJSONObject: command) + Data("\n".utf8))
        let answer = try line()
        guard answer["seq"] as? Int == sequence else {
            throw BrowserError(message: "answer \(answer) is not to command \(sequence), \(command)")
        }
        if let error = answer["error"] as? String { throw BrowserError(message: error) }
        return answer
    }

    /// The value of a JavaScript expression in the page, as text (a string as it is, anything
    /// else as its description).
    func evaluate(_ expression: String) throws -> String {
        let value = try send(["op": "eval", "expr": expression])["value"]
        return value as? String ?? value.map { "\($0)" } ?? "undefined"
    }

    /// Whether the expression became truthy, polled, within `seconds` (a bound for a loaded
    /// machine, not a measure).
    func wait(for expression: String, seconds: Int = 60) throws -> Bool {
        try send(["op": "wait", "expr": expression, "timeout": seconds])["timeout"] as? Bool != true
    }

    /// The text of the elements `selector` matches, joined by newlines.
    func text(_ selector: String) throws -> String {
        let quoted = String(decoding: try JSONSerialization.data(withJSONObject: [selector]), as: UTF8.self)
        return try evaluate("[...document.querySelectorAll(\(quoted)[0])].map((e) => e.textContent).join('\\n')")
    }

    func click(_ selector: String) throws -> Bool {
        try send(["op": "click", "selector": selector])["value"] as? Bool ?? false
    }

    func viewport(width: Int, height: Int, mobile: Bool) throws {
        _ = try send(["op": "viewport", "width": width, "height": height, "mobile": mobile])
    }

    /// Emulates the system's `light` or `dark` setting (`prefers-color-scheme`).
    func colorScheme(_ scheme: String) throws {
        _ = try send(["op": "colorScheme", "scheme": scheme])
    }

    func screenshot(to path: String) throws -> Int {
        try send(["op": "screenshot", "path": path])["value"] as? Int ?? 0
    }

    /// What the page logged: console messages, exceptions, Content-Security-Policy reports.
    func logged() throws -> [[String: String]] {
        try send(["op": "console"])["value"] as? [[String: String]] ?? []
    }

    func close() {
        try? process.standardInput?.close()
        _ = process.wait()
    }
}
