/// gRPC's `grpc-timeout` request field (PROTOCOL-HTTP2.md): at most 8 digits and a unit, `H`
/// hours, `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds, `n` nanoseconds.
///
/// A call's deadline travels to the backend no longer than the backend's `timeout`: the gateway
/// gives up at its own timeout anyway, and a backend told a longer deadline would keep working
/// on an answer no one will read.
enum GRPCTimeout {
    static func parse(_ value: String) -> Duration? {
        let utf8 = value.utf8
        guard utf8.count >= 2, utf8.count <= 9, let unit = value.last, let amount = Int64(value.dropLast()), amount >= 0 else {
            return nil
        }
        switch unit {
        case "H": return .seconds(amount * 3600)
        case "M": return .seconds(amount * 60)
        case "S": return .seconds(amount)
        case "m": return .milliseconds(amount)
        case "u": return .microseconds(amount)
        case "n": return .nanoseconds(amount)
        default: return nil
        }
    }

    /// `duration` as the field writes it, in milliseconds (rounded up, so never shorter).
    static func field(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return "\(min(milliseconds, 99_999_999))m"
    }
}
