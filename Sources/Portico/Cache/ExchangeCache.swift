/// What the cache stage decided for one exchange (``Exchange/cache``), which the handlers act on.
enum ExchangeCache {
    /// Answered from `entry`. `refresh` is the background refresh this request is to start
    /// (`stale-while-revalidate`); `collapsed` when the request waited for another's response.
    case hit(CachedResponse, CacheUsability, refresh: CacheFill?, request: CacheRequest, collapsed: Bool)
    /// Sent to the backend. With `fill`, its response is stored (if it may be) and those waiting
    /// are told; with `stale`, the request revalidates that stored response, and falls back on it
    /// if the backend fails within its `stale-if-error`.
    case fetch(CacheFill?, stale: CachedResponse?, request: CacheRequest)
    /// Sent to the backend as it came (a range, a precondition the cache leaves to it); nothing stored.
    case bypass
    /// An unsafe request: when it succeeds, the target's entries are dropped (RFC 9111 §4.4).
    case invalidate(CacheKey)

    /// The fill this exchange is to end.
    var fill: CacheFill? {
        switch self {
        case .hit(_, _, let refresh, _, _): refresh
        case .fetch(let fill, _, _): fill
        case .bypass, .invalidate: nil
        }
    }
}
