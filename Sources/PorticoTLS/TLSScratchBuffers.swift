import NIOCore

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// Buffers that the TLS connections of one thread (one event loop) lend each other from flush to
/// flush and from read to read, so that a connection in steady keep-alive traffic allocates no
/// buffer for its ciphertext or its plaintext.
///
/// A buffer handed on (ciphertext to the socket, plaintext to the HTTP decoder) is usually let go
/// of before the next use: the socket writes a small answer at once, the decoder parses a whole
/// request. The next user then finds the storage unreferenced and `clear()`s it in place; while
/// someone still holds it, `ByteBuffer`'s copy-on-write gives the next user fresh storage, so
/// sharing is always safe. One set per thread rather than per connection: an idle connection holds
/// none of them (it would cost each idle connection a few KiB), and a thread's connections take
/// turns anyway. Each user takes a buffer out while using it, so a re-entrant user (a promise's
/// callback flushing another connection) simply finds none and allocates.
final class TLSScratchBuffers {
    /// The ciphertext of a flush, handed to the socket.
    var outbound: ByteBuffer?
    /// Small writes' plaintext gathered into a record.
    var staging: ByteBuffer?
    /// Decrypted bytes handed up the pipeline.
    var inbound: ByteBuffer?

    /// Above this a buffer is given back after use rather than kept for the next: what one big
    /// answer needed should not stay allocated for the thread's life.
    static let retainedCapacity = 64 * 1024

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let created = pthread_key_create(&key) { Unmanaged<TLSScratchBuffers>.fromOpaque(($0 as UnsafeMutableRawPointer?)!).release() }
        precondition(created == 0, "pthread_key_create failed: \(created)")
        return key
    }()

    /// The calling thread's buffers.
    static var current: TLSScratchBuffers {
        if let raw = pthread_getspecific(key) { return Unmanaged<TLSScratchBuffers>.fromOpaque(raw).takeUnretainedValue() }
        let buffers = TLSScratchBuffers()
        pthread_setspecific(key, Unmanaged.passRetained(buffers).toOpaque())
        return buffers
    }

    /// Keeps `buffer` for the next user unless it grew too big.
    static func keep(_ buffer: ByteBuffer, in slot: inout ByteBuffer?) {
        if buffer.capacity <= retainedCapacity { slot = buffer }
    }
}
