import CPorticoOpenSSL
import NIOCore

/// One `SSL` object driven through two memory BIOs: ciphertext from the socket is written into the
/// read BIO, ciphertext OpenSSL produces is taken out of the write BIO. Nothing here does I/O or
/// knows about channels; ``TLSServerHandler`` moves the bytes.
final class TLSConnection {
    enum Step {
        /// Finished (the handshake, or a read that drained every complete record).
        case done
        /// OpenSSL needs more ciphertext from the peer.
        case wantMore
        /// The peer sent close_notify.
        case closeNotify
        case failed(TLSError)
    }

    private let ssl: OpaquePointer
    private let readBIO: OpaquePointer
    private let writeBIO: OpaquePointer
    /// The ``TLSContext`` or ``TLSClientContext``, kept so the `SSL_CTX`s (and the SNI callback's
    /// argument) outlive this `SSL`.
    private let owner: AnyObject
    /// More than ``keptBufferBytes`` went into a BIO at once since the last ``trimBuffers()``, so
    /// one may hold storage to give back (without it, small exchanges never ask OpenSSL).
    private var mayHaveGrown = false

    init?(context: TLSContext) {
        guard let (ssl, readBIO, writeBIO) = Self.makeSSL(context.defaultContext) else { return nil }
        SSL_set_accept_state(ssl)
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
        self.owner = context
    }

    /// The client side of a connection to `serverName`: SNI names it (unless it is an IP address),
    /// and the handshake fails unless the server's certificate chains to the context's CAs and is
    /// valid for it (RFC 6125 name matching, or its IP address).
    init?(client context: TLSClientContext, serverName: String) {
        guard let (ssl, readBIO, writeBIO) = Self.makeSSL(context.context) else { return nil }
        SSL_set_connect_state(ssl)
        let isAddress = (try? SocketAddress(ipAddress: serverName, port: 0)) != nil
        let named =
            isAddress
            ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1
            : portico_tls_set_host_name(ssl, serverName) == 1 && SSL_set1_host(ssl, serverName) == 1
        guard named else {
            SSL_free(ssl)
            return nil
        }
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
        self.owner = context
    }

    /// A new `SSL` of `context` with its two memory BIOs, which it owns from then on.
    private static func makeSSL(_ context: OpaquePointer) -> (ssl: OpaquePointer, readBIO: OpaquePointer, writeBIO: OpaquePointer)? {
        OpenSSLErrors.clear()
        guard let ssl = SSL_new(context) else { return nil }
        guard let readBIO = portico_tls_memory_bio(), let writeBIO = portico_tls_memory_bio() else {
            SSL_free(ssl)
            return nil
        }
        SSL_set_bio(ssl, readBIO, writeBIO)
        return (ssl, readBIO, writeBIO)
    }

    /// Why the peer's certificate was not accepted, in OpenSSL's words (`unable to get local
    /// issuer certificate`, `hostname mismatch`); `nil` when it was, or was not checked.
    var verificationFailure: String? {
        let result = SSL_get_verify_result(ssl)
        guard result != X509_V_OK else { return nil }
        return String(cString: X509_verify_cert_error_string(result))
    }

    deinit {
        SSL_free(ssl)
    }

