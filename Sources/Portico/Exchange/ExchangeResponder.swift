import NIOCore
import PorticoPolicy
import PorticoUpstream

/// Where a handler's response goes: the connection's handler, on its event loop.
protocol ExchangeResponder: AnyObject {
    func handlerReceived(_ events: UpstreamEvents, for exchange: Exchange)
}
