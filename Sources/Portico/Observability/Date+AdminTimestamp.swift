import Foundation

extension Date {
    /// RFC 3339 in UTC with milliseconds (`2026-11-27T04:45:40.114Z`): how the admin API and the
    /// console write a time.
    var adminTimestamp: String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: self)
    }
}
