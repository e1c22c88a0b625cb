import Foundation
import NIOHTTP1
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

@Suite("Prometheus metrics on the admin listener")
struct MetricsTests {
    /// One sample line of the text format: name, its labels, its value.
    struct Sample: Hashable {
        let name: String
        let labels: [String: String]
    }

    /// Parses Prometheus's text format (0.0.4) strictly: every line is a `# HELP`/`# TYPE` comment or
    /// a sample `name{label="value",...} number`; anything else fails the test.
    static func parse(_ text: String) -> [Sample: Double] {
        var samples: [Sample: Double] = [:]
        let name = #"[a-zA-Z_:][a-zA-Z0-9_:]*"#
        let sample = try! Regex(
            #"^(\#(name))(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*)?\})? (\S+)$"#)
        let comment = try! Regex(#"^# (HELP|TYPE) \#(name)( .*)?$"#)
        for line in text.split(separator: "\n") {
            if line.wholeMatch(of: comment) != nil { continue }
            guard let match = line.wholeMatch(of: sample), let value = Double(String(match.output[4].substring!)) else {
                Issue.record("not Prometheus text: \(line)")
                continue
            }
            var labels: [String: String] = [:]
            if let list = match.output[3].substring {
                for pair in list.split(separator: ",") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    labels[String(parts[0])] = String(parts[1].dropFirst().dropLast())
                }
            }
            samples[Sample(name: String(match.output[1].substring!), labels: labels)] = value
        }
        return samples
    }

    @Test("/metrics parses as Prometheus text and counts the requests, refusals and reloads the test made")
    func countsWhatHappened() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: PolicyReloadTests.files) {
            gateway, _ in
            let client = try RawHTTPClient(port: gateway.port)
            for _ in 0..<3 { #expect(try client.request("GET", "/other/x").status == 200) }
            for _ in 0..<2 { #expect(try client.request("GET", "/nowhere").status == 404) }
            #expect(try client.request("GET", "/svc/x").status == 401)
            #expect(try client.request("GET", "/svc/x", headers: [("X-API-Key", "k1.wrong-secret")]).status == 401)
            #expect(
                try client.request("GET", "/svc/x?apiVersion=7", headers: [("X-API-Key", "k1.\(PolicyReloadTests.secretOne)")]).status
                    == 404)
            let answer = try await offThePool { try gateway.adminRequest("POST", "/admin/reload?dryRun=true") }
            #expect(answer.status == 200)
            let answer2 = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
            #expect(answer2.status == 200)

            let scrape = try await offThePool { try gateway.adminRequest("GET", "/metrics") }
            #expect(scrape.status == 200)
            #expect(scrape.header("content-type")?.hasPrefix("text/plain; version=0.0.4") == true)
            let samples = Self.parse(scrape.bodyText)
            func value(_ name: String, _ labels: [String: String] = [:]) -> Double? { samples[Sample(name: name, labels: labels)] }

            #expect(value("portico_requests_total", ["service": "other", "version": "1", "status_class": "2xx"]) == 3)
            #expect(value("portico_requests_total", ["service": "", "version": "", "status_class": "4xx"]) == 2)
            #expect(value("portico_requests_total", ["service": "svc", "version": "", "status_class": "4xx"]) == 3)
            #expect(value("portico_requests_total", ["service": "svc", "version": "1", "status_class": "2xx"]) == 0)
            #expect(value("portico_request_duration_seconds_count") == 8)
            #expect(value("portico_upstream_duration_seconds_count", ["backend": "beta"]) == 3)
            #expect(value("portico_upstream_duration_seconds_count", ["backend": "alpha"]) == 0)
            #expect(value("portico_auth_failures_total", ["reason": "api_key_required"]) == 1)
            #expect(value("portico_auth_failures_total", ["reason": "api_key_invalid"]) == 1)
            #expect(value("portico_rate_limit_refusals_total", ["kind": "tier"]) == 0)
            #expect(value("portico_policy_reloads_total", ["result": "applied"]) == 1)
            #expect(value("portico_policy_reloads_total", ["result": "dry_run"]) == 1)
            #expect(value("portico_policy_reloads_total", ["result": "refused"]) == 0)
            #expect(value("portico_policy_generation") == 1)
            #expect(value("portico_open_connections") == 1)
            // Every sample of a histogram is bounded by its count.
            #expect(value("portico_request_duration_seconds_bucket", ["le": "+Inf"]) == 8)
        }
    }

    @Test("rate-limit refusals are counted by kind, TLS handshakes and failed handshakes apart")
    func refusalsAndHandshakes() async throws {
        try await withReloadableGateway(
            backends: [namedBackend("alpha")], tls: TestCertificates.listenerTLS("localhost"),
            files: { ports in
                [
                    "backends.yaml": "backends:\n  alpha: { url: \"http://127.0.0.1:\(ports[0])\", rateLimit: { rate: 1/h, burst: 1 } }",
                    "services.yaml": "services:\n  svc: { path: /svc, versions: { 1: { proxy: { backend: alpha } } } }",
                ]
            }
        ) { gateway, _ in
            let port = gateway.port
            try await offThePool {
                let client = try TLSTestClient(port: port)
                #expect(try client.request("GET", "/svc/a").status == 200)
                #expect(try client.request("GET", "/svc/a").status == 429)
                // Plain HTTP on the TLS port: a handshake that fails.
                let plain = try RawHTTPClient(port: port)
                try plain.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                _ = plain.waitForClose()
            }
            #expect(
                await eventually {
                    let samples = Self.parse(gateway.gateway.metrics.render())
                    return samples[Sample(name: "portico_tls_handshake_failures_total", labels: [:])] == 1
                })
            let samples = Self.parse(try await offThePool { try gateway.adminRequest("GET", "/metrics") }.bodyText)
            #expect(samples[Sample(name: "portico_tls_handshakes_total", labels: [:])] == 1)
            #expect(samples[Sample(name: "portico_rate_limit_refusals_total", labels: ["kind": "backend"])] == 1)
            #expect(
                samples[Sample(name: "portico_requests_total", labels: ["service": "svc", "version": "1", "status_class": "4xx"])] == 1)
        }
    }

    @Test("a 401 or 403 of a type the metrics do not list counts as reason other; other error answers do not count")
    func unknownAuthenticationFailure() {
        let metrics = GatewayMetrics()
        metrics.problemAnswered(Problem(type: "urn:portico:problem:some-new-check", title: "New", status: .unauthorized))
        metrics.problemAnswered(Problem(type: "urn:portico:problem:some-new-check", title: "New", status: .forbidden))
        metrics.problemAnswered(Problem(type: "urn:portico:problem:not-found", title: "Not found", status: .notFound))
        let samples = Self.parse(metrics.render())
        #expect(samples[Sample(name: "portico_auth_failures_total", labels: ["reason": "other"])] == 2)
        let counted = samples.filter { $0.key.name == "portico_auth_failures_total" || $0.key.name == "portico_rate_limit_refusals_total" }
        #expect(counted.values.reduce(0, +) == 2)
    }
}
