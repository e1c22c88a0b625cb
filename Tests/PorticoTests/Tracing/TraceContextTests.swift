import PorticoPolicy
import Testing

@testable import Portico

/// W3C `traceparent` parsing and writing, and the gateway's own sampling decision.
@Suite("Trace context and sampling")
struct TraceContextTests {
    @Test("a valid traceparent reads and writes back byte for byte")
    func roundTrip() throws {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let parsed = try #require(TraceParent(text))
        #expect(parsed.traceID == (0x4bf9_2f35_77b3_4da6, 0xa3ce_929d_0e0e_4736) && parsed.spanID == 0x00f0_67aa_0ba9_02b7)
        #expect(parsed.sampled && parsed.header == text)
        #expect(TraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")?.sampled == false)
        // Every digit, both ends of the range.
        let digits = TraceParent(traceID: (0x0123_4567_89ab_cdef, .max), spanID: 0xfedc_ba98_7654_3210, sampled: false)
        #expect(digits.header == "00-0123456789abcdefffffffffffffffff-fedcba9876543210-00")
    }

    @Test("the trace and span ids the access log and exemplars carry are traceparent's")
    func fieldIDs() {
        let fields = TraceFields(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        #expect(fields.traceID == "4bf92f3577b34da6a3ce929d0e0e4736" && fields.spanID == "00f067aa0ba902b7")
        #expect(TraceFields(traceparent: "00-short").traceID == "" && TraceFields().spanID == "")
    }

    @Test(
        "anything else is no trace context",
        arguments: [
            "", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // another version
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // uppercase
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero span id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ])
    func refused(text: String) {
        #expect(TraceParent(text) == nil)
    }

    @Test("the ratio decides by the trace id's lower half; a trusted parent's flag wins when parent-based")
    func sampler() {
        let half = TraceSampler(TracingPolicy.Sampler(ratio: 0.5, parentBased: true))
        #expect(half.samples(traceID: (0, 1), parent: nil))
        #expect(!half.samples(traceID: (0, .max), parent: nil))
        let parent = TraceParent(traceID: (0, .max), spanID: 1, sampled: true)
        #expect(half.samples(traceID: (0, .max), parent: parent))
        let ratioOnly = TraceSampler(TracingPolicy.Sampler(ratio: 0.5, parentBased: false))
        #expect(!ratioOnly.samples(traceID: (0, .max), parent: parent))
        #expect(!TraceSampler(TracingPolicy.Sampler(ratio: 0)).samples(traceID: (0, 1), parent: nil))
        #expect(TraceSampler(TracingPolicy.Sampler(ratio: 1)).samples(traceID: (0, .max), parent: nil))
        // About a hundredth of random ids at 0.01.
        let hundredth = TraceSampler(TracingPolicy.Sampler(ratio: 0.01))
        let sampled = (0..<100_000).filter { _ in hundredth.samples(traceID: (TraceIDs.next(), TraceIDs.next()), parent: nil) }.count
        #expect((500...1500).contains(sampled), "\(sampled) of 100000")
    }

    @Test("generated ids are not zero and do not repeat")
    func ids() {
        let ids = (0..<100_000).map { _ in TraceIDs.next() }
        #expect(!ids.contains(0) && Set(ids).count == ids.count)
    }
}
