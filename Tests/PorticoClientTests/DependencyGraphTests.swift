import Foundation
import PorticoTestSupport
import PorticoTesting
import Testing

/// What the compiler actually read to build a module: the make-style `.d` files SwiftPM's build
/// leaves beside the objects list every module and header each compile consulted. Following them
/// from one module gives its real dependency closure, C headers included.
struct CompiledDependencies {
    let buildDirectory: URL

    /// The `.build/<triple>/debug` directory this test bundle was built into.
    static func locate() throws -> CompiledDependencies {
        var directory = Bundle.main.bundleURL
        for _ in 0..<4 {
            if FileManager.default.fileExists(atPath: directory.appendingPathComponent("PorticoClient.build").path) {
                return CompiledDependencies(buildDirectory: directory)
            }
            directory = directory.deletingLastPathComponent()
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "PorticoClient.build near \(Bundle.main.bundleURL.path)"])
    }

    /// Every module reachable from `root` (itself included), and every file any of their compiles
    /// read.
    func closure(of root: String) throws -> (modules: Set<String>, files: Set<String>) {
        var modules: Set<String> = [root]
        var files: Set<String> = []
        var queue = [root]
        while let module = queue.popLast() {
            for path in try dependencyFiles(of: module) {
                files.insert(path)
                guard let name = Self.moduleName(referencedBy: path), !modules.contains(name) else { continue }
                modules.insert(name)
                queue.append(name)
            }
        }
        return (modules, files)
    }

    /// Paths listed in the `.d` files of `module`'s build directory (none for toolchain modules).
    private func dependencyFiles(of module: String) throws -> [String] {
        let directory = buildDirectory.appendingPathComponent("\(module).build")
        guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { return [] }
        var paths: [String] = []
        for case let file as URL in walker where file.pathExtension == "d" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for token in text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\\" }) where token.hasPrefix("/") {
                paths.append(String(token))
            }
        }
        return paths
    }

    /// `…/Modules/Crypto.swiftmodule` → `Crypto`; `…/Sources/CCryptoBoringSSL/include/module.modulemap`
    /// or `…/CPorticoCurl.build/module.modulemap` → that target. Toolchain modules are not followed.
    static func moduleName(referencedBy path: String) -> String? {
        let url = URL(fileURLWithPath: path)
        if path.contains("/.build/"), url.pathExtension == "swiftmodule", url.deletingLastPathComponent().lastPathComponent == "Modules" {
            return url.deletingPathExtension().lastPathComponent
        }
        guard url.lastPathComponent == "module.modulemap" else { return nil }
        let parent = url.deletingLastPathComponent()
        if parent.lastPathComponent == "include" { return parent.deletingLastPathComponent().lastPathComponent }
        if parent.pathExtension == "build" { return parent.deletingPathExtension().lastPathComponent }
        return nil
    }
}

@Suite("PorticoClient's dependency graph")
struct DependencyGraphTests {
    /// What an app must not be made to link: the gateway's C shims, the system OpenSSL and libcurl,
    /// SwiftNIO.
    static func forbidden(in closure: (modules: Set<String>, files: Set<String>)) -> [String] {
        let modules = closure.modules.filter {
            $0 == "CPorticoOpenSSL" || $0 == "CPorticoCurl" || $0.hasPrefix("NIO") || $0.hasPrefix("CNIO")
        }
        let headers = closure.files.filter {
            $0.contains("/include/openssl/") || $0.contains("/include/curl/") || $0.contains("/curl/curl.h")
        }
        return (modules.sorted() + headers.sorted())
    }

    @Test("the compiled client library read no OpenSSL, libcurl or NIO module or header")
    func clientIsIsolated() throws {
        let dependencies = try CompiledDependencies.locate()
        let client = try dependencies.closure(of: "PorticoClient")
        #expect(client.modules.isSuperset(of: ["PorticoClient", "PorticoSigning", "Crypto", "RawStructuredFieldValues"]))
        #expect(Self.forbidden(in: client) == [])
    }

    @Test("the same walk does find OpenSSL, libcurl and NIO under the gateway, so it can fail")
    func walkSeesTheGatewaysDependencies() throws {
        let gateway = try CompiledDependencies.locate().closure(of: "Portico")
        let found = Self.forbidden(in: gateway)
        #expect(found.contains("CPorticoOpenSSL"))
        #expect(found.contains("CPorticoCurl"))
        #expect(found.contains("NIOCore"))
        #expect(found.contains { $0.hasSuffix("/include/openssl/ssl.h") })
        #expect(found.contains { $0.hasSuffix("/curl/curl.h") })
    }
}

/// What SwiftPM resolves for an app that adds this checkout by path. The gateway's packages sit
/// behind the `Gateway` trait; an app that turns the default traits off must get the client's
/// graph only, which is what saves it fetching sixteen packages and building their plugins.
@Suite("An app's package graph")
struct AppPackageGraphTests {
    /// The checkout's root: three levels above this file.
    static let checkout = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Writes an app whose `.package` line is `packageLine`, resolves it, and returns the identity of
    /// every package in its graph (the app's own excluded).
    static func resolvedPackages(packageLine: String) async throws -> Set<String> {
        let app = FileManager.default.temporaryDirectory.appendingPathComponent("portico-app-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: app) }
        try FileManager.default.createDirectory(at: app.appendingPathComponent("Sources/App"), withIntermediateDirectories: true)
        let manifest = """
            // swift-tools-version:6.1
            import PackageDescription
            let package = Package(
                name: "App",
                dependencies: [\(packageLine)],
                targets: [.executableTarget(name: "App", dependencies: [.product(name: "PorticoClient", package: "\(checkout.lastPathComponent)")])]
            )
            """
        try manifest.write(to: app.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        try "import PorticoClient\n".write(to: app.appendingPathComponent("Sources/App/main.swift"), atomically: true, encoding: .utf8)
        let result = try await offThePool {
            try ChildProcess.run(
                "/usr/bin/env", ["swift", "package", "--package-path", app.path, "show-dependencies", "--format", "json"])
        }
        guard result.termination == .exited(0) else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: String(decoding: result.errors, as: UTF8.self)])
        }
        // The JSON tree starts after any progress lines SwiftPM printed while resolving.
        let text = String(decoding: result.output, as: UTF8.self)
        let start = try #require(text.firstIndex(of: "{"))
        let tree = try #require(try JSONSerialization.jsonObject(with: Data(text[start...].utf8)) as? [String: Any])
        var identities: Set<String> = []
        func walk(_ node: [String: Any]) {
            for child in node["dependencies"] as? [[String: Any]] ?? [] {
                if let identity = child["identity"] as? String { identities.insert(identity) }
                walk(child)
            }
        }
        walk(tree)
        return identities
    }

    @Test("with the default traits off, an app resolves only the client's graph")
    func clientOnly() async throws {
        let packages = try await Self.resolvedPackages(packageLine: #".package(path: "\#(Self.checkout.path)", traits: [])"#)
        #expect(packages == [Self.checkout.lastPathComponent.lowercased(), "swift-crypto", "swift-asn1", "swift-http-structured-headers"])
    }

    @Test("with the default traits, the same line brings the gateway's packages, so the check can fail")
    func gatewayByDefault() async throws {
        let packages = try await Self.resolvedPackages(packageLine: #".package(path: "\#(Self.checkout.path)")"#)
        #expect(packages.isSuperset(of: ["swift-nio", "yams", "swift-argument-parser", "jwt-kit", "swift-crypto"]))
    }
}
