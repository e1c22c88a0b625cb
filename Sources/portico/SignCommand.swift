import ArgumentParser

/// `portico sign`: the header fields that make a request acceptable to a `signature` service.
///
/// For use with any HTTP client: the output is one `Name: value` line per field, signed by the
/// client library (`PorticoClient`) exactly as an app would sign.
struct SignCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Print the Signature-Input, Signature (and Content-Digest) fields for a request.",
        discussion: """
            Example, with bash and curl:
              mapfile -t H < <(portico sign --key-id demo-app --secret-file policies/secrets/demo-app.secret \\
                  http://127.0.0.1:8080/api/1/stockquote/AAPL)
              curl -H "${H[0]}" -H "${H[1]}" http://127.0.0.1:8080/api/1/stockquote/AAPL
            Send the -H fields you give here with the request too: covered ones are part of the signature.
            """)

    @OptionGroup var request: SigningOptions

    func run() throws {
        for field in try request.signedFields() { print("\(field.name): \(field.value)") }
    }
}
