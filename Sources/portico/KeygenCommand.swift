import ArgumentParser

/// `portico keygen`: a new random secret for a key, in the form the policy and clients read.
struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Print a new random secret (base64url, no padding) for a client key.",
        discussion: "Save it to a file named by the key's secretFile (or an environment variable named by secretEnv).")

    @Option(help: "Random bytes in the secret (at least 32).")
    var bytes = 32

    func validate() throws {
        guard bytes >= 32 else { throw ValidationError("--bytes must be at least 32") }
    }

    func run() {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        print(Base64URL.encode(random))
    }
}

/// base64url without padding (RFC 4648 §5): safe in files, environment variables and YAML.
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value = UInt32(0)
            for (offset, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * offset) }
            for position in 0..<(chunk.count + 1) { out.append(alphabet[Int((value >> (18 - 6 * position)) & 0x3F)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
