import ArgumentParser
import PorticoDemoBackends

/// `portico demo-backends`: runs only the demo backends (for a gateway started separately).
struct DemoBackendsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-backends",
        abstract:
            "Run the demo backends (quotes on 18081 and 18087, echo on 18082, the facades' feeds on 18083-18086) until interrupted.")

    @Option(help: "The address to bind: 127.0.0.1, or 0.0.0.0 in a container the gateway reaches over a network.")
    var host = "127.0.0.1"

    func run() async throws {
        let servers = try await DemoBackends.start(host: host)
        print("demo backends listening on \(host) ports \(servers.map(\.port))")
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}
