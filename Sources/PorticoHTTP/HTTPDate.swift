#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// HTTP dates (RFC 9110 §5.6.7), as seconds since 1970: written in the IMF-fixdate form
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), read in that form and in the two obsolete ones a recipient
/// must still accept (RFC 850's `Sunday, 06-Nov-94 08:49:37 GMT` and asctime's
/// `Sun Nov  6 08:49:37 1994`). The cache reads `Date`, `Expires`, `Last-Modified` and
/// `If-Modified-Since` through it; problems write their `Date` with it.
public enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longDays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    public static func format(_ secondsSince1970: Int64) -> String {
        let parts = utc(secondsSince1970)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// SigV4's basic ISO 8601 form, `yyyymmddThhmmssZ` (UTC), here where `tm` is read without
    /// Foundation in scope (Foundation's overlay defines it again, and a module that sees both
    /// cannot read its fields in a release build).
    public static func formatBasicISO8601(_ secondsSince1970: Int64) -> String {
        let parts = utc(secondsSince1970)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))"
            + "T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }

    private static func utc(_ secondsSince1970: Int64) -> tm {
        var time = time_t(secondsSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        return parts
    }

    /// The moment `text` names, or nil when it is none of the three forms (an `Expires: 0`, say,
    /// which a cache reads as already expired). Surrounding whitespace is allowed, and inside the
    /// value exactly the single spaces the grammar has (asctime's day may be padded with one
    /// more); the day name is not checked against the date (recipients need not).
    public static func parse(_ text: some StringProtocol) -> Int64? {
        let trimmed = Substring(text).trimmingOptionalWhitespace()
        var words = trimmed.split(separator: " ", omittingEmptySubsequences: false)
        // asctime pads a one-digit day with a space: `Nov  6`.
        if words.count == 6, words[2].isEmpty, words[3].count == 1 { words.remove(at: 2) }
        guard !words.contains(where: \.isEmpty) else { return nil }
        if words.count == 6, words[0].hasSuffix(","), days.contains(String(words[0].dropLast())), words[5] == "GMT" {
            // IMF-fixdate: day-name "," SP 2DIGIT SP month SP 4DIGIT SP time SP "GMT"
            guard words[1].count == 2, let day = Int(words[1]), let month = months.firstIndex(of: String(words[2])), words[3].count == 4,
                let year = Int(words[3])
            else { return nil }
            return moment(year: year, month: month, day: day, time: words[4])
        }
        if words.count == 4, words[0].hasSuffix(","), longDays.contains(String(words[0].dropLast())), words[3] == "GMT" {
            // RFC 850: day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP time SP "GMT"; a two-digit
            // year more than 50 years ahead is in the past century (RFC 9110 §5.6.7).
            let parts = words[1].split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0].count == 2, let day = Int(parts[0]), let month = months.firstIndex(of: String(parts[1])),
                parts[2].count == 2, let short = Int(parts[2])
            else { return nil }
            var year = 2000 + short
            if year > currentYear() + 50 { year -= 100 }
            return moment(year: year, month: month, day: day, time: words[2])
        }
        if words.count == 5, days.contains(String(words[0])) {
            // asctime: day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time SP 4DIGIT
            guard let month = months.firstIndex(of: String(words[1])), (1...2).contains(words[2].count), let day = Int(words[2]),
                words[4].count == 4, let year = Int(words[4])
            else { return nil }
            return moment(year: year, month: month, day: day, time: words[3])
        }
        return nil
    }

    private static func moment(year: Int, month: Int, day: Int, time: Substring) -> Int64? {
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }), let hour = Int(clock[0]), let minute = Int(clock[1]),
            let second = Int(clock[2]), hour < 24, minute < 60, second < 61, (1...31).contains(day), year >= 1900
        else { return nil }
        return daysSinceEpoch(year: year, month: month + 1, day: day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    /// Seconds since 1970 of a UTC civil time (month 1–12), as SigV4's `yyyymmddThhmmssZ` gives it.
    public static func epochSeconds(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64 {
        daysSinceEpoch(year: year, month: month, day: day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    /// Days from 1970-01-01 to the given civil date (proleptic Gregorian), without the C library's
    /// time zone: Howard Hinnant's days-from-civil algorithm.
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func currentYear() -> Int {
        var time = time(nil)
        var parts = tm()
        gmtime_r(&time, &parts)
        return Int(parts.tm_year) + 1900
    }
}
