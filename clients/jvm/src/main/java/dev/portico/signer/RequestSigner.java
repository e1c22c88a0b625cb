package dev.portico.signer;

import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Supplier;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Signs requests for a Portico gateway: RFC 9421 HTTP Message Signatures with {@code hmac-sha256},
 * and an RFC 9530 {@code Content-Digest} for bodies.
 *
 * <p>Configure one signer per key when the app starts and call it for every request; it is
 * immutable and safe to share between threads. It mirrors the Swift client's signer
 * ({@code PorticoClient.RequestSigner}) and is checked against the same shared vectors, so the
 * gateway cannot tell the two apart.
 *
 * <pre>{@code
 * RequestSigner signer = RequestSigner.builder("android-app", secret)
 *         .identity(new ClientIdentity("2.4.1", "android"))
 *         .build();
 * List<Map.Entry<String, String>> fields =
 *         signer.sign("GET", URI.create("https://api.example.com/api/2/stockquote/AAPL"), headers, null);
 * // set each of fields on the request, replacing any field of the same name
 * }</pre>
 *
 * <p>What a signature covers: {@code @method}, {@code @authority}, {@code @path}, plus
 * {@code @query} when the request target has a {@code ?}, {@code content-digest} when there is a
 * body, the identity fields, and whichever of the {@linkplain Builder#coveredFields covered fields}
 * the request carries. Its parameters are {@code created}, {@code expires} (with a
 * {@linkplain Builder#lifetime lifetime}), a fresh random {@code nonce} (the gateway refuses a nonce
 * it has seen, so a captured request cannot be replayed: sign every attempt again) and
 * {@code keyid}.
 *
 * <p>Only JDK classes Android offers from API 26 are used (no {@code java.net.http}, no
 * {@code Map.entry}/{@code List.of}), so the same jar serves servers, desktop apps and Android.
 */
public final class RequestSigner {
    /** The only algorithm Portico verifies. */
    public static final String ALGORITHM = "hmac-sha256";
    /** The signature label the gateway expects unless its policy names another. */
    public static final String DEFAULT_LABEL = "sig1";

    private static final String HMAC = "HmacSHA256";
    private static final List<String> BASE_COMPONENTS =
            Collections.unmodifiableList(Arrays.asList("@method", "@authority", "@path"));
    private static final SecureRandom RANDOM = new SecureRandom();

    private final String keyId;
    private final SecretKeySpec key;
    private final ClientIdentity identity;
    private final String label;
    private final Duration lifetime;
    private final boolean includesNonce;
    private final List<String> coveredFields;
    private final Clock clock;
    private final Supplier<String> nonceSupplier;

    private RequestSigner(Builder builder) {
        this.keyId = builder.keyId;
        this.key = new SecretKeySpec(builder.secret, HMAC);
        this.identity = builder.identity;
        this.label = builder.label;
        this.lifetime = builder.lifetime;
        this.includesNonce = builder.includesNonce;
        this.coveredFields = Collections.unmodifiableList(new ArrayList<>(builder.coveredFields));
        this.clock = builder.clock;
        this.nonceSupplier = builder.nonceSupplier;
    }

    /**
     * A builder for a signer whose HMAC key is the UTF-8 bytes of {@code secret}, exactly as the
     * gateway reads its key file (as {@code portico keygen} printed it). On a device, keep it in
     * the Android Keystore-protected storage, not in the APK.
     */
    public static Builder builder(String keyId, String secret) {
        Objects.requireNonNull(secret, "secret");
        return new Builder(keyId, secret.getBytes(StandardCharsets.UTF_8));
    }

    /** A builder for a signer whose HMAC key is raw bytes (such as RFC 9421's example key). */
    public static Builder builder(String keyId, byte[] secretBytes) {
        Objects.requireNonNull(secretBytes, "secretBytes");
        return new Builder(keyId, secretBytes.clone());
    }

    /**
     * Reads a secret file the way the gateway and {@code portico sign} do: UTF-8 text without its
     * trailing line breaks ({@code \n}, {@code \r\n}, {@code \r}). Other whitespace is part of the
     * secret, as it is for the gateway.
     *
     * @throws IOException when the file cannot be read or is not UTF-8
     */
    public static String readSecretFile(Path file) throws IOException {
        byte[] bytes = Files.readAllBytes(file);
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(bytes))
                    .toString();
        } catch (CharacterCodingException e) {
            throw new IOException("the secret file " + file + " is not UTF-8 text", e);
        }
        int end = text.length();
        while (end > 0 && (text.charAt(end - 1) == '\n' || text.charAt(end - 1) == '\r')) end--;
        return text.substring(0, end);
    }

    /**
     * 16 random bytes from {@link SecureRandom}, base64url without padding (22 characters): the
     * default nonce. 128 bits make a collision between two honest requests negligible, so the
     * gateway's replay check only ever refuses real replays.
     */
    public static String randomNonce() {
        byte[] bytes = new byte[16];
        RANDOM.nextBytes(bytes);
        return Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
    }

    /**
     * The {@code Content-Digest} value of {@code body} (RFC 9530): {@code sha-256=:base64:}.
     */
    public static String contentDigest(byte[] body) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(body);
            return "sha-256=:" + Base64.getEncoder().encodeToString(digest) + ":";
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("SHA-256 is not available", e); // every JDK and Android has it
        }
    }

    // MARK: signing

    /**
     * Signs a request to {@code uri}.
     *
     * @param method the method as it will be sent ({@code GET}, {@code POST}…)
     * @param uri the absolute URI as it will be sent; its raw (percent-encoded) path and query are
     *     signed as they are, so give the client the same {@code URI}
     * @param headers the fields the request already carries (only covered ones matter); may be null
     * @param body the body that will be sent; {@code null} or empty for none
     * @return the fields to set on the request, replacing any of the same name: the identity fields,
     *     {@code Content-Digest} when there is a body, {@code Signature-Input} and {@code Signature}
     * @throws SigningException for a URI that is not absolute {@code http(s)} with a host, or a
     *     covered value that is not ASCII
     */
    public List<Map.Entry<String, String>> sign(String method, URI uri, List<? extends Map.Entry<String, String>> headers, byte[] body) {
        return signWithDetails(method, uri, headers, body).fields();
    }

    /** {@link #sign(String, URI, List, byte[])} for a request without fields of its own or a body. */
    public List<Map.Entry<String, String>> sign(String method, URI uri) {
        return sign(method, uri, null, null);
    }

    /**
     * Signs a request given in its parts, for HTTP clients that do not hand out a {@code URI}
     * (OkHttp's {@code HttpUrl} re-encodes when converted to one).
     *
     * @param scheme {@code http} or {@code https}
     * @param authority host and port as the {@code Host} field will carry them
     * @param requestTarget path and query in origin form, exactly as sent ({@code /a%20b?q=1})
     */
    public List<Map.Entry<String, String>> sign(
            String method, String scheme, String authority, String requestTarget, List<? extends Map.Entry<String, String>> headers,
            byte[] body) {
        return signWithDetails(method, scheme, authority, requestTarget, headers, body).fields();
    }

    /** Like {@link #sign(String, URI, List, byte[])}, and also returns the signature base. */
    public SignedRequest signWithDetails(String method, URI uri, List<? extends Map.Entry<String, String>> headers, byte[] body) {
        HttpRequestParts.Target target = HttpRequestParts.Target.of(uri);
        return signWithDetails(method, target.scheme, target.authority, target.requestTarget, headers, body);
    }

    /** Like {@link #sign(String, String, String, String, List, byte[])}, and also returns the signature base. */
    public SignedRequest signWithDetails(
            String method, String scheme, String authority, String requestTarget, List<? extends Map.Entry<String, String>> headers,
            byte[] body) {
        List<Map.Entry<String, String>> added = new ArrayList<>();
        if (identity != null) added.addAll(identity.fields());
        boolean hasBody = body != null && body.length > 0;
        if (hasBody) added.add(Fields.entry("Content-Digest", contentDigest(body)));

        // The request as it will be sent: its own fields, with the ones this signer sets replaced.
        Set<String> replaced = new HashSet<>();
        for (Map.Entry<String, String> field : added) replaced.add(Fields.lowercaseAscii(field.getKey()));
        replaced.add("signature-input");
        replaced.add("signature");
        List<Map.Entry<String, String>> kept = new ArrayList<>();
        if (headers != null) {
            for (Map.Entry<String, String> field : headers) {
                if (!replaced.contains(Fields.lowercaseAscii(field.getKey()))) kept.add(field);
            }
        }
        kept.addAll(added);
        HttpRequestParts request = new HttpRequestParts(method, scheme, authority, requestTarget, HttpRequestParts.withHost(authority, kept));

        List<String> covered = coverage(request, hasBody);
        Computed computed = compute(request, covered);
        List<Map.Entry<String, String>> fields = new ArrayList<>(added);
        fields.add(Fields.entry("Signature-Input", computed.signatureInput));
        fields.add(Fields.entry("Signature", computed.signature));
        return new SignedRequest(
                Collections.unmodifiableList(fields), request, covered, computed.base, computed.signatureInput, computed.signature);
    }

    /**
     * The signature base {@link #sign(String, URI, List, byte[])} would compute the HMAC over (with
     * this signer's clock and a nonce drawn for the call), for tests and for comparing with the
     * gateway's when a signature is refused.
     */
    public String signatureBase(String method, URI uri, List<? extends Map.Entry<String, String>> headers, byte[] body) {
        return signWithDetails(method, uri, headers, body).signatureBase();
    }

    /**
     * Signs {@code request} covering exactly {@code components}, in that order, with this signer's
     * key, label, clock, nonce and lifetime: for protocols that fix their own coverage, and for
     * checking against published vectors such as RFC 9421 B.2.5. Adds no fields (no identity, no
     * digest): the request must already carry every covered one.
     *
     * @param components lowercase identifiers: derived ones ({@code @authority}) or field names
     *     ({@code content-type})
     * @return {@code Signature-Input} and {@code Signature} as its {@link SignedRequest#fields()}
     * @throws SigningException when a component is unsupported, missing or not ASCII
     */
    public SignedRequest signCovering(HttpRequestParts request, List<String> components) {
        List<String> covered = Collections.unmodifiableList(new ArrayList<>(components));
        Computed computed = compute(request, covered);
        List<Map.Entry<String, String>> fields = new ArrayList<>(2);
        fields.add(Fields.entry("Signature-Input", computed.signatureInput));
        fields.add(Fields.entry("Signature", computed.signature));
        return new SignedRequest(
                Collections.unmodifiableList(fields), request, covered, computed.base, computed.signatureInput, computed.signature);
    }

    /**
     * {@code @method @authority @path}, then {@code @query}, {@code content-digest}, the identity
     * fields and whichever covered fields the request carries, each once: the same order as the
     * Swift signer, which the {@code Signature-Input} text (and so the signature) depends on.
     */
    private List<String> coverage(HttpRequestParts request, boolean hasBody) {
        List<String> covered = new ArrayList<>(BASE_COMPONENTS);
        if (request.requestTarget().indexOf('?') >= 0) addOnce(covered, "@query");
        if (hasBody) addOnce(covered, "content-digest");
        if (identity != null) {
            for (Map.Entry<String, String> field : identity.fields()) addOnce(covered, Fields.lowercaseAscii(field.getKey()));
        }
        for (String name : coveredFields) {
            if (!request.fieldValues(name).isEmpty()) addOnce(covered, name);
        }
        return Collections.unmodifiableList(covered);
    }

    private static void addOnce(List<String> list, String component) {
        if (!list.contains(component)) list.add(component);
    }

    private static final class Computed {
        final String base;
        final String signatureInput;
        final String signature;

        Computed(String base, String signatureInput, String signature) {
            this.base = base;
            this.signatureInput = signatureInput;
            this.signature = signature;
        }
    }

    private Computed compute(HttpRequestParts request, List<String> components) {
        long created = clock.instant().getEpochSecond(); // whole seconds, rounded down
        Long expires = lifetime == null ? null : created + lifetime.getSeconds();
        String nonce = null;
        if (includesNonce) {
            nonce = nonceSupplier.get();
            if (nonce == null) throw new SigningException(SigningException.Reason.INVALID_PARAMETER, "the nonce supplier returned null");
        }
        String params = SignatureBase.signatureParams(components, created, expires, nonce, keyId);
        String base = SignatureBase.build(request, components, params);
        byte[] mac;
        try {
            // A Mac per signature: Mac objects are not thread-safe, and initialising one is cheap
            // next to a network request.
            Mac hmac = Mac.getInstance(HMAC);
            hmac.init(key);
            mac = hmac.doFinal(base.getBytes(StandardCharsets.US_ASCII)); // the base is checked ASCII
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HMAC-SHA256 is not available", e); // every JDK and Android has it
        }
        return new Computed(base, label + "=" + params, label + "=:" + Base64.getEncoder().encodeToString(mac) + ":");
    }

    // MARK: configuration

    public String keyId() {
        return keyId;
    }

    /** The identity sent with every request, or {@code null}. */
    public ClientIdentity identity() {
        return identity;
    }

    public String label() {
        return label;
    }

    /** How long after {@code created} signatures expire, or {@code null} for no {@code expires}. */
    public Duration lifetime() {
        return lifetime;
    }

    public boolean includesNonce() {
        return includesNonce;
    }

    /** The configured extra covered field names, lowercase. */
    public List<String> coveredFields() {
        return coveredFields;
    }

    /** A builder holding this signer's configuration (and key), to derive a variant. */
    public Builder toBuilder() {
        // getEncoded() is a copy, which the new builder owns.
        return new Builder(keyId, key.getEncoded())
                .identity(identity)
                .label(label)
                .lifetime(lifetime)
                .includesNonce(includesNonce)
                .coveredFields(coveredFields)
                .clock(clock)
                .nonceSupplier(nonceSupplier);
    }

    @Override
    public String toString() {
        // Never the secret.
        return "RequestSigner[keyId=" + keyId + ", label=" + label + ", identity=" + identity + "]";
    }

    /** Configures a {@link RequestSigner}. Every setting but the key id and secret is optional. */
    public static final class Builder {
        private final String keyId;
        private final byte[] secret;
        private ClientIdentity identity;
        private String label = DEFAULT_LABEL;
        private Duration lifetime;
        private boolean includesNonce = true;
        private final List<String> coveredFields = new ArrayList<>();
        private Clock clock = Clock.systemUTC();
        private Supplier<String> nonceSupplier = RequestSigner::randomNonce;

        private Builder(String keyId, byte[] secret) {
            this.keyId = Objects.requireNonNull(keyId, "keyId");
            this.secret = secret;
        }

        /** Sent with every request and covered by its signature; {@code null} sends no identity fields. */
        public Builder identity(ClientIdentity identity) {
            this.identity = identity;
            return this;
        }

        /** The signature's label in {@code Signature-Input} and {@code Signature}; {@code sig1} by default. */
        public Builder label(String label) {
            this.label = Objects.requireNonNull(label, "label");
            return this;
        }

        /**
         * When set, signatures carry {@code expires} this many whole seconds after {@code created},
         * and the gateway refuses them afterwards even inside its clock-skew window.
         */
        public Builder lifetime(Duration lifetime) {
            this.lifetime = lifetime;
            return this;
        }

        /**
         * Whether signatures carry a nonce ({@code true} by default). The gateway requires one unless
         * its policy says otherwise; without one, a captured request can be replayed until it ages
         * out of the gateway's window.
         */
        public Builder includesNonce(boolean includesNonce) {
            this.includesNonce = includesNonce;
            return this;
        }

        /**
         * Header fields to cover whenever a request carries them (e.g. {@code content-type},
         * {@code authorization}), in this order after the default ones. Replaces earlier ones.
         */
        public Builder coveredFields(List<String> names) {
            coveredFields.clear();
            for (String name : names) {
                String lower = Fields.lowercaseAscii(Objects.requireNonNull(name, "covered field"));
                SignatureBase.checkComponent(lower);
                if (lower.startsWith("@")) throw new IllegalArgumentException("covered fields are header fields, not " + name);
                if (!coveredFields.contains(lower)) coveredFields.add(lower);
            }
            return this;
        }

        /** The clock {@code created} is read from; tests pass a fixed one. */
        public Builder clock(Clock clock) {
            this.clock = Objects.requireNonNull(clock, "clock");
            return this;
        }

        /**
         * Makes each signature's nonce; the default is {@link #randomNonce()}. Tests pass a fixed
         * one; an app should not replace it.
         */
        public Builder nonceSupplier(Supplier<String> nonceSupplier) {
            this.nonceSupplier = Objects.requireNonNull(nonceSupplier, "nonceSupplier");
            return this;
        }

        /**
         * @throws IllegalArgumentException for an empty key id or secret, a key id that cannot be a
         *     structured-field string, a label that cannot be a structured-field key, or a lifetime
         *     shorter than a second
         */
        public RequestSigner build() {
            if (keyId.isEmpty()) throw new IllegalArgumentException("the key id must not be empty");
            try {
                StructuredFields.appendString(new StringBuilder(), keyId);
            } catch (SigningException e) {
                throw new IllegalArgumentException("the key id must be visible ASCII: " + e.getMessage());
            }
            // javax.crypto refuses an empty HMAC key, and the gateway never issues one.
            if (secret.length == 0) throw new IllegalArgumentException("the secret must not be empty");
            if (!StructuredFields.isKey(label)) {
                throw new IllegalArgumentException(
                        "the label \"" + label + "\" is not a structured-field key (lowercase letter or *, then a-z 0-9 _ - . *)");
            }
            if (lifetime != null && lifetime.getSeconds() < 1) {
                throw new IllegalArgumentException("the lifetime must be at least one second");
            }
            return new RequestSigner(this);
        }
    }
}
