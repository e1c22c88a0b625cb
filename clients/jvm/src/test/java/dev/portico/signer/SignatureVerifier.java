package dev.portico.signer;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A verifier for the tests, written the way the gateway verifies: it reads the covered components
 * and parameters from the {@code Signature-Input} text it was sent, rebuilds the base from the
 * request as received, and compares MACs. It shares {@link SignatureBase} with the signer (as the
 * gateway shares its Swift base code), but not the signer's choice of coverage or parameters, so a
 * request changed in transit, or fields set wrongly by an adapter, fail here.
 */
public final class SignatureVerifier {
    private SignatureVerifier() {}

    /** A parsed {@code Signature-Input} member. */
    public static final class Input {
        public final String label;
        public final List<String> components = new ArrayList<>();
        public final Map<String, Object> parameters = new LinkedHashMap<>();
        /** The member's value: the {@code @signature-params} text. */
        public final String params;

        Input(String label, String params) {
            this.label = label;
            this.params = params;
        }
    }

    /** Reads {@code label=("a" "b");k=v;…} as this signer writes it (strings and integers only). */
    public static Input parseInput(String signatureInput) {
        int equals = signatureInput.indexOf('=');
        if (equals <= 0) throw new IllegalArgumentException("no label in " + signatureInput);
        Input input = new Input(signatureInput.substring(0, equals), signatureInput.substring(equals + 1));
        String rest = input.params;
        int i = 0;
        if (rest.charAt(i++) != '(') throw new IllegalArgumentException("not an inner list: " + rest);
        while (rest.charAt(i) != ')') {
            if (rest.charAt(i) == ' ') i++;
            int[] end = new int[1];
            input.components.add(readString(rest, i, end));
            i = end[0];
        }
        i++;
        while (i < rest.length()) {
            if (rest.charAt(i++) != ';') throw new IllegalArgumentException("';' expected at " + i + " in " + rest);
            int eq = rest.indexOf('=', i);
            String key = rest.substring(i, eq);
            i = eq + 1;
            if (rest.charAt(i) == '"') {
                int[] end = new int[1];
                input.parameters.put(key, readString(rest, i, end));
                i = end[0];
            } else {
                int start = i;
                while (i < rest.length() && (Character.isDigit(rest.charAt(i)) || rest.charAt(i) == '-')) i++;
                input.parameters.put(key, Long.parseLong(rest.substring(start, i)));
            }
        }
        return input;
    }

    private static String readString(String text, int start, int[] end) {
        if (text.charAt(start) != '"') throw new IllegalArgumentException("'\"' expected at " + start + " in " + text);
        StringBuilder out = new StringBuilder();
        int i = start + 1;
        while (text.charAt(i) != '"') {
            if (text.charAt(i) == '\\') i++;
            out.append(text.charAt(i++));
        }
        end[0] = i + 1;
        return out.toString();
    }

    /** The MAC in {@code label=:base64:}. */
    public static byte[] signatureBytes(String signature, String label) {
        String prefix = label + "=:";
        if (!signature.startsWith(prefix) || !signature.endsWith(":")) throw new IllegalArgumentException("not " + prefix + "…: " + signature);
        return Base64.getDecoder().decode(signature.substring(prefix.length(), signature.length() - 1));
    }

    /** Rebuilds the base over {@code request} from the {@code Signature-Input} text alone. */
    public static String base(HttpRequestParts request, String signatureInput) {
        Input input = parseInput(signatureInput);
        return SignatureBase.build(request, input.components, input.params);
    }

    public static boolean verify(HttpRequestParts request, String signatureInput, String signature, byte[] key) {
        Input input = parseInput(signatureInput);
        String base = SignatureBase.build(request, input.components, input.params);
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            byte[] expected = mac.doFinal(base.getBytes(StandardCharsets.US_ASCII));
            return MessageDigest.isEqual(expected, signatureBytes(signature, input.label));
        } catch (java.security.GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }
}
