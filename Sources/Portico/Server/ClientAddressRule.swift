import NIOHTTP1
import PorticoHTTP
import PorticoPolicy

/// Which address a request comes from: its TCP peer's, unless that peer is one of the policy's
/// `trustedProxies`; then the last address of `X-Forwarded-For` that is not itself a trusted
/// proxy (read from the right: each proxy appends the address it saw, and only what trusted
/// proxies appended can be believed). Logs, limits, the address lists and the `X-Forwarded-For`
/// sent to backends all use the address this gives.
///
/// A field with an entry that is not an IP address stops the walk there, and the peer's address
/// stands: a client may write anything in the field, and what follows its own claim is unreliable.
enum ClientAddressRule {
    static func resolve(_ client: ClientConnection, headers: HTTPHeaders, trusted: [AddressRange]) -> ClientConnection {
        guard !trusted.isEmpty, let peer = client.peerBytes, trusted.contains(where: { $0.contains(peer) }) else { return client }
        let entries = headers["x-forwarded-for"].flatMap { $0.split(separator: ",") }.map { String($0.trimmingOptionalWhitespace()) }
        var chosen: (text: String, bytes: [UInt8])?
        for entry in entries.reversed() {
            guard let bytes = AddressRange.bytes(of: entry) else { return client }
            chosen = (entry, bytes)
            if !trusted.contains(where: { $0.contains(bytes) }) { break }
        }
        guard let chosen else { return client }
        var resolved = client
        resolved.address = chosen.text
        resolved.addressBytes = chosen.bytes
        resolved.addressSubject = ClientAddress.rateLimitSubject(bytes: chosen.bytes) ?? chosen.text
        return resolved
    }
}
