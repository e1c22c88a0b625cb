/// The RFC 9421 `tag` parameter of the service locator's signature, which binds a signed document
/// to the environment it was made for. Every environment's document is signed with the same key,
/// so without it a CDN or an attacker could serve staging's (validly signed) document to
/// production's apps; a client that pins its environment accepts only its own tag.
public enum LocatorTag {
    /// `portico-locator:<environment>`, or `portico-locator` for a listener in no environment.
    public static func value(environment: String?) -> String {
        environment.map { "portico-locator:\($0)" } ?? "portico-locator"
    }
}
