package dev.portico.signer;

import java.util.List;
import java.util.Map;

/**
 * One signature and what it was made from: the fields to set on the request, and, for tests and
 * debugging, the signature base the HMAC was computed over.
 *
 * <p>The base holds no secret (it is built from the request), so it is safe to log when a
 * signature is refused and the two sides must be compared.
 */
public final class SignedRequest {
    private final List<Map.Entry<String, String>> fields;
    private final HttpRequestParts request;
    private final List<String> components;
    private final String signatureBase;
    private final String signatureInput;
    private final String signature;

    SignedRequest(
            List<Map.Entry<String, String>> fields, HttpRequestParts request, List<String> components, String signatureBase,
            String signatureInput, String signature) {
        this.fields = fields;
        this.request = request;
        this.components = components;
        this.signatureBase = signatureBase;
        this.signatureInput = signatureInput;
        this.signature = signature;
    }

    /**
     * The fields to set on the request, replacing any of the same name: the identity fields,
     * {@code Content-Digest} when there is a body, then {@code Signature-Input} and
     * {@code Signature} (only the last two for {@link RequestSigner#signCovering}).
     */
    public List<Map.Entry<String, String>> fields() {
        return fields;
    }

    /** The request as it will be sent, with the fields the signer adds: what the base was built over. */
    public HttpRequestParts request() {
        return request;
    }

    /** The covered components, in order. */
    public List<String> components() {
        return components;
    }

    /** The text the HMAC was computed over (its UTF-8 bytes, all ASCII). */
    public String signatureBase() {
        return signatureBase;
    }

    /** The {@code Signature-Input} value, label included: {@code sig1=("@method" …);created=…}. */
    public String signatureInput() {
        return signatureInput;
    }

    /** The {@code Signature} value, label included: {@code sig1=:base64:}. */
    public String signature() {
        return signature;
    }

    /** The value of the returned field {@code name} (any case), or {@code null}. */
    public String field(String name) {
        return Fields.first(fields, name);
    }
}
