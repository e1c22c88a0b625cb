import CPorticoOpenSSL
import PorticoSigning

/// HMAC-SHA256 under one key, computed with the system OpenSSL's SHA-256.
///
/// The key is absorbed once, into the hash states after its two pad blocks; a MAC copies them onto
/// the stack, so it allocates nothing, takes no lock, and any number of threads may use one key at
/// once. (A context per key and event loop, reset between uses, was the other way to stop
/// duplicating an `EVP_MAC_CTX` per MAC; state copied on the stack needs no per-loop table at all.)
public final class OpenSSLHMACKey: MessageAuthenticator, @unchecked Sendable {
    // Unchecked: the state is written only by `init` (and wiped by `deinit`) and read afterwards.
    private let key: UnsafeMutablePointer<portico_hmac_sha256_key>

    /// Fails only when OpenSSL cannot compute SHA-256 (a broken installation).
    public init?(key secret: [UInt8]) {
        // Set up in a local first: once `self.key` is assigned, a failing init would run `deinit`
        // on it as well, and free it twice.
        let state = UnsafeMutablePointer<portico_hmac_sha256_key>.allocate(capacity: 1)
        guard secret.withUnsafeBytes({ portico_hmac_sha256_key_init(state, $0.baseAddress, $0.count) }) == 1 else {
            portico_hmac_sha256_key_clear(state)
            state.deallocate()
            return nil
        }
        key = state
    }

    deinit {
        portico_hmac_sha256_key_clear(key)
        key.deallocate()
    }

    public func authenticationCode(for message: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
            count = portico_hmac_sha256(key, message.baseAddress, message.count, buffer.baseAddress) == 1 ? 32 : 0
        }
    }

    public func writeAuthenticationCode(for message: UnsafeRawBufferPointer, to code: UnsafeMutableRawBufferPointer) -> Bool {
        guard code.count == 32, let out = code.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
        return portico_hmac_sha256(key, message.baseAddress, message.count, out) == 1
    }
}
