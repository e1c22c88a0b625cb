package dev.portico.signer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RequestSignerTest {
    static final String SECRET = "unit-test-secret-0123456789abcdefghijklmnopqrstuv";
    static final Clock CLOCK = Clock.fixed(Instant.ofEpochSecond(1_763_800_000L, 999_000_000L), ZoneOffset.UTC);

    static RequestSigner.Builder signer() {
        return RequestSigner.builder("unit-app", SECRET).clock(CLOCK).nonceSupplier(() -> "fixed-nonce");
    }

    static List<Map.Entry<String, String>> headers(String... nameValues) {
        List<Map.Entry<String, String>> list = new ArrayList<>();
        for (int i = 0; i < nameValues.length; i += 2) list.add(Fields.entry(nameValues[i], nameValues[i + 1]));
        return list;
    }

    static String line(String base, String component) {
        for (String line : base.split("\n")) {
            if (line.startsWith("\"" + component + "\": ")) return line.substring(component.length() + 4);
        }
        return null;
    }

    // MARK: nonce

    @Test
    void theDefaultNonceIs16RandomBytesInBase64urlWithoutPadding() {
        Pattern base64url = Pattern.compile("[A-Za-z0-9_-]{22}");
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < 2000; i++) {
            String nonce = RequestSigner.randomNonce();
            assertTrue(base64url.matcher(nonce).matches(), nonce);
            assertEquals(16, Base64.getUrlDecoder().decode(nonce).length);
            assertTrue(seen.add(nonce), "a nonce repeated: " + nonce);
        }
    }

    @Test
    void everySignatureDrawsAFreshNonce() {
        RequestSigner signer = RequestSigner.builder("unit-app", SECRET).clock(CLOCK).build();
        URI uri = URI.create("https://api.example.com/api/1/stockquote/AAPL");
        SignedRequest first = signer.signWithDetails("GET", uri, null, null);
        SignedRequest second = signer.signWithDetails("GET", uri, null, null);
        Object firstNonce = SignatureVerifier.parseInput(first.signatureInput()).parameters.get("nonce");
        Object secondNonce = SignatureVerifier.parseInput(second.signatureInput()).parameters.get("nonce");
        assertTrue(Pattern.matches("[A-Za-z0-9_-]{22}", (String) firstNonce));
        assertNotEquals(firstNonce, secondNonce);
        assertNotEquals(first.signature(), second.signature());
    }

    @Test
    void theNonceCanBeLeftOut() {
        SignedRequest signed = signer().includesNonce(false).build().signWithDetails("GET", URI.create("http://h/x"), null, null);
        assertEquals("sig1=(\"@method\" \"@authority\" \"@path\");created=1763800000;keyid=\"unit-app\"", signed.signatureInput());
    }

    // MARK: parameters

    @Test
    void createdIsWholeSecondsRoundedDownAndExpiresAddsTheLifetime() {
        SignedRequest signed = signer().lifetime(Duration.ofSeconds(90)).build().signWithDetails("GET", URI.create("http://h/x"), null, null);
        assertEquals(
                "sig1=(\"@method\" \"@authority\" \"@path\");created=1763800000;expires=1763800090;nonce=\"fixed-nonce\";keyid=\"unit-app\"",
                signed.signatureInput());
        assertTrue(signed.signatureBase().endsWith("\n\"@signature-params\": " + signed.signatureInput().substring("sig1=".length())));
    }

    @Test
    void theLabelIsUsedInBothFields() {
        SignedRequest signed = signer().label("app-sig").build().signWithDetails("GET", URI.create("http://h/x"), null, null);
        assertTrue(signed.signatureInput().startsWith("app-sig=(\"@method\""));
        assertTrue(signed.signature().startsWith("app-sig=:") && signed.signature().endsWith(":"));
        assertEquals(32, SignatureVerifier.signatureBytes(signed.signature(), "app-sig").length);
    }

    @Test
    void aNonceIsEscapedAsAStructuredFieldString() {
        SignedRequest signed = signer().nonceSupplier(() -> "a\"b\\c").build().signWithDetails("GET", URI.create("http://h/x"), null, null);
        assertTrue(signed.signatureInput().contains(";nonce=\"a\\\"b\\\\c\";"), signed.signatureInput());
        SigningException e = assertThrows(SigningException.class,
                () -> signer().nonceSupplier(() -> "caf\u00e9").build().sign("GET", URI.create("http://h/x")));
        assertEquals(SigningException.Reason.INVALID_PARAMETER, e.reason());
    }

    @Test
    void badConfigurationIsRefusedWhenBuilt() {
        assertThrows(IllegalArgumentException.class, () -> RequestSigner.builder("", SECRET).build());
        assertThrows(IllegalArgumentException.class, () -> RequestSigner.builder("k\u00e9y", SECRET).build());
        assertThrows(IllegalArgumentException.class, () -> RequestSigner.builder("app", "").build());
        assertThrows(IllegalArgumentException.class, () -> RequestSigner.builder("app", SECRET).label("Sig1").build());
        assertThrows(IllegalArgumentException.class, () -> RequestSigner.builder("app", SECRET).lifetime(Duration.ofMillis(500)).build());
        assertThrows(IllegalArgumentException.class, () -> RequestSigner.builder("app", SECRET).coveredFields(Arrays.asList("@query")));
        assertThrows(SigningException.class, () -> RequestSigner.builder("app", SECRET).coveredFields(Arrays.asList("bad name")));
    }

    @Test
    void toStringNeverShowsTheSecret() {
        assertFalse(signer().build().toString().contains(SECRET));
    }

    // MARK: @authority, @path, @query

    @Test
    void theDefaultPortIsLeftOutOfAuthority() {
        RequestSigner signer = signer().build();
        assertEquals("example.com", line(signer.signatureBase("GET", URI.create("http://Example.com:80/"), null, null), "@authority"));
        assertEquals("example.com", line(signer.signatureBase("GET", URI.create("https://EXAMPLE.com:443/"), null, null), "@authority"));
        assertEquals("example.com", line(signer.signatureBase("GET", URI.create("https://example.com/"), null, null), "@authority"));
        // Only the scheme's own default port is left out.
        assertEquals("example.com:443", line(signer.signatureBase("GET", URI.create("http://example.com:443/"), null, null), "@authority"));
        assertEquals("example.com:80", line(signer.signatureBase("GET", URI.create("https://example.com:80/"), null, null), "@authority"));
        assertEquals("127.0.0.1:8080", line(signer.signatureBase("GET", URI.create("http://127.0.0.1:8080/"), null, null), "@authority"));
        assertEquals("[::1]:8443", line(signer.signatureBase("GET", URI.create("https://[::1]:8443/"), null, null), "@authority"));
        assertEquals("[::1]", line(signer.signatureBase("GET", URI.create("https://[::1]:443/"), null, null), "@authority"));
    }

    @Test
    void thePathAndQueryAreSignedExactlyAsSent() {
        RequestSigner signer = signer().build();
        String base = signer.signatureBase("GET", URI.create("http://h/a%2Fb/c%20d?x=%41&y=a+b&&z"), null, null);
        assertEquals("/a%2Fb/c%20d", line(base, "@path"));
        assertEquals("?x=%41&y=a+b&&z", line(base, "@query"));
        // No path: "/"; an empty query is still a query.
        String empty = signer.signatureBase("GET", URI.create("http://h?"), null, null);
        assertEquals("/", line(empty, "@path"));
        assertEquals("?", line(empty, "@query"));
        // Without a "?" there is no @query.
        assertNull(line(signer.signatureBase("GET", URI.create("http://h/p#frag"), null, null), "@query"));
    }

    @Test
    void theUriMustBeAbsoluteHttpWithAHost() {
        RequestSigner signer = signer().build();
        for (String uri : Arrays.asList("/api/1/x", "ftp://h/x", "mailto:someone@example.com", "http:///x", "file:///etc/passwd")) {
            SigningException e = assertThrows(SigningException.class, () -> signer.sign("GET", URI.create(uri)), uri);
            assertEquals(SigningException.Reason.INVALID_URI, e.reason(), uri);
        }
        assertEquals(SigningException.Reason.INVALID_URI,
                assertThrows(SigningException.class, () -> signer.sign("GET", "ftp", "h", "/", null, null)).reason());
        // The scheme's case does not matter.
        assertEquals(2, signer.sign("GET", URI.create("HTTPS://h/x")).size());
    }

    @Test
    void aNonAsciiPathIsRefusedNotSignedWrong() {
        SigningException e = assertThrows(SigningException.class,
                () -> signer().build().sign("GET", URI.create("http://h/caf\u00e9")));
        assertEquals(SigningException.Reason.NON_ASCII, e.reason());
        assertTrue(e.getMessage().contains("@path"), e.getMessage());
    }

    // MARK: body

    @Test
    void aBodyGetsAContentDigestWhichIsCovered() {
        byte[] body = "hello".getBytes(StandardCharsets.UTF_8);
        SignedRequest signed = signer().build().signWithDetails("POST", URI.create("https://h/orders"), null, body);
        // SHA-256("hello") = 2cf24dba…9824
        assertEquals("sha-256=:LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=:", signed.field("Content-Digest"));
        assertEquals(Arrays.asList("@method", "@authority", "@path", "content-digest"), signed.components());
        assertEquals("sha-256=:LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=:", line(signed.signatureBase(), "content-digest"));
        assertEquals(Arrays.asList("Content-Digest", "Signature-Input", "Signature"), names(signed.fields()));
    }

    @Test
    void anEmptyBodyIsNoBody() {
        SignedRequest signed = signer().build().signWithDetails("POST", URI.create("https://h/orders"), null, new byte[0]);
        assertNull(signed.field("Content-Digest"));
        assertEquals(Arrays.asList("@method", "@authority", "@path"), signed.components());
    }

    @Test
    void theSignersFieldsReplaceTheRequestsOwn() {
        RequestSigner signer = signer().identity(new ClientIdentity("2.4.1", "android")).build();
        SignedRequest signed = signer.signWithDetails("PUT", URI.create("https://h/x"),
                headers("x-client-version", "0.0.1", "CONTENT-DIGEST", "sha-256=:stale:", "Signature", "old=:AA==:", "Accept", "*/*"),
                new byte[] {1, 2, 3});
        assertEquals(Arrays.asList("X-Client-Version", "X-Client-Platform", "Content-Digest", "Signature-Input", "Signature"), names(signed.fields()));
        assertEquals(Collections.singletonList("2.4.1"), signed.request().fieldValues("x-client-version"));
        assertEquals(1, signed.request().fieldValues("content-digest").size());
        assertTrue(signed.request().fieldValues("signature").isEmpty());
        assertEquals("2.4.1", line(signed.signatureBase(), "x-client-version"));
        assertEquals("android", line(signed.signatureBase(), "x-client-platform"));
    }

    // MARK: covered fields

    @Test
    void configuredFieldsAreCoveredWhenPresentOnly() {
        RequestSigner signer = signer().coveredFields(Arrays.asList("Content-Type", "authorization")).build();
        SignedRequest without = signer.signWithDetails("GET", URI.create("https://h/x"), headers("Accept", "*/*"), null);
        assertEquals(Arrays.asList("@method", "@authority", "@path"), without.components());
        SignedRequest with = signer.signWithDetails("GET", URI.create("https://h/x?q"),
                headers("content-type", "  application/json\t", "Authorization", "Bearer a", "authorization", "Bearer b "), null);
        assertEquals(Arrays.asList("@method", "@authority", "@path", "@query", "content-type", "authorization"), with.components());
        // Trimmed, and several lines joined with ", ".
        assertEquals("application/json", line(with.signatureBase(), "content-type"));
        assertEquals("Bearer a, Bearer b", line(with.signatureBase(), "authorization"));
    }

    @Test
    void aMissingCoveredFieldIsAnError() {
        RequestSigner signer = signer().build();
        HttpRequestParts request = HttpRequestParts.of("GET", URI.create("https://example.com/x"), headers("Content-Type", "text/plain"));
        SigningException e = assertThrows(SigningException.class,
                () -> signer.signCovering(request, Arrays.asList("@method", "date")));
        assertEquals(SigningException.Reason.MISSING_COMPONENT, e.reason());
        assertTrue(e.getMessage().contains("\"date\""), e.getMessage());
    }

    @Test
    void aCoveredNonAsciiValueIsAnError() {
        RequestSigner signer = signer().coveredFields(Collections.singletonList("x-note")).build();
        SigningException e = assertThrows(SigningException.class,
                () -> signer.sign("GET", URI.create("https://h/x"), headers("X-Note", "caf\u00e9"), null));
        assertEquals(SigningException.Reason.NON_ASCII, e.reason());
        SigningException newline = assertThrows(SigningException.class,
                () -> signer.sign("GET", URI.create("https://h/x"), headers("X-Note", "a\r\n\"@method\": POST"), null));
        assertEquals(SigningException.Reason.NON_ASCII, newline.reason());
        // Not covered, not checked: the signature does not depend on it.
        RequestSigner plain = signer().build();
        assertEquals(2, plain.sign("GET", URI.create("https://h/x"), headers("X-Note", "caf\u00e9"), null).size());
    }

    @Test
    void exactCoverageRefusesUnsupportedOrRepeatedComponents() {
        RequestSigner signer = signer().build();
        HttpRequestParts request = HttpRequestParts.of("GET", URI.create("https://example.com/x?a=1"), null);
        for (List<String> components : Arrays.asList(
                Arrays.asList("@status"), Arrays.asList("@query-param;name=\"a\""), Arrays.asList("Host"), Arrays.asList("@path", "@path"),
                Arrays.asList(""))) {
            SigningException e = assertThrows(SigningException.class, () -> signer.signCovering(request, components), components.toString());
            assertEquals(SigningException.Reason.INVALID_COMPONENT, e.reason(), components.toString());
        }
        SignedRequest signed = signer.signCovering(request,
                Arrays.asList("@target-uri", "@scheme", "@request-target", "@query", "host"));
        assertEquals("\"@target-uri\": https://example.com/x?a=1\n\"@scheme\": https\n\"@request-target\": /x?a=1\n\"@query\": ?a=1\n"
                + "\"host\": example.com\n\"@signature-params\": " + signed.signatureInput().substring(5), signed.signatureBase());
    }

    @Test
    void theSignatureVerifiesAndBreaksWhenTheRequestChanges() {
        RequestSigner signer = signer().identity(new ClientIdentity("1.0")).build();
        byte[] key = SECRET.getBytes(StandardCharsets.UTF_8);
        SignedRequest signed = signer.signWithDetails("GET", URI.create("https://h/api/1/stockquote/AAPL"), null, null);
        assertTrue(SignatureVerifier.verify(signed.request(), signed.signatureInput(), signed.signature(), key));
        HttpRequestParts tampered = new HttpRequestParts("GET", "https", "h", "/api/1/stockquote/MSFT", signed.request().fields());
        assertFalse(SignatureVerifier.verify(tampered, signed.signatureInput(), signed.signature(), key));
        List<Map.Entry<String, String>> otherVersion = new ArrayList<>(signed.request().fields());
        otherVersion.replaceAll(f -> f.getKey().equals("X-Client-Version") ? Fields.entry(f.getKey(), "9.9") : f);
        assertFalse(SignatureVerifier.verify(
                new HttpRequestParts("GET", "https", "h", "/api/1/stockquote/AAPL", otherVersion), signed.signatureInput(), signed.signature(), key));
    }

    // MARK: secret file

    @Test
    void aSecretFileLosesItsTrailingLineBreaksOnly(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("app.secret");
        Files.write(file, " s3cret \r\n\n".getBytes(StandardCharsets.UTF_8));
        assertEquals(" s3cret ", RequestSigner.readSecretFile(file));
        Files.write(file, new byte[] {'a', (byte) 0xC3});
        assertThrows(IOException.class, () -> RequestSigner.readSecretFile(file));
    }

    static List<String> names(List<Map.Entry<String, String>> fields) {
        List<String> names = new ArrayList<>();
        for (Map.Entry<String, String> field : fields) names.add(field.getKey());
        return names;
    }
}
