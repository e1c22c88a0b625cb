/**
 * Signs requests for a Portico gateway with RFC 9421 HTTP Message Signatures ({@code hmac-sha256})
 * and RFC 9530 {@code Content-Digest}, byte for byte as the gateway verifies them.
 *
 * <p>Start with {@link dev.portico.signer.RequestSigner}. The package depends on the JDK alone
 * (and only on classes Android has from API 26), so it can sit under any HTTP client; the adapters
 * for OkHttp ({@code dev.portico.signer.okhttp}) and {@code java.net.http}
 * ({@code dev.portico.signer.jdkhttp}) live in their own source trees so that this one never needs
 * them on the class path.
 */
package dev.portico.signer;
