package dev.portico.signer.okhttp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.portico.signer.ClientIdentity;
import dev.portico.signer.RecordingServer;
import dev.portico.signer.RequestSigner;
import dev.portico.signer.SignatureVerifier;
import dev.portico.signer.SigningException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import okhttp3.HttpUrl;
import okhttp3.MediaType;
import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.RequestBody;
import okhttp3.Response;
import okio.BufferedSink;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Real OkHttp calls to a loopback server that records what arrived; the signature is checked there. */
class PorticoInterceptorTest {
    static final String SECRET = "okhttp-test-secret-0123456789abcdefghijklmnopqrstuv";
    static final byte[] KEY = SECRET.getBytes(StandardCharsets.UTF_8);

    RecordingServer server;

    @BeforeEach
    void start() throws IOException {
        server = new RecordingServer();
    }

    @AfterEach
    void stop() {
        server.close();
    }

    static OkHttpClient client(RequestSigner signer) {
        return new OkHttpClient.Builder()
                .addInterceptor(new PorticoInterceptor(signer))
                .connectTimeout(5, TimeUnit.SECONDS)
                .readTimeout(5, TimeUnit.SECONDS)
                .build();
    }

    static void assertVerifies(RecordingServer.Recorded recorded) {
        assertTrue(SignatureVerifier.verify(recorded.parts("http"), recorded.header("Signature-Input"), recorded.header("Signature"), KEY),
                "the signature verifies over the request as received: " + SignatureVerifier.base(recorded.parts("http"), recorded.header("Signature-Input")));
    }

    @Test
    void aGetIsSignedAsItArrives() throws Exception {
        RequestSigner signer = RequestSigner.builder("okhttp-app", SECRET).build();
        String url = server.baseUrl() + "/api/2/stock%20quote/caf%C3%A9?symbol=BRK.B&q=a%2Bb&empty=";
        try (Response response = client(signer).newCall(new Request.Builder().url(url).build()).execute()) {
            assertEquals(200, response.code());
        }
        RecordingServer.Recorded recorded = server.take();
        assertEquals("/api/2/stock%20quote/caf%C3%A9?symbol=BRK.B&q=a%2Bb&empty=", recorded.requestTarget);
        assertVerifies(recorded);
        SignatureVerifier.Input input = SignatureVerifier.parseInput(recorded.header("Signature-Input"));
        assertEquals(Arrays.asList("@method", "@authority", "@path", "@query"), input.components);
        assertEquals("okhttp-app", input.parameters.get("keyid"));
        assertTrue(((String) input.parameters.get("nonce")).matches("[A-Za-z0-9_-]{22}"));
    }

    @Test
    void aPostCarriesItsDigestIdentityAndCoveredContentType() throws Exception {
        RequestSigner signer = RequestSigner.builder("okhttp-app", SECRET)
                .identity(new ClientIdentity("3.1.0", "android"))
                .coveredFields(Arrays.asList("content-type", "x-request-tag"))
                .build();
        byte[] body = "{\"symbol\": \"AAPL\", \"quantity\": 10}".getBytes(StandardCharsets.UTF_8);
        Request request = new Request.Builder()
                .url(server.baseUrl() + "/api/1/orders")
                .header("X-Request-Tag", " t-1 ")
                .header("Signature", "stale=:AAAA:")
                .header("X-Client-Version", "0.0.1")
                // The body's media type wins over this field, as OkHttp's bridge sends it.
                .header("Content-Type", "text/plain")
                .post(RequestBody.create(MediaType.parse("application/json; charset=utf-8"), body))
                .build();
        try (Response response = client(signer).newCall(request).execute()) {
            assertEquals(200, response.code());
        }
        RecordingServer.Recorded recorded = server.take();
        assertArrayEquals(body, recorded.body);
        assertEquals(RequestSigner.contentDigest(body), recorded.header("Content-Digest"));
        assertEquals("3.1.0", recorded.header("X-Client-Version"));
        assertEquals("android", recorded.header("X-Client-Platform"));
        assertEquals("application/json; charset=utf-8", recorded.header("Content-Type"));
        assertFalse(recorded.header("Signature").startsWith("stale="));
        assertEquals(
                Arrays.asList("@method", "@authority", "@path", "content-digest", "x-client-version", "x-client-platform", "content-type", "x-request-tag"),
                SignatureVerifier.parseInput(recorded.header("Signature-Input")).components);
        assertVerifies(recorded);
    }

    @Test
    void aOneShotBodyIsReadOnceAndStillSent() throws Exception {
        AtomicInteger writes = new AtomicInteger();
        RequestBody oneShot = new RequestBody() {
            @Override
            public MediaType contentType() {
                return MediaType.parse("text/plain");
            }

            @Override
            public long contentLength() {
                return -1; // streamed: OkHttp would send it chunked
            }

            @Override
            public void writeTo(BufferedSink sink) throws IOException {
                if (writes.incrementAndGet() > 1) throw new IOException("this body can be written once");
                sink.writeUtf8("streamed once");
            }
        };
        RequestSigner signer = RequestSigner.builder("okhttp-app", SECRET).build();
        try (Response response = client(signer).newCall(
                new Request.Builder().url(server.baseUrl() + "/upload").put(oneShot).build()).execute()) {
            assertEquals(200, response.code());
        }
        RecordingServer.Recorded recorded = server.take();
        assertEquals(1, writes.get());
        assertEquals("streamed once", new String(recorded.body, StandardCharsets.UTF_8));
        assertVerifies(recorded);
    }

    @Test
    void aSigningFailureIsAnIOExceptionWithTheCause() {
        RequestSigner signer = RequestSigner.builder("okhttp-app", SECRET).nonceSupplier(() -> "\u00e9").build();
        IOException e = assertThrows(IOException.class,
                () -> client(signer).newCall(new Request.Builder().url(server.baseUrl() + "/x").build()).execute());
        assertInstanceOf(SigningException.class, e.getCause());
    }

    @Test
    void theAuthorityIsWhatOkHttpsHostFieldCarries() {
        assertEquals("example.com", PorticoInterceptor.authority(HttpUrl.get("https://example.com:443/x")));
        assertEquals("example.com:8443", PorticoInterceptor.authority(HttpUrl.get("https://Example.com:8443/x")));
        assertEquals("[::1]:8080", PorticoInterceptor.authority(HttpUrl.get("http://[::1]:8080/x")));
        assertEquals("[::1]", PorticoInterceptor.authority(HttpUrl.get("http://[::1]/x")));
    }
}
