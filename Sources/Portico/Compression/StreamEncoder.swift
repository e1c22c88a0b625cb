import CPorticoCodecs
import CompressNIO
import NIOCore
import PorticoPolicy

/// Compresses one response body as it streams: each part in, its compressed bytes out (flushed,
/// so a client reads each part as soon as it came), and the stream's end. One per response,
/// confined to its event loop; its memory is the coding's window and state, bounded here.
protocol StreamEncoder: AnyObject {
    /// The compressed form of `input`, flushed; with `finishing`, the stream's end too.
    func encode(_ input: ByteBuffer, finishing: Bool) throws -> ByteBuffer
}

/// What compressing failed with (a library's error code, or its memory).
struct EncoderError: Error, CustomStringConvertible {
    let description: String
}

enum StreamEncoders {
    /// A new encoder for `coding` at `level` (in the coding's range).
    static func make(_ coding: ContentCoding, level: Int) throws -> any StreamEncoder {
        switch coding {
        case .gzip: try GzipEncoder(level: level)
        case .br: try BrotliEncoder(level: level)
        case .zstd: try ZstdEncoder(level: level)
        }
    }

    /// `body` compressed whole (a stored response's variant).
    static func encodeWhole(_ body: ByteBuffer, coding: ContentCoding, level: Int) throws -> ByteBuffer {
        try make(coding, level: level).encode(body, finishing: true)
    }

    /// Windows: 32 KiB for deflate (its largest), 256 KiB for brotli and zstd, so that a response's
    /// encoder state does not grow with its length. What the state costs then depends on the level
    /// (Debian 12's libraries, allocated per response): gzip about 270 KiB at any level; brotli about
    /// 2 MiB at level 4 (the default) and 34 MiB at 9; zstd about 1.7 MiB at level 3 (the default)
    /// and 82 MiB at 19. Of that, what a streamed response touches (resident) was 100 KiB for gzip,
    /// 230 KiB for brotli and 350 KiB for zstd at the defaults (bench/cache.sh). High levels are for
    /// stored responses, compressed once.
    static let windowLog: Int32 = 18
}

/// gzip through compress-nio's zlib stream: window 2¹⁵, memory level 8 (about 256 KiB of state).
final class GzipEncoder: StreamEncoder {
    private let compressor: ZlibCompressor

    init(level: Int) throws {
        compressor = try ZlibCompressor(
            algorithm: .gzip, configuration: ZlibConfiguration(windowSize: 15, compressionLevel: Int32(level), memoryLevel: 8))
    }

    func encode(_ input: ByteBuffer, finishing: Bool) throws -> ByteBuffer {
        var input = input
        var output = ByteBufferAllocator().buffer(capacity: compressor.maxSize(from: input))
        while true {
            do {
                try compressor.deflate(from: &input, to: &output, flush: finishing ? .finish : .sync)
                return output
            } catch let error as CompressNIOError where error == .bufferOverflow {
                output.reserveCapacity(minimumWritableBytes: max(4096, input.readableBytes))
            }
        }
    }
}

/// Brotli through the system's libbrotlienc, with a 2¹⁸ window.
final class BrotliEncoder: StreamEncoder {
    private let state: OpaquePointer

    init(level: Int) throws {
        guard let state = BrotliEncoderCreateInstance(nil, nil, nil) else { throw EncoderError(description: "brotli: out of memory") }
        self.state = state
        BrotliEncoderSetParameter(state, BROTLI_PARAM_QUALITY, UInt32(level))
        BrotliEncoderSetParameter(state, BROTLI_PARAM_LGWIN, UInt32(StreamEncoders.windowLog))
    }

    deinit { BrotliEncoderDestroyInstance(state) }

    func encode(_ input: ByteBuffer, finishing: Bool) throws -> ByteBuffer {
        var output = ByteBufferAllocator().buffer(capacity: input.readableBytes / 2 + 64)
        let operation = finishing ? BROTLI_OPERATION_FINISH : BROTLI_OPERATION_FLUSH
        try input.withUnsafeReadableBytes { raw in
            var availableIn = raw.count
            var nextIn = raw.baseAddress?.assumingMemoryBound(to: UInt8.self)
            repeat {
                try output.writeWithUnsafeMutableBytes(minimumWritableBytes: 16 * 1024) { buffer in
                    var availableOut = buffer.count
                    var nextOut = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
                    guard BrotliEncoderCompressStream(state, operation, &availableIn, &nextIn, &availableOut, &nextOut, nil) != 0 else {
                        throw EncoderError(description: "brotli: the encoder failed")
                    }
                    return buffer.count - availableOut
                }
            } while availableIn > 0 || BrotliEncoderHasMoreOutput(state) != 0
                || (finishing && BrotliEncoderIsFinished(state) == 0)
        }
        return output
    }
}

/// Zstandard through the system's libzstd, with a 2¹⁸ window.
final class ZstdEncoder: StreamEncoder {
    private let context: OpaquePointer

    init(level: Int) throws {
        guard let context = ZSTD_createCCtx() else { throw EncoderError(description: "zstd: out of memory") }
        self.context = context
        ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, Int32(level))
        ZSTD_CCtx_setParameter(context, ZSTD_c_windowLog, StreamEncoders.windowLog)
    }

    deinit { ZSTD_freeCCtx(context) }

    func encode(_ input: ByteBuffer, finishing: Bool) throws -> ByteBuffer {
        var output = ByteBufferAllocator().buffer(capacity: input.readableBytes / 2 + 64)
        let directive = finishing ? ZSTD_e_end : ZSTD_e_flush
        try input.withUnsafeReadableBytes { raw in
            var source = ZSTD_inBuffer(src: raw.baseAddress, size: raw.count, pos: 0)
            var remaining = 0
            repeat {
                try output.writeWithUnsafeMutableBytes(minimumWritableBytes: 16 * 1024) { buffer in
                    var destination = ZSTD_outBuffer(dst: buffer.baseAddress, size: buffer.count, pos: 0)
                    remaining = ZSTD_compressStream2(context, &destination, &source, directive)
                    if ZSTD_isError(remaining) != 0 {
                        throw EncoderError(description: "zstd: " + String(cString: ZSTD_getErrorName(remaining)))
                    }
                    return destination.pos
                }
            } while remaining != 0 || source.pos < source.size
        }
        return output
    }
}
