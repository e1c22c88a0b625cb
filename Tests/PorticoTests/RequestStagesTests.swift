import Testing

@testable import Portico

/// The stages' order as a client sees it, through the gateway's real pipeline on an `EmbeddedChannel`.
@Suite struct RequestStagesTests {
    @Test func anUnauthenticatedRequestLearnsNothingAboutVersions() throws {
        // The service exists; version 9 does not. Authentication runs before the version stage.
        let answer = try EmbeddedGateway.exchange("GET /api/v9/stockquote HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(answer.hasPrefix("HTTP/1.1 401 "))
        #expect(!answer.contains("unknown-api-version"))
        #expect(!answer.lowercased().contains("x-api-version"))
    }

    @Test func routingRunsBeforeAuthentication() throws {
        let answer = try EmbeddedGateway.exchange("GET /nowhere HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(answer.hasPrefix("HTTP/1.1 404 "))
        #expect(answer.contains("urn:portico:problem:no-route"))
    }

    @Test func headChecksRunFirst() throws {
        let answer = try EmbeddedGateway.exchange("GET /nowhere HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        #expect(answer.hasPrefix("HTTP/1.1 400 "))
        #expect(answer.contains("Host fields"))
    }
}
