package dev.portico.signer.live;

import dev.portico.signer.ClientIdentity;
import dev.portico.signer.RequestSigner;
import dev.portico.signer.jdkhttp.HttpClientSigning;
import dev.portico.signer.okhttp.PorticoInterceptor;
import dev.portico.signer.testsupport.Json;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;
import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.Response;

/**
 * Exercises the JVM signer against a real Portico gateway, for the project's Swift test suite.
 *
 * <pre>
 * LiveCheck --url http://127.0.0.1:8080 --path /api/1/stockquote/AAPL --key-id ID --secret-file FILE
 *           [--ca-file PEM] [--app-version V] [--platform P]
 * </pre>
 *
 * <p>It sends five requests and prints one line of JSON with what the gateway answered to each:
 * {@code {"accepted":{"status":S,"type":T},"tampered":…,"replayFirst":…,"replayed":…,"okhttp":…}},
 * {@code T} being the response's problem {@code type} ({@code application/problem+json}) or
 * {@code null}:
 *
 * <ul>
 *   <li>{@code accepted}: a signed GET through {@link HttpClientSigning} ({@code java.net.http});
 *   <li>{@code tampered}: the fields signed for the path, sent to the path with its last segment
 *       changed (AAPL → MSFT, or MSFT → AAPL);
 *   <li>{@code replayFirst}, {@code replayed}: one signed request sent twice, identical;
 *   <li>{@code okhttp}: a signed GET through {@link PorticoInterceptor}.
 * </ul>
 *
 * <p>It decides nothing: the caller asserts the statuses. It exits 0 once the line is printed, 2
 * for bad arguments, and 1 (with the reason on stderr) when a request could not be made at all.
 * The secret file is read as the gateway reads it (UTF-8, trailing line breaks dropped).
 */
public final class LiveCheck {
    private LiveCheck() {}

    private static final Duration TIMEOUT = Duration.ofSeconds(10);

    static final class Options {
        String url;
        String path;
        String keyId;
        String secretFile;
        String caFile;
        String appVersion;
        String platform;
    }

    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    static final String USAGE =
            "usage: LiveCheck --url BASE --path PATH --key-id ID --secret-file FILE [--ca-file PEM] [--app-version V] [--platform P]";

    static Options parse(String[] args) throws UsageException {
        Options options = new Options();
        for (int i = 0; i < args.length; i++) {
            String name = args[i];
            if (name.equals("--help") || name.equals("-h")) throw new UsageException(USAGE);
            if (i + 1 >= args.length) throw new UsageException(name + " needs a value\n" + USAGE);
            String value = args[++i];
            switch (name) {
                case "--url": options.url = value; break;
                case "--path": options.path = value; break;
                case "--key-id": options.keyId = value; break;
                case "--secret-file": options.secretFile = value; break;
                case "--ca-file": options.caFile = value; break;
                case "--app-version": options.appVersion = value; break;
                case "--platform": options.platform = value; break;
                default: throw new UsageException("unknown option " + name + "\n" + USAGE);
            }
        }
        if (options.url == null || options.path == null || options.keyId == null || options.secretFile == null) {
            throw new UsageException("--url, --path, --key-id and --secret-file are required\n" + USAGE);
        }
        if (options.platform != null && options.appVersion == null) throw new UsageException("--platform needs --app-version");
        if (!options.path.startsWith("/")) options.path = "/" + options.path;
        while (options.url.endsWith("/")) options.url = options.url.substring(0, options.url.length() - 1);
        return options;
    }

    public static void main(String[] args) {
        Options options;
        try {
            options = parse(args);
        } catch (UsageException e) {
            System.err.println(e.getMessage());
            System.exit(2);
            return;
        }
        try {
            System.out.println(run(options));
            System.out.flush();
            System.exit(0);
        } catch (Exception e) {
            System.err.println("LiveCheck: could not run: " + e);
            for (Throwable cause = e.getCause(); cause != null; cause = cause.getCause()) System.err.println("  caused by: " + cause);
            System.exit(1);
        }
    }

    /** What the gateway answered: a status and the problem type, if any. */
    static final class Outcome {
        final int status;
        final String type;

        Outcome(int status, String type) {
            this.status = status;
            this.type = type;
        }

        String json() {
            return "{\"status\":" + status + ",\"type\":" + (type == null ? "null" : Json.quote(type)) + "}";
        }
    }

