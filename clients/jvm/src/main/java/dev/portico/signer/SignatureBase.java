package dev.portico.signer;

import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The signature base (RFC 9421 §2.5): one line per covered component, {@code "name": value}, then
 * the {@code @signature-params} line. It is the exact text the HMAC is computed over, so every rule
 * here mirrors the gateway's {@code PorticoSigning/SignatureBase.swift} byte for byte.
 *
 * <p>Components are plain names: the derived ones a request always has ({@code @method},
 * {@code @target-uri}, {@code @authority}, {@code @scheme}, {@code @request-target},
 * {@code @path}, {@code @query}) and header fields by lowercase name. Component parameters
 * ({@code ;bs}, {@code ;key}, {@code @query-param;name}) are refused: no Portico client coverage
 * uses them, and a signer that cannot compute one must not guess.
 */
public final class SignatureBase {
    private SignatureBase() {}

    private static final Set<String> DERIVED = new HashSet<>(java.util.Arrays.asList(
            "@method", "@target-uri", "@authority", "@scheme", "@request-target", "@path", "@query"));

    /**
     * Builds the base over {@code request}.
     *
     * @param components the covered components, in order
     * @param signatureParams the {@code @signature-params} value: the same text as the label's member
     *     of {@code Signature-Input} ({@link #signatureParams})
     * @throws SigningException when a component is malformed or unsupported, absent from the
     *     request, or has a value that is not visible ASCII
     */
    public static String build(HttpRequestParts request, List<String> components, String signatureParams) {
        checkComponents(components);
        StringBuilder base = new StringBuilder(64 * (components.size() + 2));
        for (String component : components) {
            String value = componentValue(request, component);
            requireAscii(value, component);
            StructuredFields.appendString(base, component);
            base.append(": ").append(value).append('\n');
        }
        base.append("\"@signature-params\": ").append(signatureParams);
        return base.toString();
    }

    /**
     * The {@code @signature-params} value: the inner list of components, then {@code created},
     * {@code expires} (when not null), {@code nonce} (when not null) and {@code keyid}, the order
     * RFC 9421's examples and the gateway's signer use.
     */
    public static String signatureParams(List<String> components, long created, Long expires, String nonce, String keyId) {
        checkComponents(components);
        StringBuilder out = new StringBuilder("(");
        for (int i = 0; i < components.size(); i++) {
            if (i > 0) out.append(' ');
            StructuredFields.appendString(out, components.get(i));
        }
        out.append(')');
        out.append(";created=");
        StructuredFields.appendInteger(out, created, "created");
        if (expires != null) {
            out.append(";expires=");
            StructuredFields.appendInteger(out, expires, "expires");
        }
        if (nonce != null) {
            out.append(";nonce=");
            StructuredFields.appendString(out, nonce);
        }
        out.append(";keyid=");
        StructuredFields.appendString(out, keyId);
        return out.toString();
    }

    /**
     * The value of one component over {@code request}, before the ASCII check.
     *
     * @throws SigningException when the component is unsupported or absent
     */
    public static String componentValue(HttpRequestParts request, String component) {
        checkComponent(component);
        if (component.startsWith("@")) return derivedValue(request, component);
        List<String> lines = request.fieldValues(component);
        if (lines.isEmpty()) {
            throw new SigningException(
                    SigningException.Reason.MISSING_COMPONENT,
                    "the covered component \"" + component + "\" is not present in the request; set the field or do not cover it");
        }
        // RFC 9421 §2.1: each line without leading and trailing whitespace, joined with ", ".
        StringBuilder value = new StringBuilder();
        for (int i = 0; i < lines.size(); i++) {
            if (i > 0) value.append(", ");
            value.append(trimSpacesAndTabs(lines.get(i)));
        }
        return value.toString();
    }

    private static String derivedValue(HttpRequestParts request, String component) {
        String target = request.requestTarget();
        int query = request.queryOffset();
        switch (component) {
            case "@method":
                return request.method();
            case "@target-uri":
                return request.scheme() + "://" + normalizedAuthority(request) + target;
            case "@authority":
                return normalizedAuthority(request);
            case "@scheme":
                return request.scheme();
            case "@request-target":
                return target;
            case "@path": {
                String path = query < 0 ? target : target.substring(0, query);
                return path.isEmpty() ? "/" : path;
            }
            case "@query":
                // The query with its "?", exactly as sent; a request without one signs "?"
                // (RFC 9421 §2.2.7), as the gateway does.
                return query < 0 ? "?" : target.substring(query);
            default:
                throw new AssertionError(component);
        }
    }

    /**
     * Host lowercased, with the scheme's default port left out (RFC 9421 §2.2.3): {@code :443} for
     * https, {@code :80} for http.
     */
    static String normalizedAuthority(HttpRequestParts request) {
        String authority = request.authority();
        String defaultPort = request.scheme().equals("https") ? ":443" : ":80";
        if (authority.endsWith(defaultPort)) authority = authority.substring(0, authority.length() - defaultPort.length());
        return Fields.lowercaseAscii(authority);
    }

    /** Without leading and trailing spaces and tabs (not other whitespace: RFC 9421 §2.1 step 2). */
    static String trimSpacesAndTabs(String value) {
        int start = 0;
        int end = value.length();
        while (start < end && isSpaceOrTab(value.charAt(start))) start++;
        while (end > start && isSpaceOrTab(value.charAt(end - 1))) end--;
        return value.substring(start, end);
    }

    private static boolean isSpaceOrTab(char c) {
        return c == ' ' || c == '\t';
    }

    /**
     * Visible ASCII, space and tab only: anything else cannot be rebuilt byte for byte by the
     * gateway, and a line break would let a value forge a line of its own.
     */
    static void requireAscii(String value, String component) {
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (!(c == '\t' || (c >= 0x20 && c <= 0x7E))) {
                throw new SigningException(
                        SigningException.Reason.NON_ASCII,
                        "the value of \"" + component + "\" is not ASCII (character U+"
                                + String.format(java.util.Locale.ROOT, "%04X", (int) c) + " at " + i
                                + "); a signature base can only carry visible ASCII, so percent-encode URLs and keep covered fields ASCII");
            }
        }
    }

    /** Checks every identifier, and that none is repeated (the gateway refuses repeats). */
    static void checkComponents(List<String> components) {
        Set<String> seen = new HashSet<>();
        for (String component : components) {
            checkComponent(component);
            if (!seen.add(component)) {
                throw new SigningException(SigningException.Reason.INVALID_COMPONENT, "the component \"" + component + "\" is covered twice");
            }
        }
    }

    static void checkComponent(String component) {
        if (component == null || component.isEmpty()) {
            throw new SigningException(SigningException.Reason.INVALID_COMPONENT, "a component identifier cannot be empty");
        }
        if (component.indexOf(';') >= 0) {
            throw new SigningException(
                    SigningException.Reason.INVALID_COMPONENT,
                    "component parameters (" + component + ") are not supported by this signer; cover plain names");
        }
        if (component.startsWith("@")) {
            if (!DERIVED.contains(component)) {
                throw new SigningException(
                        SigningException.Reason.INVALID_COMPONENT,
                        "the derived component " + component + " is not supported on requests (supported: " + String.join(", ", new java.util.TreeSet<>(DERIVED)) + ")");
            }
            return;
        }
        for (int i = 0; i < component.length(); i++) {
            char c = component.charAt(i);
            if (!StructuredFields.isTchar(c) || (c >= 'A' && c <= 'Z')) {
                throw new SigningException(
                        SigningException.Reason.INVALID_COMPONENT,
                        "\"" + component + "\" is not a lowercase header field name");
            }
        }
    }
}
