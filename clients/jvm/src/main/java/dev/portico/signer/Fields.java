package dev.portico.signer;

import java.util.AbstractMap;
import java.util.List;
import java.util.Map;

/**
 * Small helpers for header-field lists, the {@code List<Map.Entry<String, String>>} the signer
 * takes and returns (one entry per field line, in order, names in any case).
 *
 * <p>{@link #entry} exists because {@code Map.entry} needs Android API 30; this library targets
 * API 26.
 */
public final class Fields {
    private Fields() {}

    /** An immutable field line. */
    public static Map.Entry<String, String> entry(String name, String value) {
        if (name == null || value == null) throw new NullPointerException("a field needs a name and a value");
        return new AbstractMap.SimpleImmutableEntry<>(name, value);
    }

    /** The value of the first field named {@code name} (any case), or {@code null}. */
    public static String first(List<? extends Map.Entry<String, String>> fields, String name) {
        for (Map.Entry<String, String> field : fields) {
            if (equalsIgnoringAsciiCase(field.getKey(), name)) return field.getValue();
        }
        return null;
    }

    /**
     * Whether two field names are equal ignoring ASCII case only. {@code String.equalsIgnoreCase}
     * also folds non-ASCII letters (and the Kelvin sign into {@code k}), which HTTP does not.
     */
    public static boolean equalsIgnoringAsciiCase(String a, String b) {
        if (a.length() != b.length()) return false;
        for (int i = 0; i < a.length(); i++) {
            if (lowerAscii(a.charAt(i)) != lowerAscii(b.charAt(i))) return false;
        }
        return true;
    }

    /** {@code text} with A–Z lowered and every other character left as is. */
    public static String lowercaseAscii(String text) {
        StringBuilder out = null;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c >= 'A' && c <= 'Z') {
                if (out == null) out = new StringBuilder(text);
                out.setCharAt(i, (char) (c | 0x20));
            }
        }
        return out == null ? text : out.toString();
    }

    static char lowerAscii(char c) {
        return c >= 'A' && c <= 'Z' ? (char) (c | 0x20) : c;
    }
}
