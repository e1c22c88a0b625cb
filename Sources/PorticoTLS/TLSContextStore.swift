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

    /// Installs a context built (off the event loops) by the caller, who checks every listener's
    /// files first so that a reload is all or nothing.
    public func replace(with context: TLSContext) {
        box.withLockedValue { $0 = context }
    }
}
