package dev.portico.signer;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * An HTTP server on loopback that records each request as it arrived (method, raw request target,
 * header lines, body) and answers 200: what the adapters' tests verify the signature against, as
 * the gateway would.
 */
public final class RecordingServer implements AutoCloseable {
    /** One request as received. */
    public static final class Recorded {
        public final String method;
        public final String requestTarget;
        public final List<Map.Entry<String, String>> headers;
        public final byte[] body;

        Recorded(String method, String requestTarget, List<Map.Entry<String, String>> headers, byte[] body) {
            this.method = method;
            this.requestTarget = requestTarget;
            this.headers = headers;
            this.body = body;
        }

        /** The request as a verifier sees it: the authority from its Host field. */
        public HttpRequestParts parts(String scheme) {
            return new HttpRequestParts(method, scheme, Fields.first(headers, "host"), requestTarget, headers);
        }

        public String header(String name) {
            return Fields.first(headers, name);
        }
    }

    private final HttpServer server;
    private final LinkedBlockingQueue<Recorded> requests = new LinkedBlockingQueue<>();

    public RecordingServer() throws IOException {
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", this::handle);
        server.start();
    }

    private void handle(HttpExchange exchange) throws IOException {
        byte[] body;
        try (InputStream in = exchange.getRequestBody()) {
            body = in.readAllBytes();
        }
        List<Map.Entry<String, String>> headers = new ArrayList<>();
        for (Map.Entry<String, List<String>> field : exchange.getRequestHeaders().entrySet()) {
            for (String value : field.getValue()) headers.add(Fields.entry(field.getKey(), value));
        }
        requests.add(new Recorded(exchange.getRequestMethod(), exchange.getRequestURI().toString(), headers, body));
        byte[] answer = "{\"ok\":true}".getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().add("Content-Type", "application/json");
        exchange.sendResponseHeaders(200, answer.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(answer);
        }
    }

    /** {@code http://127.0.0.1:PORT} (or the loopback address this machine has). */
    public String baseUrl() {
        InetSocketAddress address = server.getAddress();
        String host = address.getAddress().getHostAddress();
        if (host.indexOf(':') >= 0) host = "[" + host + "]";
        return "http://" + host + ":" + address.getPort();
    }

    /** The next request received, waiting up to 5 s. */
    public Recorded take() throws InterruptedException {
        Recorded recorded = requests.poll(5, TimeUnit.SECONDS);
        if (recorded == null) throw new AssertionError("no request arrived");
        return recorded;
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
