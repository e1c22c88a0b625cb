extension PolicyDocumentReader {
    /// Admin tokens are compared as they are; a short one could be guessed.
    static let minimumAdminTokenLength = 32

    /// `admin: { address, port, tokenFile }`.
    func readAdmin(_ value: PolicyValue) -> AdminPolicy? {
        guard let fields = value.fields(known: ["address", "port", "tokenFile", "allowFrom", "denyFrom"]) else { return nil }
        let address = fields.optional("address", default: "127.0.0.1") { $0.nonEmptyString() }
        let port = fields.required("port") { $0.int(in: 0...65535) }
        let token = fields.optional("tokenFile") { value -> Secret? in
            guard let path = value.filePath() else { return nil }
            switch Secret.read(file: path) {
            case .success(let text):
                guard text.count >= Self.minimumAdminTokenLength else {
                    value.error(
                        "the token in \(path) is \(text.count) characters; at least \(Self.minimumAdminTokenLength) are required (make one with `portico keygen`)"
                    )
                    return nil
                }
                return Secret(text)
            case .failure(let problem):
                value.error("the token file \(path) \(problem)")
                return nil
            }
        }
        if !AdminPolicy.isLoopback(address), fields["tokenFile"] == nil {
            value.error("an admin listener on \(address) (not loopback) needs tokenFile, the bearer token admin requests must present")
        }
        guard let port else { return nil }
        var admin = AdminPolicy(address: address, port: port, token: token)
        admin.addresses = fields.addressList()
        return admin
    }
}
