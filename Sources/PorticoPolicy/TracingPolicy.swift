/// `tracing:`: OpenTelemetry traces of the gateway's requests, exported over OTLP/HTTP with
/// protobuf. Absent, the gateway makes no span and passes a client's trace fields through as any
/// other field.
public struct TracingPolicy: Sendable, Hashable {
    /// Where spans go: an OTLP/HTTP collector (port 4318's protocol).
    public struct OTLP: Sendable, Hashable {
        /// The traces URL, `/v1/traces` included (added when the URL has no path).
        public var endpoint: String
        /// Sent with every export (a collector's token, say); values are secrets, never shown.
        public var headers: [Header]
        /// How long one export may take before it is given up.
        public var timeout: Duration

        public init(endpoint: String, headers: [Header] = [], timeout: Duration = .seconds(10)) {
            self.endpoint = endpoint
            self.headers = headers
            self.timeout = timeout
        }
    }

    public struct Header: Sendable, Hashable {
        public var name: String
        public var value: Secret

        public init(name: String, value: Secret) {
            self.name = name
            self.value = value
        }
    }

    /// Which requests are traced: a share of trace ids, and whether a trusted caller's decision
    /// (its `traceparent`'s sampled flag) wins.
    public struct Sampler: Sendable, Hashable {
        /// 0 to 1: the share of new traces recorded (by trace id, so every gateway of a fleet agrees).
        public var ratio: Double
        /// A trusted incoming `traceparent` decides for its trace; the ratio decides only for new ones.
        public var parentBased: Bool

        public init(ratio: Double = 1, parentBased: Bool = true) {
            self.ratio = ratio
            self.parentBased = parentBased
        }
    }

    /// Whose `traceparent`/`tracestate` the gateway continues. Anyone else's is replaced by a new
    /// trace: an untrusted caller must not choose trace ids, nor force sampling on the collector.
    public struct TrustIncoming: Sendable, Hashable {
        /// Every client of every listener.
        public var everyone: Bool
        /// Clients of these listeners.
        public var listeners: [String]
        /// Clients from these networks (after `trustedProxies`: the client's own address).
        public var networks: [AddressRange]

        public static let nobody = TrustIncoming(everyone: false, listeners: [], networks: [])

        public init(everyone: Bool, listeners: [String], networks: [AddressRange]) {
            self.everyone = everyone
            self.listeners = listeners
            self.networks = networks
        }
    }

    /// `service.name` of the gateway's spans.
    public var serviceName: String
    public var otlp: OTLP
    public var sampler: Sampler
    public var trustIncoming: TrustIncoming
    /// Whether the client's answer carries `traceparent` (its request's trace, the gateway's span).
    public var responseTraceparent: Bool
    /// The most ended spans held for export; beyond it, spans are dropped (and counted) rather
    /// than held without bound while a collector is slow or away.
    public var queueSize = 2048

    public init(
        serviceName: String = "portico", otlp: OTLP, sampler: Sampler = Sampler(), trustIncoming: TrustIncoming = .nobody,
        responseTraceparent: Bool = false
    ) {
        self.serviceName = serviceName
        self.otlp = otlp
        self.sampler = sampler
        self.trustIncoming = trustIncoming
        self.responseTraceparent = responseTraceparent
    }
}
