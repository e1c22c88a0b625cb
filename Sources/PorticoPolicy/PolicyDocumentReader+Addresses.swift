extension PolicyValue {
    /// A list of CIDR blocks or addresses: `[10.0.0.0/8, "::1"]`.
    func addressRanges() -> [AddressRange]? {
        guard let items = sequence() else { return nil }
        var ranges: [AddressRange] = []
        for item in items {
            guard let text = item.nonEmptyString() else { continue }
            guard let range = AddressRange(text) else {
                item.error("expected an IP address or a CIDR block such as 10.0.0.0/8 or 2001:db8::/32, found \"\(text)\"")
                continue
            }
            ranges.append(range)
        }
        return ranges
    }
}

extension PolicyFields {
    /// `allowFrom` and `denyFrom`.
    func addressList() -> AddressList {
        AddressList(allow: optional("allowFrom") { $0.addressRanges() }, deny: optional("denyFrom", default: []) { $0.addressRanges() })
    }
}
