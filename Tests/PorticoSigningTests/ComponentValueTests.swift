import PorticoSigning
import RawStructuredFieldValues
import Testing

/// Component values from RFC 9421 §2.1 and §2.2's examples.
@Suite struct ComponentValueTests {
    static func request(_ target: String, fields: [(name: String, value: String)] = []) -> HTTPRequestParts {
        HTTPRequestParts(method: "POST", scheme: "https", authority: "www.example.com", requestTarget: target, fields: fields)
    }

    @Test func derivedComponents() throws {
        let request = Self.request("/path?param=value")
        let expected: [(ComponentIdentifier, String)] = [
            (.method, "POST"), (.targetURI, "https://www.example.com/path?param=value"), (.authority, "www.example.com"),
            (.scheme, "https"), (.requestTarget, "/path?param=value"), (.path, "/path"), (.query, "?param=value"),
        ]
        for (component, value) in expected {
            #expect(try SignatureBase.componentValue(component, request: request) == value)
        }
        #expect(try SignatureBase.componentValue(.query, request: Self.request("/path")) == "?")
    }

    @Test func authorityDropsTheDefaultPortAndCase() throws {
        let request = HTTPRequestParts(method: "GET", scheme: "https", authority: "WWW.Example.com:443", requestTarget: "/", fields: [])
        #expect(try SignatureBase.componentValue(.authority, request: request) == "www.example.com")
        let other = HTTPRequestParts(method: "GET", scheme: "https", authority: "localhost:8443", requestTarget: "/", fields: [])
        #expect(try SignatureBase.componentValue(.authority, request: other) == "localhost:8443")
    }

