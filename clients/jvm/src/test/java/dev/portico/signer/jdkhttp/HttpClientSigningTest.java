package dev.portico.signer.jdkhttp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.portico.signer.ClientIdentity;
import dev.portico.signer.Fields;
import dev.portico.signer.RecordingServer;
import dev.portico.signer.RequestSigner;
import dev.portico.signer.SignatureVerifier;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collections;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Real java.net.http calls to a loopback server that records what arrived; the signature is checked there. */
class HttpClientSigningTest {
    static final String SECRET = "jdk-test-secret-0123456789abcdefghijklmnopqrstuv";
    static final byte[] KEY = SECRET.getBytes(StandardCharsets.UTF_8);

    RecordingServer server;
    // The default client: HTTP/2 preferred, so on http:// it adds its h2c upgrade fields, which are
    // not covered and must not disturb the signature.
    final HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @BeforeEach
    void start() throws IOException {
        server = new RecordingServer();
    }

    @AfterEach
    void stop() {
        server.close();
    }

    RecordingServer.Recorded send(HttpRequest request) throws Exception {
        HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
        assertEquals(200, response.statusCode());
        RecordingServer.Recorded recorded = server.take();
        assertTrue(SignatureVerifier.verify(recorded.parts("http"), recorded.header("Signature-Input"), recorded.header("Signature"), KEY),
                "the signature verifies over the request as received: " + SignatureVerifier.base(recorded.parts("http"), recorded.header("Signature-Input")));
        return recorded;
    }

    @Test
    void aGetIsSignedAsItArrives() throws Exception {
        RequestSigner signer = RequestSigner.builder("jdk-app", SECRET).identity(new ClientIdentity("1.2.3")).build();
        RecordingServer.Recorded recorded = send(HttpClientSigning.newRequest(signer, "GET",
                URI.create(server.baseUrl() + "/api/1/stockquote/AAPL?fields=price%2Cname"), null, null));
        assertEquals("/api/1/stockquote/AAPL?fields=price%2Cname", recorded.requestTarget);
        assertEquals("1.2.3", recorded.header("X-Client-Version"));
        assertEquals(Arrays.asList("@method", "@authority", "@path", "@query", "x-client-version"),
                SignatureVerifier.parseInput(recorded.header("Signature-Input")).components);
    }

    @Test
    void aPostSendsTheSignedBodyAndFields() throws Exception {
        RequestSigner signer = RequestSigner.builder("jdk-app", SECRET).coveredFields(Collections.singletonList("content-type")).build();
        byte[] body = "[\"AAPL\",\"MSFT\"]".getBytes(StandardCharsets.UTF_8);
        HttpRequest request = HttpClientSigning.newRequestBuilder(signer, "POST", URI.create(server.baseUrl() + "/api/3/watchlists"),
                Arrays.asList(Fields.entry("Content-Type", "application/json"), Fields.entry("Content-Digest", "sha-256=:stale:")), body)
                .timeout(Duration.ofSeconds(5))
                .build();
        RecordingServer.Recorded recorded = send(request);
        assertArrayEquals(body, recorded.body);
        assertEquals(RequestSigner.contentDigest(body), recorded.header("Content-Digest"));
        assertEquals(Arrays.asList("@method", "@authority", "@path", "content-digest", "content-type"),
                SignatureVerifier.parseInput(recorded.header("Signature-Input")).components);
    }

    @Test
    void theUriIsSignedInTheFormTheClientSends() throws Exception {
        RequestSigner signer = RequestSigner.builder("jdk-app", SECRET).build();
        // A raw non-ASCII character: the client percent-encodes it as UTF-8, so the signer must too.
        URI unicode = new URI("http", null, "127.0.0.1", 0, "/quotes/caf\u00e9", null, null);
        URI target = URI.create(server.baseUrl() + unicode.getRawPath());
        RecordingServer.Recorded recorded = send(HttpClientSigning.newRequest(signer, "GET", target, null, null));
        assertEquals("/quotes/caf%C3%A9", recorded.requestTarget);
        // A "?" with nothing after it: the client leaves it out, and so does the signature.
        RecordingServer.Recorded empty = send(HttpClientSigning.newRequest(signer, "GET", URI.create(server.baseUrl() + "/x?"), null, null));
        assertEquals("/x", empty.requestTarget);
    }

    @Test
    void asSentKeepsFragmentsOutOfTheQuestion() {
        assertEquals(URI.create("http://h/x#f"), HttpClientSigning.asSent(URI.create("http://h/x?#f")));
        assertEquals(URI.create("http://h/x?a"), HttpClientSigning.asSent(URI.create("http://h/x?a")));
    }
}
