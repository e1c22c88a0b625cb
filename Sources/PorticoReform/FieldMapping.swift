/// The formats a facade source can answer in.
public enum SourceFormat: String, Sendable, Hashable, CaseIterable {
    case json, xml, csv
}

/// Where one contract field comes from in a source's body, and how it is turned into the
/// contract's value.
public struct FieldMapping: Sendable, Hashable {
    /// The contract field filled.
    public var field: String
    public var locator: Locator
    /// Applied in order to what the locator found.
    public var conversions: [Conversion]

    public init(field: String, locator: Locator, conversions: [Conversion] = []) {
        self.field = field
        self.locator = locator
        self.conversions = conversions
    }
}

/// Where a value is in a parsed body.
public enum Locator: Sendable, Hashable {
    /// An RFC 6901 JSON pointer, e.g. `/query/results/channel/item/condition/temp`.
    case jsonPointer(String)
    /// An element path from the root, local names (namespace prefixes are ignored), e.g.
    /// `StockQuotes/Stock/Last`; a final `@name` selects an attribute, `[n]` (from 0) the n-th
    /// element of that name.
    case xmlPath(String)
    /// A CSV column by its header's name (the source has a header line).
    case csvColumn(String)
    /// A CSV column by position, from 0.
    case csvIndex(Int)
    /// Not read from the body: always this value (a contract field the source has no notion of).
    case fixed(ReformValue)
    /// Not read from the body: a parameter of the request (a path segment or query value), e.g.
    /// the symbol a quote was asked for.
    case parameter(String)
}

/// A step that turns a found value into the contract's.
public enum Conversion: String, Sendable, Hashable, CaseIterable {
    /// Text to number (`"530.12"` → 530.12); a number stays as it is.
    case number
    /// Text or number to an integer; a fraction is refused rather than rounded.
    case integer
    /// Any scalar to text (530.12 → `"530.12"`, true → `"true"`).
    case string
    /// `true`/`false`/`1`/`0`/`yes`/`no` to a boolean.
    case boolean
    /// Leading and trailing white space removed.
    case trim
    /// One pair of surrounding double or single quotes removed (`"\"AAPL\""` → `"AAPL"`).
    case stripQuotes
    /// Percent text to its number (`"-2.92%"` → -2.92).
    case percentToNumber
    /// A number (or numeric text) to percent text (-2.92 → `"-2.92%"`).
    case numberToPercent
    case lowercase
    case uppercase
}
