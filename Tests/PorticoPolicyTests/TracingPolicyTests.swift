import Foundation
import PorticoPolicy
import Testing

/// The `tracing` section: where spans go, which requests are sampled, whose trace context is trusted.
@Suite("Tracing in the policy")
struct TracingPolicyTests {
    static let base = """
        listeners: [{ name: public, address: 127.0.0.1, port: 0 }, { name: internal, address: 127.0.0.1, port: 0 }]
        backends: { app: { url: "http://127.0.0.1:9" } }
        services: { orders: { path: /orders, versions: { 1: { proxy: { backend: app } } } } }
        tracing:
          serviceName: edge
          otlp: { endpoint: "http://collector:4318", headers: { Authorization: "Bearer t0ken", X-Tenant: { env: TENANT } }, timeout: 2s }
          sampler: { ratio: 0.25, parentBased: false }
          trustIncoming: { listeners: [internal], networks: [10.0.0.0/8] }
          responseTraceparent: true
          queueSize: 4096
        """

    static func load(_ text: String) throws(PolicyError) -> Policy {
        try PolicyLoader(environment: ["TENANT": "blue"]).load(sources: [(file: "p.yaml", text: text)]).policy
    }

    @Test("the issue's shape reads, and a bare collector address gets OTLP's traces path")
    func reads() throws {
        let tracing = try #require(try Self.load(Self.base).tracing)
        #expect(tracing.serviceName == "edge")
        #expect(tracing.otlp.endpoint == "http://collector:4318/v1/traces")
        #expect(tracing.otlp.headers.map(\.name) == ["Authorization", "X-Tenant"])
        #expect(tracing.otlp.headers.map(\.value) == [Secret("Bearer t0ken"), Secret("blue")])
        #expect(tracing.otlp.timeout == .seconds(2))
        #expect(tracing.sampler == TracingPolicy.Sampler(ratio: 0.25, parentBased: false))
        #expect(tracing.trustIncoming.listeners == ["internal"] && tracing.trustIncoming.networks.count == 1)
        #expect(!tracing.trustIncoming.everyone)
        #expect(tracing.responseTraceparent && tracing.queueSize == 4096)
        // A header value is a secret: its description never shows it.
        #expect(!String(describing: tracing).contains("t0ken"))
    }

    @Test("defaults: service portico, every trace sampled with the parent's decision, nobody trusted, nothing returned")
    func defaults() throws {
        let text =
            Self.base.components(separatedBy: "tracing:")[0] + "tracing: { otlp: { endpoint: \"https://otel.example.com/custom/path\" } }\n"
        let tracing = try #require(try Self.load(text).tracing)
        #expect(tracing.serviceName == "portico" && tracing.otlp.endpoint == "https://otel.example.com/custom/path")
        #expect(tracing.otlp.timeout == .seconds(10) && tracing.otlp.headers.isEmpty)
        #expect(tracing.sampler == TracingPolicy.Sampler(ratio: 1, parentBased: true))
        #expect(tracing.trustIncoming == .nobody && !tracing.responseTraceparent && tracing.queueSize == 2048)
        #expect(try Self.load(Self.base.components(separatedBy: "tracing:")[0]).tracing == nil)
        let everyone = try Self.load(Self.base.replacingOccurrences(of: "{ listeners: [internal], networks: [10.0.0.0/8] }", with: "true"))
        #expect(everyone.tracing?.trustIncoming.everyone == true)
    }

    static let broken: [(String, String, String)] = [
        (
            "endpoint: \"http://collector:4318\"", "endpoint: \"grpc://collector:4317\"",
            "tracing.otlp.endpoint: expected the collector's OTLP/HTTP URL"
        ),
        ("otlp: { endpoint: \"http://collector:4318\", ", "otlp: { ", "tracing.otlp: missing"),
        ("ratio: 0.25", "ratio: 1.5", "tracing.sampler.ratio: expected a share of traces between 0 and 1"),
        ("timeout: 2s", "timeout: 5m", "tracing.otlp.timeout: expected at most 60s"),
        ("queueSize: 4096", "queueSize: 8", "tracing.queueSize"),
        ("listeners: [internal]", "listeners: [backstage]", "tracing.trustIncoming.listeners.0: no listener is named backstage"),
        ("networks: [10.0.0.0/8]", "networks: [10.0.0.0/99]", "tracing.trustIncoming.networks.0"),
        (
            "X-Tenant: { env: TENANT }", "X-Tenant: { env: MISSING }",
            "tracing.otlp.headers.X-Tenant: the environment variable MISSING is not set"
        ),
        (
            "Authorization: \"Bearer t0ken\"", "\"Bad Name\": x",
            "tracing.otlp.headers.Bad Name: \"Bad Name\" is not a valid HTTP field name"
        ),
        ("serviceName: edge", "serviceName: edge\n  exporter: zipkin", "tracing.exporter: unknown key \"exporter\""),
    ]

    @Test("each mistake names the file and key path, and a broken section is refused whole", arguments: broken)
    func mistakes(replacing: String, with replacement: String, expected: String) throws {
        let text = Self.base.replacingOccurrences(of: replacing, with: replacement)
        #expect(text != Self.base, "the replacement did not apply")
        do {
            _ = try Self.load(text)
            Issue.record("accepted: \(replacement)")
        } catch {
            let lines = error.diagnostics.map(\.description)
            #expect(lines.contains { $0.hasPrefix("p.yaml:") && $0.contains(expected) }, "\(lines)")
        }
    }
}
