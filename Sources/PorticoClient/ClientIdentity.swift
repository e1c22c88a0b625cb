/// Who is calling: the app's version and platform, sent with every request and covered by its
/// signature.
///
/// The gateway maps `X-Client-Version` to an API version (its compatibility buckets) and refuses
/// apps older than a service's minimum, so the version is part of what the signature protects: a
/// proxy cannot move a request into another bucket without breaking it.
public struct ClientIdentity: Sendable, Hashable {
    /// The field carrying the app version (`X-Client-Version`).
    public static let versionField = "X-Client-Version"
    /// The field carrying the platform (`X-Client-Platform`).
    public static let platformField = "X-Client-Platform"

    /// The app's version as released, e.g. `2.4.1`.
    public var appVersion: String
    /// The platform, e.g. `iphone`, `ipad`, `android`, `web`; `nil` sends none.
    public var platform: String?

    public init(appVersion: String, platform: String? = nil) {
        self.appVersion = appVersion
        self.platform = platform
    }

    /// The fields to send, in order.
    var fields: [(name: String, value: String)] {
        var fields = [(name: Self.versionField, value: appVersion)]
        if let platform { fields.append((Self.platformField, platform)) }
        return fields
    }
}
