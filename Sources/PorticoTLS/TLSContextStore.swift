import NIOConcurrencyHelpers

/// The context a listener hands to each new connection; a certificate reload replaces it.
///
/// Connections already open keep the context they started with (and through it their
/// `SSL_CTX`), so a reload never disturbs them.
public final class TLSContextStore: Sendable {
    private let box: NIOLockedValueBox<TLSContext>

    public init(_ context: TLSContext) {
        box = NIOLockedValueBox(context)
    }

    public var current: TLSContext { box.withLockedValue { $0 } }

    /// Builds a context from `configuration` (off any event loop: it reads files) and installs it.
    /// On failure nothing changes and the error says which file or setting is wrong.
    public func reload(_ configuration: TLSConfiguration) throws(TLSConfigurationError) {
        let context = try TLSContext(configuration: configuration, replacing: current)
        box.withLockedValue { $0 = context }
    }

    public func replace(with context: TLSContext) {
        box.withLockedValue { $0 = context }
    }
}
