/// Services behind signature and API-key authentication in front of an `echo` backend: the
/// policy the signature tests, the client's round trips and the interoperability tests share.
///
/// `app-one` may call `signed` and `keyed` (tier `standard`); `old-app` is revoked.
public enum SignedServicesFixture {
    public static let appSecret = "app-one-secret-0123456789abcdefghijklmnopqrstuvwxyz"
    public static let revokedSecret = "revoked-secret-0123456789abcdefghijklmnopqrstuvwxyz"

    public static func policy(_ ports: [Int]) -> String {
        """
        signatures: { maxClockSkew: 300s, requireNonce: true }
        limits: { authFailures: off }  # these tests send hundreds of refusals from one address
        backends:
          echo: { url: "http://127.0.0.1:\(ports[0])" }
        services:
          signed:
            path: /signed
            auth: signature
            versions: { 1: { proxy: { backend: echo } } }
          other:
            path: /other
            auth: signature
            versions: { 1: { proxy: { backend: echo } } }
          keyed:
            path: /keyed
            auth: apiKey
            versions: { 1: { proxy: { backend: echo } } }
        tiers:
          standard: { rate: 10000/s, burst: 10000 }
        keys:
          app-one: { secret: "\(appSecret)", demo: true, services: [signed, keyed], tier: standard }
          old-app: { secret: "\(revokedSecret)", demo: true, status: revoked, services: ["*"] }
        """
    }
}
