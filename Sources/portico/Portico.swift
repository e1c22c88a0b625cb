import ArgumentParser

@main
struct PorticoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "portico",
        abstract: "An API gateway: signed requests, per-backend limits, versioned remote facades.",
        subcommands: [
            ServeCommand.self, CheckCommand.self, KeygenCommand.self, LocatorKeyCommand.self, SignCommand.self, CallCommand.self,
            DemoBackendsCommand.self,
        ]
    )
}
