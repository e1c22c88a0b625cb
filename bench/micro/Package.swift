// swift-tools-version:6.1
// Micro-benchmarks, kept out of the main package so `swift test` never builds the benchmark tool.
// Run: `make microbench`, i.e. `swift package --package-path bench/micro -Xswiftc -cross-module-optimization benchmark`.
import PackageDescription

let package = Package(
    name: "PorticoMicroBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Portico", path: "../.."),
        .package(url: "https://github.com/apple/swift-http-structured-headers.git", from: "1.7.0"),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "SignatureVerification",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Portico", package: "Portico"),
                .product(name: "PorticoSigning", package: "Portico"),
                .product(name: "PorticoCrypto", package: "Portico"),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
            ],
            path: "Benchmarks/SignatureVerification",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "RateLimiting",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Portico", package: "Portico"),
            ],
            path: "Benchmarks/RateLimiting",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
