package dev.portico.signer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.portico.signer.testsupport.Json;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared vectors of {@code Tests/Vectors/signing-vectors.json}, which the Swift signer and the
 * gateway's verifier run too: this signer must produce every one byte for byte (signature base,
 * {@code Signature-Input}, {@code Signature}, {@code Content-Digest}, identity fields).
 *
 * <p>The file is found through the system property {@code portico.vectors} (test.sh sets it), or
 * by walking up from the working directory to the repository.
 */
class SigningVectorsTest {
    static Path vectorsFile() {
        String property = System.getProperty("portico.vectors");
        if (property != null && !property.isEmpty()) return Paths.get(property);
        for (Path dir = Paths.get("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path candidate = dir.resolve("Tests/Vectors/signing-vectors.json");
            if (Files.isRegularFile(candidate)) return candidate;
        }
        throw new IllegalStateException("cannot find Tests/Vectors/signing-vectors.json; pass -Dportico.vectors=PATH");
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> vectors() throws IOException {
        String text = new String(Files.readAllBytes(vectorsFile()), StandardCharsets.UTF_8);
        Map<String, Object> file = (Map<String, Object>) Json.parse(text);
        return (List<Map<String, Object>>) (List<?>) file.get("vectors");
    }

    @Test
    void theVectorFileHasVectorsOfBothModes() throws IOException {
        List<Map<String, Object>> vectors = vectors();
        assertTrue(vectors.size() >= 6, "expected at least 6 vectors, found " + vectors.size());
        assertTrue(vectors.stream().anyMatch(v -> "exact".equals(((Map<?, ?>) v.get("coverage")).get("mode"))));
        assertTrue(vectors.stream().anyMatch(v -> "default".equals(((Map<?, ?>) v.get("coverage")).get("mode"))));
    }

    @TestFactory
    Stream<DynamicTest> theSignerReproducesEveryVector() throws IOException {
        return vectors().stream().map(vector -> DynamicTest.dynamicTest((String) vector.get("name"), () -> check(new Vector(vector))));
    }

    /** One vector, read strictly: a missing member is a test failure, not a default. */
    @SuppressWarnings("unchecked")
    static final class Vector {
        final Map<String, Object> raw;

        Vector(Map<String, Object> raw) {
            this.raw = raw;
        }

        Map<String, Object> object(String key) {
            return (Map<String, Object>) raw.get(key);
        }

        String string(Map<String, Object> object, String key) {
            return (String) object.get(key);
        }

        byte[] key() {
            Map<String, Object> key = object("key");
            if (key.get("text") != null) return ((String) key.get("text")).getBytes(StandardCharsets.UTF_8);
            return Base64.getDecoder().decode((String) key.get("base64"));
        }

        List<Map.Entry<String, String>> headers() {
            List<Map.Entry<String, String>> headers = new ArrayList<>();
            for (Object pair : (List<Object>) object("request").get("headers")) {
                List<Object> nameValue = (List<Object>) pair;
                assertEquals(2, nameValue.size(), "a header is [name, value]");
                headers.add(Fields.entry((String) nameValue.get(0), (String) nameValue.get(1)));
            }
            return headers;
        }

        RequestSigner signer() {
            long created = (Long) raw.get("created");
            String nonce = (String) raw.get("nonce");
            Map<String, Object> identity = object("identity");
            Long lifetime = (Long) raw.get("lifetime");
            return RequestSigner.builder((String) raw.get("keyID"), key())
                    .label((String) raw.get("label"))
                    .clock(Clock.fixed(Instant.ofEpochSecond(created), ZoneOffset.UTC))
                    .nonceSupplier(() -> nonce)
                    .includesNonce(nonce != null)
                    .lifetime(lifetime == null ? null : Duration.ofSeconds(lifetime))
                    .identity(identity == null ? null : new ClientIdentity(string(identity, "appVersion"), string(identity, "platform")))
                    .build();
        }
    }

    @SuppressWarnings("unchecked")
    static void check(Vector vector) {
        RequestSigner signer = vector.signer();
        Map<String, Object> request = vector.object("request");
        Map<String, Object> coverage = vector.object("coverage");
        Map<String, Object> expected = vector.object("expected");
        String method = (String) request.get("method");
        URI uri = URI.create((String) request.get("url"));
        List<String> components = (List<String>) (List<?>) coverage.get("components");
        String body = (String) vector.raw.get("body");

        SignedRequest signed;
        switch ((String) coverage.get("mode")) {
            case "default":
                signed = signer.signWithDetails(method, uri, vector.headers(), body == null ? null : body.getBytes(StandardCharsets.UTF_8));
                assertEquals(components, signed.components(), "covered components");
                assertEquals(expected.get("contentDigest"), signed.field("Content-Digest"), "Content-Digest");
                Map<String, Object> identity = vector.object("identity");
                if (identity != null) {
                    assertEquals(identity.get("appVersion"), signed.field("X-Client-Version"));
                    assertEquals(identity.get("platform"), signed.field("X-Client-Platform"));
                } else {
                    assertNull(signed.field("X-Client-Version"));
                    assertNull(signed.field("X-Client-Platform"));
                }
                // What sign() returns is what signWithDetails() computed.
                assertEquals(signed.fields(), signer.sign(method, uri, vector.headers(), body == null ? null : body.getBytes(StandardCharsets.UTF_8)));
                assertEquals(expected.get("signatureBase"), signer.signatureBase(method, uri, vector.headers(), body == null ? null : body.getBytes(StandardCharsets.UTF_8)));
                break;
            case "exact":
                signed = signer.signCovering(HttpRequestParts.of(method, uri, vector.headers()), components);
                assertEquals(2, signed.fields().size(), "exact coverage adds no fields");
                break;
            default:
                fail("unknown coverage mode " + coverage.get("mode"));
                return;
        }
        assertEquals(expected.get("signatureBase"), signed.signatureBase(), "signature base");
        assertEquals(expected.get("signatureInput"), signed.signatureInput(), "Signature-Input");
        assertEquals(expected.get("signature"), signed.signature(), "Signature");
        assertEquals(expected.get("signatureInput"), signed.field("Signature-Input"));
        assertEquals(expected.get("signature"), signed.field("Signature"));

        // The verifier's view: the base rebuilt from the sent request and the Signature-Input text
        // alone gives the same MAC under the vector's key.
        assertTrue(SignatureVerifier.verify(signed.request(), signed.signatureInput(), signed.signature(), vector.key()),
                "the signature verifies over the request as sent");
        byte[] wrongKey = vector.key().clone();
        wrongKey[0] ^= 1;
        assertFalse(SignatureVerifier.verify(signed.request(), signed.signatureInput(), signed.signature(), wrongKey));
    }
}
