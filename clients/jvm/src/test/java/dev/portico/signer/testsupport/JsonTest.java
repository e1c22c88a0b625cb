package dev.portico.signer.testsupport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigDecimal;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The vectors are only as trustworthy as the reader: it must refuse what is not JSON. */
class JsonTest {
    @Test
    void readsEveryKindOfValue() {
        Map<String, Object> expected = new LinkedHashMap<>();
        expected.put("s", "a\"b\\c/\n\u00e9\ud83d\ude00");
        expected.put("i", -12L);
        expected.put("d", new BigDecimal("1.5e3"));
        expected.put("big", new BigDecimal("123456789012345678901234567890"));
        expected.put("t", true);
        expected.put("f", false);
        expected.put("n", null);
        expected.put("a", Arrays.asList(1L, Arrays.asList(), new LinkedHashMap<>()));
        assertEquals(expected, Json.parse(
                " {\"s\":\"a\\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00\",\"i\":-12,\"d\":1.5e3,\"big\":123456789012345678901234567890,"
                        + "\"t\":true,\"f\":false,\"n\":null,\"a\":[1,[],{}]}\n"));
        assertNull(Json.parse("null"));
    }

    @Test
    void refusesWhatIsNotJson() {
        for (String text : Arrays.asList(
                "", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "1.", "-", ".5", "+1", "[1] 2", "{\"a\":1,\"a\":2}",
                "\"tab\there\"", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "tru", "nul", "// c\n1", "{\"a\" 1}", "NaN")) {
            assertThrows(Json.ParseException.class, () -> Json.parse(text), text);
        }
    }

    @Test
    void quotesStrings() {
        assertEquals("\"a\\\"b\\\\c\\n\\u0001\"", Json.quote("a\"b\\c\n\u0001"));
        assertEquals("x\"y", Json.parse(Json.quote("x\"y")));
    }
}
