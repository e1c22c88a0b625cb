// swift-tools-version:6.0
// The NIO and libcurl upstream clients side by side: N requests to one backend, requests/s and the
// CPU time this process spent per request. A package of its own, like bench/micro, so that
// `swift test` never builds it. Run: `bench/upstream-clients.sh` (it starts the backend).
import PackageDescription

let package = Package(
    name: "PorticoUpstreamBenchmark",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Portico", path: "../.."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "UpstreamClients",
            dependencies: [
                .product(name: "PorticoUpstream", package: "Portico"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Sources/UpstreamClients"
        )
    ]
)
