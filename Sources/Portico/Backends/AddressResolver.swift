import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PorticoPolicy

#if canImport(Glibc)
import Glibc
#endif

/// Resolves a host name to its addresses (IP literals). A protocol so that tests can give the
/// answers a real DNS would.
public protocol AddressResolver: Sendable {
    /// The addresses of `host`, or nil when it could not be resolved. Called off the event loops
    /// (it may block).
    func addresses(of host: String) -> [String]?
}

/// The system's resolver (`getaddrinfo`: `/etc/hosts`, then DNS), TCP addresses, IPv4 and IPv6.
public struct SystemAddressResolver: AddressResolver {
    public init() {}

    public func addresses(of host: String) -> [String]? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(first) }
        var addresses: [String] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(current.pointee.ai_addr, current.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST)
                == 0
            {
                let address = String(cString: buffer)
                if !addresses.contains(address) { addresses.append(address) }
            }
            entry = current.pointee.ai_next
        }
        return addresses
    }
}

/// What the backends' host names resolved to last, by name: every policy compile expands a named
/// target into one target per address (``CompiledBackend``). The gateway's, across reloads.
public final class ResolvedAddresses: Sendable {
    private let table = NIOLockedValueBox<[String: [String]]>([:])

    public init() {}

    var current: [String: [String]] { table.withLockedValue { $0 } }

    /// Records `resolved` (names that could not be resolved, or resolved to nothing, are left out
    /// and keep their last good answer); whether anything changed.
    func update(_ resolved: [String: [String]]) -> Bool {
        table.withLockedValue { table in
            var next = table
            for (name, addresses) in resolved where !addresses.isEmpty { next[name] = addresses.sorted() }
            guard next != table else { return false }
            table = next
            return true
        }
    }
}

/// Re-resolves the backends' host names every `resolveEvery`, on a thread of NIO's pool (the
/// system resolver blocks), and when an answer changes compiles the policy in place again with the
/// new addresses (``PolicyStore/refresh(_:from:)``): requests pay nothing for it, since they read
/// the compiled policy as they always do. A name that fails to resolve, or resolves to nothing,
/// keeps its last good addresses (logged); one never resolved is left to each connect, as without
/// `resolveEvery`.
final class AddressRefresher: Sendable {
    private let store: PolicyStore
    private let resolver: any AddressResolver
    private let eventLoop: any EventLoop
    private let logger: Logger
    private let onRefresh: @Sendable (CompiledPolicy) -> Void
    private let task = NIOLockedValueBox<RepeatedTask?>(nil)

    init(
        store: PolicyStore, resolver: any AddressResolver, eventLoop: any EventLoop, logger: Logger,
        onRefresh: @escaping @Sendable (CompiledPolicy) -> Void
    ) {
        self.store = store
        self.resolver = resolver
        self.eventLoop = eventLoop
        self.logger = logger
        self.onRefresh = onRefresh
    }

    /// Resolves every name once (on NIO's thread pool; the first requests then go to all the
    /// addresses), then keeps resolving each at its backend's `resolveEvery`, checked every 100 ms
    /// against the policy in place (so a reload's names and settings apply from the next turn).
    func start() async {
        let names = Self.names(in: store.current)
        if !names.isEmpty {
            let resolved = try? await NIOThreadPool.singleton.runIfActive { [self] in resolve(Array(names.keys)) }
            if let resolved { apply(resolved) }
            let now = NIODeadline.now()
            due.withLockedValue { due in
                for (name, every) in names { due[name] = now + .nanoseconds(every.nanoseconds) }
            }
        }
        let every = TimeAmount.milliseconds(100)
        let repeated = eventLoop.scheduleRepeatedTask(initialDelay: every, delay: every) { [self] _ in tick() }
        task.withLockedValue { $0 = repeated }
    }

    func stop() {
        task.withLockedValue { $0?.cancel() }
    }

    private let due = NIOLockedValueBox<[String: NIODeadline]>([:])

    /// Resolves the names whose time has come, on NIO's thread pool, off the loop.
    private func tick() {
        let now = NIODeadline.now()
        let names = Self.names(in: store.current).filter { name, _ in due.withLockedValue { ($0[name] ?? now) <= now } }
        guard !names.isEmpty else { return }
        due.withLockedValue { due in
            for (name, every) in names { due[name] = now + .nanoseconds(every.nanoseconds) }
        }
        NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) { [self] in
            resolve(Array(names.keys))
        }.whenSuccess { [self] resolved in
            apply(resolved)
        }
    }

    private func resolve(_ names: [String]) -> [String: [String]] {
        var resolved: [String: [String]] = [:]
        for name in names {
            guard let addresses = resolver.addresses(of: name), !addresses.isEmpty else {
                logger.warning("backend host name did not resolve; its last addresses stay in use", metadata: ["host": .string(name)])
                continue
            }
            resolved[name] = addresses
        }
        return resolved
    }

    private func apply(_ resolved: [String: [String]]) {
        guard store.addresses.update(resolved) else { return }
        // A reload that lands meanwhile compiled with the table before or after this update: the
        // policy is compiled again against whatever is in place, until one refresh holds.
        for _ in 0..<3 {
            let (policy, generation) = store.compiledNow
            let compiled = store.compile(policy.snapshot)
            if store.refresh(compiled, from: generation) {
                onRefresh(compiled)
                return
            }
        }
    }

    /// Every target host of the policy that is a name, not an IP literal, with its backend's
    /// `resolveEvery` (the shortest, if several backends name it).
    static func names(in policy: CompiledPolicy) -> [String: Duration] {
        var names: [String: Duration] = [:]
        for backend in policy.snapshot.policy.backends.values {
            guard let every = backend.resolveEvery, backend.url.scheme == "http" else { continue }
            for target in backend.targets where !isAddress(target.url.host) {
                names[target.url.host] = min(names[target.url.host] ?? every, every)
            }
        }
        return names
    }

    private static func isAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
