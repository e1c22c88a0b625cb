import Atomics
import NIOHTTP1
import PorticoPolicy

/// A W3C `traceparent` (version 00): the trace and parent span ids, and whether the caller sampled.
struct TraceParent: Equatable {
    var traceID: (UInt64, UInt64)
    var spanID: UInt64
    var sampled: Bool

    static func == (lhs: TraceParent, rhs: TraceParent) -> Bool {
        lhs.traceID == rhs.traceID && lhs.spanID == rhs.spanID && lhs.sampled == rhs.sampled
    }

    /// Parses `00-<32 hex>-<16 hex>-<2 hex>`, lowercase, with ids that are not all zeros (W3C Trace
    /// Context, §3.2). Anything else is no trace context at all: the gateway starts its own.
    init?(_ text: String) {
        var text = text
        let parsed: TraceParent? = text.withUTF8 { bytes in
            guard bytes.count == 55, bytes[0] == UInt8(ascii: "0"), bytes[1] == UInt8(ascii: "0"), bytes[2] == UInt8(ascii: "-"),
                bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-"),
                let high = Self.hex(bytes, 3, 16), let low = Self.hex(bytes, 19, 16), let span = Self.hex(bytes, 36, 16),
                let flags = Self.hex(bytes, 53, 2), high | low != 0, span != 0
            else { return nil }
            return TraceParent(traceID: (high, low), spanID: span, sampled: flags & 1 == 1)
        }
        guard let parsed else { return nil }
        self = parsed
    }

    init(traceID: (UInt64, UInt64), spanID: UInt64, sampled: Bool) {
        self.traceID = traceID
        self.spanID = spanID
        self.sampled = sampled
    }

    private static func hex(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ count: Int) -> UInt64? {
        var value: UInt64 = 0
        for index in start..<start + count {
            // Lowercase only (W3C Trace Context): an uppercase digit makes the field invalid.
            let byte = bytes[index]
            guard !(UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte), let digit = PathNormalizer.hexValue(byte) else { return nil }
            value = value << 4 | UInt64(digit)
        }
        return value
    }

    /// `00-<trace>-<span>-<flags>`.
    var header: String {
        String(unsafeUninitializedCapacity: 55) { buffer in
            buffer[0] = UInt8(ascii: "0")
            buffer[1] = UInt8(ascii: "0")
            buffer[2] = UInt8(ascii: "-")
            Self.write(traceID.0, into: buffer, at: 3)
            Self.write(traceID.1, into: buffer, at: 19)
            buffer[35] = UInt8(ascii: "-")
            Self.write(spanID, into: buffer, at: 36)
            buffer[52] = UInt8(ascii: "-")
            buffer[53] = UInt8(ascii: "0")
            buffer[54] = sampled ? UInt8(ascii: "1") : UInt8(ascii: "0")
            return 55
        }
    }

    /// Lowercase hex, computed (no table to look up and bounds-check).
    private static func write(_ value: UInt64, into buffer: UnsafeMutableBufferPointer<UInt8>, at start: Int) {
        for index in 0..<16 {
            let nibble = UInt8(truncatingIfNeeded: value >> UInt64(60 - 4 * index)) & 0xF
            buffer[start + index] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble
        }
    }
}

/// Which traces are recorded: the policy's ratio over trace ids (the lower 64 bits, so that every
/// gateway of a fleet decides alike for one trace), or, when `parentBased`, a trusted caller's flag.
///
/// Decided before swift-otel is asked for anything: an unsampled request then costs two random
/// ids and a `traceparent`, and swift-otel (whose sampler is always-on) sees sampled requests only.
struct TraceSampler: Sendable {
    let threshold: UInt64
    let always: Bool
    let parentBased: Bool

    init(_ policy: TracingPolicy.Sampler) {
        always = policy.ratio >= 1
        threshold = policy.ratio <= 0 ? 0 : policy.ratio >= 1 ? .max : UInt64(policy.ratio * 18_446_744_073_709_551_616.0)
        parentBased = policy.parentBased
    }

    func samples(traceID: (UInt64, UInt64), parent: TraceParent?) -> Bool {
        if parentBased, let parent { return parent.sampled }
        return always || traceID.1 < threshold
    }
}

/// Random trace and span ids for requests the gateway does not record: SplitMix64 over one atomic
/// counter, seeded from the system's generator. Ids must be unique, not secret; this costs an
/// atomic add per id, where the system generator costs a system call.
enum TraceIDs {
    private static let state = ManagedAtomic<UInt64>(
        {
            var generator = SystemRandomNumberGenerator()
            return generator.next()
        }())

    static func next() -> UInt64 {
        var value = state.wrappingIncrementThenLoad(by: 0x9E37_79B9_7F4A_7C15, ordering: .relaxed)
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        value ^= value >> 31
        return value == 0 ? 1 : value
    }
}
