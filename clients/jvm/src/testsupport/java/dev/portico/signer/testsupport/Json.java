package dev.portico.signer.testsupport;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small strict JSON reader (RFC 8259) for the tests and the live check: the JDK has none, and
 * the signer itself must not depend on a JSON library.
 *
 * <p>Objects become {@code LinkedHashMap<String, Object>} (a repeated key is an error), arrays
 * {@code List<Object>}, strings {@code String}, numbers {@code Long} when integral and in range,
 * else {@code BigDecimal}, {@code true}/{@code false} {@code Boolean}, and {@code null}
 * {@code null}. Anything RFC 8259 does not allow (trailing commas, comments, single quotes, leading
 * zeros, unescaped control characters, lone surrogates escaped, text after the value) is refused.
 */
public final class Json {
    private final String text;
    private int position;

    private Json(String text) {
        this.text = text;
    }

    /** Thrown for text that is not JSON; the message says where. */
    public static final class ParseException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        ParseException(String message) {
            super(message);
        }
    }

    /** The value of {@code text}, which must be exactly one JSON value (whitespace around it allowed). */
    public static Object parse(String text) {
        Json reader = new Json(text);
        reader.skipWhitespace();
        Object value = reader.value(0);
        reader.skipWhitespace();
        if (reader.position != text.length()) throw reader.error("unexpected text after the value");
        return value;
    }

    /** Writes {@code value} as a JSON string literal. */
    public static String quote(String value) {
        StringBuilder out = new StringBuilder(value.length() + 2).append('"');
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20) out.append(String.format(java.util.Locale.ROOT, "\\u%04x", (int) c));
                    else out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static final int MAX_DEPTH = 64;

    private Object value(int depth) {
        if (depth > MAX_DEPTH) throw error("nested too deeply");
        if (position >= text.length()) throw error("a value was expected");
        char c = text.charAt(position);
        switch (c) {
            case '{': return object(depth);
            case '[': return array(depth);
            case '"': return string();
            case 't': literal("true"); return Boolean.TRUE;
            case 'f': literal("false"); return Boolean.FALSE;
            case 'n': literal("null"); return null;
            default:
                if (c == '-' || (c >= '0' && c <= '9')) return number();
                throw error("unexpected character '" + c + "'");
        }
    }

    private Map<String, Object> object(int depth) {
        position++; // {
        Map<String, Object> members = new LinkedHashMap<>();
        skipWhitespace();
        if (peek() == '}') {
            position++;
            return members;
        }
        while (true) {
            skipWhitespace();
            if (peek() != '"') throw error("a member name (string) was expected");
            String key = string();
            if (members.containsKey(key)) throw error("the member \"" + key + "\" is repeated");
            skipWhitespace();
            expect(':');
            skipWhitespace();
            members.put(key, value(depth + 1));
            skipWhitespace();
            char next = next();
            if (next == '}') return members;
            if (next != ',') throw error("',' or '}' was expected");
        }
    }

    private List<Object> array(int depth) {
        position++; // [
        List<Object> items = new ArrayList<>();
        skipWhitespace();
        if (peek() == ']') {
            position++;
            return Collections.unmodifiableList(items);
        }
        while (true) {
            skipWhitespace();
            items.add(value(depth + 1));
            skipWhitespace();
            char next = next();
            if (next == ']') return Collections.unmodifiableList(items);
            if (next != ',') throw error("',' or ']' was expected");
        }
    }

    private String string() {
        expect('"');
        StringBuilder out = new StringBuilder();
        while (true) {
            if (position >= text.length()) throw error("unterminated string");
            char c = text.charAt(position++);
            if (c == '"') return out.toString();
            if (c < 0x20) throw error("unescaped control character in a string");
            if (c != '\\') {
                out.append(c);
                continue;
            }
            char escape = next();
            switch (escape) {
                case '"': out.append('"'); break;
                case '\\': out.append('\\'); break;
                case '/': out.append('/'); break;
                case 'b': out.append('\b'); break;
                case 'f': out.append('\f'); break;
                case 'n': out.append('\n'); break;
                case 'r': out.append('\r'); break;
                case 't': out.append('\t'); break;
                case 'u': {
                    char unit = hex4();
                    if (Character.isHighSurrogate(unit)) {
                        if (!text.startsWith("\\u", position)) throw error("a high surrogate must be followed by a low one");
                        position += 2;
                        char low = hex4();
                        if (!Character.isLowSurrogate(low)) throw error("a high surrogate must be followed by a low one");
                        out.append(unit).append(low);
                    } else if (Character.isLowSurrogate(unit)) {
                        throw error("a lone low surrogate");
                    } else {
                        out.append(unit);
                    }
                    break;
                }
                default:
                    throw error("invalid escape \\" + escape);
            }
        }
    }

    private char hex4() {
        if (position + 4 > text.length()) throw error("\\u needs four hex digits");
        int value = 0;
        for (int i = 0; i < 4; i++) {
            int digit = Character.digit(text.charAt(position++), 16);
            if (digit < 0) throw error("\\u needs four hex digits");
            value = value * 16 + digit;
        }
        return (char) value;
    }

    private Object number() {
        int start = position;
        if (peek() == '-') position++;
        if (peek() == '0') {
            position++;
        } else if (peek() >= '1' && peek() <= '9') {
            while (peek() >= '0' && peek() <= '9') position++;
        } else {
            throw error("a digit was expected");
        }
        boolean integral = true;
        if (peek() == '.') {
            integral = false;
            position++;
            if (!(peek() >= '0' && peek() <= '9')) throw error("a digit was expected after '.'");
            while (peek() >= '0' && peek() <= '9') position++;
        }
        if (peek() == 'e' || peek() == 'E') {
            integral = false;
            position++;
            if (peek() == '+' || peek() == '-') position++;
            if (!(peek() >= '0' && peek() <= '9')) throw error("a digit was expected in the exponent");
            while (peek() >= '0' && peek() <= '9') position++;
        }
        String literal = text.substring(start, position);
        if (integral) {
            try {
                return Long.parseLong(literal);
            } catch (NumberFormatException tooLarge) {
                return new BigDecimal(literal);
            }
        }
        return new BigDecimal(literal);
    }

    private void literal(String word) {
        if (!text.startsWith(word, position)) throw error("unexpected text");
        position += word.length();
    }

    private void skipWhitespace() {
        while (position < text.length()) {
            char c = text.charAt(position);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
            position++;
        }
    }

    /** The next character without consuming it, or U+0000 at the end (never valid where peeked). */
    private char peek() {
        return position < text.length() ? text.charAt(position) : '\0';
    }

    private char next() {
        if (position >= text.length()) throw error("unexpected end of text");
        return text.charAt(position++);
    }

    private void expect(char c) {
        if (next() != c) {
            position--;
            throw error("'" + c + "' was expected");
        }
    }

    private ParseException error(String message) {
        int line = 1;
        int column = 1;
        for (int i = 0; i < Math.min(position, text.length()); i++) {
            if (text.charAt(i) == '\n') {
                line++;
                column = 1;
            } else {
                column++;
            }
        }
        return new ParseException(message + " at line " + line + ", column " + column);
    }
}
