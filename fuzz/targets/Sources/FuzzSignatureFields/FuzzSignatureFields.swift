import PorticoSigning

/// libFuzzer's entry point: the bytes up to the first line feed are the `Signature-Input` value, the
/// rest the `Signature` value (a line feed is the one byte a real field value never holds, so every
/// pair of values a client can send is some input). Anything may be refused; nothing may crash, and
/// what is accepted must keep the properties ``SignatureFieldsProperties`` checks.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSignatureFields(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let separator = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
    let signatureInput = String(decoding: bytes[..<separator], as: UTF8.self)
    let signature = separator == bytes.endIndex ? "" : String(decoding: bytes[(separator + 1)...], as: UTF8.self)
    SignatureFieldsProperties.check(signatureInput: signatureInput, signature: signature)
    return 0
}
