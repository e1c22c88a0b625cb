// swift-tools-version:6.0
// What the operations features cost a request, each on one thread:
// - AccessLogCost: formatting a typical access-log record and appending it to the batched writer
//   (the writer thread draining to /dev/null); run `bench/access-log.sh`;
// - MetricsCost: counting a finished exchange in the metrics (its status-class counter, its two
//   duration histograms); run `bench/metrics-cost.sh`;
// - AuthenticationCost: the authenticate stage's check of bench/auth.sh's request, per kind of
//   route (none, API key, signature); run `bench/auth-cost.sh`;
// - TraceCost: a request's tracing on its event loop, unsampled and sampled; run `bench/trace-cost.sh`.
// A package of its own, like bench/micro, so that `swift test` never builds it. It reaches types
// internal to the server through `@testable import`, so it is built with `-enable-testing`.
import PackageDescription

let package = Package(
    name: "PorticoOperationsBenchmark",
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
        ),
        .executableTarget(
            name: "MetricsCost",
            dependencies: [
                .product(name: "Portico", package: "Portico"),
                .product(name: "PorticoPolicy", package: "Portico"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Sources/MetricsCost"
        ),
        .executableTarget(
            name: "AuthenticationCost",
            dependencies: [
                .product(name: "Portico", package: "Portico"),
                .product(name: "PorticoPolicy", package: "Portico"),
                .product(name: "PorticoSigning", package: "Portico"),
                .product(name: "PorticoCrypto", package: "Portico"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Sources/AuthenticationCost"
        ),
        .executableTarget(
            name: "TraceCost",
            dependencies: [
                .product(name: "Portico", package: "Portico"),
                .product(name: "PorticoPolicy", package: "Portico"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Sources/TraceCost"
        ),
    ]
)
