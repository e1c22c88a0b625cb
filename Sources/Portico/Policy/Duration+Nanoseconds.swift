extension Duration {
    /// Whole nanoseconds, as the gateway's clocks count (a duration the policy reader accepted is
    /// never longer than 2⁶³ ns).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
