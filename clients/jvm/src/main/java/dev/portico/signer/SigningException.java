package dev.portico.signer;

/**
 * Why a request could not be signed.
 *
 * <p>It is unchecked, like {@link IllegalArgumentException}: every reason is a mistake in the
 * request the app built (a relative URL, a covered field it forgot to set, a value with bytes a
 * signature base cannot carry), not a condition to recover from at run time, and Kotlin callers
 * have no checked exceptions anyway. Adapters that must throw {@link java.io.IOException} (OkHttp's
 * interceptor) wrap it. The message never contains the secret.
 */
public final class SigningException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** What was wrong, for callers that handle the cases differently. */
    public enum Reason {
        /** The URL is not an absolute {@code http} or {@code https} URL with a host. */
        INVALID_URI,
        /** A covered component is absent from the request (a header field that is not set). */
        MISSING_COMPONENT,
        /**
         * A covered value holds a character outside visible ASCII, space and tab. The signature base
         * is ASCII (RFC 9421 §2.5), so the gateway could never rebuild such a base; signing it would
         * only produce a signature that fails.
         */
        NON_ASCII,
        /** A component identifier is malformed, repeated, or one this signer does not compute. */
        INVALID_COMPONENT,
        /**
         * A signature parameter (label, key id, nonce, created or expires) cannot be written as a
         * structured field.
         */
        INVALID_PARAMETER
    }

    private final Reason reason;

    public SigningException(Reason reason, String message) {
        super(message);
        this.reason = reason;
    }

    public Reason reason() {
        return reason;
    }
}