    static String run(Options options) throws Exception {
        String secret = RequestSigner.readSecretFile(Paths.get(options.secretFile));
        RequestSigner.Builder builder = RequestSigner.builder(options.keyId, secret);
        if (options.appVersion != null) builder.identity(new ClientIdentity(options.appVersion, options.platform));
        RequestSigner signer = builder.build();

        SSLContext ssl = null;
        X509TrustManager trust = null;
        if (options.caFile != null) {
            trust = trustManager(options.caFile);
            ssl = SSLContext.getInstance("TLS");
            ssl.init(null, new TrustManager[] {trust}, null);
        }
        URI target = URI.create(options.url + options.path);
        HttpClient.Builder jdkBuilder = HttpClient.newBuilder().connectTimeout(TIMEOUT);
        if (ssl != null) jdkBuilder.sslContext(ssl);
        // The JDK client's defaults, h2c upgrade offer over plain http included: the gateway must
        // ignore the offer and close that connection (it used to hang the next request).
        HttpClient jdk = jdkBuilder.build();

        URI tamperedTarget = URI.create(options.url + tamperedPath(options.path));

        Map<String, Outcome> outcomes = new LinkedHashMap<>();
        outcomes.put("accepted", send("accepted", jdk, HttpClientSigning.newRequestBuilder(signer, "GET", target, null, null).timeout(TIMEOUT).build()));

        // Signed for one path, sent to another with the same fields: the signature must not carry over.
        List<Map.Entry<String, String>> fields = signer.sign("GET", target);
        HttpRequest.Builder tampered = HttpRequest.newBuilder(tamperedTarget).GET().timeout(TIMEOUT);
        for (Map.Entry<String, String> field : fields) tampered.setHeader(field.getKey(), field.getValue());
        outcomes.put("tampered", send("tampered", jdk, tampered.build()));

        // One signed request, sent twice: the second use of its nonce is a replay.
        HttpRequest once = HttpClientSigning.newRequestBuilder(signer, "GET", target, null, null).timeout(TIMEOUT).build();
        outcomes.put("replayFirst", send("replayFirst", jdk, once));
        outcomes.put("replayed", send("replayed", jdk, once));

        OkHttpClient.Builder okBuilder = new OkHttpClient.Builder()
                .addInterceptor(new PorticoInterceptor(signer))
                .connectTimeout(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)
                .readTimeout(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        if (ssl != null) okBuilder.sslSocketFactory(ssl.getSocketFactory(), trust);
        OkHttpClient ok = okBuilder.build();
        try (Response response = ok.newCall(new Request.Builder().url(target.toString()).get().build()).execute()) {
            String body = response.body() == null ? "" : response.body().string();
            outcomes.put("okhttp", new Outcome(response.code(), problemType(response.header("Content-Type"), body)));
        } catch (IOException e) {
            throw new IOException("the okhttp request to " + target + " failed: " + e, e);
        } finally {
            ok.dispatcher().executorService().shutdown();
            ok.connectionPool().evictAll();
        }

        StringBuilder line = new StringBuilder("{");
        for (Map.Entry<String, Outcome> outcome : outcomes.entrySet()) {
            if (line.length() > 1) line.append(',');
            line.append(Json.quote(outcome.getKey())).append(':').append(outcome.getValue().json());
        }
        return line.append('}').toString();
    }

    /** {@code path} with its last segment changed to another stock symbol. */
    static String tamperedPath(String path) {
        int slash = path.lastIndexOf('/');
        String last = path.substring(slash + 1);
        return path.substring(0, slash + 1) + (last.equals("MSFT") ? "AAPL" : "MSFT");
    }

    static Outcome send(String step, HttpClient client, HttpRequest request) throws IOException, InterruptedException {
        HttpResponse<String> response;
        try {
            response = client.send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new IOException("the " + step + " request to " + request.uri() + " failed: " + e, e);
        }
        return new Outcome(response.statusCode(), problemType(response.headers().firstValue("Content-Type").orElse(null), response.body()));
    }

    /** The {@code type} of an {@code application/problem+json} body; null for any other response. */
    static String problemType(String contentType, String body) {
        if (contentType == null || !contentType.trim().toLowerCase(java.util.Locale.ROOT).startsWith("application/problem+json")) return null;
        try {
            Object parsed = Json.parse(body);
            if (parsed instanceof Map) {
                Object type = ((Map<?, ?>) parsed).get("type");
                if (type instanceof String) return (String) type;
            }
        } catch (Json.ParseException e) {
            System.err.println("LiveCheck: a problem body is not JSON: " + e.getMessage());
        }
        return null;
    }

    /** A trust manager trusting exactly the CA certificates in {@code pemFile}. */
    static X509TrustManager trustManager(String pemFile) throws IOException, GeneralSecurityException {
        Collection<? extends Certificate> certificates;
        try (InputStream in = Files.newInputStream(Paths.get(pemFile))) {
            certificates = CertificateFactory.getInstance("X.509").generateCertificates(in);
        }
        if (certificates.isEmpty()) throw new GeneralSecurityException("no certificate in " + pemFile);
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        int index = 0;
        for (Certificate certificate : certificates) store.setCertificateEntry("ca-" + index++, certificate);
        TrustManagerFactory factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        factory.init(store);
        for (TrustManager manager : factory.getTrustManagers()) {
            if (manager instanceof X509TrustManager) return (X509TrustManager) manager;
        }
        throw new GeneralSecurityException("no X509TrustManager for " + pemFile);
    }
}
