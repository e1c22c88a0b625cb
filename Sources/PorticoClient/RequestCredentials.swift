import Foundation

/// Per-request credentials from the app's account system, sent beside the app's own signature.
///
/// The façade holds no account logic: it asks this for header fields before every call (a user's
/// bearer token, say), sends them, and covers them with the app's signature, so a token cannot be
/// lifted onto another signed request. Refreshing an expired token, logging in and out stay in the
/// app. Answers are cached and shared per credentials, so one user's answer never serves another.
///
/// ```swift
/// struct SessionCredentials: RequestCredentials {
///     let session: UserSession
///     func fields(for request: APIRequest) async throws -> [String: String] {
///         guard let token = try await session.validAccessToken() else { return [:] }   // logged out
///         return ["Authorization": "Bearer \(token)"]
///     }
/// }
/// ```
public protocol RequestCredentials: Sendable {
    /// The fields to add to `request`; empty for none. A thrown error fails the call with
    /// ``PorticoAPIError/credentials`` (its text is not repeated, in case it quotes a token).
    func fields(for request: APIRequest) async throws -> [String: String]
}

/// Where the façade gets the app's signing secret: read once, on the first call, and kept.
///
/// ```swift
/// let secret = SecretSource { try Keychain.string(for: "portico-secret") }
/// ```
public struct SecretSource: Sendable {
    let load: @Sendable () async throws -> String

    /// A source that reads the secret when first needed (from the Keychain, say).
    public init(_ load: @escaping @Sendable () async throws -> String) {
        self.load = load
    }

    /// A secret already in memory (tests, command-line tools).
    public static func value(_ secret: String) -> SecretSource { SecretSource { secret } }

    /// A secret file as `portico keygen` writes it, read as the gateway reads its key files: UTF-8,
    /// with trailing line breaks dropped (a file's final newline is not part of the secret; kept, it
    /// would make every signature invalid).
    public static func file(_ path: String) -> SecretSource {
        SecretSource {
            var text = try String(contentsOfFile: path, encoding: .utf8)
            while let last = text.last, last == "\n" || last == "\r" || last == "\r\n" { text.removeLast() }
            return text
        }
    }
}
