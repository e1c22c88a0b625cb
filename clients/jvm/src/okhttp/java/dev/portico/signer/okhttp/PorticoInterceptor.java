package dev.portico.signer.okhttp;

import dev.portico.signer.Fields;
import dev.portico.signer.RequestSigner;
import dev.portico.signer.SigningException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import okhttp3.Headers;
import okhttp3.HttpUrl;
import okhttp3.Interceptor;
import okhttp3.MediaType;
import okhttp3.Request;
import okhttp3.RequestBody;
import okhttp3.Response;
import okio.Buffer;

/**
 * An OkHttp interceptor that signs every request for a Portico gateway.
 *
 * <pre>{@code
 * OkHttpClient client = new OkHttpClient.Builder()
 *         .addInterceptor(new PorticoInterceptor(signer))
 *         .build();
 * }</pre>
 *
 * <p>Install it as an <em>application</em> interceptor ({@code addInterceptor}), after any
 * interceptor that changes covered fields or the body: it signs the request as the application
 * interceptors below it will pass it on. It signs what OkHttp will put on the wire:
 *
 * <ul>
 *   <li>the URL's {@linkplain HttpUrl#encodedPath() encoded path} and
 *       {@linkplain HttpUrl#encodedQuery() encoded query}, which are what OkHttp writes in the
 *       request line ({@code HttpUrl.uri()} would re-encode, so it is not used);
 *   <li>the host and port as OkHttp's {@code Host} field carries them (the default port left out);
 *   <li>the body's bytes, read once into memory (a {@code Content-Digest} needs all of them before
 *       the first is sent) and passed on as a byte-backed body, so a one-shot body is not consumed
 *       twice;
 *   <li>the body's {@code Content-Type} in place of a {@code Content-Type} header, as OkHttp's
 *       bridge does, in case that field is covered.
 * </ul>
 *
 * <p>Each call draws a fresh nonce. A request OkHttp itself sends again below this interceptor (a
 * redirect, or a retry after a connection failure) carries the same signature: a redirect to
 * another path fails verification, and a retry the gateway had already received is a replay (401).
 * Signed services are not redirected by the gateway; an app that retries should do so by making a
 * new call, which is signed again.
 *
 * <p>A {@link SigningException} (a covered field missing, a non-ASCII value) is rethrown as an
 * {@link IOException}, the only kind OkHttp delivers to {@code Callback.onFailure}; the cause holds
 * the original.
 */
public final class PorticoInterceptor implements Interceptor {
    private final RequestSigner signer;

    public PorticoInterceptor(RequestSigner signer) {
        this.signer = Objects.requireNonNull(signer, "signer");
    }

    @Override
    public Response intercept(Chain chain) throws IOException {
        return chain.proceed(sign(chain.request()));
    }

    /**
     * {@code request} with the signer's fields set (replacing any of the same name), and its body,
     * if any, replaced by the same bytes held in memory.
     *
     * @throws IOException when the body cannot be read or the request cannot be signed
     */
    public Request sign(Request request) throws IOException {
        HttpUrl url = request.url();
        RequestBody body = request.body();
        byte[] bytes = null;
        MediaType contentType = null;
        if (body != null) {
            Buffer buffer = new Buffer();
            body.writeTo(buffer);
            bytes = buffer.readByteArray();
            contentType = body.contentType();
        }

        List<Map.Entry<String, String>> headers = new ArrayList<>();
        Headers fields = request.headers();
        for (int i = 0; i < fields.size(); i++) {
            String name = fields.name(i);
            if (contentType != null && Fields.equalsIgnoringAsciiCase(name, "Content-Type")) continue;
            headers.add(Fields.entry(name, fields.value(i)));
        }
        if (contentType != null) headers.add(Fields.entry("Content-Type", contentType.toString()));

        String query = url.encodedQuery();
        String target = url.encodedPath() + (query == null ? "" : "?" + query);
        List<Map.Entry<String, String>> signed;
        try {
            signed = signer.sign(request.method(), url.scheme(), authority(url), target, headers, bytes);
        } catch (SigningException e) {
            throw new IOException("cannot sign " + request.method() + " " + url.redact() + ": " + e.getMessage(), e);
        }

        Request.Builder builder = request.newBuilder();
        for (Map.Entry<String, String> field : signed) builder.header(field.getKey(), field.getValue());
        if (body != null) builder.method(request.method(), RequestBody.create(contentType, bytes));
        return builder.build();
    }

    /**
     * The authority as OkHttp's {@code Host} field carries it: the host (IPv6 in brackets; OkHttp
     * keeps it without), and the port unless it is the scheme's default.
     */
    static String authority(HttpUrl url) {
        String host = url.host();
        if (host.indexOf(':') >= 0) host = "[" + host + "]";
        return url.port() == HttpUrl.defaultPort(url.scheme()) ? host : host + ":" + url.port();
    }
}
