import Logging
import PorticoCrypto
import PorticoPolicy
import PorticoSigning

/// Reloads the gateway's policy from its directory: the one code path behind `SIGHUP` and
/// `POST /admin/reload`.
///
/// A reload reads and validates the whole directory (off the event loops: an actor runs on the
/// cooperative pool), compiles the new policy and builds the TLS listeners' contexts from their
/// files, and only when all of that succeeded installs both (``Gateway/install(_:contentHash:)``).
/// A policy that fails anywhere is refused with every diagnostic, and the one in use keeps serving.
/// Being an actor, it serialises reloads: a second one starts when the first has finished.
///
/// What outlives a reload is not in the snapshot: rate-limit buckets, the nonce store, backend
/// in-flight counts and the upstream connection pools belong to the ``Gateway``.
public actor PolicyReloader {
    public let directory: String
    private let gateway: Gateway
    private let logger: Logger
    /// The content hash the directory watch last tried (applied or refused), so that a broken
    /// policy on disk is reported once, not at every look.
    private var lastWatched: String?

    public init(gateway: Gateway, directory: String, logger: Logger) {
        self.gateway = gateway
        self.directory = directory
        self.logger = logger
    }

    /// Reads the directory and, unless `dryRun`, installs what it holds.
    public func reload(dryRun: Bool = false) -> ReloadOutcome {
        let sources: [(file: String, text: String)]
        do throws(PolicyError) {
            sources = try PolicyLoader().readSources(directory: directory)
        } catch {
            return refused(error.diagnostics, dryRun: dryRun)
        }
        return reload(sources, hash: PolicyContentHash.of(sources), dryRun: dryRun)
    }

    /// The directory watch's look (off by default; `portico serve --watch-policies`): reloads when
    /// the policy files' content hash differs from the active policy's and from the last one tried.
    /// Returns nil when there was nothing new. Files the policy names (secrets, certificates) are
    /// not part of the hash: a change to them alone waits for SIGHUP or the admin API.
    public func reloadIfChanged() -> ReloadOutcome? {
        guard let sources = try? PolicyLoader().readSources(directory: directory) else { return nil }
        let hash = PolicyContentHash.of(sources)
        guard hash != gateway.store.revision.contentHash, hash != lastWatched else { return nil }
        lastWatched = hash
        return reload(sources, hash: hash, dryRun: false)
    }

    private func reload(_ sources: [(file: String, text: String)], hash: String, dryRun: Bool) -> ReloadOutcome {
        let current = gateway.store.current.snapshot.policy
        let loaded: (snapshot: PolicySnapshot, hash: String)
        do throws(PolicyError) {
            loaded = (try PolicyLoader().load(sources: sources), hash)
        } catch {
            return refused(error.diagnostics, dryRun: dryRun)
        }
        let diff = PolicyDiff(from: current, to: loaded.snapshot.policy)
        let restart = Self.restartRequired(from: current, to: loaded.snapshot.policy)
        if dryRun {
            // The certificates and the locator key are opened too, so that a dry run refuses what
            // the reload would.
            do throws(PolicyError) {
                _ = try gateway.openFiles(for: loaded.snapshot)
            } catch {
                return refused(error.diagnostics, dryRun: true)
            }
            gateway.metrics.reloadEnded("dry_run")
            return ReloadOutcome(
                result: .dryRun, revision: gateway.store.revision, diff: diff, errors: [], warnings: loaded.snapshot.warnings,
                restartRequired: restart)
        }
        let revision: PolicyRevision
        do throws(PolicyError) {
            revision = try gateway.install(loaded.snapshot, contentHash: loaded.hash)
        } catch {
            return refused(error.diagnostics, dryRun: false)
        }
        gateway.metrics.reloadEnded("applied")
        for warning in loaded.snapshot.warnings { logger.warning("policy warning: \(warning)") }
        logger.notice(
            "policy reloaded",
            metadata: [
                "generation": .stringConvertible(revision.generation), "hash": .string(revision.contentHash),
                "changes": .string(diff.summary),
            ])
        if !restart.isEmpty {
            logger.warning("policy sections that take effect at the next restart changed", metadata: ["sections": "\(restart)"])
        }
        return ReloadOutcome(
            result: .applied, revision: revision, diff: diff, errors: [], warnings: loaded.snapshot.warnings, restartRequired: restart)
    }

    private func refused(_ diagnostics: [PolicyDiagnostic], dryRun: Bool) -> ReloadOutcome {
        gateway.metrics.reloadEnded(dryRun ? "dry_run" : "refused")
        if !dryRun {
            for diagnostic in diagnostics { logger.error("policy reload refused, the current policy stays: \(diagnostic)") }
        }
        return ReloadOutcome(
            result: .refused, revision: gateway.store.revision, diff: nil, errors: diagnostics, warnings: [], restartRequired: [])
    }

    /// The parts of the policy read only at start: a change to them is accepted (the rest of the
    /// reload applies) and reported, and takes effect when the process restarts.
    static func restartRequired(from old: Policy, to new: Policy) -> [String] {
        var sections: [String] = []
        // A reload swaps the certificates of listeners that already terminate TLS; turning TLS on
        // or off changes what a listener's connections speak, which only a restart does.
        if old.listeners.map(\.withoutTLS) != new.listeners.map(\.withoutTLS)
            || old.listeners.map({ $0.tls != nil }) != new.listeners.map({ $0.tls != nil })
        {
            sections.append("listeners")
        }
        var oldLimits = old.limits
        oldLimits.maxBodyBytes = new.limits.maxBodyBytes  // read per request
        oldLimits.authFailures = new.limits.authFailures  // compiled with the policy
        if oldLimits != new.limits { sections.append("limits") }
        if old.upstream != new.upstream { sections.append("upstream") }
        if old.accessLog.format != new.accessLog.format { sections.append("accessLog.format") }  // the writer's, fixed at start
        if old.signatures.nonceCacheSize != new.signatures.nonceCacheSize { sections.append("signatures.nonceCacheSize") }
        if old.admin?.address != new.admin?.address || old.admin?.port != new.admin?.port { sections.append("admin") }
        if old.cluster != new.cluster { sections.append("cluster") }  // the Redis client is made at start
        // Whether entries go to Redis, and whether fleet purges are read, are decided with the Redis client.
        if (old.cache?.store ?? .memory) != (new.cache?.store ?? .memory) { sections.append("cache.store") }
        return sections
    }
}