    /// Hands ciphertext received from the peer to OpenSSL (memory BIOs take everything).
    func receive(_ buffer: ByteBuffer) {
        if buffer.readableBytes > Self.keptBufferBytes { mayHaveGrown = true }
        buffer.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = BIO_write(readBIO, bytes.baseAddress! + offset, Int32(min(bytes.count - offset, Int(Int32.max))))
                guard written > 0 else { return }
                offset += Int(written)
            }
        }
    }

    func handshake() -> Step {
        OpenSSLErrors.clear()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        return step(after: result, failure: .handshakeFailed)
    }

    /// Ciphertext received and not yet decrypted; the plaintext it holds is never larger.
    var pendingCiphertext: Int { Int(BIO_ctrl_pending(readBIO)) }

    /// Decrypts every complete record into `buffer`.
    func read(into buffer: inout ByteBuffer) -> Step {
        while true {
            OpenSSLErrors.clear()
            var result: Int32 = 0
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: max(pendingCiphertext, 1024)) { space in
                result = SSL_read(ssl, space.baseAddress, Int32(min(space.count, Int(Int32.max))))
                return result > 0 ? Int(result) : 0
            }
            if result <= 0 { return step(after: result, failure: .protocolError) }
        }
    }

    /// Encrypts `buffer` whole (a memory BIO never pushes back, so `SSL_write` takes it all).
    func write(_ buffer: ByteBuffer) -> Step {
        var outcome = Step.done
        buffer.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                OpenSSLErrors.clear()
                let result = SSL_write(ssl, bytes.baseAddress! + offset, Int32(min(bytes.count - offset, Int(Int32.max))))
                guard result > 0 else {
                    // A memory BIO never pushes back, so "want more" here (a renegotiation, say)
                    // would leave the rest unsent: it is a failure, not a pause.
                    let step = step(after: result, failure: .protocolError)
                    if case .failed = step { outcome = step } else { outcome = .failed(TLSError(.protocolError)) }
                    return
                }
                offset += Int(result)
            }
        }
        return outcome
    }

    /// The most plaintext one record carries (RFC 8446 §5.1, RFC 5246 §6.2.1); OpenSSL cuts a
    /// longer `SSL_write` into records of this size.
    static let maxRecordPlaintext = 16_384

    /// Encrypts `buffers`, in order, into as few records as their total size allows, and appends
    /// the ciphertext to `output` record by record.
    ///
    /// Each `SSL_write` ends in a record of its own, so writing a response's head and body
    /// separately costs a second record: its header, its tag, and a second encryption call. Small
    /// buffers are therefore copied into `staging` until it holds a record's worth; a buffer that
    /// is at least a record long on its own is encrypted where it lies (its whole-record part, and
    /// its rest too when nothing follows), so big bodies are never copied but for the piece that
    /// completes a record begun by the buffers before them.
    ///
    /// The ciphertext leaves the write BIO after each record, so that the BIO (whose storage never
    /// shrinks on its own) holds at most one record at any time, however large the flush.
    ///
    /// - Parameters:
    ///   - total: the buffers' readable bytes together, which the caller has counted already
    ///     (counted again here, each buffer was copied out of the collection and let go).
    ///   - staging: scratch space for the copies, cleared first (its storage is reused when nothing
    ///     else holds it); it holds nothing meaningful afterwards.
    ///   - output: where the ciphertext goes, appended after what it holds.
    func write<Buffers: Collection<ByteBuffer>>(
        _ buffers: Buffers, total: Int, staging: inout ByteBuffer, into output: inout ByteBuffer
    ) -> Step {
        let recordSize = Self.maxRecordPlaintext
        var left = total
        // Whether `staging` has been cleared for this call (until then it holds the caller's leftovers).
        var stagingReady = false
        for var buffer in buffers {
            while buffer.readableBytes > 0 {
                if !stagingReady || staging.readableBytes == 0 {
                    // Nothing staged: encrypt in place whatever would fill records of its own.
                    let inPlace = buffer.readableBytes == left ? left : buffer.readableBytes - buffer.readableBytes % recordSize
                    if inPlace > 0 {
                        left -= inPlace
                        var records = buffer.readSlice(length: inPlace)!
                        while records.readableBytes > 0 {
                            let step = seal(records.readSlice(length: min(recordSize, records.readableBytes))!, into: &output)
                            guard case .done = step else { return step }
                        }
                        continue
                    }
                }
                if !stagingReady {
                    staging.clear(minimumCapacity: min(left, recordSize))
                    stagingReady = true
                }
                var piece = buffer.readSlice(length: min(recordSize - staging.readableBytes, buffer.readableBytes))!
                left -= piece.readableBytes
                staging.writeBuffer(&piece)
                if staging.readableBytes == recordSize || left == 0 {
                    let step = seal(staging, into: &output)
                    guard case .done = step else { return step }
                    staging.clear()
                }
            }
        }
        return .done
    }

    /// Encrypts one record's plaintext and moves its ciphertext to `output`.
    private func seal(_ record: ByteBuffer, into output: inout ByteBuffer) -> Step {
        let step = write(record)
        appendCiphertext(to: &output)
        return step
    }

    /// The most an empty memory BIO keeps of the storage it grew to (``trimBuffers()``): enough for
    /// a handshake's flight and a small request or response, so that keep-alive traffic of small
    /// exchanges never gives storage back only to allocate it again.
    static let keptBufferBytes = 4096

    /// The storage the two memory BIOs hold between them.
    var bufferStorage: Int {
        portico_tls_memory_bio_capacity(readBIO) + portico_tls_memory_bio_capacity(writeBIO)
    }

    /// Gives back the storage a BIO grew to for a burst (a large request read, a large response
    /// written) once it is empty again. A memory BIO never shrinks by itself, so an idle
    /// keep-alive connection would otherwise hold the largest burst it ever carried.
    func trimBuffers() {
        guard mayHaveGrown else { return }
        mayHaveGrown = false
        portico_tls_memory_bio_trim(readBIO, Self.keptBufferBytes)
        portico_tls_memory_bio_trim(writeBIO, Self.keptBufferBytes)
    }

    /// Queues close_notify.
    func shutdown() {
        OpenSSLErrors.clear()
        _ = SSL_shutdown(ssl)
        OpenSSLErrors.clear()
    }

    /// The ciphertext OpenSSL has produced since the last call, if any, in a buffer of its own.
    func takeCiphertext(allocator: ByteBufferAllocator) -> ByteBuffer? {
        let pending = BIO_ctrl_pending(writeBIO)
        guard pending > 0 else { return nil }
        var buffer = allocator.buffer(capacity: Int(pending))
        readCiphertext(into: &buffer, count: Int(pending))
        return buffer
    }

    /// Appends the ciphertext OpenSSL has produced since the last call, if any, to `buffer`.
    func appendCiphertext(to buffer: inout ByteBuffer) {
        let pending = Int(BIO_ctrl_pending(writeBIO))
        if pending > 0 { readCiphertext(into: &buffer, count: pending) }
    }

    /// Moves `count` bytes of ciphertext out of the write BIO, which held them all at once.
    private func readCiphertext(into buffer: inout ByteBuffer, count: Int) {
        if count > Self.keptBufferBytes { mayHaveGrown = true }
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { space in
            Int(max(0, BIO_read(writeBIO, space.baseAddress, Int32(count))))
        }
    }

    /// The `SSL_CTX` the connection is served by: the default one, or the one SNI moved it to.
    var servingContext: OpaquePointer? { SSL_get_SSL_CTX(ssl) }

    var info: TLSConnectionInfo {
        var alpn: UnsafePointer<UInt8>?
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpn, &alpnLength)
        let protocolName = alpn.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(alpnLength)), as: UTF8.self) }
        var subject = [CChar](repeating: 0, count: 1024)
        let subjectLength = portico_tls_peer_subject(ssl, &subject, subject.count)
        return TLSConnectionInfo(
            version: String(cString: SSL_get_version(ssl)),
            cipher: SSL_get_current_cipher(ssl).map { String(cString: SSL_CIPHER_get_name($0)) } ?? "",
            applicationProtocol: protocolName,
            serverName: SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) },
            peerSubject: subjectLength > 0
                ? String(decoding: subject.prefix(Int(subjectLength)).map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil,
            resumed: SSL_session_reused(ssl) == 1)
    }

    private func step(after result: Int32, failure: TLSError.Kind) -> Step {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .wantMore
        case SSL_ERROR_ZERO_RETURN:
            return .closeNotify
        default:
            return .failed(TLSError(failure, openSSLErrors: OpenSSLErrors.drain()))
        }
    }
}

/// What a completed handshake established; the handler sends it up the pipeline as a user event
/// so later stages (authentication, the access log) can see the client certificate's subject.
public struct TLSConnectionInfo: Sendable, Hashable {
    /// `TLSv1.3`, `TLSv1.2`.
    public var version: String
    public var cipher: String
    /// The ALPN protocol agreed on (`http/1.1`), or nil when the client offered none we speak.
    public var applicationProtocol: String?
    /// The SNI name the client asked for.
    public var serverName: String?
    /// The verified client certificate's subject (RFC 2253), when the client sent one.
    public var peerSubject: String?
    /// Whether the session was resumed from a ticket or session id.
    public var resumed: Bool
}
