import Portico

/// libFuzzer's entry point: the input is a request path as the HTTP decoder hands it over (bytes
/// that are not UTF-8 arrive repaired, as NIO's `String` would hold them). Whatever
/// ``PathNormalizer`` accepts must keep the properties ``PathNormalizerProperties`` checks.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPathNormalizer(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let path = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    switch PathNormalizer.normalize(path[...]) {
    case .success(let normalized): PathNormalizerProperties.checkAccepted(normalized, input: path)
    case .failure(let rejection): PathNormalizerProperties.checkRefused(rejection, input: path)
    }
    return 0
}