extension ListenerPolicy {
    /// The listener without its TLS settings, which a reload does apply.
    fileprivate var withoutTLS: ListenerPolicy {
        var listener = self
        listener.tls = nil
        return listener
    }
}

/// What one reload (or dry run) did.
public struct ReloadOutcome: Sendable, Equatable {
    public enum Result: String, Sendable {
        /// The new policy is serving.
        case applied
        /// Nothing was applied; ``ReloadOutcome/diff`` says what a reload would change.
        case dryRun
        /// The policy does not validate; ``ReloadOutcome/errors`` says why, and the old one serves on.
        case refused
    }

    public var result: Result
    /// The active revision after this call (the new one when applied).
    public var revision: PolicyRevision
    /// What changed (applied) or would change (dry run); nil when refused.
    public var diff: PolicyDiff?
    public var errors: [PolicyDiagnostic]
    public var warnings: [PolicyDiagnostic]
    /// Sections whose change waits for a restart (``PolicyReloader/restartRequired(from:to:)``).
    public var restartRequired: [String]
}

extension PolicyDiff {
    /// `services +1 ~2; keys -1`: for a log line.
    var summary: String {
        let parts = sections.filter { !$0.isEmpty }.map { section in
            var counts: [String] = []
            if !section.added.isEmpty { counts.append("+\(section.added.count)") }
            if !section.removed.isEmpty { counts.append("-\(section.removed.count)") }
            if !section.changed.isEmpty { counts.append("~\(section.changed.count)") }
            return "\(section.name) \(counts.joined(separator: " "))"
        }
        return parts.isEmpty ? "none" : parts.joined(separator: "; ")
    }
}

/// The content hash of a policy: SHA-256 over each file's name (without its directory) and text,
/// in name order, as hex. Secret and certificate files the policy names are not part of it.
public enum PolicyContentHash {
    public static func of(_ sources: [(file: String, text: String)]) -> String {
        var bytes: [UInt8] = []
        for source in sources {
            let name = source.file.split(separator: "/").last.map(String.init) ?? source.file
            bytes += Array(name.utf8) + [0] + Array(source.text.utf8) + [0]
        }
        let digest = bytes.withUnsafeBytes { OpenSSLDigest().digest(.sha256, of: $0) }
        return digest.map { byte in
            let hex = Array("0123456789abcdef".utf8)
            return String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]], as: UTF8.self)
        }.joined()
    }
}