    @Test func queryParametersAreDecodedAndReencoded() throws {
        let request = Self.request("/path?var=this%20is%20a%20big%0Avalue&bar=with+plus+whitespace&fa%C3%A7ade%22%3A%20=something&qux=")
        #expect(try SignatureBase.componentValue(.queryParameter("var"), request: request) == "this%20is%20a%20big%0Avalue")
        #expect(try SignatureBase.componentValue(.queryParameter("bar"), request: request) == "with%20plus%20whitespace")
        let facade = ComponentIdentifier.queryParameter("fa\u{e7}ade\": ")
        #expect(facade.description == #""@query-param";name="fa%C3%A7ade%22%3A%20""#)
        #expect(try SignatureBase.componentValue(facade, request: request) == "something")
        #expect(try SignatureBase.componentValue(.queryParameter("qux"), request: request) == "")
        #expect(throws: SigningError.componentNotInMessage(#""@query-param";name="missing""#)) {
            try SignatureBase.componentValue(.queryParameter("missing"), request: request)
        }
        #expect(throws: SigningError.ambiguousQueryParameter("a")) {
            try SignatureBase.componentValue(.queryParameter("a"), request: Self.request("/p?a=1&a=2"))
        }
    }

    @Test func fieldValuesAreTrimmedAndCombined() throws {
        let request = Self.request(
            "/",
            fields: [
                ("Cache-Control", "max-age=60"), ("cache-control", "   must-revalidate  "),
                ("Example-Dict", " a=1,    b=2;x=1;y=2,   c=(a   b   c)"),
            ])
        #expect(try SignatureBase.componentValue(.field("Cache-Control"), request: request) == "max-age=60, must-revalidate")
        #expect(
            try SignatureBase.componentValue(ComponentIdentifier("example-dict", parameters: [("key", .string("b"))]), request: request)
                == "2;x=1;y=2")
        #expect(
            try SignatureBase.componentValue(ComponentIdentifier("example-dict", parameters: [("key", .string("c"))]), request: request)
                == "(a b c)")
        #expect(
            try SignatureBase.componentValue(ComponentIdentifier("cache-control", parameters: [("bs", .bool(true))]), request: request)
                == ":bWF4LWFnZT02MA==:, :bXVzdC1yZXZhbGlkYXRl:")
    }

    @Test func theSignerRefusesWhatCannotBeSigned() throws {
        let request = Self.request("/", fields: [("X-Name", "Caf\u{e9}"), ("X-Injected", "a\n\"@method\": GET")])
        let input = SignatureInput(components: [.field("x-name")], created: 1, keyID: "k")
        #expect(throws: SigningError.nonASCIIValue(#""x-name""#)) { try SignatureBase.make(for: input, request: request) }
        let injected = SignatureInput(components: [.field("x-injected")], created: 1, keyID: "k")
        #expect(throws: SigningError.nonASCIIValue(#""x-injected""#)) { try SignatureBase.make(for: injected, request: request) }
        let missing = SignatureInput(components: [.field("x-absent")], created: 1, keyID: "k")
        #expect(throws: SigningError.componentNotInMessage(#""x-absent""#)) { try SignatureBase.make(for: missing, request: request) }
        let status = SignatureInput(components: [ComponentIdentifier("@status")], created: 1, keyID: "k")
        #expect(throws: SigningError.self) { try SignatureBase.make(for: status, request: request) }
    }

    @Test func duplicateLabelsAndRepeatedComponentsAreRefused() {
        #expect(throws: SigningError.duplicateLabel(field: "Signature-Input", label: "a")) {
            try SignatureFields.select(
                label: nil, signatureInput: #"a=("@method");created=1, a=("@path");created=1"#, signature: "a=:AAAA:")
        }
        #expect(throws: SigningError.invalidComponent(#""@method" is covered more than once"#)) {
            try SignatureFields.select(label: nil, signatureInput: #"a=("@method" "@method");created=1"#, signature: "a=:AAAA:")
        }
        #expect(throws: SigningError.invalidComponent(#""Host" must be lowercase"#)) {
            try SignatureFields.select(label: nil, signatureInput: #"a=("Host");created=1"#, signature: "a=:AAAA:")
        }
        #expect(throws: SigningError.labelMismatch(label: "a")) {
            try SignatureFields.select(label: nil, signatureInput: #"a=("@method");created=1"#, signature: "b=:AAAA:")
        }
    }

    @Test func definedParametersAreReadFromTheirFirstPlaceAndTypeChecked() throws {
        func select(_ input: String) throws(SigningError) -> SignatureInput {
            try SignatureFields.select(label: nil, signatureInput: input, signature: "a=:AAAA:").input
        }
        let input = try select(#"a=("@method");keyid="k";x=1;created=5;nonce="n";alg="hmac-sha256";tag="t";expires=9"#)
        #expect(input.keyID == "k")
        #expect(input.created == 5)
        #expect(input.expires == 9)
        #expect(input.nonce == "n")
        #expect(input.algorithm == "hmac-sha256")
        #expect(input.tag == "t")
        #expect(try select(#"a=("@method");x=1"#).keyID == nil)

        #expect(throws: SigningError.invalidParameter("created must be an integer (seconds since the epoch)")) {
            try select(#"a=("@method");keyid="k";created="5""#)
        }
        #expect(throws: SigningError.invalidParameter("keyid must be a quoted string")) { try select(#"a=("@method");created=5;keyid=7"#) }
        #expect(throws: SigningError.invalidParameter("nonce must be a quoted string")) { try select(#"a=("@method");nonce=?1"#) }

        // Built in code: the accessors follow changes to the parameters, and the first of a
        // repeated key is the one read, while a later mistyped one is still refused by the signer.
        var built = SignatureInput(components: [.method], created: 1, keyID: "first")
        built.parameters.append(("keyid", .integer(2)))
        #expect(built.keyID == "first")
        built.parameters.removeFirst()
        #expect(built.created == nil)
        #expect(built.keyID == "first")
        let key = UnusedKey()
        #expect(throws: SigningError.invalidParameter("keyid must be a quoted string")) {
            try MessageSignature.sign(Self.request("/"), input: built, authenticator: key)
        }
    }
}

/// An authenticator for tests that never get as far as a MAC.
struct UnusedKey: MessageAuthenticator {
    func authenticationCode(for message: UnsafeRawBufferPointer) -> [UInt8] { [UInt8](repeating: 0, count: 32) }
}
