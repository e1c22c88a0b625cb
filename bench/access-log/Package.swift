// swift-tools-version:6.0
// The access log's cost per line: formatting a typical record and appending it to the batched
// writer, on one thread, with the writer thread draining to /dev/null. A package of its own, like
// bench/micro, so that `swift test` never builds it. It reaches the record and the line formatter
// (internal to the server) through `@testable import`, so it is built with `-enable-testing`.
// Run: `bench/access-log.sh` (or the command in it).
import PackageDescription

let package = Package(
    name: "PorticoAccessLogBenchmark",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Portico", path: "../.."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "AccessLogCost",
            dependencies: [
                .product(name: "Portico", package: "Portico"),
                .product(name: "PorticoPolicy", package: "Portico"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Sources/AccessLogCost"
        )
    ]
)
