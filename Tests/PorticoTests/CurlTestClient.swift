import CPorticoCurl
import Foundation
import PorticoTestSupport

/// A blocking libcurl easy handle, for TLS tests that must come from libcurl: one handle keeps its
/// connection alive between ``get(_:)`` calls, as a client app would.
final class CurlTestClient {
    struct Response {
        var status: Int
        var body: String
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private final class Sink {
        var data: [UInt8] = []
    }

    private let easy: UnsafeMutableRawPointer
    private let sink = Sink()
    private var resolve: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    /// - Parameters:
    ///   - tlsVersion: `CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2` and the like.
    ///   - resolve: `name:port:127.0.0.1` entries, so SNI names reach the loopback gateway.
    init(tlsVersion: Int, caFile: String = TestCertificates.path("ca.pem"), resolve: [String] = []) {
        _ = portico_curl_global_init()
        easy = curl_easy_init()
        _ = portico_easy_setopt_long(easy, CURLOPT_SSLVERSION, tlsVersion)
        _ = portico_easy_setopt_pointer(easy, CURLOPT_CAINFO, caFile)
        _ = portico_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = portico_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, 10_000)
        _ = portico_easy_setopt_pointer(easy, CURLOPT_PROXY, "")
        for entry in resolve { self.resolve = curl_slist_append(self.resolve, entry) }
        if let list = self.resolve { _ = portico_easy_setopt_pointer(easy, CURLOPT_RESOLVE, list) }
        let callback: portico_curl_data_callback = { data, size, count, userdata in
            let sink = Unmanaged<Sink>.fromOpaque(userdata!).takeUnretainedValue()
            sink.data += UnsafeRawBufferPointer(start: data, count: size * count)
            return size * count
        }
        _ = portico_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, callback)
        _ = portico_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque())
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        _ = portico_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(resolve)
        errorBuffer.deallocate()
    }

    func useClientCertificate(chain: String, key: String) {
        _ = portico_easy_setopt_pointer(easy, CURLOPT_SSLCERT, chain)
        _ = portico_easy_setopt_pointer(easy, CURLOPT_SSLKEY, key)
    }

    func get(_ url: String) throws -> Response {
        sink.data.removeAll()
        _ = portico_easy_setopt_pointer(easy, CURLOPT_URL, url)
        let code = curl_easy_perform(easy)
        guard code == CURLE_OK else {
            let detail = String(cString: errorBuffer)
            throw Failure(description: "\(String(cString: curl_easy_strerror(code))): \(detail)")
        }
        var status = 0
        _ = portico_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return Response(status: status, body: String(decoding: sink.data, as: UTF8.self))
    }

    /// New connections opened so far by this handle (0 for a reused keep-alive connection).
    var connectionsOpened: Int {
        var count = 0
        _ = portico_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &count)
        return count
    }
}
