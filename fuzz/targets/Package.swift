// swift-tools-version:6.0
import PackageDescription

// libFuzzer targets for Portico. A package of its own, so that the main package's `swift build`
// and `swift test` never see them: they link only with `-sanitize=fuzzer`, which supplies
// libFuzzer's runtime. Build and run them with `make fuzz-build` / `make fuzz` from the repository
// root (see ../README.md).
//
// The package sits in fuzz/targets rather than in fuzz/ itself because SwiftPM names a package
// after its directory: a checkout that is itself called "fuzz" would give the main package (at
// "../..") and this one the same identity, and the build would not find the main package's products.
//
// The gateway target drives internal types (the connection pipeline, `GatewayServices`) through
// `@testable import Portico`, so the package is built with `-enable-testing`. Those types are the
// server's inside, not an API anyone should program against; widening their access for a fuzzer
// would make them one. FuzzEventStream reads the client library's internal event stream parser
// the same way, and FuzzBackendResponse the upstream connection's internal response decoder.
// FuzzSignatureFields reaches the signing module's internal dictionary parser
// the same way, to check it against swift-http-structured-headers'. The other targets use public API only.
let nio: Package.Dependency = .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2")

let log: Package.Dependency = .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2")

let structuredHeaders: Package.Dependency = .package(url: "https://github.com/apple/swift-http-structured-headers.git", from: "1.7.0")

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "PorticoFuzz",
    platforms: [.macOS(.v14)],
    dependencies: [.package(name: "Portico", path: "../.."), nio, log, structuredHeaders],
    targets: [
        // libFuzzer's driver, declared for Swift (`LLVMFuzzerRunDriver`), and the `main` each target calls.
        .target(name: "CLibFuzzer"),
        .target(name: "FuzzSupport", dependencies: ["CLibFuzzer"], swiftSettings: swiftSettings),
        // Signature-Input and Signature parsing, round trips and signature bases (PorticoSigning).
        .executableTarget(
            name: "FuzzSignatureFields",
            dependencies: [
                "FuzzSupport", .product(name: "PorticoSigning", package: "Portico"),
                // The reference the signing module's own dictionary parser is checked against.
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
            ],
            swiftSettings: swiftSettings
        ),
        // Policy YAML through the whole loader: diagnostics, never a crash (PorticoPolicy).
        .executableTarget(
            name: "FuzzPolicyLoader",
            dependencies: ["FuzzSupport", .product(name: "PorticoPolicy", package: "Portico")],
            swiftSettings: swiftSettings
        ),
        // Request paths through the path normaliser: idempotent, no dot-segment or stray encoding accepted (Portico).
        .executableTarget(
            name: "FuzzPathNormalizer",
            dependencies: ["FuzzSupport", .product(name: "Portico", package: "Portico")],
            swiftSettings: swiftSettings
        ),
        // The gateway harness both connection targets share: a fixed policy, the connection pipeline
        // on an EmbeddedChannel, a backend double, the checks of what the gateway writes (Portico).
        .target(
            name: "FuzzGateway",
            dependencies: [
                .product(name: "Portico", package: "Portico"),
                .product(name: "PorticoPolicy", package: "Portico"),
                .product(name: "PorticoUpstream", package: "Portico"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // HTTP/2 frames through the gateway's real HTTP/2 pipeline on an EmbeddedChannel (Portico).
        .executableTarget(
            name: "FuzzHTTP2Connection",
            dependencies: [
                "FuzzSupport", "FuzzGateway", .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Response and request fields as the response cache and compression read them (Portico).
        .executableTarget(
            name: "FuzzCacheFields",
            dependencies: [
                "FuzzSupport", .product(name: "Portico", package: "Portico"), .product(name: "PorticoHTTP", package: "Portico"),
                .product(name: "PorticoPolicy", package: "Portico"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Bearer tokens as the JWT scheme reads them: compact JWS, strict base64url, claims (Portico).
        .executableTarget(
            name: "FuzzBearerToken",
            dependencies: [
                "FuzzSupport", .product(name: "Portico", package: "Portico"), .product(name: "PorticoPolicy", package: "Portico"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Request heads as the SigV4 scheme reads them: both credential forms, the canonical request (Portico).
        .executableTarget(
            name: "FuzzSigV4Request",
            dependencies: [
                "FuzzSupport", .product(name: "Portico", package: "Portico"), .product(name: "PorticoHTTP", package: "Portico"),
                .product(name: "PorticoPolicy", package: "Portico"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // A text/event-stream body as the client library reads it, whole and cut (PorticoClient).
        .executableTarget(
            name: "FuzzEventStream",
            dependencies: ["FuzzSupport", .product(name: "PorticoClient", package: "Portico")],
            swiftSettings: swiftSettings
        ),
        // A backend's bytes through the upstream connection's HTTP/1.1 decoder, cut anywhere, and
        // against NIO's decoder (PorticoUpstream, internal).
        .executableTarget(
            name: "FuzzBackendResponse",
            dependencies: [
                "FuzzSupport", .product(name: "PorticoUpstream", package: "Portico"), .product(name: "PorticoHTTP", package: "Portico"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // A client's request bytes through the gateway's own HTTP/1.1 request decoder, beside NIO's (Portico).
        .executableTarget(
            name: "FuzzClientRequest",
            dependencies: [
                "FuzzSupport", .product(name: "Portico", package: "Portico"), .product(name: "PorticoHTTP", package: "Portico"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Request bytes through the gateway's real connection pipeline on an EmbeddedChannel (Portico).
        .executableTarget(
            name: "FuzzGatewayHead",
            dependencies: ["FuzzSupport", "FuzzGateway", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
    ]
)
