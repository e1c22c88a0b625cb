import Testing

@testable import PorticoPolicy

@Suite("HTTP/2 in the policy: listeners' protocols and limits.http2")
struct HTTP2PolicyTests: LoadsPolicyText {
    static let tls = "tls: { certificate: /dev/null, privateKey: /dev/null }"

    @Test("TLS listeners offer h2 and http/1.1 by default, plain ones http/1.1; a list restricts or adds h2c")
    func defaults() throws {
        let policy = ListenerPolicy(name: "a", address: "127.0.0.1", port: 1, tls: nil)
        #expect(policy.protocols == [.http11])
        let snapshot = try Self.load(
            """
            listeners:
              - { name: plain, port: 0 }
              - { name: both, port: 0, protocols: [h2c, http/1.1] }
              - { name: prior, port: 0, protocols: [h2c] }
            """
        ).get()
        #expect(snapshot.listeners.map(\.protocols) == [[.http11], [.h2c, .http11], [.h2c]])
        #expect(snapshot.policy.limits.http2 == HTTP2LimitsPolicy())
    }

    @Test("h2 needs tls, h2c its absence; an empty list, a repeat or an unknown name are refused, naming the key path")
    func refused() {
        let found = Self.diagnostics(
            """
            listeners:
              - { name: a, port: 0, protocols: [h2] }
              - { name: b, port: 0, protocols: [] }
              - { name: c, port: 0, protocols: [http/1.1, http/1.1] }
              - { name: d, port: 0, protocols: [spdy] }
              - { name: e, port: 0, protocols: [h2c], \(Self.tls) }
            """)
        #expect(found.contains { $0.contains("listeners.0.protocols.0") && $0.contains("use h2c") }, "\(found)")
        #expect(found.contains { $0.contains("listeners.1.protocols:") && $0.contains("expected at least one") }, "\(found)")
        #expect(found.contains { $0.contains("listeners.2.protocols.1") && $0.contains("listed twice") }, "\(found)")
        #expect(found.contains { $0.contains("listeners.3.protocols.0") && $0.contains("spdy") }, "\(found)")
        #expect(found.contains { $0.contains("listeners.4.protocols.0") && $0.contains("use h2") }, "\(found)")
    }

    @Test("limits.http2 reads every bound, with units, and refuses values HTTP/2 cannot carry")
    func limits() throws {
        let snapshot = try Self.load(
            """
            listeners: [{ name: a, port: 0 }]
            limits:
              http2:
                maxConcurrentStreams: 50
                maxHeaderListSize: 8KiB
                headerTableSize: 0
                initialWindowSize: 128KiB
                connectionWindowSize: 4MiB
                maxResets: 30
                maxControlFrames: 40
                maxWindowUpdates: 500
                floodWindow: 10s
            """
        ).get()
        var expected = HTTP2LimitsPolicy()
        expected.maxConcurrentStreams = 50
        expected.maxHeaderListSize = 8192
        expected.headerTableSize = 0
        expected.initialWindowSize = 131_072
        expected.connectionWindowSize = 4 << 20
        expected.maxResets = 30
        expected.maxControlFrames = 40
        expected.maxWindowUpdates = 500
        expected.floodWindow = .seconds(10)
        #expect(snapshot.policy.limits.http2 == expected)
        let found = Self.diagnostics(
            """
            listeners: [{ name: a, port: 0 }]
            limits: { http2: { initialWindowSize: 1000, maxHeaderListSize: 100, maxConcurrentStreams: 0, streams: 3 } }
            """)
        #expect(found.contains { $0.contains("limits.http2.initialWindowSize") && $0.contains("65535") }, "\(found)")
        #expect(found.contains { $0.contains("limits.http2.maxHeaderListSize") }, "\(found)")
        #expect(found.contains { $0.contains("limits.http2.maxConcurrentStreams") }, "\(found)")
        #expect(found.contains { $0.contains("limits.http2.streams") }, "\(found)")
    }
}
