package dev.portico.signer.jdkhttp;

import dev.portico.signer.RequestSigner;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.http.HttpRequest;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Signed requests for {@link java.net.http.HttpClient}.
 *
 * <pre>{@code
 * HttpRequest request = HttpClientSigning.newRequest(signer, "GET",
 *         URI.create("https://api.example.com/api/1/stockquote/AAPL"), headers, null);
 * HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
 * }</pre>
 *
 * <p>Why a helper that builds the request, rather than one that signs a finished
 * {@link HttpRequest}: {@code java.net.http} has no interceptors, and a built request's body is a
 * {@link HttpRequest.BodyPublisher}, a one-way stream that only the client subscribes to while
 * sending. Its bytes cannot be read back beforehand, and the {@code Content-Digest} (and so the
 * signature) needs all of them before the first header is written. So the caller hands the method,
 * URI, fields and body bytes over here, and gets back a request carrying that very body.
 *
 * <p>Sign last and send at once: each request has a fresh nonce, so send each signed request once
 * (the gateway refuses a second use with 401) and build a new one for a retry. The client's own
 * fields ({@code User-Agent}, {@code Content-Length}, {@code Host}) are not covered unless given
 * here; {@code Host} cannot be set on {@code java.net.http} requests at all.
 *
 * <p>For a gateway on plain {@code http://}, the default client offers an h2c upgrade on its first
 * request; the gateway ignores it and closes that connection. {@code HttpClient.Version.HTTP_1_1}
 * saves that connection (see the README).
 *
 * <p>This class needs Java 11+ ({@code java.net.http}); Android has no {@code java.net.http}, use
 * the OkHttp interceptor there.
 */
public final class HttpClientSigning {
    private HttpClientSigning() {}

    /**
     * A signed request.
     *
     * @param method the method, e.g. {@code GET}
     * @param uri the absolute {@code http(s)} URI; non-ASCII characters are percent-encoded as UTF-8
     *     first (as the client would), and an empty query ({@code …?}) is dropped, as the client
     *     sends none
     * @param headers fields to send; covered ones are signed. May be null
     * @param body the body, or {@code null} (or empty) for none
     * @throws dev.portico.signer.SigningException when the request cannot be signed
     * @throws IllegalArgumentException when {@code java.net.http} refuses a field (a restricted name
     *     such as {@code Host} or {@code Content-Length})
     */
    public static HttpRequest newRequest(
            RequestSigner signer, String method, URI uri, List<? extends Map.Entry<String, String>> headers, byte[] body) {
        return newRequestBuilder(signer, method, uri, headers, body).build();
    }

    /**
     * {@link #newRequest} as a builder, to set a timeout, a version or {@code expectContinue} before
     * building. Do not change its URI, method, body or the covered fields: the signature is over
     * them as they are.
     */
    public static HttpRequest.Builder newRequestBuilder(
            RequestSigner signer, String method, URI uri, List<? extends Map.Entry<String, String>> headers, byte[] body) {
        Objects.requireNonNull(signer, "signer");
        Objects.requireNonNull(method, "method");
        URI sent = asSent(Objects.requireNonNull(uri, "uri"));
        List<Map.Entry<String, String>> signed = signer.sign(method, sent, headers, body);

        HttpRequest.BodyPublisher publisher =
                body == null || body.length == 0 ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(body);
        HttpRequest.Builder builder = HttpRequest.newBuilder(sent).method(method, publisher);
        if (headers != null) {
            for (Map.Entry<String, String> field : headers) builder.header(field.getKey(), field.getValue());
        }
        // setHeader replaces every earlier value of the name, as the signer's fields must.
        for (Map.Entry<String, String> field : signed) builder.setHeader(field.getKey(), field.getValue());
        return builder;
    }

    /**
     * {@code uri} as {@code java.net.http} will write it in the request line: non-ASCII characters
     * percent-encoded (its {@code toASCIIString()}), and without a {@code ?} whose query is empty,
     * which the client leaves out. Signing this form keeps the signed and the sent target equal.
     */
    static URI asSent(URI uri) {
        URI ascii = URI.create(uri.toASCIIString());
        if (!"".equals(ascii.getRawQuery())) return ascii;
        String text = ascii.toString();
        int question = text.indexOf('?');
        String fragment = ascii.getRawFragment();
        try {
            return new URI(text.substring(0, question) + (fragment == null ? "" : "#" + fragment));
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException(e);
        }
    }
}
