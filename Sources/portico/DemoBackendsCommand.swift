import ArgumentParser
import PorticoDemoBackends

/// `portico demo-backends`: runs only the demo backends (for a gateway started separately).
struct DemoBackendsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-backends", abstract: "Run the demo backends (quotes on 18081, echo on 18082) until interrupted.")

    func run() async throws {
        let servers = try await DemoBackends.start()
        print("demo backends listening on 127.0.0.1 ports \(servers.map(\.port))")
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}
