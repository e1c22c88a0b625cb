package dev.portico.signer;

/**
 * The few structured-field serialisations (RFC 9651 §4.1) a signature needs: strings, integers,
 * keys and byte sequences. Written here rather than taken from a library so that the core has no
 * dependency beyond the JDK, and checked by the shared vectors against the gateway's writer.
 */
final class StructuredFields {
    private StructuredFields() {}

    /** The largest magnitude of a structured-field integer (§3.3.1). */
    static final long MAX_INTEGER = 999_999_999_999_999L;

    /** §4.1.6: quoted, with {@code "} and {@code \} escaped; visible ASCII and space only. */
    static void appendString(StringBuilder out, String value) {
        out.append('"');
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c < 0x20 || c > 0x7E) {
                throw new SigningException(
                        SigningException.Reason.INVALID_PARAMETER,
                        "a structured-field string can hold only visible ASCII and spaces (U+" + String.format(java.util.Locale.ROOT, "%04X", (int) c) + " in it)");
            }
            if (c == '"' || c == '\\') out.append('\\');
            out.append(c);
        }
        out.append('"');
    }

    /** §4.1.4: decimal digits, within ±999,999,999,999,999. */
    static void appendInteger(StringBuilder out, long value, String what) {
        if (value > MAX_INTEGER || value < -MAX_INTEGER) {
            throw new SigningException(SigningException.Reason.INVALID_PARAMETER, what + " " + value + " is out of a structured-field integer's range");
        }
        out.append(value);
    }

    /** §3.1.2 (§4.1.1.3): a lowercase letter or {@code *}, then lowercase letters, digits, {@code _-.*}. */
    static boolean isKey(String key) {
        if (key == null || key.isEmpty()) return false;
        char first = key.charAt(0);
        if (!((first >= 'a' && first <= 'z') || first == '*')) return false;
        for (int i = 1; i < key.length(); i++) {
            char c = key.charAt(i);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == '*';
            if (!ok) return false;
        }
        return true;
    }

    /** RFC 9110 §5.6.2 tchar: what a field name is made of. */
    static boolean isTchar(char c) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
        return "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
    }
}
