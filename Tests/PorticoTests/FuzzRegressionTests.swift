import Testing

/// Inputs the gateway fuzz target (`fuzz/targets/Sources/FuzzGatewayHead`) crashed on, replayed
/// through the same connection pipeline on an `EmbeddedChannel`. Each is also in the target's seed
/// corpus (`fuzz/corpus/FuzzGatewayHead/`) under the name its test gives.
@Suite("Fuzz regressions: the gateway's connection pipeline")
struct FuzzRegressionTests {
    /// `regression-path-ends-inside-route`: a path that stops inside a route's template
    /// (`/api/x` against `/api/{version}/stockquote`) made route matching read past its end and trap,
    /// killing the gateway with one unauthenticated request. It is a 404 now.
    @Test func aPathThatEndsInsideARouteIsNotFound() throws {
        let input =
            "GET /api/InttockquotezMSFT?range=1d&apiVersion=2 HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: req-1\r\n"
            + "Signature-Input: sig1=(\"@method\" \"@authority\" \"@path\" \"@quer/cuty\");created=1795132800;keyid=\"demo-app\";"
            + "nonce=\"n0nce-2\"\r\nSignature: sig1=:I77McQ2gdFsu88CFNT/1FlM/zRO+LcOcdMdfSl2sRhM=:\r\n\r\n"
        let output = try EmbeddedGateway.exchange(input)
        #expect(output.hasPrefix("HTTP/1.1 404 "), "\(output)")
        #expect(try EmbeddedGateway.exchange("GET /api/1 HTTP/1.1\r\nHost: a\r\n\r\n").hasPrefix("HTTP/1.1 404 "))
    }
}
