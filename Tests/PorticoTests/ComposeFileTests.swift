import Foundation
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
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
    static func containerPolicy(_ gateway: String = "gateway") throws -> PolicySnapshot {
        let volumes = try #require(try service(gateway)["volumes"] as? [String])
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

    static let fleetGateways = ["gateway-a", "gateway-b"]

    @Test(
        "the gateway and the demo backends are its services, Redis and two more gateways its fleet profile's; each with a health check, every mount read-only"
    )
    func services() throws {
        let services = try #require(try Self.compose()["services"] as? [String: Any])
        #expect(Set(services.keys) == Set(["gateway", "demo-backends", "redis"] + Self.fleetGateways))
        for name in services.keys {
            let profiles = try Self.service(name)["profiles"] as? [String]
            let inFleet = name == "redis" || Self.fleetGateways.contains(name)
            #expect(profiles == (inFleet ? ["fleet"] : nil), "\(name)")
        }
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
        var volumes: [String] = []
        for gateway in ["gateway"] + Self.fleetGateways {
            volumes += try #require(try Self.service(gateway)["volumes"] as? [String])
        }
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
            DemoBackends.weatherYQLPort, DemoBackends.weatherRESTPort, DemoBackends.quotesSecondPort, LiveDemoBackend.port,
        ])
        let targets = snapshot.policy.backends.values.flatMap(\.targets)
        #expect(Set(targets.map(\.url.port)) == demoPorts)
        #expect(targets.allSatisfy { $0.url.host == "demo-backends" })
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
        for name in ["gateway", "demo-backends"] + Self.fleetGateways {
            let command = try #require(try Self.service(name)["command"] as? [String])
            let help = try ChildProcess.run(executable.path, [command[0], "--help"])
            let text = String(decoding: help.output, as: UTF8.self)
            #expect(help.termination == .exited(0), "\(command[0])")
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

    @Test(
        "the fleet profile: two gateways with the shipped policy plus a cluster section naming the profile's Redis, on ports of their own")
    func fleetProfile() throws {
        let single = try Self.containerPolicy()
        #expect(single.policy.cluster == nil, "the default gateway keeps its state in memory")
        let redis = try Self.service("redis")
        let redisCommand = try #require(redis["command"] as? [String])
        let redisPort = try #require(redisCommand.firstIndex(of: "--port").flatMap { Int(redisCommand[$0 + 1]) })
        #expect(redisCommand.first == "redis-server")
        #expect(redisCommand.contains("noeviction"), "a full Redis refuses rather than forgets a nonce")
        let redisCheck = try #require((redis["healthcheck"] as? [String: Any])?["test"] as? [String])
        #expect(redisCheck.contains("redis-cli") && redisCheck.contains(String(redisPort)))
        let singleVolumes = try #require(try Self.service("gateway")["volumes"] as? [String])
        var snapshots: [PolicySnapshot] = []
        for name in Self.fleetGateways {
            let gateway = try Self.service(name)
            // The real loader, on the files as the container sees them.
            let snapshot = try Self.containerPolicy(name)
            let cluster = try #require(snapshot.policy.cluster, "\(name) has no cluster section")
            #expect(cluster.redis == RedisAddress(host: "redis", port: redisPort), "\(name)")
            #expect(cluster.onFailure == ClusterFailurePolicy(limits: .local, nonces: .deny))
            // Otherwise the default gateway's policy: the same mounts plus the cluster file.
            let volumes = try #require(gateway["volumes"] as? [String])
            #expect(Set(volumes).subtracting(singleVolumes) == ["./policies/fleet/cluster.yaml:/etc/portico/policies/cluster.yaml:ro"])
            #expect(Set(singleVolumes).isSubset(of: Set(volumes)))
            #expect(snapshot.policy.services == single.policy.services)
            #expect(snapshot.policy.backends == single.policy.backends)
            let dependsOn = try #require(gateway["depends_on"] as? [String: Any])
            #expect(Set(dependsOn.keys) == ["redis", "demo-backends"])
            // Published on ports of their own; inside, the policy's listeners.
            let published = try #require(gateway["ports"] as? [String])
            let containerPorts = Set(published.compactMap { $0.split(separator: ":").last.flatMap { Int($0) } })
            #expect(containerPorts == Set(snapshot.policy.listeners.map(\.port)))
            let admin = try #require(snapshot.policy.admin)
            let check = try #require((gateway["healthcheck"] as? [String: Any])?["test"] as? [String])
            #expect(check.contains("http://127.0.0.1:\(admin.port)/readyz"))
            snapshots.append(snapshot)
        }
        #expect(snapshots.count == 2 && snapshots[0].policy.cluster == snapshots[1].policy.cluster, "one fleet, one Redis")
        // No host port is published twice across the whole file (every profile may run at once).
        let services = try #require(try Self.compose()["services"] as? [String: Any])
        let hostPorts = try services.keys.flatMap { name in
            (try Self.service(name)["ports"] as? [String] ?? []).compactMap { $0.split(separator: ":").first.map(String.init) }
        }
        #expect(Set(hostPorts).count == hostPorts.count, "\(hostPorts.sorted())")
        // The shipped policy directory itself does not read the fleet file.
        let shipped = try PolicyLoader().load(directory: Self.root.appendingPathComponent("policies").path)
        #expect(shipped.policy.cluster == nil)
    }
}
