import Foundation
import PorticoDemoBackends
import PorticoPolicy
import Testing
import Yams

/// docker-compose.yml and the Dockerfile, checked against the code: no Docker engine runs here, so
/// what can drift (service names, ports, mounted paths, commands and options) is checked instead.
@Suite("docker-compose.yml and Dockerfile")
struct ComposeFileTests {
    static let root = DemoQuotesTests.repositoryRoot

    static func compose() throws -> [String: Any] {
        let text = try String(contentsOf: root.appendingPathComponent("docker-compose.yml"), encoding: .utf8)
        return try #require(try Yams.load(yaml: text) as? [String: Any])
    }

    static func service(_ name: String) throws -> [String: Any] {
        let services = try #require(try compose()["services"] as? [String: Any])
        return try #require(services[name] as? [String: Any], "no service \(name)")
    }

    /// The policy the gateway container reads: its mounts laid out as in the container (links
    /// under a temporary root), loaded as the gateway loads its directory.
    static func containerPolicy() throws -> PolicySnapshot {
        let volumes = try #require(try service("gateway")["volumes"] as? [String])
        let container = FileManager.default.temporaryDirectory.appendingPathComponent("portico-compose-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: container) }
        for volume in volumes {
            let parts = volume.split(separator: ":").map(String.init)
            let link = container.appendingPathComponent(parts[1])
            try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: root.appendingPathComponent(parts[0]))
        }
        return try PolicyLoader().load(directory: container.appendingPathComponent("etc/portico/policies").path)
    }

    @Test("the gateway and the demo backends are its services, each with a health check, every mount read-only")
    func services() throws {
        let services = try #require(try Self.compose()["services"] as? [String: Any])
        #expect(Set(services.keys) == ["gateway", "demo-backends"])
        for name in services.keys {
            let service = try Self.service(name)
            let check = try #require(service["healthcheck"] as? [String: Any], "\(name) has no health check")
            #expect((check["test"] as? [String])?.first == "CMD")
            #expect(service["read_only"] as? Bool == true)
            for volume in service["volumes"] as? [String] ?? [] {
                #expect(volume.hasSuffix(":ro"), "\(volume) is not read-only")
            }
        }
        let dependsOn = try #require(try Self.service("gateway")["depends_on"] as? [String: Any])
        #expect(dependsOn["demo-backends"] != nil)
    }

    @Test("every mounted path exists in the repository (certs/dev is made by certs/make-dev-certs.sh)")
    func mountedPaths() throws {
        let volumes = try #require(try Self.service("gateway")["volumes"] as? [String])
        for volume in volumes {
            let host = String(volume.split(separator: ":")[0])
            if host == "./certs/dev" {
                #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent("certs/make-dev-certs.sh").path))
                continue
            }
            #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(host).path), "\(host)")
        }
    }

    @Test("the published ports are the container policy's listeners; its backends are the demo backends' ports, by service name")
    func ports() throws {
        let snapshot = try Self.containerPolicy()
        let published = try #require(try Self.service("gateway")["ports"] as? [String])
        let containerPorts = Set(published.compactMap { $0.split(separator: ":").last.flatMap { Int($0) } })
        #expect(containerPorts == Set(snapshot.policy.listeners.map(\.port)))
        #expect(snapshot.policy.listeners.allSatisfy { $0.address == "0.0.0.0" })
        let demoPorts = Set([
            DemoBackends.quotesPort, DemoBackends.echoPort, DemoBackends.quotesCSVPort, DemoBackends.quotesXMLPort,
            DemoBackends.weatherYQLPort, DemoBackends.weatherRESTPort,
        ])
        #expect(Set(snapshot.policy.backends.values.map(\.url.port)) == demoPorts)
        #expect(snapshot.policy.backends.values.allSatisfy { $0.url.host == "demo-backends" })
        // The health checks ask what the code serves: the admin listener's /readyz, a demo backend's port.
        let gatewayCheck = try #require((try Self.service("gateway")["healthcheck"] as? [String: Any])?["test"] as? [String])
        let admin = try #require(snapshot.policy.admin)
        #expect(gatewayCheck.contains("http://127.0.0.1:\(admin.port)/readyz"))
        let backendCheck = try #require((try Self.service("demo-backends")["healthcheck"] as? [String: Any])?["test"] as? [String])
        #expect(backendCheck.contains { $0.hasPrefix("http://127.0.0.1:\(DemoBackends.echoPort)/") })
        // The container policy serves the same services and keys as the shipped one.
        let shipped = try PolicyLoader().load(directory: Self.root.appendingPathComponent("policies").path)
        #expect(snapshot.policy.services == shipped.policy.services)
        #expect(Set(snapshot.policy.backends.keys) == Set(shipped.policy.backends.keys))
    }

    @Test("the commands and options compose runs are ones the binary has")
    func commands() throws {
        let executable = try porticoExecutable()
        for name in ["gateway", "demo-backends"] {
            let command = try #require(try Self.service(name)["command"] as? [String])
            let help = Process()
            help.executableURL = executable
            help.arguments = [command[0], "--help"]
            let output = Pipe()
            help.standardOutput = output
            help.standardError = Pipe()
            try help.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            help.waitUntilExit()
            #expect(help.terminationStatus == 0, "\(command[0])")
            for option in command.dropFirst() where option.hasPrefix("--") {
                #expect(text.contains(option), "\(name): \(command[0]) has no \(option)")
            }
        }
    }

    @Test("the Dockerfile builds the portico product in release from the official Swift image and runs it as a non-root user")
    func dockerfile() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("Dockerfile"), encoding: .utf8)
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let from = lines.filter { $0.hasPrefix("FROM ") }
        #expect(from.first?.hasPrefix("FROM swift:6.3.1") == true, "\(from)")
        #expect(text.contains("swift build -c release --product portico"))
        let user = try #require(lines.last { $0.hasPrefix("USER ") })
        #expect(!user.contains("root") && user != "USER 0")
        for line in lines where line.hasPrefix("COPY ") && !line.contains("--from") {
            let source = String(line.split(separator: " ")[1])
            #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(source).path), "\(source)")
        }
        #expect(text.contains("ENTRYPOINT [\"/usr/local/bin/portico\"]"))
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        #expect(manifest.contains(".executable(name: \"portico\""))
        // Where the image expects the policies is where compose mounts them.
        let volumes = try #require(try Self.service("gateway")["volumes"] as? [String])
        #expect(volumes.allSatisfy { $0.split(separator: ":")[1].hasPrefix("/etc/portico/") })
        #expect(text.contains("/etc/portico/policies"))
    }
}
