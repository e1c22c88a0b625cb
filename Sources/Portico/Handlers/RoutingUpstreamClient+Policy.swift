import NIOCore
import PorticoPolicy
import PorticoUpstream

extension RoutingUpstreamClient {
    /// The gateway's default upstream client: the NIO client for `http://` backends (pools on the
    /// gateway's own event loops), libcurl for `https://` ones, and the HTTP/2 client for backends
    /// with `protocol: h2 | h2c`, sized by the policy's `upstream` section (read at start, like the
    /// curl threads).
    ///
    /// `maxConnectionsPerHost` caps libcurl per curl thread and the NIO client per event loop.
    static func gatewayDefault(sizedBy sizing: UpstreamPolicy, group: any EventLoopGroup) -> RoutingUpstreamClient {
        RoutingUpstreamClient(
            nio: NIOUpstreamClient(
                group: group,
                configuration: .init(maxConnectionsPerHost: sizing.maxConnectionsPerHost, idleTimeout: sizing.idleConnectionTimeout)),
            curl: CurlUpstreamClient(
                configuration: .init(
                    threads: sizing.threads, maxConnectionsPerHost: sizing.maxConnectionsPerHost,
                    maxIdleConnections: sizing.maxIdleConnections)),
            http2: HTTP2UpstreamClient(group: group, configuration: .init(idleTimeout: sizing.idleConnectionTimeout)))
    }
}

extension UpstreamClientKind {
    /// The upstream client a backend's policy names.
    init(_ client: BackendClient) {
        switch client {
        case .nio: self = .nio
        case .curl: self = .curl
        }
    }
}
