package dev.portico.signer;

import java.net.URI;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The parts of an HTTP request a signature base is built from (RFC 9421 §2), as it will be sent.
 *
 * <p>Every HTTP client has its own request type; each adapter turns its request into this one, so
 * the signature base is built by one piece of code ({@link SignatureBase}) whichever client sends
 * the request, the same way the gateway's {@code SignableRequest} is.
 */
public final class HttpRequestParts {
    private final String method;
    private final String scheme;
    private final String authority;
    private final String requestTarget;
    private final List<Map.Entry<String, String>> fields;

    /**
     * @param method the method as sent, e.g. {@code GET} (case is significant)
     * @param scheme {@code http} or {@code https} (any case; kept lowercase)
     * @param authority host and port as the client addresses them ({@code api.example.com},
     *     {@code 127.0.0.1:8080}, {@code [::1]:8443}); a scheme's default port may be given or not
     * @param requestTarget the path and, when present, {@code ?} and the query, exactly as sent:
     *     percent-encoding untouched
     * @param fields the header fields, one entry per field line, in order
     * @throws SigningException ({@link SigningException.Reason#INVALID_URI}) for another scheme or an
     *     empty authority
     */
    public HttpRequestParts(
            String method, String scheme, String authority, String requestTarget, List<? extends Map.Entry<String, String>> fields) {
        this.method = Objects.requireNonNull(method, "method");
        Objects.requireNonNull(scheme, "scheme");
        this.scheme = Fields.lowercaseAscii(scheme);
        if (!this.scheme.equals("http") && !this.scheme.equals("https")) {
            throw new SigningException(SigningException.Reason.INVALID_URI, "expected the scheme http or https, found " + scheme);
        }
        this.authority = Objects.requireNonNull(authority, "authority");
        if (authority.isEmpty()) throw new SigningException(SigningException.Reason.INVALID_URI, "the authority (host) is empty");
        this.requestTarget = Objects.requireNonNull(requestTarget, "requestTarget");
        List<Map.Entry<String, String>> copy = new ArrayList<>();
        if (fields != null) {
            for (Map.Entry<String, String> field : fields) copy.add(Fields.entry(field.getKey(), field.getValue()));
        }
        this.fields = Collections.unmodifiableList(copy);
    }

    /**
     * The parts of a request to {@code uri}: its authority as written (host and explicit port) and
     * its raw path and query, exactly as an HTTP client sends them. The fields are {@code headers}
     * with a {@code Host} field added first when they carry none, as the client will add one.
     *
     * @throws SigningException ({@link SigningException.Reason#INVALID_URI}) when {@code uri} is not
     *     an absolute {@code http}/{@code https} URI with a host
     */
    public static HttpRequestParts of(String method, URI uri, List<? extends Map.Entry<String, String>> headers) {
        Target target = Target.of(uri);
        return new HttpRequestParts(method, target.scheme, target.authority, target.requestTarget, withHost(target.authority, headers));
    }

    /** {@code headers} with {@code Host: authority} first, unless they carry a {@code Host} already. */
    static List<Map.Entry<String, String>> withHost(String authority, List<? extends Map.Entry<String, String>> headers) {
        List<Map.Entry<String, String>> fields = new ArrayList<>();
        if (headers == null || Fields.first(headers, "host") == null) fields.add(Fields.entry("Host", authority));
        if (headers != null) fields.addAll(headers);
        return fields;
    }

    public String method() {
        return method;
    }

    /** Lowercase {@code http} or {@code https}. */
    public String scheme() {
        return scheme;
    }

    public String authority() {
        return authority;
    }

    public String requestTarget() {
        return requestTarget;
    }

    /** The header fields, one entry per line, in order (unmodifiable). */
    public List<Map.Entry<String, String>> fields() {
        return fields;
    }

    /** Every value of the field {@code name} (any case), one per field line, in order. */
    public List<String> fieldValues(String name) {
        List<String> values = new ArrayList<>(1);
        for (Map.Entry<String, String> field : fields) {
            if (Fields.equalsIgnoringAsciiCase(field.getKey(), name)) values.add(field.getValue());
        }
        return values;
    }

    /** Where the query's {@code ?} is in the request target, or -1 without a query. */
    int queryOffset() {
        return requestTarget.indexOf('?');
    }

    @Override
    public String toString() {
        return method + " " + scheme + "://" + authority + requestTarget + " " + fields;
    }

    /** The scheme, authority and request target of an absolute URI, as a client sends them. */
    static final class Target {
        final String scheme;
        final String authority;
        final String requestTarget;

        private Target(String scheme, String authority, String requestTarget) {
            this.scheme = scheme;
            this.authority = authority;
            this.requestTarget = requestTarget;
        }

        static Target of(URI uri) {
            Objects.requireNonNull(uri, "uri");
            String scheme = uri.getScheme() == null ? null : Fields.lowercaseAscii(uri.getScheme());
            if (!uri.isAbsolute() || uri.isOpaque() || !("http".equals(scheme) || "https".equals(scheme))) {
                throw new SigningException(
                        SigningException.Reason.INVALID_URI, "expected an absolute http:// or https:// URL with a host, found " + uri);
            }
            // getHost() keeps the host as written (case included; IPv6 literals in brackets). It is
            // null when the authority is not a server name (e.g. an underscore in it), which no
            // HTTP client here would connect to either.
            String host = uri.getHost();
            if (host == null || host.isEmpty()) {
                throw new SigningException(
                        SigningException.Reason.INVALID_URI, "expected an absolute http:// or https:// URL with a host, found " + uri);
            }
            // The port as written, even a default one: @authority's normalisation drops it, as the
            // gateway's does, so both spellings sign the same.
            String authority = uri.getPort() == -1 ? host : host + ":" + uri.getPort();
            String path = uri.getRawPath();
            if (path == null || path.isEmpty()) path = "/";
            String query = uri.getRawQuery();
            return new Target(scheme, authority, query == null ? path : path + "?" + query);
        }
    }
}
