// swift-tools-version:6.1
import PackageDescription

// Versions are named once, here, and match the packages this project's machines carry.
let nio: Package.Dependency = .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2")
let yams: Package.Dependency = .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2")
let log: Package.Dependency = .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2")
let structuredHeaders: Package.Dependency = .package(
    url: "https://github.com/apple/swift-http-structured-headers.git", from: "1.7.0")
let argumentParser: Package.Dependency = .package(
    url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2")
// The compiled policy's swap: a strong reference loaded and replaced atomically (`ManagedAtomic`),
// which the standard library's Synchronization module does not offer for class references.
let atomics: Package.Dependency = .package(url: "https://github.com/apple/swift-atomics.git", from: "1.3.0")
// Operations: counters and histograms through swift-metrics, scraped as Prometheus text, and the
// process's start-up and graceful shutdown (signals) through swift-service-lifecycle.
let metrics: Package.Dependency = .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0")
let prometheus: Package.Dependency = .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1")
let lifecycle: Package.Dependency = .package(
    url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0")
// The client library's HMAC and hashes, and its check of the locator's Ed25519 signature: CryptoKit's
// API on Apple platforms, its own BoringSSL copy elsewhere, never the system OpenSSL.
let crypto: Package.Dependency = .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0")
// Semantic versions of client apps (`X-Client-Version`) and of compatibility-bucket ranges: parsing
// (`2.4` is 2.4.0) and SemVer 2.0 precedence, pre-releases included.
let semver: Package.Dependency = .package(url: "https://github.com/mxcl/Version.git", from: "2.2.1")
// HTTP/2 to clients (ALPN h2 over Portico's own TLS handler, and h2c with prior knowledge) and to
// backends: the frame codec, HPACK, flow control and the stream multiplexer, with its flood defences.
let http2: Package.Dependency = .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0")
// gzip for compressed responses: zlib's deflate stream, with its window and memory levels bounded
// per response (brotli and zstd come from their Debian libraries, CPorticoCodecs).
let compress: Package.Dependency = .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0")
// Facade sources that speak CSV: quoting, embedded separators and line breaks (RFC 4180).
// JWT bearer tokens: JWK import (RSA, EC and OKP keys) and the RS*, PS*, ES* and EdDSA signature
// algorithms; the gateway reads tokens and claims itself and only asks JWTKit whether a signature holds.
let jwt: Package.Dependency = .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0")
let csv: Package.Dependency = .package(url: "https://github.com/swiftcsv/SwiftCSV.git", exact: "0.10.0")
// OpenTelemetry traces: spans through swift-distributed-tracing's Tracer, made, sampled, batched and
// exported over OTLP/HTTP with protobuf by swift-otel (its gRPC exporter is left out by trait).
let otel: Package.Dependency = .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"])
let tracing: Package.Dependency = .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3")

// The gateway's packages are behind the `Gateway` trait, on by default. An app that wants only
// PorticoClient turns the default traits off (`traits: []` on its `.package` line) and SwiftPM then
// resolves and builds only the client's graph: swift-crypto (with swift-asn1) and
// swift-http-structured-headers. Every product of any other package is named through `gateway`.
func gateway(_ product: String, _ package: String) -> Target.Dependency {
    .product(name: product, package: package, condition: .when(traits: ["Gateway"]))
}

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Portico",
    // iOS for apps that add PorticoClient (Duration and async URLSession need iOS 16).
    platforms: [.macOS(.v14), .iOS(.v16)],
    products: [
        .executable(name: "portico", targets: ["portico"]),
        .library(name: "Portico", targets: ["Portico"]),
        .library(name: "PorticoPolicy", targets: ["PorticoPolicy"]),
        .library(name: "PorticoUpstream", targets: ["PorticoUpstream"]),
        .library(name: "PorticoSigning", targets: ["PorticoSigning"]),
        .library(name: "PorticoCrypto", targets: ["PorticoCrypto"]),
        .library(name: "PorticoHTTP", targets: ["PorticoHTTP"]),
        .library(name: "PorticoTLS", targets: ["PorticoTLS"]),
        .library(name: "PorticoRedis", targets: ["PorticoRedis"]),
        // What client apps add: signing and the service-locator client, with no NIO, OpenSSL or libcurl.
        // An app that adds only this turns the default traits off (`traits: []`): see `gateway` above.
        .library(name: "PorticoClient", targets: ["PorticoClient"]),
    ],
    traits: [
        .trait(name: "Gateway", description: "The gateway, its tools and tests; off for apps that add only PorticoClient."),
        .default(enabledTraits: ["Gateway"]),
    ],
    dependencies: [
        nio, yams, log, argumentParser, structuredHeaders, crypto, atomics, semver, metrics, prometheus, lifecycle, csv, http2, compress,
        jwt, otel, tracing,
    ],
    targets: [
        // System libcurl (Debian: libcurl4-openssl-dev) plus typed wrappers for its variadic calls.
        .target(
            name: "CPorticoCurl",
            linkerSettings: [.linkedLibrary("curl")]
        ),
        // System brotli encoder and zstd (Debian: libbrotli-dev, libzstd-dev), for compressed responses.
        .target(
            name: "CPorticoCodecs",
            linkerSettings: [.linkedLibrary("brotlienc"), .linkedLibrary("zstd")]
        ),
        // System OpenSSL 3 (Debian: libssl-dev) plus small shims for what Swift cannot call directly.
        .target(
            name: "CPorticoOpenSSL",
            linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]
        ),
        // RFC 9421 signatures and RFC 9530 digests, shared by the gateway and the client library:
        // no NIO, no OpenSSL, so it builds wherever an app does.
        .target(
            name: "PorticoSigning",
            dependencies: ["PorticoHTTP", .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers")],
            swiftSettings: swiftSettings
        ),
        // HTTP's string rules every module reads fields by (case-insensitive names, optional
        // whitespace), with no dependency at all: a stage needs them without importing a client.
        .target(name: "PorticoHTTP", swiftSettings: swiftSettings),
        // Every call into the system OpenSSL's libcrypto that is not TLS: HMAC-SHA256 from precomputed
        // key states, SHA digests, Ed25519 (the locator's signing key). The server's implementations
        // of PorticoSigning's protocols; the client library has its own, on swift-crypto.
        .target(
            name: "PorticoCrypto",
            dependencies: ["CPorticoOpenSSL", "PorticoSigning"],
            swiftSettings: swiftSettings
        ),
        // The client-side signer and service-locator client for apps (iOS, macOS, Linux). Its
        // dependency graph must stay free of NIO, OpenSSL and libcurl's headers (PorticoClientTests'
        // DependencyGraphTests checks what its compile actually read); on Linux a ServerTrust
        // reaches, at run time, the libcurl FoundationNetworking has loaded.
        .target(
            name: "PorticoClient",
            dependencies: [
                "PorticoSigning", .product(name: "Crypto", package: "swift-crypto"),
                .target(name: "CPorticoClientCurl", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: swiftSettings
        ),
        // On Linux only: the libcurl FoundationNetworking already loaded, reached with dlopen and no
        // curl header, for a server trust URLSession cannot honour there (ServerTrust).
        .target(name: "CPorticoClientCurl"),
        // The NIO channel handler that terminates TLS with the system OpenSSL, and its contexts.
        .target(
            name: "PorticoTLS",
            dependencies: [
                "CPorticoOpenSSL",
                gateway("NIOCore", "swift-nio"),
                gateway("NIOConcurrencyHelpers", "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PorticoUpstream",
            dependencies: [
                "CPorticoCurl",
                "PorticoHTTP",
                "PorticoTLS",
                gateway("NIOHTTP2", "swift-nio-http2"),
                gateway("NIOCore", "swift-nio"),
                gateway("NIOPosix", "swift-nio"),
                gateway("NIOHTTP1", "swift-nio"),
                gateway("NIOConcurrencyHelpers", "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Reformers: a facade source's body (JSON, XML or CSV) in, the contract's JSON object out.
        // Pure data, no NIO, so it is tested without a socket. XML through FoundationXML's parser.
        .target(
            name: "PorticoReform",
            dependencies: [gateway("SwiftCSV", "SwiftCSV")],
            swiftSettings: swiftSettings
        ),
        // A RESP2 codec and a pipelined Redis client on NIO, one connection per event loop, for fleet
        // mode's shared rate limits and nonces. Knows nothing of the gateway.
        .target(
            name: "PorticoRedis",
            dependencies: [
                "PorticoTLS",
                gateway("NIOCore", "swift-nio"),
                gateway("NIOPosix", "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PorticoPolicy",
            dependencies: [
                "PorticoReform", "PorticoHTTP", gateway("Yams", "Yams"), gateway("Version", "Version"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Portico",
            dependencies: [
                "PorticoPolicy",
                "PorticoReform",
                "PorticoUpstream",
                "PorticoSigning",
                "PorticoCrypto",
                "PorticoHTTP",
                "PorticoTLS",
                "PorticoRedis",
                "CPorticoCodecs",
                gateway("CompressNIO", "compress-nio"),
                gateway("JWTKit", "jwt-kit"),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
                gateway("NIOCore", "swift-nio"),
                gateway("NIOPosix", "swift-nio"),
                gateway("NIOHTTP1", "swift-nio"),
                gateway("NIOHTTP2", "swift-nio-http2"),
                gateway("NIOHPACK", "swift-nio-http2"),
                gateway("NIOConcurrencyHelpers", "swift-nio"),
                gateway("Logging", "swift-log"),
                gateway("Atomics", "swift-atomics"),
                gateway("Version", "Version"),
                gateway("CoreMetrics", "swift-metrics"),
                gateway("Prometheus", "swift-prometheus"),
                gateway("ServiceLifecycle", "swift-service-lifecycle"),
                gateway("UnixSignals", "swift-service-lifecycle"),
                gateway("OTel", "swift-otel"),
                gateway("Tracing", "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // Small NIO HTTP servers used as the quick start's demo backends and as the tests' real backends.
        .target(
            name: "PorticoDemoBackends",
            dependencies: [
                gateway("NIOCore", "swift-nio"),
                gateway("NIOPosix", "swift-nio"),
                gateway("NIOHTTP1", "swift-nio"),
                gateway("NIOWebSocket", "swift-nio"),
                gateway("NIOConcurrencyHelpers", "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "portico",
            dependencies: [
                "Portico",
                "PorticoPolicy",
                "PorticoSigning",
                "PorticoCrypto",
                "PorticoClient",
                "PorticoUpstream",
                "PorticoDemoBackends",
                gateway("ArgumentParser", "swift-argument-parser"),
                gateway("Logging", "swift-log"),
                gateway("NIOCore", "swift-nio"),
                gateway("NIOPosix", "swift-nio"),
                gateway("ServiceLifecycle", "swift-service-lifecycle"),
                gateway("UnixSignals", "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Starts a real redis-server for the tests of the client and of fleet mode.
        .target(
            name: "PorticoRedisTesting",
            dependencies: [
                "PorticoRedis",
                "PorticoTLS",
                "PorticoTestSupport",
                gateway("NIOCore", "swift-nio"),
                gateway("NIOPosix", "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // glibc's spawn and pipe extensions, for the tests' child processes.
        .target(name: "CPorticoSpawn"),
        // What every test target may share, none of it the gateway: child processes, a refusing
        // port, the test certificates, waiting without sleeping a fixed time, a socket that stops reading.
        .target(
            name: "PorticoTestSupport",
            dependencies: [
                "CPorticoSpawn", "CPorticoOpenSSL", "PorticoTLS", gateway("NIOConcurrencyHelpers", "swift-nio"),
                gateway("NIOCore", "swift-nio"), gateway("NIOEmbedded", "swift-nio"),
            ],
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
        // The one way tests start a real gateway (with backends), and the fixtures several test
        // targets share (the facade and client fixture, a backend that holds its answer).
        .target(
            name: "PorticoTesting",
            dependencies: [
                "Portico",
                "PorticoTLS",
                gateway("NIOHTTP2", "swift-nio-http2"),
                "PorticoPolicy",
                "PorticoClient",
                "PorticoCrypto",
                "PorticoDemoBackends",
                "PorticoTestSupport",
                gateway("Logging", "swift-log"),
                gateway("NIOCore", "swift-nio"),
                gateway("NIOPosix", "swift-nio"),
                gateway("NIOHTTP1", "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PorticoRedisTests",
            dependencies: [
                "PorticoRedis",
                "PorticoRedisTesting",
                "PorticoTestSupport",
                "PorticoTLS",
                gateway("NIOConcurrencyHelpers", "swift-nio"),
                gateway("NIOCore", "swift-nio"),
                gateway("NIOPosix", "swift-nio"),
                gateway("NIOEmbedded", "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PorticoPolicyTests",
            dependencies: ["PorticoPolicy", "PorticoReform", gateway("Version", "Version")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PorticoReformTests",
            dependencies: ["PorticoReform"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PorticoCryptoTests",
            dependencies: ["PorticoCrypto", "PorticoSigning"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PorticoSigningTests",
            dependencies: [
                "PorticoSigning",
                "PorticoCrypto",
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PorticoTLSTests",
            dependencies: [
                "PorticoTLS",
                "CPorticoOpenSSL",
                "PorticoTestSupport",
                gateway("NIOConcurrencyHelpers", "swift-nio"),
                gateway("NIOCore", "swift-nio"),
                gateway("NIOEmbedded", "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PorticoClientTests",
            dependencies: [
                "PorticoClient",
                "PorticoSigning",
                "PorticoDemoBackends",
                // The façade against a real gateway: its fixture, and the gateway's locator key.
                "Portico",
                "PorticoCrypto",
                "PorticoTesting",
                "PorticoTestSupport",
                // The client's own libcurl numbers, checked against the header's.
                "CPorticoClientCurl",
                "CPorticoCurl",
                gateway("Logging", "swift-log"),
                gateway("NIOCore", "swift-nio"),
                gateway("NIOHTTP1", "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PorticoUpstreamTests",
            dependencies: [
                "PorticoUpstream",
                "PorticoDemoBackends",
                "PorticoTestSupport",
                gateway("NIOCore", "swift-nio"),
                gateway("NIOPosix", "swift-nio"),
                gateway("NIOHTTP1", "swift-nio"),
                gateway("NIOEmbedded", "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PorticoTests",
            dependencies: [
                "Portico",
                "PorticoHTTP",
                "PorticoPolicy",
                "PorticoReform",
                "PorticoUpstream",
                "PorticoSigning",
                "PorticoCrypto",
                "PorticoClient",
                "PorticoTLS",
                "PorticoRedis",
                "PorticoRedisTesting",
                "PorticoTestSupport",
                "PorticoTesting",
                "PorticoDemoBackends",
                "CPorticoOpenSSL",
                "CPorticoCurl",
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
                gateway("NIOCore", "swift-nio"),
                gateway("NIOPosix", "swift-nio"),
                gateway("NIOEmbedded", "swift-nio"),
                gateway("NIOHTTP1", "swift-nio"),
                gateway("Logging", "swift-log"),
                gateway("Version", "Version"),
                gateway("Yams", "Yams"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
