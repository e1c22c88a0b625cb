import Foundation

/// One HTTP answer as it arrived: what the cache keeps, what identical requests in flight share, and
/// what the façade turns into a value or a ``PorticoAPIError``.
struct APIResponseData: Sendable {
    var status: Int
    /// Field names lowercased.
    var headers: [String: String]
    var body: Data

    func header(_ name: String) -> String? { headers[name.lowercased()] }

    var problem: APIProblem? { APIProblem.parse(contentType: header("content-type"), body: body) }

    /// The answer's `Date`, which a clock-skew refusal carries so a client can correct its clock.
    var date: Date? { header("date").flatMap(HTTPDateFormat.parse) }

    /// How long `Retry-After` asks to wait: delay-seconds, or an HTTP-date taken relative to the
    /// answer's own `Date` (so a wrong device clock does not matter) or to `now` without one.
    func retryAfter(now: Date) -> Duration? {
        guard let value = header("retry-after")?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Int(value), seconds >= 0 { return .seconds(seconds) }
        guard let moment = HTTPDateFormat.parse(value) else { return nil }
        let seconds = max(0, moment.timeIntervalSince(date ?? now))
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }
}

/// The IMF-fixdate of RFC 9110 §5.6.7 (`Sun, 06 Nov 1994 08:49:37 GMT`), the only form the gateway sends.
enum HTTPDateFormat {
    static func parse(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text.trimmingCharacters(in: .whitespaces))
    }
}
