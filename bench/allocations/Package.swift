// swift-tools-version:6.0
// Allocations per proxied request: the real gateway in this process, a small backend and a blocking
// client beside it, and a malloc counter that tells the gateway's threads from theirs. A package of
// its own, like bench/micro, so that `swift test` never builds it. Run: `bench/allocations.sh`.
import PackageDescription

let package = Package(
    name: "PorticoAllocationBenchmark",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Portico", path: "../.."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        // malloc and friends, counted per thread and forwarded to glibc, and the Swift runtime's
        // retains, releases, exclusivity checks and dynamic casts on the same threads (Linux only).
        .target(name: "CMallocCounter"),
        // The system OpenSSL, for the benchmark's own TLS client.
        .target(name: "CClientTLS", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        .executableTarget(
            name: "Allocations",
            dependencies: [
                "CMallocCounter",
                "CClientTLS",
                .product(name: "Portico", package: "Portico"),
                .product(name: "PorticoPolicy", package: "Portico"),
                // The signed route's request, signed as an app would.
                .product(name: "PorticoClient", package: "Portico"),
                // The third-party signer's shape, signed with an `alg` parameter.
                .product(name: "PorticoSigning", package: "Portico"),
                .product(name: "PorticoHTTP", package: "Portico"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Sources/Allocations"
        ),
    ]
)
