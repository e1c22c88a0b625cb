import NIOHTTP1

extension HTTPMethod {
    /// The method as it was on the wire. NIO's `rawValue` spells one method its own way
    /// (`MSEARCH` for SSDP's `M-SEARCH`); whatever the gateway forwards, signs over or logs is the
    /// client's spelling.
    var wireName: String {
        switch self {
        case .MSEARCH: "M-SEARCH"
        default: rawValue
        }
    }
}
