import NIOCore
import NIOHTTP1
import PorticoHTTP

/// A stored response as bytes, for the fleet's shared store: what another gateway needs to
/// serve it exactly as this one would (status, fields, body, the times its age and freshness are
/// computed from, the `Vary` selection). Versioned by its first bytes; anything it cannot read
/// back whole is no entry.
extension CachedResponse {
    static let encodingMagic: UInt32 = 0x5043_4531  // "PCE1"

    func encoded() -> ByteBuffer {
        var out = ByteBuffer()
        out.reserveCapacity(size + 64)
        out.writeInteger(Self.encodingMagic)
        out.writeInteger(Int64(status))
        for number in [responseTime, correctedInitialAge, freshnessLifetime, staleWhileRevalidate, staleIfError] {
            out.writeInteger(number.bitPattern)
        }
        out.writeInteger(UInt32(headers.count))
        for (name, value) in headers {
            Self.write(name, to: &out)
            Self.write(value, to: &out)
        }
        out.writeInteger(UInt32(varyNames.count))
        for (name, value) in zip(varyNames, varyValues) {
            Self.write(name, to: &out)
            out.writeInteger(UInt8(value == nil ? 0 : 1))
            Self.write(value ?? "", to: &out)
        }
        out.writeInteger(UInt32(body.readableBytes))
        out.writeImmutableBuffer(body)
        return out
    }

    /// The entry `bytes` hold, or nil when they are not one (another version's format, cut short).
    static func decode(_ bytes: ByteBuffer, key: CacheKey, version: Int) -> CachedResponse? {
        var input = bytes
        guard input.readInteger(as: UInt32.self) == encodingMagic, let status = input.readInteger(as: Int64.self) else { return nil }
        var numbers: [Double] = []
        for _ in 0..<5 {
            guard let bits = input.readInteger(as: UInt64.self) else { return nil }
            numbers.append(Double(bitPattern: bits))
        }
        guard let headerCount = input.readInteger(as: UInt32.self), headerCount < 10_000 else { return nil }
        var headers = HTTPHeaders()
        for _ in 0..<headerCount {
            // What Redis hands back is checked as a peer's bytes are: a field a parser would refuse is no entry.
            guard let name = read(&input), let value = read(&input), HeaderName.isToken(name), isFieldValue(value) else { return nil }
            headers.add(name: name, value: value)
        }
        guard let varyCount = input.readInteger(as: UInt32.self), varyCount < 1000 else { return nil }
        var names: [String] = []
        var values: [String?] = []
        for _ in 0..<varyCount {
            guard let name = read(&input), let present = input.readInteger(as: UInt8.self), let value = read(&input) else { return nil }
            names.append(name)
            values.append(present == 1 ? value : nil)
        }
        guard let length = input.readInteger(as: UInt32.self), let body = input.readSlice(length: Int(length)), input.readableBytes == 0
        else { return nil }
        return CachedResponse(
            key: key, version: version, status: Int(status), headers: headers, body: body, responseTime: numbers[0],
            correctedInitialAge: numbers[1], freshnessLifetime: numbers[2], staleWhileRevalidate: numbers[3], staleIfError: numbers[4],
            varyNames: names, varyValues: values)
    }

    /// A field value without the bytes no field value holds (NUL, CR, LF).
    static func isFieldValue(_ text: String) -> Bool {
        !text.utf8.contains { $0 == 0 || $0 == 0x0D || $0 == 0x0A }
    }

    private static func write(_ text: String, to out: inout ByteBuffer) {
        out.writeInteger(UInt32(text.utf8.count))
        out.writeString(text)
    }

    private static func read(_ input: inout ByteBuffer) -> String? {
        guard let length = input.readInteger(as: UInt32.self) else { return nil }
        return input.readString(length: Int(length))
    }
}
