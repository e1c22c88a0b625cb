import Version

/// A range of app versions, as a compatibility bucket's `clients` says: `<2.0.0`,
/// `>=2.0.0 <3.1.0`, `>=3.1.0`, `=2.4.1`, or `*` for every version.
///
/// Each bound is a ``Cut``, a point between versions, so that `>=`, `>`, `<` and `<=` all become
/// half-open ranges `[lower, upper)` that sort, compare and subtract without special cases: the
/// overlap and gap checks and the compiled bucket search all work on cuts. Pre-releases order as
/// SemVer says (`2.0.0-beta.1 < 2.0.0`), so `<2.0.0` holds 2.0.0's betas; write `>=2.0.0-0` to put
/// them with 2.0.0 instead.
public struct VersionRange: Sendable, Hashable, CustomStringConvertible {
    /// A point between two versions: just below or just above one.
    public enum Cut: Sendable, Hashable, Comparable {
        case below(Version)
        case above(Version)

        public var version: Version {
            switch self {
            case .below(let version), .above(let version): version
            }
        }

        /// Whether `version` lies above this cut.
        public func admits(_ version: Version) -> Bool {
            switch self {
            case .below(let bound): !(version < bound)
            case .above(let bound): bound < version
            }
        }

        public static func < (lhs: Cut, rhs: Cut) -> Bool {
            let (left, right) = (lhs.version, rhs.version)
            if left < right { return true }
            if right < left { return false }
            if case .below = lhs, case .above = rhs { return true }
            return false
        }

        /// The comparator that starts a range here: `>=2.0.0` or `>2.0.0`.
        public var asLowerBound: String {
            switch self {
            case .below(let version): ">=" + ClientVersion.describe(version)
            case .above(let version): ">" + ClientVersion.describe(version)
            }
        }

        /// The comparator that ends a range here: `<2.0.0` or `<=2.0.0`.
        public var asUpperBound: String {
            switch self {
            case .below(let version): "<" + ClientVersion.describe(version)
            case .above(let version): "<=" + ClientVersion.describe(version)
            }
        }
    }

    /// `nil`: no lower bound.
    public var lower: Cut?
    /// `nil`: no upper bound.
    public var upper: Cut?

    public init(lower: Cut?, upper: Cut?) {
        self.lower = lower
        self.upper = upper
    }

    public func contains(_ version: Version) -> Bool {
        (lower?.admits(version) ?? true) && !(upper?.admits(version) ?? false)
    }

    /// Whether no version lies in the range (`>=3.0.0 <2.0.0`).
    public var isEmpty: Bool {
        guard let lower, let upper else { return false }
        return lower >= upper
    }

    /// The versions both ranges hold, if any.
    public func intersection(_ other: VersionRange) -> VersionRange? {
        let lowers = [lower, other.lower].compactMap { $0 }
        let uppers = [upper, other.upper].compactMap { $0 }
        let range = VersionRange(lower: lowers.max(), upper: uppers.min())
        return range.isEmpty ? nil : range
    }

    /// Normalised text: `>=2.0.0 <3.1.0`, `<2.0.0`, `*`.
    public var description: String {
        let parts = [lower?.asLowerBound, upper?.asUpperBound].compactMap { $0 }
        return parts.isEmpty ? "*" : parts.joined(separator: " ")
    }

    /// Reads the text of a `clients` range; the error says what is wrong, for a policy diagnostic.
    public static func parse(_ text: String) -> Result<VersionRange, RangeError> {
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard !tokens.isEmpty else { return .failure(RangeError("is empty")) }
        if tokens == ["*"] { return .success(VersionRange(lower: nil, upper: nil)) }
        var lower: Cut?
        var upper: Cut?
        for token in tokens {
            let operators = [">=", "<=", ">", "<", "="]
            let op = operators.first { token.hasPrefix($0) } ?? ""
            let versionText = token.dropFirst(op.count)
            guard let version = ClientVersion.parse(versionText) else {
                return .failure(RangeError("has \"\(token)\", which is not a comparator such as >=2.0.0 or <3.1"))
            }
            let bounds: (lower: Cut?, upper: Cut?) =
                switch op {
                case ">=": (.below(version), nil)
                case ">": (.above(version), nil)
                case "<": (nil, .below(version))
                case "<=": (nil, .above(version))
                default: (.below(version), .above(version))
                }
            if let bound = bounds.lower {
                guard lower == nil else { return .failure(RangeError("has more than one lower bound")) }
                lower = bound
            }
            if let bound = bounds.upper {
                guard upper == nil else { return .failure(RangeError("has more than one upper bound")) }
                upper = bound
            }
        }
        let range = VersionRange(lower: lower, upper: upper)
        guard !range.isEmpty else { return .failure(RangeError("holds no version (its lower bound is not below its upper bound)")) }
        return .success(range)
    }

    public struct RangeError: Error, Sendable {
        public let message: String
        init(_ message: String) { self.message = message }
    }
}
